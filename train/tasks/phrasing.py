"""Task wording: several English phrasings per family plus French, Spanish and German ones.

Each entry has "train" and "eval" English templates (disjoint: eval templates never appear in train)
and, per foreign language, a pair [train template, eval template]. About 10% of tasks use a foreign
language. Placeholders in braces are filled by the family builders; quoted labels are passed already
quoted exactly as displayed on the page.
"""

FOREIGN_SHARE = 0.10

PHRASES = {
    "click_button": {
        "train": ["Click the {label} button.", "Press {label}.", "Please click on {label}.",
                  "Hit the {label} button on this page.", "Can you click {label} for me?",
                  "Find the button labelled {label} and click it."],
        "eval": ["Activate the {label} button.", "I need you to press the button that says {label}.",
                 "Go ahead and select {label}."],
        "fr": ["Cliquez sur le bouton {label}.", "Appuyez sur {label}."],
        "es": ["Haz clic en el botón {label}.", "Pulsa el botón {label}."],
        "de": ["Klicken Sie auf die Schaltfläche {label}.", "Drücke auf {label}."],
    },
    "click_button_card": {
        "train": ["Click {label} for the {item}.", "Press the {label} button of the {item}.",
                  "On the {item} card, click {label}.", "Please hit {label} on the {item}.",
                  "Use {label} on the {item} entry."],
        "eval": ["Select {label} next to the {item}.", "For the {item}, press {label}.",
                 "I want to {verb} the {item}: click its {label} button."],
        "fr": ["Cliquez sur {label} pour l'article {qitem}.", "Sur la fiche {qitem}, appuyez sur {label}."],
        "es": ["Haz clic en {label} en la tarjeta {qitem}.", "En {qitem}, pulsa {label}."],
        "de": ["Klicken Sie bei {qitem} auf {label}.", "Drücke {label} auf der Karte {qitem}."],
    },
    "click_link": {
        "train": ["Click the {label} link.", "Open the {label} link.", "Follow the link {label}.",
                  "Please go to {label} by clicking its link.", "Can you open {label}?",
                  "Navigate to {label}."],
        "eval": ["Take me to the {label} page via its link.", "Select the link that reads {label}.",
                 "I'd like to see {label}; click the link."],
        "fr": ["Cliquez sur le lien {label}.", "Ouvrez le lien {label}."],
        "es": ["Haz clic en el enlace {label}.", "Abre el enlace {label}."],
        "de": ["Klicken Sie auf den Link {label}.", "Öffne den Link {label}."],
    },
    "click_tab": {
        "train": ["Switch to the {label} tab.", "Open the {label} tab.", "Click the tab named {label}.",
                  "Please show the {label} tab.", "Go to the {label} tab.", "Select the {label} tab."],
        "eval": ["Change the view to the {label} tab.", "I want to see what's under {label}; open that tab.",
                 "Bring up the {label} tab, please."],
        "fr": ["Passez à l'onglet {label}.", "Ouvrez l'onglet {label}."],
        "es": ["Cambia a la pestaña {label}.", "Abre la pestaña {label}."],
        "de": ["Wechseln Sie zum Tab {label}.", "Öffne den Reiter {label}."],
    },
    "click_icon": {
        "train": ["{Func}.", "Please {func}.", "Use the icon button to {func}.", "Click the icon that lets you {func}.",
                  "{Func} using the toolbar icon.", "Can you {func}? There's an icon for it."],
        "eval": ["I want to {func}. Click the right icon.", "Click whichever icon lets me {func}.",
                 "{Func} with the matching icon button."],
        "fr": ["Cliquez sur l'icône qui permet de : {func}.", "Utilisez l'icône pour : {func}."],
        "es": ["Haz clic en el icono que sirve para: {func}.", "Usa el icono para: {func}."],
        "de": ["Klicken Sie auf das Symbol für: {func}.", "Nutze das Icon, um Folgendes zu tun: {func}."],
    },
    "type_submit": {
        "train": ["Type {value} into the {field} field and submit.", "Enter {value} as the {field} and submit the form.",
                  "Fill in {field} with {value}, then submit.", "Put {value} in {field} and send the form.",
                  "Set the {field} field to {value} and submit it.", "Submit the form with {field} = {value}."],
        "eval": ["Please write {value} in the {field} box and submit.", "Use {value} for {field} and submit the form.",
                 "The {field} should be {value}; enter it and submit."],
        "fr": ["Saisissez {value} dans le champ {field} puis envoyez le formulaire.", "Entrez {value} comme {field} et validez."],
        "es": ["Escribe {value} en el campo {field} y envía el formulario.", "Introduce {value} en {field} y envíalo."],
        "de": ["Geben Sie {value} in das Feld {field} ein und senden Sie das Formular ab.", "Trage {value} bei {field} ein und sende ab."],
    },
    "checkbox": {
        "train": ["{Changes}.", "Please {changes}.", "{Changes} and leave the other options as they are.",
                  "In the options, {changes}.", "Update the preferences: {changes}.", "Could you {changes}?"],
        "eval": ["Adjust the checkboxes so that you {changes}.", "Make these changes: {changes}.",
                 "I need you to {changes}; nothing else should change."],
        "fr": ["Dans les options : {changes}.", "Modifiez les cases : {changes}."],
        "es": ["En las opciones: {changes}.", "Cambia las casillas: {changes}."],
        "de": ["In den Optionen: {changes}.", "Ändere die Kästchen: {changes}."],
    },
    "radio": {
        "train": ["Choose {option} for {group}.", "Select {option} under {group}.", "Set {group} to {option}.",
                  "Pick the {option} option in {group}.", "Please select {option} as the {group}.",
                  "Under {group}, choose {option}."],
        "eval": ["Change the {group} to {option}.", "I'd like {option} as my {group}; select it.",
                 "Mark {option} in the {group} group."],
        "fr": ["Choisissez {option} pour {group}.", "Sélectionnez {option} dans {group}."],
        "es": ["Elige {option} en {group}.", "Selecciona {option} para {group}."],
        "de": ["Wählen Sie {option} bei {group}.", "Wähle {option} unter {group} aus."],
    },
    "dropdown": {
        "train": ["Set {dd} to {option}.", "Choose {option} in the {dd} dropdown.", "Select {option} from the {dd} menu.",
                  "Change {dd} to {option}.", "Please pick {option} for {dd}.", "Open the {dd} dropdown and choose {option}."],
        "eval": ["Use the {dd} selector to choose {option}.", "I want {dd} set to {option}.",
                 "Switch the {dd} dropdown to {option}."],
        "fr": ["Réglez {dd} sur {option}.", "Choisissez {option} dans la liste {dd}."],
        "es": ["Pon {dd} en {option}.", "Elige {option} en el desplegable {dd}."],
        "de": ["Stellen Sie {dd} auf {option}.", "Wähle {option} im Menü {dd}."],
    },
    "listbox": {
        "train": ["Select {option} in the {lb} list.", "Choose {option} from {lb}.", "Pick {option} in the {lb} list.",
                  "In {lb}, select {option}.", "Please highlight {option} in the {lb} list.", "Click {option} in {lb}."],
        "eval": ["From the {lb} list, choose {option}.", "Make {option} the selected item in {lb}.",
                 "I need {option} chosen in the {lb} list."],
        "fr": ["Sélectionnez {option} dans la liste {lb}.", "Choisissez {option} dans {lb}."],
        "es": ["Selecciona {option} en la lista {lb}.", "Elige {option} en {lb}."],
        "de": ["Wählen Sie {option} in der Liste {lb}.", "Markiere {option} in {lb}."],
    },
    "login": {
        "train": ["Log in with username {user} and password {pw}.", "Sign in as {user} (password: {pw}).",
                  "Please log in. Username: {user}, password: {pw}.", "Use {user} / {pw} to sign in.",
                  "Log into the account {user} with the password {pw}.", "Sign in using the credentials {user} and {pw}."],
        "eval": ["Authenticate as {user}; the password is {pw}.", "My login is {user} and my password is {pw}. Sign me in.",
                 "Access the account: user {user}, pass {pw}."],
        "fr": ["Connectez-vous avec l'identifiant {user} et le mot de passe {pw}.", "Identifiez-vous : {user} / {pw}."],
        "es": ["Inicia sesión con el usuario {user} y la contraseña {pw}.", "Entra como {user} con la clave {pw}."],
        "de": ["Melden Sie sich mit Benutzername {user} und Passwort {pw} an.", "Logge dich als {user} ein, Passwort {pw}."],
    },
    "search_open": {
        "train": ["Search for {query} and open {result}.", "Look up {query}, then open the result {result}.",
                  "Use the search to find {query} and click {result}.", "Search {query} and open the {result} result.",
                  "Find {result} by searching for {query}.", "Run a search for {query}; open {result} from the results."],
        "eval": ["Type {query} in the search and go to {result}.", "I'm looking for {result}. Search {query} and open it.",
                 "Query {query}, then select {result} in the list of results."],
        "fr": ["Recherchez {query} puis ouvrez le résultat {result}.", "Cherchez {query} et ouvrez {result}."],
        "es": ["Busca {query} y abre el resultado {result}.", "Haz una búsqueda de {query} y abre {result}."],
        "de": ["Suchen Sie nach {query} und öffnen Sie {result}.", "Suche {query} und öffne das Ergebnis {result}."],
    },
    "menu_walk": {
        "train": ["Go to {path}.", "Navigate to {path}.", "Open {path} in the menu.", "Please open the page {path}.",
                  "Using the menu, go to {path}.", "Find {path}."],
        "eval": ["Browse the menu to {path}.", "Take me to {path}.", "Drill down to {path}."],
        "fr": ["Allez dans {path}.", "Ouvrez {path} via le menu."],
        "es": ["Ve a {path}.", "Abre {path} desde el menú."],
        "de": ["Gehen Sie zu {path}.", "Öffne {path} über das Menü."],
    },
    "table_goto": {
        "train": ["Go to page {page} of the table.", "Show page {page} of the results.", "Open page {page} of the list.",
                  "Navigate to page {page} in the table.", "Please switch the table to page {page}.",
                  "Display the table's page {page}."],
        "eval": ["Page through the table until page {page} is shown.", "Bring up page {page} of the records.",
                 "I'd like to see page {page} of this table."],
        "fr": ["Allez à la page {page} du tableau.", "Affichez la page {page} de la liste."],
        "es": ["Ve a la página {page} de la tabla.", "Muestra la página {page} de la lista."],
        "de": ["Gehen Sie zu Seite {page} der Tabelle.", "Zeige Seite {page} der Liste an."],
    },
    "table_qa": {
        "train": ["What is the {col} for {row}?", "Find {row} in the table and tell me its {col}.",
                  "Look up the {col} of {row}.", "In the table, what {col} does {row} have?",
                  "Report the {col} listed for {row}.", "Tell me the {col} of {row}."],
        "eval": ["Which {col} is shown for {row}?", "Check the table: what's the {col} for {row}?",
                 "I need the {col} of {row} from the table."],
        "fr": ["Dans le tableau, quelle est la valeur de la colonne {qcol} pour {qrow} ?", "Quel est le {qcol} de {qrow} ?"],
        "es": ["En la tabla, ¿cuál es el valor de {qcol} para {qrow}?", "¿Qué {qcol} tiene {qrow}?"],
        "de": ["Welcher Wert steht in der Spalte {qcol} für {qrow}?", "Was ist {qcol} bei {qrow}?"],
    },
    "qa_price": {
        "train": ["What is the price of {desc}?", "How much does {desc} cost?", "Tell me the price of {desc}.",
                  "What's {desc} priced at?", "Find {desc} and report its price.", "How much is {desc}?"],
        "eval": ["What would I pay for {desc}?", "Check the cost of {desc}.", "Give me the current price of {desc}."],
        "fr": ["Quel est le prix de {qname} ?", "Combien coûte {qname} ?"],
        "es": ["¿Cuál es el precio de {qname}?", "¿Cuánto cuesta {qname}?"],
        "de": ["Was kostet {qname}?", "Wie hoch ist der Preis von {qname}?"],
    },
    "qa_date": {
        "train": ["On what date is {desc}?", "When does {desc} take place?", "What is the date of {desc}?",
                  "Tell me the date of {desc}.", "Which day is {desc} scheduled for?", "When is {desc}?"],
        "eval": ["Find the date of {desc}.", "What day has {desc} been set for?", "Give me the date for {desc}."],
        "fr": ["À quelle date a lieu {qname} ?", "Quelle est la date de {qname} ?"],
        "es": ["¿En qué fecha es {qname}?", "¿Cuándo es {qname}?"],
        "de": ["An welchem Datum findet {qname} statt?", "Wann ist {qname}?"],
    },
    "qa_name_who": {
        "train": ["Who is the {role}?", "What is the name of the {role}?", "Tell me who works as {role}.",
                  "Find the person whose role is {role}.", "Which team member is the {role}?", "Name the {role}."],
        "eval": ["Who holds the position of {role}?", "Look up the {role} and give me their name.",
                 "I need the name of the {role}."],
        "fr": ["Qui occupe le poste {qrole} ?", "Quel est le nom de la personne au poste {qrole} ?"],
        "es": ["¿Quién ocupa el puesto {qrole}?", "¿Cómo se llama la persona con el cargo {qrole}?"],
        "de": ["Wer hat die Position {qrole}?", "Wie heißt die Person mit der Rolle {qrole}?"],
    },
    "qa_name_role": {
        "train": ["What is {name}'s role?", "What does {name} do here?", "What is the job title of {name}?",
                  "Tell me the role of {name}.", "Which position does {name} hold?", "Find {name} and report their title."],
        "eval": ["What's the title listed for {name}?", "Look up {name}: what is their role?",
                 "I need to know {name}'s position."],
        "fr": ["Quel est le poste de {qname} ?", "Quelle fonction occupe {qname} ?"],
        "es": ["¿Cuál es el puesto de {qname}?", "¿Qué cargo tiene {qname}?"],
        "de": ["Welche Position hat {qname}?", "Was ist die Rolle von {qname}?"],
    },
}

# Verb phrases for the checkbox family, per language: (tick, untick).
CHECK_VERBS = {
    "en": [("tick {x}", "untick {x}"), ("check {x}", "uncheck {x}"), ("turn on {x}", "turn off {x}"),
           ("select {x}", "clear {x}"), ("enable {x}", "disable {x}")],
    "fr": [("cochez {x}", "décochez {x}")],
    "es": [("marca {x}", "desmarca {x}")],
    "de": [("aktivieren Sie {x}", "deaktivieren Sie {x}")],
}
AND = {"en": " and ", "fr": " et ", "es": " y ", "de": " und "}
THEN_SAVE = {"en": ", then click {save}", "fr": ", puis cliquez sur {save}", "es": ", luego haz clic en {save}",
             "de": " und klicken Sie dann auf {save}"}
EN_EVAL_CHECK_VERBS = [3, 4]  # indices of CHECK_VERBS["en"] reserved for eval


def q(label):
    """Quotes a label exactly as displayed."""
    return '"%s"' % label


def pick_lang(rng):
    """Returns "en" most of the time and a foreign language for about FOREIGN_SHARE of tasks."""
    if rng.random() < FOREIGN_SHARE:
        return rng.choice(["fr", "es", "de"])
    return "en"


def phrase(rng, split, key, lang="en", **vals):
    """Fills one template of family `key` for the split; `lang` picks English or a foreign pair."""
    entry = PHRASES[key]
    if lang == "en":
        tpl = rng.choice(entry["eval" if split == "eval" else "train"])
    else:
        tpl = entry[lang][1 if split == "eval" else 0]
    vals = dict(vals)
    for k, v in list(vals.items()):
        if isinstance(v, str) and k[:1].islower():
            vals[k[:1].upper() + k[1:]] = v[:1].upper() + v[1:]
    return tpl.format(**vals)


def checkbox_changes(rng, split, lang, tick, untick):
    """Builds the {changes} text of a checkbox task from the labels to tick and to untick."""
    verbs = CHECK_VERBS[lang]
    if lang == "en":
        allowed = [v for i, v in enumerate(verbs) if (i in EN_EVAL_CHECK_VERBS) == (split == "eval")]
        verbs = allowed
    on, off = rng.choice(verbs)
    parts = []
    if tick:
        parts.append(on.format(x=AND[lang].join(q(t) for t in tick)))
    if untick:
        parts.append(off.format(x=AND[lang].join(q(t) for t in untick)))
    return AND[lang].join(parts)
