"""Families search_open, menu_walk and table_page: multi-view navigation inside one page.

Views are switched in JS (js/nav.js) from data the generator puts in the config: the search catalogue,
the menu tree, the table rows. The page never navigates away.
"""
import datetime

import words
from common import (DATE_FORMATS, DAY_FIRST, MONEY_FORMATS, YEAR_SHOWN, esc, fmt_date, fmt_money, person,
                    price_cents, product_name, q, random_date, spoken_date)

HELP_TOPICS = ["password", "invoice", "refund", "shipping", "account", "subscription", "email", "order", "payment",
               "profile", "delivery", "warranty", "coupon", "login"]
HELP_TITLES = ["How to change your {t}", "Why can't I see my {t}?", "{T} FAQ", "Troubleshooting {t} problems",
               "Updating your {t} settings", "{T}: everything you need to know", "Where do I find my {t}?",
               "Managing {t} for your team", "{T} limits and rules", "What happens to my {t} after I cancel?"]
RECIPE_MAIN = ["chicken", "tomato", "mushroom", "lentil", "salmon", "tofu", "potato", "rice", "spinach", "chickpea"]
RECIPE_TITLES = ["{Adj} {m} salad", "{M} and {v} soup", "Roast {m} with {v}", "{Adj} {m} curry", "Grilled {m} skewers",
                 "{M} pasta bake", "{M} stir-fry with {v}", "{Adj} {m} tart", "Slow-cooked {m} stew"]
ADJS = ["Spicy", "Creamy", "Quick", "Smoky", "Lemon", "Garlic", "Easy", "Summer", "Rustic", "Crispy"]
VEG = ["leeks", "peppers", "kale", "carrots", "courgette", "beans", "peas", "fennel"]
JOB_WORDS = ["designer", "engineer", "analyst", "manager", "nurse", "teacher", "accountant", "developer"]
JOB_TITLES = ["Senior {J}", "Junior {J}", "{J} (remote)", "Lead {J}", "{J}, {city}", "Freelance {J}", "{J} intern",
              "Principal {J}"]


def _catalogue(rng, nv=None):
    """Returns (domain, query, items[{key,title,snippet,meta}]) where several items match the query.

    With a Novel `nv` the query word, the product names and the cities are invented."""
    domain = rng.choice(["shop", "help", "recipes", "jobs"])
    items = []

    def topic(pool):  # the query word of a domain: from its list, or invented
        return nv.topic() if nv else rng.choice(pool)

    def others(pool, t, k):  # k other topic words for the results that do not match
        return [nv.topic() for _ in range(k)] if nv else rng.sample([x for x in pool if x != t], k)
    city = nv.place if nv else (lambda: rng.choice(words.CITIES))
    if domain == "shop":
        qtype = nv.topic() if nv and nv.rng.random() < 0.5 else rng.choice(words.PRODUCT_TYPES)
        used = set()
        product = nv.product if nv else (lambda t: product_name(rng, t, used))
        style = rng.choice(MONEY_FORMATS)
        for i in range(rng.randint(4, 8)):
            items.append((product(qtype), "%s %s." % (rng.choice(words.COLORS).capitalize(), rng.choice(
                ["Free delivery", "Best seller", "New arrival", "Ships in 2 days", "Limited edition"])), fmt_money(price_cents(rng), style)))
        for t in rng.sample([x for x in words.PRODUCT_TYPES if qtype not in x and x not in qtype], 6):
            items.append((product(t), "In stock.", fmt_money(price_cents(rng), style)))
        query = qtype
    elif domain == "help":
        t = topic(HELP_TOPICS)
        titles = rng.sample(HELP_TITLES, rng.randint(4, 7))
        for tt in titles:
            items.append((tt.format(t=t, T=t.capitalize()), rng.choice(words.FILLER_SENTENCES), "Help article"))
        for o in others(HELP_TOPICS, t, 5):
            tt = rng.choice(HELP_TITLES)
            items.append((tt.format(t=o, T=o.capitalize()), rng.choice(words.FILLER_SENTENCES), "Help article"))
        query = t
    elif domain == "recipes":
        m = topic(RECIPE_MAIN)
        for tt in rng.sample(RECIPE_TITLES, rng.randint(4, 7)):
            items.append((tt.format(m=m, M=m.capitalize(), v=rng.choice(VEG), Adj=rng.choice(ADJS)), "Ready in %d minutes." % rng.randint(15, 90),
                          "Serves %d" % rng.randint(2, 6)))
        for o in others(RECIPE_MAIN, m, 5):
            tt = rng.choice(RECIPE_TITLES)
            items.append((tt.format(m=o, M=o.capitalize(), v=rng.choice(VEG), Adj=rng.choice(ADJS)), "Ready in %d minutes." % rng.randint(15, 90),
                          "Serves %d" % rng.randint(2, 6)))
        query = m
    else:
        j = topic(JOB_WORDS)
        for tt in rng.sample(JOB_TITLES, rng.randint(4, 7)):
            items.append((tt.format(J=j.capitalize(), city=city()), "%s · Full-time" % city(),
                          "Posted %d days ago" % rng.randint(1, 30)))
        for o in others(JOB_WORDS, j, 5):
            items.append((rng.choice(JOB_TITLES).format(J=o.capitalize(), city=city()), "Full-time", "Posted this week"))
        query = j
    seen, out = set(), []
    for title, snip, meta in items:
        if title in seen:
            continue
        seen.add(title)
        out.append({"key": "i%d" % len(out), "title": title, "snippet": snip, "meta": meta})
    return domain, query, out


def build_search_open(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["list_results", "card_results", "compact_results", "hero_search"], ["table_results", "grid_tiles"])
    domain, query, items = _catalogue(rng, ctx.novel)
    matching = [it for it in items if all(w in (it["title"] + " " + it["snippet"]).lower() for w in query.lower().split())]
    target = rng.choice(matching)
    placeholder = {"shop": "Search products", "help": "Search help articles", "recipes": "Search recipes", "jobs": "Search jobs"}[domain]
    placeholder = rng.choice([placeholder, "Search…", "What are you looking for?", placeholder + "…"])
    go = th.label(rng.choice(["Search", "Go", "Find"]))
    where = "at the top" if ctx.frame not in ("widget", "widget_bare", "widget_panel") else ""
    box = ('<form data-search role="search" class="sbox" novalidate><input type="search" data-q autocomplete="off" placeholder="%s" data-desc="%s">'
           '<button type="submit" class="btn" data-desc="the %s button">%s</button></form>' % (
               esc(placeholder), esc("the search box %s" % where if where else "the search box"), esc(q(go)), esc(go)))
    popular = [it for it in items if it is not target and it not in matching][:3]
    home = '<div data-home><h3>%s</h3><ul>%s</ul><p class="muted">%s</p></div>' % (
        esc(rng.choice(["Popular right now", "Trending", "Recently viewed", "Featured"])),
        "".join('<li><a href="#" data-open="%s" data-desc="the %s link">%s</a></li>' % (it["key"], esc(q(it["title"])), esc(it["title"])) for it in popular),
        esc(" ".join(rng.sample(words.FILLER_SENTENCES, 2))))
    main = ('%s<div data-results class="hidden"><p class="muted"><span data-count></span> results for <b data-qshow></b></p><div data-list class="res %s"></div></div>'
            '<div data-detail class="hidden"><a href="#" data-backres data-desc=\'the "← Back to results" link\'>← Back to results</a><h2 data-dtitle></h2>'
            '<p class="muted" data-dmeta></p><p>%s</p><button type="button" class="btn" data-chrome>%s</button></div>') % (
        home, variant, esc(" ".join(rng.sample(words.FILLER_SENTENCES, 3))),
        esc(th.label({"shop": "Add to cart", "help": "Was this helpful?", "recipes": "Save recipe", "jobs": "Apply now"}[domain])))
    opts = dict(header_slot=box, title=rng.choice(["", "Welcome to %s" % ctx.site, "Find what you need"]), no_hero=True)
    if variant == "hero_search":
        opts["header_slot"] = None
        main = '<section class="card" style="text-align:center;padding:2em 1em"><h2>%s</h2>%s</section>%s' % (
            esc(rng.choice(["How can we help?", "What are you looking for?", "Search our catalogue"])), box.replace("the search box at the top", "the search box"), main)
    css = (".sbox{display:flex;gap:.4em;width:100%;max-width:520px;margin:0 auto}.sbox input{flex:1;min-width:0}"
           ".res.list_results .r,.res.compact_results .r{padding:.6em 0;border-bottom:1px solid var(--border)}"
           ".res.card_results .r{margin:.6em 0}.res.grid_tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:.8em}"
           ".res.compact_results .r p{display:none}.r a{font-size:1.08em;font-weight:600}")
    return dict(kind="action", ques=ctx.phrase("search_open", query=q(query), result=q(target["title"])), main=main, js="nav", css=css,
                steps=2, scroll_slack=4, state=dict(view="home", query=None, opened=None),
                config=dict(items=items, query=query, target=target["key"], targetTitle=target["title"], variant=variant,
                            done=["I searched for %s and opened %s." % (q(query), q(target["title"])), "Opened %s from the search results." % q(target["title"])]),
                opts=opts)


MENU_TOPS = sorted({a for t in words.MENU_TREES for a in t})
MENU_MIDS = sorted({b for t in words.MENU_TREES for a in t for b in t[a]})
MENU_LEAVES = sorted({c for t in words.MENU_TREES for a in t for b in t[a] for c in t[a][b]})


def _novel_tree(nv):
    """A menu tree (like words.MENU_TREES) of invented labels, all distinct."""
    r = nv.rng
    return {a: {b: nv.mix(r.randint(2, 4), MENU_LEAVES) for b in nv.mix(r.randint(2, 3), MENU_MIDS)}
            for a in nv.mix(r.randint(2, 3), MENU_TOPS)}


def build_menu_walk(ctx):
    rng = ctx.rng
    variant = ctx.variant(["menubar", "tree", "drilldown", "drawer"], ["mega", "accordion"])
    tree = _novel_tree(ctx.novel) if ctx.novel else rng.choice(words.MENU_TREES)
    tops = list(tree)
    rng.shuffle(tops)
    t1 = rng.choice(tops)
    t2 = rng.choice(list(tree[t1]))
    t3 = rng.choice(tree[t1][t2])
    path = [t1, t2, t3]

    def node(key, label, leaf, desc, cls=""):
        return '<a href="#" class="mn %s" data-node="%s"%s data-desc="%s">%s%s</a>' % (
            cls, esc(key), " data-leaf" if leaf else "", esc(desc), esc(label), "" if leaf else ' <span class="chev">›</span>')
    parts = []
    for a in tops:
        subs = []
        for b in tree[a]:
            kb = a + " > " + b
            leaves = "".join(node(kb + " > " + c, c, True, {"menubar": "the %s item in the %s submenu", "mega": "the %s link under %s",
                                                             "drilldown": "the %s row"}.get(variant, "the %s item under %s") % (q(c), q(b)) if variant != "drilldown" else "the %s row" % q(c))
                             for c in tree[a][b])
            if variant == "mega":
                subs.append('<div class="mcol"><div class="mhead">%s</div>%s</div>' % (esc(b), leaves))
            else:
                bdesc = {"menubar": "the %s item in the %s menu" % (q(b), q(a)), "drilldown": "the %s row" % q(b),
                         "drawer": "the %s entry under %s in the menu drawer" % (q(b), q(a))}.get(variant, "the %s node under %s" % (q(b), q(a)))
                subs.append('<div class="mi">%s<div class="sub lvl2 hidden" data-sub="%s">%s</div></div>' % (node(kb, b, False, bdesc), esc(kb), leaves))
        adesc = {"menubar": "the %s menu in the menu bar" % q(a), "mega": "the %s menu in the menu bar" % q(a), "drilldown": "the %s row" % q(a),
                 "drawer": "the %s section in the menu drawer" % q(a), "accordion": "the %s section header" % q(a)}.get(variant, "the %s node in the tree" % q(a))
        parts.append('<div class="mi top">%s<div class="sub lvl1 hidden" data-sub="%s">%s</div></div>' % (node(a, a, False, adesc), esc(a), "".join(subs)))
    menu = '<nav class="menu %s" data-menu>%s</nav>' % (variant, "".join(parts))
    if variant == "drawer":
        menu = ('<button type="button" class="iconbtn" data-drawer-toggle data-desc="the hamburger menu button" aria-label="Menu">'
                '<svg viewBox="0 0 24 24"><path d="M4 6.5h16M4 12h16M4 17.5h16"/></svg></button><div class="drawer hidden" data-drawer>%s</div>' % menu)
    if variant == "drilldown":
        menu = '<div class="card dd"><a href="#" class="hidden" data-back data-desc=\'the "‹ Back" link at the top of the list\'>‹ Back</a><div data-crumb class="muted small"></div>%s</div>' % menu
    page = '<div class="card pagev" data-page><h2 data-ptitle>%s</h2><p class="muted" data-pcrumbs>%s</p><p>%s</p></div>' % (
        esc(rng.choice(["Welcome", "Overview", "Home"])), esc(rng.choice(["Choose a page from the menu.", "Use the menu to find a page."])),
        esc(" ".join(rng.sample(words.FILLER_SENTENCES, 2))))
    side = variant in ("tree", "accordion") and ctx.vp[0] >= 700
    if side:
        main = '<div class="row" style="align-items:flex-start;flex-wrap:nowrap"><div class="card" style="width:240px;flex:none">%s</div><div class="grow">%s</div></div>' % (menu, page)
    else:
        main = '<div class="menuwrap">%s</div>%s' % (menu, page)
    css = (".mn{display:block;padding:.35em .7em;color:var(--text);text-decoration:none;white-space:nowrap}.mn:hover{background:var(--surface2)}"
           ".mn.sel{background:var(--brand);color:var(--on-brand)}.chev{float:right;margin-left:.8em;color:var(--muted)}"
           ".menu.menubar,.menu.mega{display:flex;flex-wrap:wrap;gap:.2em;background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);margin-bottom:1em}"
           ".menu.menubar>.mi,.menu.mega>.mi{position:relative}.menu.menubar>.mi>.mn .chev,.menu.mega>.mi>.mn .chev{display:none}"
           ".menu.menubar .lvl1,.menu.mega .lvl1{position:absolute;top:100%;left:0;background:var(--surface);border:1px solid var(--border);"
           "box-shadow:0 6px 18px rgba(0,0,0,.18);z-index:80;min-width:190px;border-radius:var(--radius)}"
           ".menu.menubar .mi{position:relative}.menu.menubar .lvl2{position:absolute;left:100%;top:0;background:var(--surface);border:1px solid var(--border);"
           "box-shadow:0 6px 18px rgba(0,0,0,.18);z-index:81;min-width:180px;border-radius:var(--radius)}"
           ".menu.menubar .lvl2.below{position:static;box-shadow:none;border:0;border-left:3px solid var(--border);margin-left:.8em}"
           ".menu.mega .lvl1{display:flex;gap:1.2em;padding:.8em;flex-wrap:wrap}.mhead{font-weight:700;padding:.2em .7em;color:var(--muted)}"
           ".menu.tree .sub,.menu.drawer .sub,.menu.accordion .sub{margin-left:1em;border-left:1px solid var(--border)}"
           ".menu.accordion>.mi{border:1px solid var(--border);border-radius:var(--radius);margin-bottom:.4em;background:var(--surface)}"
           ".menu.accordion>.mi>.mn{font-weight:700;padding:.6em .8em}"
           ".drawer{border:1px solid var(--border);background:var(--surface);border-radius:var(--radius);margin:.4em 0 1em;max-width:360px}"
           ".menu.drilldown .sub{margin:0}.menu.drilldown .mn{border-bottom:1px solid var(--border);padding:.55em .7em}.pagev{margin-top:1em}")
    ptxt = " > ".join(path)
    return dict(kind="action", ques=ctx.phrase("menu_walk", path=ptxt), main=main, js="nav", css=css, steps=4 if variant == "drawer" else 3,
                state=dict(open=[], page=None, drawer=False, level=""),
                config=dict(path=path, target=ptxt, variant=variant,
                            done=["I opened %s." % ptxt, "The %s page is now shown." % ptxt]),
                opts=dict(title=rng.choice(["", ctx.site, "Dashboard", "Control panel"]), no_fixed=True))


TABLES = {
    "orders": ["Order", "Customer", "City", "Date", "Total", "Status"],
    "invoices": ["Invoice", "Client", "Issued", "Due", "Amount", "Status"],
    "staff": ["Name", "Department", "Office", "Start date", "Extension"],
    "inventory": ["SKU", "Product", "Warehouse", "Stock", "Price"],
}
STATUS = {"orders": ["Shipped", "Pending", "Delivered", "Cancelled", "Processing"], "invoices": ["Paid", "Overdue", "Open", "Draft"]}
COL_TYPES = {"Customer": "name", "Client": "text", "City": "text", "Office": "text", "Warehouse": "text", "Department": "text",
             "Date": "date", "Issued": "date", "Due": "date", "Start date": "date", "Total": "money", "Amount": "money", "Price": "money",
             "Status": "text", "Stock": "number", "Extension": "number", "Product": "text", "Name": "name"}


def _table_rows(rng, kind, n, money_style, date_style, nv=None):
    """Rows of a table of `kind` as shown and as values; with a Novel `nv` names, places and products
    are invented (places and departments drawn from small invented pools, so that they repeat)."""
    rows, truth = [], []
    used, ids = set(), set()
    if nv:
        places, depts = [nv.place() for _ in range(6)], nv.mix(6, words.DEPARTMENTS)
        who, where, dept = (lambda: nv.person()), (lambda: nv.rng.choice(places)), (lambda: nv.rng.choice(depts))
    else:
        who, where, dept = (lambda: person(rng, used)), (lambda: rng.choice(words.CITIES)), (lambda: rng.choice(words.DEPARTMENTS))
    for i in range(n):
        d = random_date(rng)
        if kind == "orders":
            rid = "#%s-%d" % (rng.choice("ABCK"), rng.randint(1000, 9999))
            cents = price_cents(rng)
            vals = [rid, who(), where(), d, cents, rng.choice(STATUS["orders"])]
        elif kind == "invoices":
            rid = "INV-%d" % rng.randint(2000, 9999)
            cents = price_cents(rng, 50, 3000)
            client = nv.company() if nv else "%s %s" % (rng.choice(words.BRANDS), rng.choice(["Ltd", "GmbH", "SA", "Inc."]))
            vals = [rid, client, d,
                    d + datetime.timedelta(days=rng.choice([14, 30, 30, 45, 60])), cents,
                    rng.choice(STATUS["invoices"])]
        elif kind == "staff":
            rid = who()
            vals = [rid, dept(), where(), d, rng.randint(100, 999)]
        else:
            rid = "SKU-%d" % rng.randint(10000, 99999)
            vals = [rid, nv.product() if nv else product_name(rng), where(), rng.randint(0, 400), price_cents(rng)]
        if rid in ids:
            continue
        ids.add(rid)
        truth.append(vals)
    for vals in truth:
        shown = []
        for c, v in zip(TABLES[kind], vals):
            t = COL_TYPES.get(c, "text")
            if t == "date":
                shown.append(fmt_date(v, date_style))
            elif t == "money":
                shown.append(fmt_money(v, money_style))
            else:
                shown.append(str(v))
        rows.append(shown)
    return rows, truth


def build_table_page(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["numbers", "prevnext", "numbers_only"], ["arrows", "showing_range"])
    kind = rng.choice(sorted(TABLES))
    cols = TABLES[kind]
    per = rng.randint(4, 5) if ctx.size == "small" else rng.randint(5, 10)
    pages = rng.randint(3, 5)
    money_style = rng.choice(MONEY_FORMATS)
    date_style = rng.choice([f for f in DATE_FORMATS if f != "badge"])
    rows, truth = _table_rows(rng, kind, per * pages - rng.randint(0, per - 1), money_style, date_style, ctx.novel)
    pages = (len(rows) + per - 1) // per
    mode = "qa" if rng.random() < 0.65 else "goto"
    tcol = rng.randrange(1, len(cols))
    maxc = max(2, min(len(cols), int(ctx.content_width() / (th.fs * 8.5))))
    if mode == "qa":
        others = [c for c in rng.sample(range(1, len(cols)), len(cols) - 1) if c != tcol]
        shown_cols = sorted([0, tcol] + others[:maxc - 2])
    else:
        shown_cols = list(range(min(len(cols), maxc)))
    cfg = dict(cols=[cols[c] for c in shown_cols], rows=[[r[c] for c in shown_cols] for r in rows], perPage=per, pages=pages,
               variant=variant, mode=mode)
    if mode == "qa":
        tp = rng.randint(2, min(3, pages))
        tr = rng.randrange((tp - 1) * per, min(tp * per, len(rows)))
        col = cols[tcol]
        ctype = COL_TYPES.get(col, "text")
        v = truth[tr][tcol]
        if ctype == "money":
            spec = {"type": "money", "cents": v}
        elif ctype == "date":
            spec = {"type": "date", "ymd": [v.year, v.month, v.day], "dayFirst": DAY_FIRST.get(date_style, False), "yearShown": YEAR_SHOWN.get(date_style, True)}
        elif ctype == "number":
            spec = {"type": "number", "value": v}
        elif ctype == "name":
            spec = {"type": "name", "text": str(v)}
        else:
            spec = {"type": "text", "text": str(v)}
        spec["display"] = rows[tr][tcol]
        rid = rows[tr][0]
        rowdesc = {"orders": "order %s" % rid, "invoices": "invoice %s" % rid, "staff": rid, "inventory": rid}[kind]
        cfg.update(targetRow=tr, col=shown_cols.index(tcol), colLabel=col, rowLabel=rowdesc, truth=spec,
                   spoken=spoken_date(v, YEAR_SHOWN.get(date_style, True)) if ctype == "date" else None)
        ques = ctx.phrase("table_qa", col=col.lower(), row=rowdesc, qcol=q(col), qrow=q(rid))
        steps = tp
    else:
        goal = rng.randint(2, pages)
        cfg.update(goal=goal, done=["Page %d of the table is now shown." % goal, "I went to page %d." % goal])
        ques = ctx.phrase("table_goto", page=str(goal))
        steps = goal if variant in ("prevnext", "showing_range") else 1
    title = {"orders": "Recent orders", "invoices": "Invoices", "staff": "Staff directory", "inventory": "Inventory"}[kind]
    tstyle = rng.choice(["striped", "lined", "boxed", "compact"])
    main = ('<div class="card tblw %s"><div class="row" style="justify-content:space-between"><h3 style="margin:.2em 0">%s</h3><span class="muted small">%d records</span></div>'
            '<table><thead><tr>%s</tr></thead><tbody data-tbody></tbody></table><div class="pager row" data-pager></div></div>') % (
        tstyle, esc(title), len(rows), "".join("<th>%s</th>" % esc(c) for c in cfg["cols"]))
    css = (".tblw.striped tbody tr:nth-child(even){background:var(--surface2)}.tblw.boxed td,.tblw.boxed th{border:1px solid var(--border)}"
           ".tblw.compact td,.tblw.compact th{padding:.25em .4em;font-size:.92em}.pager{margin-top:.8em;justify-content:center;gap:.3em}"
           ".pg{min-width:2.2em;padding:.3em .6em;border:1px solid var(--border);background:var(--surface);color:var(--text);border-radius:var(--radius);font:inherit;cursor:pointer;text-decoration:none;text-align:center}"
           ".pg.cur{background:var(--brand);color:var(--on-brand);border-color:var(--brand)}.pg.off{opacity:.4;cursor:default}")
    return dict(kind=mode == "qa" and "qa" or "action", ques=ques, main=main, js="nav", css=css, steps=steps, scroll_slack=3,
                state=dict(page=1), config=cfg, opts=dict(title="", no_hero=True, avoid=["Next", "Previous"]))
