"""Families qa_price, qa_date and qa_name: answer a question from text on the page.

The item is identified by another attribute (name, colour + type, event type + city, role), with
look-alike distractors nearby. Each item carries data-item; its identifying text has data-f="name"
and the answer text data-f="value". js/qa.js checks answers with tolerant matching.
"""
import novel
import words
from common import (DATE_FORMATS, DAY_FIRST, MONEY_FORMATS, YEAR_SHOWN, esc, fmt_date, fmt_money, person, price_cents, q,
                    random_date, spoken_date)

CSS_COLORS = {"mint": "#98e0b0", "cream": "#f3ecd0", "charcoal": "#36454f", "beige": "#e3d3b0", "silver": "#c0c0c0"}
DISHES = ["Margherita pizza", "Caesar salad", "Mushroom risotto", "Fish and chips", "Pad thai", "Beef burger", "Falafel wrap",
          "Tomato soup", "Chicken curry", "Veggie lasagne", "Club sandwich", "Greek salad", "Ramen bowl", "Carbonara",
          "Chocolate cake", "Apple pie", "Cheesecake", "Espresso", "Lemonade", "Iced tea", "Cappuccino", "Tiramisu"]


def _qa_spec(kind, ques, main, css, cfg, rng, steps=0):
    return dict(kind="qa", ques=ques, main=main, js="qa", css=css, steps=steps, scroll_slack=4, config=cfg,
                opts=dict(title=cfg.pop("title", ""), filler_above=rng.choice([0, 0, 1, 2, 3]), avoid=[]))


def _swatch(color, letter):
    c = CSS_COLORS.get(color, color)
    return '<div class="thumb" style="background:%s"><span>%s</span></div>' % (c, esc(letter))


def build_qa_price(ctx):
    rng, nv = ctx.rng, ctx.novel
    variant = ctx.variant(["grid_cards", "list_rows", "compare_table", "menu_prices"], ["deal_tiles", "spec_sheet"])
    style = rng.choice(MONEY_FORMATS)
    n = rng.randint(4, 6) if ctx.size == "small" else rng.randint(6, 12)
    items = []
    if variant == "menu_prices":
        dishes = [nv.thing(novel.DISH_NOUNS) for _ in range(n)] if nv else rng.sample(DISHES, n)
        for d in dishes:
            items.append({"name": d, "color": None, "type": None, "cents": rng.randint(3, 29) * 100 + rng.choice([0, 50, 90, 95])})
        mode = "name"
    else:
        types = rng.sample(words.PRODUCT_TYPES, rng.randint(2, 3))
        if nv:  # some product types are invented words too ("the teal brovent")
            types = [nv.topic() if nv.rng.random() < 0.3 else t for t in types]
        used = set()
        for i in range(n):
            t = types[i % len(types)]
            colors_taken = {it["color"] for it in items if it["type"] == t}
            color = rng.choice([c for c in words.COLORS if c not in colors_taken])
            name = nv.product(t) if nv else "%s %s" % (rng.choice([m for m in words.MODEL_WORDS if m not in used]), t.title())
            used.add(name.split()[0])
            items.append({"name": name, "color": color, "type": t, "cents": price_cents(rng)})
        mode = rng.choice(["name", "color_type", "color_type"])
    seen = set()
    for it in items:  # distinct prices so that a distractor's price never equals the truth
        while it["cents"] in seen:
            it["cents"] += 100
        seen.add(it["cents"])
        it["old"] = it["cents"] + rng.randint(2, 40) * 100 if (variant == "deal_tiles" or rng.random() < 0.25) else None
        while it["old"] in seen:
            it["old"] += 100
        if it["old"]:
            seen.add(it["old"])
    ti = rng.randrange(len(items))
    tgt = items[ti]
    if ctx.lang != "en":
        mode = "name"
    desc = ("the %s %s" % (tgt["color"], tgt["type"])) if mode == "color_type" else "the %s" % q(tgt["name"])
    cards = []
    for i, it in enumerate(items):
        price = fmt_money(it["cents"], style)
        old = ('<s class="muted small">%s</s> ' % esc(fmt_money(it["old"], style))) if it["old"] else ""
        color_line = ("%s · %s" % (it["color"].capitalize(), rng.choice(["In stock", "Free delivery", "New", "Only 3 left", "Ships tomorrow"]))) if it["color"] else ""
        rating = "★" * rng.randint(3, 5) + " (%d)" % rng.randint(2, 900)
        name_el = '<span data-f="name">%s</span>' % esc(it["name"])
        val_el = '<span data-f="value">%s</span>' % esc(price)
        if variant == "grid_cards":
            cards.append('<div class="card pc" data-item="%d">%s<h4>%s</h4><div class="muted small">%s</div><div class="small">%s</div><div class="price">%s%s</div></div>' % (
                i, _swatch(it["color"], it["name"][0]), name_el, esc(color_line), esc(rating), old, val_el))
        elif variant == "list_rows":
            cards.append('<div class="lrow" data-item="%d">%s<div class="grow"><b>%s</b><div class="muted small">%s</div></div><div class="price">%s%s</div></div>' % (
                i, _swatch(it["color"], it["name"][0]), name_el, esc(color_line), old, val_el))
        elif variant == "compare_table":
            cards.append('<tr data-item="%d"><td>%s</td><td>%s</td><td>%s</td><td>%s%s</td></tr>' % (
                i, name_el, esc((it["color"] or "").capitalize()), esc(rating), old, val_el))
        elif variant == "menu_prices":
            cards.append('<div class="mrow" data-item="%d">%s<span class="dots"></span>%s</div>' % (i, name_el, val_el))
        elif variant == "deal_tiles":
            cards.append('<div class="card pc" data-item="%d"><span class="badge sale">-%d%%</span>%s<h4>%s</h4><div class="muted small">%s</div><div class="price">%s%s</div></div>' % (
                i, max(5, 100 - 100 * it["cents"] // max(1, it["old"] or it["cents"] + 1)), _swatch(it["color"], it["name"][0]), name_el, esc(color_line), old, val_el))
        else:
            cards.append('<dl class="card spec" data-item="%d"><dt>Product</dt><dd>%s</dd><dt>Colour</dt><dd>%s</dd><dt>Price</dt><dd>%s</dd></dl>' % (
                i, name_el, esc((it["color"] or "").capitalize()), val_el))
    if variant == "compare_table":
        main = "<table><thead><tr><th>Product</th><th>Colour</th><th>Rating</th><th>Price</th></tr></thead><tbody>%s</tbody></table>" % "".join(cards)
    elif variant == "menu_prices":
        main = '<div class="card menu"><h3>%s</h3>%s</div>' % (esc(rng.choice(["Lunch menu", "Today's specials", "Menu", "Drinks & mains"])), "".join(cards))
    else:
        main = '<div class="%s">%s</div>' % ("pgrid" if variant in ("grid_cards", "deal_tiles", "spec_sheet") else "", "".join(cards))
    css = (".pgrid{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:.9em}.pc h4{margin:.4em 0 .2em}"
           ".thumb{height:70px;border-radius:var(--radius);display:flex;align-items:center;justify-content:center;font-size:1.6em;color:rgba(0,0,0,.35);min-width:70px}"
           ".price{font-weight:700;font-size:1.1em;margin-top:.3em}.lrow{display:flex;gap:1em;align-items:center;padding:.6em 0;border-bottom:1px solid var(--border)}"
           ".lrow .thumb{height:54px;min-width:54px}.mrow{display:flex;gap:.4em;padding:.3em 0}.dots{flex:1;border-bottom:2px dotted var(--border);margin-bottom:.35em}"
           ".sale{background:#c0392b;color:#fff}.spec{display:grid;grid-template-columns:auto 1fr;gap:.2em .8em;margin:0}.spec dd{margin:0}")
    distract = [{"type": "money", "cents": it["cents"], "display": fmt_money(it["cents"], style)} for it in items if it is not tgt]
    distract += [{"type": "money", "cents": it["old"], "display": fmt_money(it["old"], style)} for it in items if it["old"]]
    cfg = dict(target=str(ti), truth={"type": "money", "cents": tgt["cents"], "display": fmt_money(tgt["cents"], style)}, distractors=distract,
               desc=desc, answers=["{Desc} costs {val}.", "The price of {desc} is {val}.", "{val}", "It is priced at {val}.", "{Desc} is {val}."],
               note="{Desc} costs {val}.", title=rng.choice(["Shop", "Best sellers", "New arrivals", "Today's deals", ""]) if variant != "menu_prices" else "")
    ques = ctx.phrase("qa_price", desc=desc, qname=q(tgt["name"]))
    return _qa_spec("qa_price", ques, main, css, cfg, rng)


def build_qa_date(ctx):
    rng = ctx.rng
    variant = ctx.variant(["event_cards", "agenda_list", "event_table", "timeline"], ["calendar_tiles", "ticket_rows"])
    dstyle = rng.choice(DATE_FORMATS)
    n = rng.randint(4, 6) if ctx.size == "small" else rng.randint(6, 12)
    if ctx.novel:  # invented event names, cities and venues
        nv = ctx.novel
        types = [nv.thing(novel.EVENT_NOUNS) for _ in range(n // 2 + 2)]
        cities = [nv.place() for _ in range(n // 2 + 2)]
        venues = [nv.thing(novel.VENUE_NOUNS) for _ in range(4)]
    else:
        types = rng.sample(words.EVENT_TYPES, n // 2 + 2)
        cities = rng.sample(words.CITIES, n // 2 + 2)
        venues = words.VENUES
    combos, events = set(), []
    year = rng.choice([2025, 2026])
    dates = set()
    while len(events) < n:
        t, c = rng.choice(types), rng.choice(cities)
        if (t, c) in combos:
            continue
        d = random_date(rng, year)
        if (d.month, d.day) in dates:
            continue
        combos.add((t, c))
        dates.add((d.month, d.day))
        events.append({"type": t, "city": c, "venue": rng.choice(venues), "date": d,
                       "time": rng.choice(["10:00", "14:30", "18:00", "19:30", "20:00", "7:30 PM", "6 PM", "11 AM"])})
    events.sort(key=lambda e: e["date"])
    ti = rng.randrange(len(events))
    tgt = events[ti]
    desc = "the %s in %s" % (tgt["type"].lower(), tgt["city"])
    rows = []
    for i, e in enumerate(events):
        ds = fmt_date(e["date"], dstyle)
        name_el = '<span data-f="name">%s</span>' % esc(e["type"])
        where = '<span data-f="name">%s</span> · %s' % (esc(e["city"]), esc(e["venue"]))
        val = '<span data-f="value">%s</span>' % esc(ds)
        if variant == "event_cards":
            rows.append('<div class="card ev" data-item="%d"><div class="dbadge">%s</div><h4>%s</h4><div class="muted">%s</div><div class="small">%s</div></div>' % (
                i, val, name_el, where, esc(e["time"])))
        elif variant == "agenda_list":
            rows.append('<div class="ag" data-item="%d"><div class="agd">%s<br><span class="muted small">%s</span></div><div><b>%s</b><div class="muted">%s</div></div></div>' % (
                i, val, esc(e["time"]), name_el, where))
        elif variant == "event_table":
            rows.append('<tr data-item="%d"><td>%s</td><td><span data-f="name">%s</span></td><td>%s</td><td>%s</td></tr>' % (
                i, name_el, esc(e["city"]), esc(e["venue"]), val))
        elif variant == "timeline":
            rows.append('<div class="tl" data-item="%d"><div class="tld"></div><div><div class="small muted">%s · %s</div><b>%s</b><div>%s</div></div></div>' % (
                i, val, esc(e["time"]), name_el, where))
        elif variant == "calendar_tiles":
            rows.append('<div class="card ctile" data-item="%d"><div class="big">%s</div><div><b>%s</b><div class="muted">%s</div><div class="small">%s</div></div></div>' % (
                i, val, name_el, where, esc(e["time"])))
        else:
            rows.append('<div class="trow" data-item="%d"><div class="grow"><b>%s</b><div class="muted">%s</div></div><div>%s<div class="small muted">%s</div></div>'
                        '<button type="button" class="btn2 small" data-chrome>Tickets</button></div>' % (i, name_el, where, val, esc(e["time"])))
    if variant == "event_table":
        main = "<table><thead><tr><th>Event</th><th>City</th><th>Venue</th><th>Date</th></tr></thead><tbody>%s</tbody></table>" % "".join(rows)
    else:
        main = '<div class="%s">%s</div>' % ("egrid" if variant in ("event_cards", "calendar_tiles") else "", "".join(rows))
    css = (".egrid{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:.9em}.dbadge{display:inline-block;background:var(--brand);color:var(--on-brand);"
           "padding:.15em .6em;border-radius:var(--radius);font-weight:700}.ev h4{margin:.5em 0 .2em}.ag{display:flex;gap:1.2em;padding:.6em 0;border-bottom:1px solid var(--border)}"
           ".agd{min-width:8em;font-weight:700}.tl{display:flex;gap:.8em;padding:.4em 0 .8em;border-left:2px solid var(--border);margin-left:.5em;padding-left:1em;position:relative}"
           ".tld{position:absolute;left:-.45em;top:.7em;width:.8em;height:.8em;border-radius:50%;background:var(--brand)}"
           ".ctile{display:flex;gap:.8em;align-items:flex-start}.ctile .big{font-size:1.25em;font-weight:700;color:var(--brand-text);min-width:5em}"
           ".trow{display:flex;gap:1em;align-items:center;padding:.6em 0;border-bottom:1px solid var(--border);flex-wrap:wrap}")
    ys = YEAR_SHOWN.get(dstyle, True)
    spec = {"type": "date", "ymd": [tgt["date"].year, tgt["date"].month, tgt["date"].day], "dayFirst": DAY_FIRST.get(dstyle, False), "yearShown": ys,
            "display": fmt_date(tgt["date"], dstyle)}
    distract = [{"type": "date", "ymd": [e["date"].year, e["date"].month, e["date"].day], "dayFirst": spec["dayFirst"], "yearShown": ys,
                 "display": fmt_date(e["date"], dstyle)} for e in events if e is not tgt]
    cfg = dict(target=str(ti), truth=spec, distractors=distract, desc=desc, spoken=spoken_date(tgt["date"], ys),
               answers=["{Desc} is on {val}.", "{val}", "It takes place on {val}.", "The date of {desc} is {val}."],
               note="{Desc} is on {val}.", title=rng.choice(["Upcoming events", "What's on", "Events calendar", "This season", ""]))
    ques = ctx.phrase("qa_date", desc=desc, qname='%s (%s)' % (q(tgt["type"]), tgt["city"]))
    return _qa_spec("qa_date", ques, main, css, cfg, rng)


def build_qa_name(ctx):
    rng = ctx.rng
    variant = ctx.variant(["team_cards", "staff_table", "org_list", "contact_rows"], ["profile_tiles", "directory_dl"])
    n = rng.randint(4, 6) if ctx.size == "small" else rng.randint(6, 12)
    nd = max(2, min(len(words.DEPARTMENTS), n // 2))
    depts = ctx.novel.mix(nd, words.DEPARTMENTS) if ctx.novel else rng.sample(words.DEPARTMENTS, nd)
    roles, used, people = set(), set(), []
    while len(people) < n:
        role = rng.choice(words.ROLE_PATTERNS).format(d=rng.choice(depts))
        if role in roles:
            continue
        roles.add(role)
        nm = ctx.novel.person() if ctx.novel else person(rng, used)
        people.append({"name": nm, "role": role, "city": rng.choice(words.CITIES),
                       "email": "%s@%s.com" % (nm.split()[0].lower().encode("ascii", "ignore").decode() or "team", ctx.site.lower())})
    ti = rng.randrange(n)
    tgt = people[ti]
    mode = rng.choice(["who", "who", "role"])
    rows = []
    for i, p in enumerate(people):
        nm, rl = esc(p["name"]), esc(p["role"])
        if mode == "who":
            name_html, role_html = '<span data-f="value">%s</span>' % nm, '<span data-f="name">%s</span>' % rl
        else:
            name_html, role_html = '<span data-f="name">%s</span>' % nm, '<span data-f="value">%s</span>' % rl
        initials = "".join(w[0] for w in p["name"].split()[:2])
        if variant == "team_cards":
            rows.append('<div class="card tc" data-item="%d"><div class="avatar">%s</div><b>%s</b><div class="muted">%s</div><div class="small muted">%s</div></div>' % (
                i, esc(initials), name_html, role_html, esc(p["city"])))
        elif variant == "staff_table":
            rows.append('<tr data-item="%d"><td>%s</td><td>%s</td><td>%s</td><td class="small">%s</td></tr>' % (i, name_html, role_html, esc(p["city"]), esc(p["email"])))
        elif variant == "org_list":
            rows.append('<li data-item="%d">%s — %s</li>' % (i, name_html, role_html))
        elif variant == "contact_rows":
            rows.append('<div class="crow" data-item="%d"><div class="avatar sm">%s</div><div class="grow"><b>%s</b><div class="muted">%s</div></div>'
                        '<span class="small muted">%s</span><button type="button" class="btn2 small" data-chrome>Message</button></div>' % (i, esc(initials), name_html, role_html, esc(p["email"])))
        elif variant == "profile_tiles":
            rows.append('<div class="card tc" data-item="%d"><div class="small muted" style="text-transform:none">%s</div><b>%s</b><div class="small">%s</div></div>' % (
                i, role_html, name_html, esc(p["city"])))
        else:
            rows.append('<dl class="dl" data-item="%d"><dt>Name</dt><dd>%s</dd><dt>Role</dt><dd>%s</dd><dt>Office</dt><dd>%s</dd></dl>' % (
                i, name_html, role_html, esc(p["city"])))
    if variant == "staff_table":
        main = "<table><thead><tr><th>Name</th><th>Role</th><th>Office</th><th>Email</th></tr></thead><tbody>%s</tbody></table>" % "".join(rows)
    elif variant == "org_list":
        main = '<div class="card"><ul class="org">%s</ul></div>' % "".join(rows)
    else:
        main = '<div class="%s">%s</div>' % ("tgrid" if variant in ("team_cards", "profile_tiles", "directory_dl") else "", "".join(rows))
    css = (".tgrid{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:.9em}.tc{text-align:center}"
           ".avatar{width:3.2em;height:3.2em;border-radius:50%;background:var(--accent);color:#fff;display:flex;align-items:center;justify-content:center;margin:0 auto .5em;font-weight:700}"
           ".avatar.sm{width:2.4em;height:2.4em;margin:0;flex:none}.crow{display:flex;gap:.8em;align-items:center;padding:.55em 0;border-bottom:1px solid var(--border);flex-wrap:wrap}"
           ".org li{margin:.35em 0}.dl{display:grid;grid-template-columns:auto 1fr;gap:.15em .8em;margin:0;padding:.7em;border:1px solid var(--border);border-radius:var(--radius)}.dl dd{margin:0}")
    if mode == "who":
        spec = {"type": "name", "text": tgt["name"], "display": tgt["name"]}
        distract = [{"type": "name", "text": p["name"], "display": p["name"]} for p in people if p is not tgt]
        desc = "the " + tgt["role"]
        cfg = dict(answers=["The {role} is {val}.", "{val}", "{val} is the {role}.", "It's {val}."], note="The {role} is {val}.")
        ques = ctx.phrase("qa_name_who", role=tgt["role"], qrole=q(tgt["role"]))
    else:
        spec = {"type": "text", "text": tgt["role"], "display": tgt["role"]}
        distract = [{"type": "text", "text": p["role"], "display": p["role"]} for p in people if p is not tgt]
        desc = tgt["name"]
        cfg = dict(answers=["{name} is the {val}.", "{name} works as {val}.", "{val}", "Their role is {val}."], note="{name} is the {val}.")
        ques = ctx.phrase("qa_name_role", name=tgt["name"], qname=q(tgt["name"]))
    cfg.update(target=str(ti), truth=spec, distractors=distract, desc=desc, role=tgt["role"], name=tgt["name"],
               title=rng.choice(["Our team", "Meet the team", "Staff directory", "Contacts", "Leadership", ""]))
    return _qa_spec("qa_name", ques, main, css, cfg, rng)
