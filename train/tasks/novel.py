"""Invented labels for the train split: pseudo-words, unusual word pairs, codes and real words mixed.

The label lists in words.py are small, so a model trained only on them can fit the data by memorising
labels instead of reading them from the task text and the screenshot. In about NOVEL_SHARE of the train
tasks the family builders take the labels that the task refers to, and the look-alikes around them,
from a Novel instead: "Brovent", "Kalimo tracker", "Export Zorvik", "Plan B-47", "Copper ledger".

Each Novel draws from its own random stream, derived from the task's seed, so a train task without
invented labels is generated exactly as before and the eval split never reaches this module's choices.
Every label a Novel hands out is distinct (case-insensitively) from all others it handed out on the
same page, so labels stay unique wherever a family needs that.
"""
import random

import words

NOVEL_SHARE = 0.4

# Syllable parts for pseudo-words: onset + vowel (+ coda); mostly single letters so that the words stay
# short and pronounceable ("Kalimo", "Brovent", "Tesul").
ONSETS = list("bcdfghjklmnprstvz") * 3 + "br bl cr dr fl fr gl gr kr pl pr sk sl sp st tr th sh ch".split()
VOWELS = list("aeiou") * 4 + "ai ou ea io".split()
CODAS = [""] * 8 + "n r l s m x k nt rk st ld ng".split()
# Substrings a pseudo-word never contains (unfortunate real words).
BLOCKED = ("fuck shit cunt nig fag rape cock dick piss slut whore nazi porn anal cum tit sex kill dead "
           "hate poo pee gay kkk").split()

# A larger pool of real words; unusual pairs of them ("Copper ledger") make labels no list contains.
EXTRA_WORDS = """amber anchor archive atlas badge basket beacon bench berry binder blossom board bolt bridge
bucket cabin canvas caravan carbon cargo castle cellar chapter circuit clover cluster compass copper
corner cottage crystal current dial domain drawer echo ember engine fabric falcon feather ferry fiber
filter flag fleet forest fountain frame garden gate glow granite harbor helmet hive island journal kernel
ladder lagoon lantern ledger lemon level lighthouse lotus marble meadow mirror module mosaic motor
needle orbit orchard outpost paddle panel parcel pebble pepper pillar pilot planet pocket portal quarry
quill radar ribbon rocket saddle signal socket spark spindle spiral spring stamp station summit switch
thimble thunder timber token tower trail tunnel valley velvet voyage wagon walnut window wing yard""".split()

# Words that go with a pseudo-word to make a UI-like label ("Kalimo settings", "Export Zorvik").
UI_VERBS = ["Open", "Export", "Sync", "Share", "Add", "Remove", "Review", "Archive", "Send", "Track",
            "Book", "Edit", "Start", "Join", "Pause", "Order", "Renew", "Print", "Copy", "Check"]
UI_NOUNS = ["settings", "report", "plan", "notes", "tracker", "hub", "list", "portal", "center", "board",
            "log", "pass", "kit", "alerts", "guide", "club", "budget", "map", "files", "queue", "studio"]
LOOKALIKE_SUFFIXES = ["all", "now", "later", "draft", "again", "selected", "copy", "as PDF", "and close", "details"]
LOOKALIKE_PREFIXES = ["Re", "Un", "Pre", "Auto"]
# Nouns that turn a pseudo-word into a dish, an event, a venue or a field label.
DISH_NOUNS = ["soup", "salad", "pie", "curry", "stew", "wrap", "tart", "bowl", "latte", "toast", "noodles", "cake"]
EVENT_NOUNS = ["night", "workshop", "festival", "meetup", "fair", "concert", "class", "tour", "talk", "market",
               "screening", "tasting", "contest", "jam", "sprint"]
VENUE_NOUNS = ["Hall", "Park", "Square", "Pavilion", "Theatre", "Centre", "Gardens", "Loft", "Stage", "Arena"]
FIELD_NOUNS = ["code", "name", "ID", "number", "label", "key", "tag", "reference", "alias", "handle"]
FIELD_NOUNS_BY_KIND = {"email": ["email", "address", "contact"], "name": ["name", "contact", "owner"],
                       "city": ["city", "town", "location"], "company": ["company", "organisation", "team"],
                       "phone": ["phone", "number", "line"], "code": ["code", "key", "voucher"],
                       "url": ["website", "link", "URL"], "zip": ["zip", "postcode", "area code"]}
GROUP_NOUNS = ["type", "mode", "level", "style", "option", "tier", "setting", "source", "format", "profile"]
PLACE_SUFFIXES = ["", "", "", "burg", "ton", "ville", "stad", "ford", "haven", "mere"]


STOPWORDS = {"with", "from", "this", "that", "only", "your", "into", "more", "also", "have", "time"}


def real_pool():
    """Every single word of the UI and product vocabularies plus EXTRA_WORDS, lower-case, deduplicated."""
    out = []
    for group in words.BUTTON_GROUPS + words.TAB_SETS + words.CHECKBOX_SETS:
        for lab in group:
            out += lab.split()
    for lab in words.LINK_LABELS + words.NAV_LABELS + words.PRODUCT_TYPES + words.COLORS + words.MATERIALS:
        out += lab.split()
    out += words.MODEL_WORDS + words.SITE_WORDS_A + EXTRA_WORDS
    return sorted({w.lower() for w in out if w.isalpha() and 3 < len(w) <= 10} - STOPWORDS)


REAL_WORDS = real_pool()


def for_task(split, seed):
    """The Novel of one task, or None: None for every eval task and for about 60% of train tasks.

    `seed` is the task's seed; the Novel's stream is derived from it but distinct from the task's
    own stream, so the task's other random choices are untouched by this decision."""
    if split != "train":
        return None
    r = random.Random("novel|%d" % seed)
    return Novel(r) if r.random() < NOVEL_SHARE else None


class Novel:
    """Invents labels for one page; every label it returns is new on that page (case-insensitively)."""

    def __init__(self, rng):
        self.rng = rng
        self.used = set()
        self.firsts = set()

    # ---- building blocks -----------------------------------------------------------------------
    def word(self, lo=2, hi=3):
        """A capitalised pseudo-word of lo..hi syllables: "Brovent", "Kalimo", "Strenlo"."""
        r = self.rng
        while True:
            n = r.randint(lo, hi)
            w = "".join(r.choice(ONSETS) + r.choice(VOWELS) + (r.choice(CODAS) if i == n - 1 or r.random() < 0.25 else "")
                        for i in range(n))
            if 4 <= len(w) <= 8 and not any(b in w for b in BLOCKED) and w not in REAL_WORDS:
                return w.capitalize()

    def real(self):
        return self.rng.choice(REAL_WORDS)

    def code(self):
        """A label with a number or code in it: "Plan B-47", "Zorvik 3", "KX-204", "Ledger 12"."""
        r = self.rng
        style = r.randrange(5)
        if style == 0:
            return "%s %s-%d" % (self.real().capitalize(), r.choice("ABCDEFGHKLMNPRSTVXZ"), r.randint(2, 99))
        if style == 1:
            return "%s %d" % (self.word(), r.randint(2, 12))
        if style == 2:
            return "%s%s-%d" % (r.choice("BCDFGHKLMNPRSTVXZ"), r.choice("ABCDEFGHKLMNPRSTVXZ"), r.randint(10, 999))
        if style == 3:
            return "%s %d" % (self.real().capitalize(), r.randint(2, 99))
        return "%s %s" % (self.word(), r.choice(["II", "III", "X", "One", "Plus", "Max", "Go"]))

    def _fresh(self, make):
        """Calls make() until it returns a label not yet used on the page; records it."""
        for _ in range(200):
            lab = make()
            if lab.lower() not in self.used and "|" not in lab and ">" not in lab:
                self.used.add(lab.lower())
                return lab
        lab = "%s %d" % (make(), len(self.used))
        self.used.add(lab.lower())
        return lab

    def _label_once(self):
        r = self.rng
        style = r.random()
        if style < 0.3:
            return self.word()
        if style < 0.45:
            return "%s %s" % (self.word(), r.choice(UI_NOUNS))
        if style < 0.55:
            return "%s %s" % (r.choice(UI_VERBS), self.word())
        if style < 0.8:
            return "%s %s" % (self.real().capitalize(), self.real())
        return self.code()

    # ---- labels ----------------------------------------------------------------------------------
    def label(self):
        """One invented UI label: a pseudo-word, a pseudo-word with a UI word, a real-word pair or a code."""
        return self._fresh(self._label_once)

    def mix(self, k, real=(), p_real=0.15):
        """k distinct labels, each invented, or (with probability p_real) taken from the real list `real`."""
        out = []
        pool = [x for x in real if x.lower() not in self.used]
        for _ in range(k):
            if pool and self.rng.random() < p_real:
                x = self.rng.choice(pool)
                pool = [y for y in pool if y.lower() != x.lower()]
                self.used.add(x.lower())
                out.append(x)
            else:
                out.append(self.label())
        return out

    def lookalikes(self, k):
        """Up to k distinct labels built around one invented stem ("Brovent", "Brovent all",
        "Export Brovent", "Rebrovent"), so that the look-alike difficulty of BUTTON_GROUPS remains."""
        r = self.rng
        stem = self.word()
        forms = [stem] + ["%s %s" % (stem, s) for s in r.sample(LOOKALIKE_SUFFIXES, 4)]
        forms += ["%s %s" % (v, stem) for v in r.sample(UI_VERBS, 2)]
        forms.append(r.choice(LOOKALIKE_PREFIXES) + stem.lower())
        r.shuffle(forms)
        out = []
        for f in forms:
            if len(out) < k and f.lower() not in self.used:
                self.used.add(f.lower())
                out.append(f)
        return out

    def group_name(self):
        """A name for a group of options (radio group, dropdown, list): "Kalimo", "Brovent tier"."""
        r = self.rng
        return self._fresh(lambda: self.word() if r.random() < 0.4 else "%s %s" % (
            self.word() if r.random() < 0.6 else self.real().capitalize(), r.choice(GROUP_NOUNS)))

    def field_label(self, kind=None):
        """A text field label for a value of `kind`: "Zorvik code", "Lantern email", "Kalimo"."""
        r = self.rng
        nouns = FIELD_NOUNS_BY_KIND.get(kind, FIELD_NOUNS)
        return self._fresh(lambda: "%s %s" % (self.word() if r.random() < 0.6 else self.real().capitalize(),
                                              r.choice(nouns)) if r.random() < 0.8 else self.word())

    # ---- names, places, things -----------------------------------------------------------------------
    def person(self):
        """A 'First Last' name with a first name not yet used on the page; mostly invented words,
        sometimes one real first or last name."""
        r = self.rng

        def make():
            first = r.choice(words.FIRST_NAMES) if r.random() < 0.2 else self.word(2, 2)
            last = r.choice(words.LAST_NAMES) if r.random() < 0.25 else self.word(2, 3)
            return first if first in self.firsts else "%s %s" % (first, last)
        n = "%s %s" % (self.word(2, 2), self.word(2, 3))
        for _ in range(100):
            cand = make()
            if " " in cand and cand.lower() not in self.used:
                n = cand
                break
        self.used.add(n.lower())
        self.firsts.add(n.split()[0])
        return n

    def place(self):
        """An invented town name: "Talvora", "Brenton"."""
        return self._fresh(lambda: self.word() + self.rng.choice(PLACE_SUFFIXES))

    def product(self, ptype=None):
        """A product name with an invented model word: "Kalimo Kettle", "Brovent Steel Lamp"."""
        r = self.rng

        def make():
            t = (ptype or r.choice(words.PRODUCT_TYPES)).title()
            style = r.randrange(3)
            if style == 0:
                return "%s %s" % (self.word(), t)
            if style == 1:
                return "%s %s %s" % (self.word(), r.choice(words.MATERIALS).title(), t)
            return "%s %s %s" % (self.word(), self.rng.choice(words.MODEL_WORDS + EXTRA_WORDS).capitalize(), t)
        return self._fresh(make)

    def thing(self, nouns):
        """A pseudo-word or real word with a noun from `nouns`: "Brovent soup", "Lantern festival"."""
        r = self.rng
        return self._fresh(lambda: "%s %s" % (self.word() if r.random() < 0.7 else self.real().capitalize(), r.choice(nouns)))

    def topic(self):
        """A lower-case invented search word, unused on the page: "brovent"."""
        return self._fresh(lambda: self.word().lower())

    def company(self):
        return self._fresh(lambda: "%s %s" % (self.word(), self.rng.choice(["Ltd", "GmbH", "SA", "Inc.", "Labs", "Studio"])))

    def password(self):
        """A password built on an invented word: "Kalimo42!", "brovent-318"."""
        r = self.rng
        w = self.word() if r.random() < 0.5 else self.word().lower()
        return r.choice(["%s%d!", "%s-%d", "%s%d", "%s#%d", "%s_%d"]) % (w, r.randint(10, 9999))

    def text(self, kind):
        """A typed value of a text field kind with invented words (kinds whose values are numbers, URLs
        or phone numbers return None: those are random already)."""
        r = self.rng
        if kind == "name":
            return self.person()
        if kind == "city":
            return self.place()
        if kind == "company":
            return self.company()
        if kind == "code":
            return "%s%d" % (self.word().upper(), r.randint(5, 99))
        if kind == "job":
            return "%s %s" % (self.word(), r.choice(["specialist", "designer", "officer", "keeper", "planner"]))
        if kind == "handle":
            return "%s_%s%d" % (self.word().lower(), self.word(1, 1).lower(), r.randint(1, 99))
        if kind in ("subject", "project"):
            return self.label()
        if kind == "message":
            return r.choice(["Greetings from %s!", "Happy %s day!", "See you in %s", "Thanks for the %s"]) % self.word()
        if kind == "street":
            return "%d %s %s" % (r.randint(1, 220), self.word(), r.choice(["Street", "Road", "Lane", "Avenue"]))
        if kind == "email":
            return "%s.%s@%s.com" % (self.word().lower(), self.word().lower(), r.choice(["example", "mail", self.word().lower()]))
        return None
