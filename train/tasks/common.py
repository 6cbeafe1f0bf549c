"""Helpers shared by the family builders: escaping, attributes, names, prices and dates."""
import datetime
import html

import words


def esc(s):
    return html.escape(str(s), quote=True)


def attrs(**kw):
    """Renders keyword arguments as HTML attributes; data_x becomes data-x; None values are skipped."""
    out = []
    for k, v in kw.items():
        if v is None or v is False:
            continue
        name = k.rstrip("_").replace("_", "-")
        out.append(name if v is True else '%s="%s"' % (name, esc(v)))
    return (" " + " ".join(out)) if out else ""


def q(label):
    return '"%s"' % label


def person(rng, used=None):
    """A unique 'First Last' name."""
    used = used if used is not None else set()
    for _ in range(200):
        n = "%s %s" % (rng.choice(words.FIRST_NAMES), rng.choice(words.LAST_NAMES))
        if n not in used and n.split()[0] not in {u.split()[0] for u in used}:
            used.add(n)
            return n
    n = "%s %s" % (rng.choice(words.FIRST_NAMES), rng.choice(words.LAST_NAMES))
    used.add(n)
    return n


def product_name(rng, ptype=None, used=None):
    used = used if used is not None else set()
    for _ in range(100):
        t = ptype or rng.choice(words.PRODUCT_TYPES)
        style = rng.randrange(4)
        if style == 0:
            n = "%s %s" % (rng.choice(words.MODEL_WORDS), t.title())
        elif style == 1:
            n = "%s %s %s" % (rng.choice(words.BRANDS), rng.choice(words.MODEL_WORDS), t.title())
        elif style == 2:
            n = "%s %s %s" % (rng.choice(words.MODEL_WORDS), rng.choice(words.MATERIALS).title(), t.title())
        else:
            n = "%s %s" % (rng.choice(words.BRANDS), t.title())
        if n not in used:
            used.add(n)
            return n
    return n


# ---- money ---------------------------------------------------------------------------------------
def _group(n, sep):
    s = str(n)
    parts = []
    while len(s) > 3:
        parts.insert(0, s[-3:])
        s = s[:-3]
    parts.insert(0, s)
    return sep.join(parts)


MONEY_FORMATS = ["usd", "usd", "eur_fr", "eur_de", "gbp", "eur_ie", "usd_code", "chf", "usd_nocents"]


def fmt_money(cents, style):
    """Formats an amount in cents the way shops in different countries print it."""
    whole, frac = divmod(cents, 100)
    if style == "usd":
        return "$%s.%02d" % (_group(whole, ","), frac)
    if style == "usd_nocents":
        return "$%s" % _group(whole, ",") if frac == 0 else "$%s.%02d" % (_group(whole, ","), frac)
    if style == "eur_fr":
        return "%s,%02d\u00a0€" % (_group(whole, "\u202f"), frac)
    if style == "eur_de":
        return "%s,%02d €" % (_group(whole, "."), frac)
    if style == "gbp":
        return "£%s.%02d" % (_group(whole, ","), frac)
    if style == "eur_ie":
        return "€%s.%02d" % (_group(whole, ","), frac)
    if style == "usd_code":
        return "%s.%02d USD" % (_group(whole, ","), frac)
    if style == "chf":
        return "CHF %s.%02d" % (_group(whole, "'"), frac)
    raise ValueError(style)


def price_cents(rng, lo=5, hi=400):
    whole = rng.randint(lo, hi)
    if whole > 150 and rng.random() < 0.2:
        whole = rng.randint(1000, 2500)
    return whole * 100 + rng.choice([0, 99, 95, 50, 49, 25, 90, 0, 99])


# ---- dates ---------------------------------------------------------------------------------------
DATE_FORMATS = ["us_long", "us_short", "eu_long", "iso", "us_num", "eu_num", "de_num", "wd_short", "wd_long", "badge"]
DAY_FIRST = {"eu_long": True, "eu_num": True, "de_num": True, "wd_long": True}
YEAR_SHOWN = {"wd_short": False, "wd_long": False, "badge": False}


def fmt_date(d, style):
    """Formats a datetime.date; returns the text shown on the page."""
    m, wd = words.MONTHS[d.month - 1], words.WEEKDAYS[d.weekday()]
    if style == "us_long":
        return "%s %d, %d" % (m, d.day, d.year)
    if style == "us_short":
        return "%s %d, %d" % (m[:3], d.day, d.year)
    if style == "eu_long":
        return "%d %s %d" % (d.day, m, d.year)
    if style == "iso":
        return d.isoformat()
    if style == "us_num":
        return "%02d/%02d/%d" % (d.month, d.day, d.year)
    if style == "eu_num":
        return "%02d/%02d/%d" % (d.day, d.month, d.year)
    if style == "de_num":
        return "%d.%d.%d" % (d.day, d.month, d.year)
    if style == "wd_short":
        return "%s, %s %d" % (wd[:3], m[:3], d.day)
    if style == "wd_long":
        return "%s %d %s" % (wd, d.day, m)
    if style == "badge":
        return "%s %02d" % (m[:3].upper(), d.day)
    raise ValueError(style)


def spoken_date(d, with_year=True):
    """The date as a person would say it in an English answer."""
    s = "%s %d" % (words.MONTHS[d.month - 1], d.day)
    return s + (", %d" % d.year if with_year else "")


def random_date(rng, year=None):
    y = year or rng.choice([2025, 2026])
    return datetime.date(y, 1, 1) + datetime.timedelta(days=rng.randrange(365))


def username(rng, name):
    first, last = name.lower().split()[0], name.lower().split()[-1]
    first = first.encode("ascii", "ignore").decode() or "user"
    last = last.encode("ascii", "ignore").decode() or "x"
    style = rng.randrange(5)
    if style == 0:
        return first[0] + last
    if style == 1:
        return "%s.%s" % (first, last)
    if style == 2:
        return "%s%d" % (first, rng.randint(7, 99))
    if style == 3:
        return "%s_%s" % (first, last[:3])
    return "%s@%s.com" % (first, rng.choice(["example", "mail", "inbox", "work"]))


def password(rng):
    w = rng.choice(words.MODEL_WORDS + words.SITE_WORDS_A)
    return rng.choice(["%s%d!", "%s-%d", "%s%d", "%s#%d"]) % (w, rng.randint(10, 9999))
