"""Families click_button, click_link, click_tab and click_icon: activate one named element among look-alikes.

Every clickable candidate carries data-act (its key) and data-desc (how a person would describe it on
a screenshot). js/clicks.js records activations and implements check() and the oracle.
"""
import icons
import words
from common import attrs, esc, person, product_name, q

CARD_SETS = [
    ("product", [("Add to cart", "buy"), ("Save for later", "save"), ("Compare", "compare")]),
    ("file", [("Open", "open"), ("Rename", "rename"), ("Delete", "delete"), ("Share", "share")]),
    ("person", [("Message", "message"), ("Follow", "follow"), ("Remove", "remove")]),
    ("booking", [("Modify", "modify"), ("Cancel", "cancel"), ("Check in", "check in")]),
]
FILE_EXT = ["pdf", "docx", "xlsx", "png", "txt", "csv", "pptx", "zip"]
BUTTON_WORDS = [x for g in words.BUTTON_GROUPS for x in g]
CARD_ACTIONS = sorted({lab for _, acts in CARD_SETS for lab, _ in acts})
TAB_WORDS = sorted({t for ts in words.TAB_SETS for t in ts})


def _button(theme, key, label, desc, cls="btn2", msg=None):
    return '<button type="button" class="%s"%s>%s</button>' % (
        cls, attrs(data_act=key, data_desc=desc, data_msg=msg), esc(label))


def _button_labels(rng, k, avoid=()):
    """k distinct button labels: one look-alike group plus random others."""
    groups = rng.sample(words.BUTTON_GROUPS, 3)
    labels = list(groups[0])
    rng.shuffle(labels)
    labels = labels[:rng.randint(3, 5)]
    for g in groups[1:]:
        for x in rng.sample(g, 2):
            if x not in labels:
                labels.append(x)
    labels = [x for x in labels if x not in avoid][:k]
    return labels, groups[0]


def _novel_button_labels(nv, k):
    """k distinct invented button labels: look-alikes around one invented stem plus other labels."""
    labels = nv.lookalikes(nv.rng.randint(3, 5))
    return (labels + nv.mix(k - len(labels), BUTTON_WORDS))[:k]


def _novel_card_item(nv, kind):
    """An invented name for one card/row of the given kind (product, file, person, booking)."""
    if kind == "product":
        return nv.product()
    if kind == "file":
        return "%s.%s" % (nv.label(), nv.rng.choice(FILE_EXT))
    if kind == "person":
        return nv.person()
    return "%s in %s" % (nv.rng.choice(["Hotel", "Flat", "Table", "Room", "Tour"]), nv.place())


def build_click_button(ctx):
    rng, th, nv = ctx.rng, ctx.theme, ctx.novel
    variant = ctx.variant(["toolbar", "form_actions", "cards", "dialog_buttons"], ["settings_rows", "row_table"])
    status = '<div class="status" data-status role="status"></div>'
    if variant in ("cards", "row_table"):
        kind, actions = rng.choice(CARD_SETS)
        if nv:  # invented action labels; the verbs stay for the wording
            actions = list(zip(nv.mix(len(actions), CARD_ACTIONS), [v for _, v in actions]))
        used = set()
        n = rng.randint(3, 6) if ctx.size != "small" else rng.randint(2, 4)
        items = []
        for _ in range(n):
            if nv:
                items.append(_novel_card_item(nv, kind))
            elif kind == "product":
                items.append(product_name(rng, used=used))
            elif kind == "file":
                items.append("%s.%s" % (rng.choice(words.PROJECTS + words.SUBJECTS[:4]), rng.choice(FILE_EXT)))
            elif kind == "person":
                items.append(person(rng, used))
            else:
                items.append("%s in %s" % (rng.choice(["Hotel", "Flat", "Table", "Room", "Tour"]), rng.choice(words.CITIES)))
        items = list(dict.fromkeys(items))
        ti, (tlabel, verb) = rng.randrange(len(items)), rng.choice(actions)
        tlabel_r = th.label(tlabel)
        blocks = []
        for i, it in enumerate(items):
            btns = []
            for lab, _ in actions:
                lr = th.label(lab)
                ctxword = "card" if variant == "cards" else "row"
                desc = 'the %s button in the %s %s' % (q(lr), q(it), ctxword)
                btns.append(_button(th, "%d:%s" % (i, lab), lr, desc, "btn" if lab == actions[0][0] else "btn2",
                                    msg="%s: %s." % (lab, it)))
            if variant == "cards":
                sub = rng.choice(["In stock", "Updated 2 days ago", "Member since 2021", "Confirmed", "Popular"])
                blocks.append('<div class="card ccard"><h3>%s</h3><p class="muted small">%s</p><div class="row">%s</div></div>'
                              % (esc(it), esc(sub), "".join(btns)))
            else:
                blocks.append("<tr><td>%s</td><td><div class='row'>%s</div></td></tr>" % (esc(it), "".join(btns)))
        if variant == "cards":
            main = status + '<div class="cgrid">%s</div>' % "".join(blocks)
        else:
            main = status + "<table><thead><tr><th>Name</th><th>Actions</th></tr></thead><tbody>%s</tbody></table>" % "".join(blocks)
        target = "%d:%s" % (ti, tlabel)
        ques = ctx.phrase("click_button_card", label=q(tlabel_r), item=items[ti], qitem=q(items[ti]), verb=verb)
        desc_done = 'I clicked %s for %s.' % (q(tlabel_r), q(items[ti]))
        css = ".cgrid{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:1em}"
        return dict(kind="action", ques=ques, main=main, js="clicks", css=css, steps=1,
                    config=dict(target=target, label=tlabel_r, done=[desc_done, "Done: clicked %s on the %s entry." % (q(tlabel_r), items[ti])]),
                    opts=dict(title=rng.choice({"product": ["Recommended for you", "Shop", "Best sellers"], "file": ["Files", "Documents", "Shared with me"],
                                                   "person": ["Team", "People", "Contacts"], "booking": ["My bookings", "Trips", "Reservations"]}[kind])))
    k = rng.randint(5, 9) if ctx.size != "small" else rng.randint(4, 6)
    labels = _novel_button_labels(nv, k) if nv else _button_labels(rng, k)[0]
    labels = [th.label(x) for x in labels]
    target = rng.choice(labels)
    where = {"toolbar": "in the toolbar", "form_actions": "at the bottom of the form", "dialog_buttons": "in the dialog",
             "settings_rows": ""}[variant]
    primary = rng.choice(labels)

    def b(lab, extra=""):
        desc = "the %s button%s" % (q(lab), (" " + where) if where and rng.random() < 0.5 else "")
        return _button(th, lab, lab, desc, "btn" if lab == primary else "btn2", msg=rng.choice(
            ["%s: done." % lab, "%s completed." % lab, "Action %s applied." % q(lab)]))
    if variant == "toolbar":
        doc = "".join("<li>%s <span class='muted small'>%s</span></li>" % (esc(x), esc(rng.choice(["edited today", "2 KB", "shared"])))
                      for x in rng.sample(words.PROJECTS, 4))
        main = ('<div class="card"><div class="row toolbar">%s</div>%s<ul>%s</ul></div>'
                % ("".join(b(x) for x in labels), status, doc))
    elif variant == "form_actions":
        fields = "".join('<div class="field"><span>%s</span><input type="text" value="%s"%s></div>' % (
            esc(lab), esc(val), attrs(readonly=True)) for lab, val in [
                ("Title", rng.choice(words.PROJECTS)), ("Owner", person(rng)), ("City", rng.choice(words.CITIES))][:rng.randint(1, 3)])
        main = '<div class="card">%s<div class="row" style="justify-content:flex-end">%s</div>%s</div>' % (
            fields, "".join(b(x) for x in labels), status)
    elif variant == "dialog_buttons":
        half = len(labels) // 2
        main = ('<div class="card"><h3>%s</h3><p>%s</p><div class="row">%s</div></div>%s'
                '<div class="card" style="margin-top:1em"><p class="muted small">%s</p><div class="row">%s</div></div>'
                % (esc(rng.choice(["Unsaved changes", "Before you go", "Review your document", "Confirm action"])),
                   esc(rng.choice(words.FILLER_SENTENCES)), "".join(b(x) for x in labels[:half]), status,
                   esc(rng.choice(words.FILLER_SENTENCES)), "".join(b(x) for x in labels[half:])))
    else:  # settings_rows
        rows = "".join('<div class="srow"><div><b>%s</b><div class="muted small">%s</div></div>%s</div>' % (
            esc(x), esc(rng.choice(words.FILLER_SENTENCES)), b(x)) for x in labels)
        main = status + '<div class="card">%s</div>' % rows
    ques = ctx.phrase("click_button", label=q(target))
    css = (".toolbar{border-bottom:1px solid var(--border);padding-bottom:.6em;margin-bottom:.6em}"
           ".srow{display:flex;justify-content:space-between;align-items:center;gap:1em;padding:.6em 0;border-bottom:1px solid var(--border)}")
    return dict(kind="action", ques=ques, main=main, js="clicks", css=css, steps=1,
                config=dict(target=target, label=target, done=["I clicked the %s button." % q(target), "Clicked %s." % q(target)]),
                opts=dict(title=rng.choice(["Document", "Project settings", "Editor", "Account", "Workspace", ""]), avoid=labels))


def build_click_link(ctx):
    rng = ctx.rng
    variant = ctx.variant(["article_inline", "link_list", "nav_footer", "link_grid"], ["sitemap", "table_links"])
    has_chrome = ctx.frame in ("topnav", "shop", "article", "docs")
    if variant == "nav_footer" and not has_chrome:
        variant = "link_list"
    k = rng.randint(6, 10)
    labels = ctx.novel.mix(k, words.LINK_LABELS) if ctx.novel else rng.sample(words.LINK_LABELS, k)
    if variant in ("link_list", "table_links", "link_grid"):
        topic = ctx.novel.topic() if ctx.novel else rng.choice(words.ARTICLE_TOPICS)
        extra = [rng.choice(["How to start with %s", "%s for beginners", "The cost of %s", "%s: common mistakes",
                             "Is %s worth it?", "%s in 5 minutes"]) % topic for _ in range(3)]
        labels = list(dict.fromkeys(labels[:6] + [e[0].upper() + e[1:] for e in extra]))
    target = rng.choice(labels)
    opts = dict(avoid=labels, title=rng.choice(["Resources", "Useful links", "Explore", "Help", "More information"]))

    def a(lab, where):
        return '<a href="#%s"%s>%s</a>' % (esc(lab.lower().replace(" ", "-")), attrs(
            data_act=lab, data_link=True, data_desc="the %s link%s" % (q(lab), where)), esc(lab))
    if variant == "article_inline":
        chunks = []
        rest = labels[:]
        rng.shuffle(rest)
        while rest:
            sent = rng.choice(words.FILLER_SENTENCES)
            links = [rest.pop() for _ in range(min(len(rest), rng.randint(1, 2)))]
            chunks.append("<p>%s %s</p>" % (esc(sent), " ".join("See %s." % a(x, " in the text") for x in links)))
        main = "".join(chunks)
    elif variant == "link_list":
        main = '<div class="card"><h3>%s</h3><ul class="links">%s</ul></div>' % (
            esc(rng.choice(["Related articles", "Quick links", "Read next", "Popular pages"])),
            "".join("<li>%s</li>" % a(x, "") for x in labels))
    elif variant == "link_grid":
        main = '<div class="lgrid">%s</div>' % "".join(
            '<div class="card"><h4>%s</h4><p class="muted small">%s</p></div>' % (a(x, ""), esc(rng.choice(words.FILLER_SENTENCES)))
            for x in labels)
    elif variant == "sitemap":
        per = (len(labels) + 2) // 3
        main = '<div class="smap">%s</div>' % "".join(
            "<div><h4>%s</h4><ul class='links'>%s</ul></div>" % (esc(h), "".join("<li>%s</li>" % a(x, " under %s" % q(h))
                                                                                for x in labels[i * per:(i + 1) * per]))
            for i, h in enumerate(rng.sample(["Company", "Products", "Support", "Legal", "Community"], 3)))
    elif variant == "table_links":
        main = "<table><thead><tr><th>Page</th><th>Updated</th></tr></thead><tbody>%s</tbody></table>" % "".join(
            "<tr><td>%s</td><td class='muted'>%d days ago</td></tr>" % (a(x, " in the table"), rng.randint(1, 60)) for x in labels)
    else:  # nav_footer: the target sits in the page chrome
        nav_labels = labels[:4]
        foot_labels = labels[4:]
        if ctx.vp[0] < 900:
            target = rng.choice(foot_labels)
        opts["nav"] = [a(x, " in the top navigation") for x in nav_labels]
        opts["footer"] = '<footer class="ftr"><div class="fcols"><ul>%s</ul></div></footer>' % "".join(
            "<li>%s</li>" % a(x, " in the footer") for x in foot_labels)
        main = "".join("<p>%s</p>" % esc(" ".join(rng.sample(words.FILLER_SENTENCES, 3))) for _ in range(rng.randint(1, 3)))
    main = '<div data-home>%s</div><div data-view class="hidden"><a href="#back" data-back%s>%s</a><h2 data-vtitle></h2><p>%s</p></div>' % (
        main, attrs(data_desc=rng.choice(['the "← Back" link', 'the "← Back" link at the top'])), "← Back",
        esc(" ".join(rng.sample(words.FILLER_SENTENCES, 3))))
    css = (".links{padding-left:1.2em}.links li{margin:.3em 0}.lgrid{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:1em}"
           ".smap{display:flex;gap:2em;flex-wrap:wrap}")
    return dict(kind="action", ques=ctx.phrase("click_link", label=q(target)), main=main, js="clicks", css=css, steps=1,
                config=dict(target=target, label=target, done=["I opened the %s link." % q(target), "Clicked the %s link; its page is shown." % q(target)]),
                opts=opts)


def build_click_tab(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["underline", "pills", "boxed", "segmented"], ["vertical", "cardtabs"])
    tabs = ctx.novel.mix(ctx.novel.rng.randint(4, 7), TAB_WORDS) if ctx.novel else rng.choice(words.TAB_SETS)[:]
    if ctx.size == "small":
        tabs = tabs[:rng.randint(3, 4)]
    tabs = [th.label(t) for t in tabs]
    target = rng.choice(tabs)
    initial = rng.choice([t for t in tabs if t != target])
    heads = []
    for t in tabs:
        count = (' <span class="badge">%d</span>' % rng.randint(1, 40)) if variant == "cardtabs" and rng.random() < 0.5 else ""
        heads.append('<button type="button" role="tab" class="tab%s"%s>%s%s</button>' % (
            " active" if t == initial else "", attrs(data_act=t, data_tab=True, aria_selected="true" if t == initial else "false",
                                                   data_desc="the %s tab" % q(t)), esc(t), count))
    panels = "".join('<div class="tpanel%s" data-panel="%s"><h3>%s</h3><p>%s</p><button type="button" class="btn2" data-chrome>%s</button></div>' % (
        "" if t == initial else " hidden", esc(t), esc(t), esc(" ".join(rng.sample(words.FILLER_SENTENCES, 2))),
        esc(rng.choice(["Save changes", "Edit", "View all", "Refresh"]))) for t in tabs)
    css = {
        "underline": ".tabs{display:flex;flex-wrap:wrap;border-bottom:2px solid var(--border)}.tab{background:none;border:0;border-bottom:3px solid transparent;padding:.6em 1em;font:inherit;color:var(--muted);cursor:pointer;margin-bottom:-2px}.tab.active{color:var(--text);border-bottom-color:var(--brand);font-weight:700}",
        "pills": ".tabs{display:flex;flex-wrap:wrap;gap:.4em}.tab{background:var(--surface2);border:0;border-radius:999px;padding:.4em 1em;font:inherit;color:var(--text);cursor:pointer}.tab.active{background:var(--brand);color:var(--on-brand)}",
        "boxed": ".tabs{display:flex;flex-wrap:wrap;border-bottom:1px solid var(--border)}.tab{background:var(--surface2);border:1px solid var(--border);border-bottom:0;border-radius:var(--radius) var(--radius) 0 0;padding:.45em 1em;font:inherit;color:var(--text);cursor:pointer;margin-right:2px}.tab.active{background:var(--surface);font-weight:700}",
        "segmented": ".tabs{display:inline-flex;flex-wrap:wrap;border:1px solid var(--brand);border-radius:var(--btn-radius);overflow:hidden}.tab{background:var(--surface);border:0;border-right:1px solid var(--brand);padding:.4em .9em;font:inherit;color:var(--text);cursor:pointer}.tab.active{background:var(--brand);color:var(--on-brand)}",
        "vertical": ".tw{display:flex;gap:1.2em;flex-wrap:wrap}.tabs{display:flex;flex-direction:column;min-width:150px;border-right:1px solid var(--border)}.tab{text-align:left;background:none;border:0;border-left:3px solid transparent;padding:.5em .9em;font:inherit;color:var(--text);cursor:pointer}.tab.active{border-left-color:var(--brand);background:var(--surface2);font-weight:700}.tw>.tpanels{flex:1;min-width:200px}",
        "cardtabs": ".tabs{display:flex;flex-wrap:wrap;gap:.2em;background:var(--surface2);padding:.3em;border-radius:var(--radius)}.tab{background:none;border:0;padding:.45em .9em;font:inherit;color:var(--muted);cursor:pointer;border-radius:var(--radius)}.tab.active{background:var(--surface);color:var(--text);box-shadow:var(--shadow);font-weight:700}",
    }[variant] + ".tpanel{padding:1em .2em}"
    main = '<div class="%s"><div class="tabs" role="tablist">%s</div><div class="tpanels">%s</div></div>' % (
        "tw" if variant == "vertical" else "tabw", "".join(heads), panels)
    if variant == "cardtabs":
        main = '<div class="card">%s</div>' % main
    return dict(kind="action", ques=ctx.phrase("click_tab", label=q(target)), main=main, js="clicks", css=css, steps=1,
                state=dict(selected=initial),
                config=dict(target=target, label=target, done=["The %s tab is now open." % q(target), "I switched to the %s tab." % q(target)]),
                opts=dict(title=rng.choice(["Settings", "Product", "Mailbox", "Project", "Overview", ""]), avoid=tabs))


def build_click_icon(ctx):
    rng = ctx.rng
    variant = ctx.variant(["app_header", "item_actions", "side_toolbar", "bottom_bar"], ["card_corner", "editor_ribbon"])
    k = rng.randint(5, 9) if ctx.size != "small" else rng.randint(4, 6)
    names = rng.sample(sorted(icons.ICONS), k)
    target = rng.choice(names)
    where = {"app_header": "in the top bar", "item_actions": "on the item", "side_toolbar": "in the left toolbar",
             "bottom_bar": "in the bottom bar", "card_corner": "on the card", "editor_ribbon": "in the editor toolbar"}[variant]
    size = rng.choice(["1.6em", "2em", "2.3em", "2.6em"])

    def ib(n):
        svg, noun, funcs = icons.ICONS[n]
        tip = funcs[0]
        return '<button type="button" class="iconbtn"%s style="width:%s;height:%s">%s</button>' % (
            attrs(data_act=n, aria_label=tip, data_tip=tip, title=tip, data_toggle=n in ("favorite", "star") or None,
                  data_msg=rng.choice(["%s opened." % tip, "%s: done." % tip, "%s" % tip]),
                  data_desc="the %s icon button %s" % (noun, where)), size, size, icons.svg(n))
    bar = "".join(ib(n) for n in names)
    status = '<div class="status" data-status role="status"></div>'
    body = "<p>%s</p>" % esc(" ".join(rng.sample(words.FILLER_SENTENCES, 2)))
    title = rng.choice(words.PROJECTS + words.HEADLINES[:4])
    if variant == "app_header":
        main = '<div class="card"><div class="row ibar" style="justify-content:space-between"><b>%s</b><span class="row">%s</span></div>%s%s</div>' % (
            esc(title), bar, status, body)
    elif variant == "item_actions":
        main = '<div class="card"><h3>%s</h3>%s<div class="row">%s</div>%s</div>' % (esc(product_name(rng)), body, bar, status)
    elif variant == "side_toolbar":
        main = '<div class="row" style="align-items:flex-start;flex-wrap:nowrap"><div class="vbar">%s</div><div class="card" style="flex:1;min-width:0">%s%s</div></div>' % (
            bar, status, body)
    elif variant == "bottom_bar":
        main = '<div class="card">%s%s<div class="row bbar">%s</div></div>' % (body, status, bar)
    elif variant == "card_corner":
        main = '<div class="card" style="position:relative"><div class="row" style="justify-content:flex-end">%s</div><h3>%s</h3>%s%s</div>' % (
            bar, esc(product_name(rng)), status, body)
    else:
        main = '<div class="card"><div class="row ibar">%s</div><div class="editor">%s</div>%s</div>' % (bar, body, status)
    css = (".vbar{display:flex;flex-direction:column;gap:.3em;border:1px solid var(--border);border-radius:var(--radius);padding:.3em;background:var(--surface)}"
           ".bbar{justify-content:space-around;border-top:1px solid var(--border);padding-top:.4em}"
           ".ibar{border-bottom:1px solid var(--border);padding-bottom:.4em}.editor{min-height:6em;padding:.6em;border:1px dashed var(--border);margin-top:.5em}")
    func = rng.choice(icons.ICONS[target][2][1:])
    noun = icons.ICONS[target][1]
    return dict(kind="action", ques=ctx.phrase("click_icon", func=func[0].lower() + func[1:]), main=main, js="clicks", css=css, steps=1,
                config=dict(target=target, label=noun,
                            done=["I clicked the %s icon to %s." % (noun, func[0].lower() + func[1:]),
                                  "Done: the %s icon button was clicked." % noun]),
                opts=dict(title="", no_icons=True))
