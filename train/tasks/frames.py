"""Page frames (layouts) and page chrome: headers, navigation, footers, cookie banners, ads, filler.

A frame wraps a family's component (`main`) into a whole page. Frames are split between the splits:
TRAIN_FRAMES are used only by the train split and EVAL_FRAMES only by eval, per viewport class
("small" widgets, "phone" and "large" screens). Every frame is responsive CSS, so it lays out at any
viewport; the generator still picks frames that suit the task's viewport.
"""
import html

import icons
import words

TRAIN_FRAMES = {"small": ["widget", "widget_bare"],
                "phone": ["topnav", "centered", "article", "widget"],
                "large": ["topnav", "sidebar", "centered", "article", "shop", "docs"]}
EVAL_FRAMES = {"small": ["widget_panel"],
               "phone": ["split", "modal", "widget_panel"],
               "large": ["dashboard", "split", "modal"]}

CHROME_ICONS = ["search", "cart", "profile", "notifications", "favorite", "settings", "menu"]


def esc(s):
    return html.escape(str(s), quote=True)


def site_name(rng):
    return rng.choice(words.SITE_WORDS_A) + rng.choice(words.SITE_WORDS_B)


def para(rng, n=3):
    """A paragraph of n realistic English sentences."""
    return " ".join(rng.sample(words.FILLER_SENTENCES, n))


def paras(rng, k, lo=2, hi=4):
    return "".join("<p>%s</p>" % esc(para(rng, rng.randint(lo, hi))) for _ in range(k))


def chrome_link(label):
    return '<a href="#" data-chrome>%s</a>' % esc(label)


def pick_labels(rng, pool, k, avoid):
    cands = [x for x in pool if x not in avoid and x.lower() not in {a.lower() for a in avoid}]
    return rng.sample(cands, min(k, len(cands)))


class Chrome:
    """Decides and renders the page chrome for one page (header, nav, footer, banners, ads)."""

    def __init__(self, ctx, opts):
        self.ctx, self.rng, self.opts = ctx, ctx.rng, opts
        self.avoid = set(opts.get("avoid", ()))
        w, h = ctx.vp
        big = h >= 600 and not opts.get("no_fixed")
        self.sticky = big and self.rng.random() < 0.3
        cookie_opts = ["none", "none", "top"]
        if big and w >= 600 and not self.sticky:
            cookie_opts += ["bottom", "corner" if w >= 1000 else "bottom"]
        self.cookie = self.rng.choice(cookie_opts) if not opts.get("no_cookie") else "none"
        self.logo_shape = self.rng.choice(["square", "circle", "text"])

    def logo(self):
        name = self.ctx.site
        if self.logo_shape == "text":
            return '<span class="logo"><b>%s</b></span>' % esc(name)
        r = "50%" if self.logo_shape == "circle" else "6px"
        return ('<span class="logo"><span class="mark" style="border-radius:%s">%s</span><b>%s</b></span>'
                % (r, esc(name[0].upper()), esc(name)))

    def nav(self, k):
        links = self.opts.get("nav")
        if links is None:
            links = [chrome_link(x) for x in pick_labels(self.rng, words.NAV_LABELS, k, self.avoid)]
        return "".join(links)

    def header_icons(self, k):
        if self.opts.get("no_icons"):
            return ""
        names = self.rng.sample(CHROME_ICONS, k)
        return "".join('<button class="iconbtn" data-chrome aria-label="%s">%s</button>' % (n, icons.svg(n))
                       for n in names)

    def header(self, nav_k=5, cls="", with_slot=True):
        slot = (self.opts.get("header_slot") or "") if with_slot else ""
        w = self.ctx.vp[0]
        nav_k = nav_k if w >= 900 else (3 if w >= 600 else 0)
        fixed = ' data-fixed style="position:sticky;top:0;z-index:30"' if self.sticky else ""
        return ('<header class="hdr %s"%s><div class="hin">%s<nav class="nav">%s</nav><div class="slot">%s</div>'
                '<div class="hicons">%s</div></div></header>'
                % (cls, fixed, self.logo(), self.nav(nav_k), slot, self.header_icons(2 if w >= 600 else 1)))

    def cookie_banner(self):
        txt = esc(self.rng.choice([
            "We use cookies to improve your experience and analyse traffic.",
            "This site uses cookies. Some are essential, others help us improve it.",
            "Cookies help us deliver our services. You can accept or reject optional cookies."]))
        acc, rej = self.rng.choice([("Accept all", "Reject all"), ("Accept", "Decline"), ("Allow cookies", "Only essential"),
                                    ("OK", "No thanks")])
        acc = acc if acc not in self.avoid else "Got it"
        rej = rej if rej not in self.avoid else "Essential only"
        btns = ('<button class="btn2 small" data-cookie>%s</button><button class="btn2 small" data-cookie>%s</button>'
                % (esc(acc), esc(rej)))
        if self.cookie == "top":
            return '<div class="cookie ctop">%s<span class="row">%s</span></div>' % (txt, btns)
        if self.cookie == "bottom":
            return '<div class="cookie cbot" data-fixed>%s<span class="row">%s</span></div>' % (txt, btns)
        if self.cookie == "corner":
            return '<div class="cookie ccorner" data-fixed>%s<span class="row">%s</span></div>' % (txt, btns)
        return ""

    def footer(self, cols=3):
        if self.opts.get("footer") is not None:
            return self.opts["footer"]
        rng = self.rng
        w = self.ctx.vp[0]
        cols = cols if w >= 700 else 1
        labels = pick_labels(rng, words.LINK_LABELS, cols * 4, self.avoid)
        blocks = []
        for c in range(cols):
            items = "".join("<li>%s</li>" % chrome_link(x) for x in labels[c * 4:(c + 1) * 4])
            head = rng.choice(["Company", "Support", "Legal", "Resources", "Shop", "Help", "More"])
            blocks.append("<div><h4>%s</h4><ul>%s</ul></div>" % (head, items))
        return ('<footer class="ftr"><div class="fcols">%s</div><p class="small muted">© %d %s. All rights reserved.</p></footer>'
                % ("".join(blocks), rng.choice([2024, 2025, 2026]), esc(self.ctx.site)))

    def ad(self):
        label = self.rng.choice(["Advertisement", "Sponsored", "Ad"])
        cta = self.rng.choice([x for x in ["Learn more", "Shop now", "Find out more", "Get the app"] if x not in self.avoid] or ["Details"])
        return ('<aside class="ad card"><div class="small muted">%s</div><p><b>%s</b></p><button class="btn2 small" data-chrome>%s</button></aside>'
                % (label, esc(self.rng.choice(words.AD_TEXTS)), esc(cta)))

    def hero(self):
        return ('<section class="hero"><h2>%s</h2><p class="muted">%s</p></section>'
                % (esc(self.rng.choice(words.HEADLINES)), esc(para(self.rng, 2))))


def frame_css(theme):
    """CSS shared by all frames; classes are prefixed by frame role (hdr, ftr, wrap, side, ...)."""
    return """
.logo{display:inline-flex;align-items:center;gap:.5em;font-size:1.1em;white-space:nowrap}
.logo .mark{display:inline-flex;width:1.7em;height:1.7em;align-items:center;justify-content:center;background:var(--brand);color:var(--on-brand);font-weight:700}
.hdr{background:var(--hb);color:var(--ht);border-bottom:1px solid var(--border)}
.hdr .hin{display:flex;align-items:center;gap:1.2em;padding:.6em 1.2em;max-width:1280px;margin:0 auto;flex-wrap:wrap}
.hdr .nav{display:flex;gap:1em;flex-wrap:wrap}
.hdr .nav a{color:var(--ht);text-decoration:none;opacity:.92}
.hdr .slot{flex:1;display:flex;justify-content:flex-end;min-width:0}
.hdr .hicons{display:flex;gap:.2em}
.ftr{border-top:1px solid var(--border);padding:1.2em 1.5em;margin-top:2em;background:var(--surface2)}
.ftr .fcols{display:flex;gap:3em;flex-wrap:wrap}
.ftr ul{list-style:none;padding:0;margin:.3em 0}
.ftr li{margin:.25em 0}
.ftr h4{margin:.2em 0}
.wrap{max-width:1180px;margin:0 auto;padding:1em 1.2em}
.cols{display:flex;gap:1.5em;align-items:flex-start}
.cols>.mainc{flex:1;min-width:0}
.cols>.aside{width:250px;flex:none}
.hero{padding:1.2em 0 .4em}
.ad{margin-bottom:1em;border-style:dashed}
.cookie{background:var(--surface);color:var(--text);border:1px solid var(--border);padding:.6em 1em;display:flex;gap:1em;align-items:center;flex-wrap:wrap;font-size:.9em}
.cookie.cbot{position:fixed;left:0;right:0;bottom:0;z-index:40;box-shadow:0 -2px 10px rgba(0,0,0,.15)}
.cookie.ccorner{position:fixed;left:16px;bottom:16px;width:320px;z-index:40;border-radius:var(--radius);box-shadow:0 2px 14px rgba(0,0,0,.2)}
.crumbs{font-size:.85em;color:var(--muted);margin:.3em 0 .6em}
.side{width:220px;flex:none;background:var(--surface);border-right:1px solid var(--border);padding:1em;align-self:stretch}
.side a{display:block;padding:.35em .5em;border-radius:var(--radius);color:var(--text);text-decoration:none}
.side a:first-of-type{background:var(--surface2)}
.shell{display:flex;align-items:stretch;min-height:100vh}
.shell>.mainc{flex:1;min-width:0;padding:1.2em 1.5em}
.centerbg{min-height:100vh;display:flex;flex-direction:column;align-items:center;padding:5vh 1em 2em}
.centercard{width:100%;max-width:var(--cw,520px)}
.article{max-width:740px;margin:0 auto;padding:1em 1.2em}
.byline{color:var(--muted);font-size:.9em}
.catbar{display:flex;gap:1.2em;padding:.5em 1.2em;background:var(--surface2);flex-wrap:wrap;font-size:.92em}
.catbar a{color:var(--text);text-decoration:none}
.toc a{display:block;color:var(--text);text-decoration:none;padding:.2em 0}
.widget{padding:.6em .7em}
.wtitle{font-weight:700;padding:.45em .7em;background:var(--hb);color:var(--ht);font-size:.95em}
.panel{margin:6px;border:1px solid var(--border);border-radius:var(--radius);background:var(--surface)}
.panel .ph{display:flex;justify-content:space-between;align-items:center;padding:.35em .7em;border-bottom:1px solid var(--border);font-weight:700}
.panel .pb{padding:.6em .7em}
.rail{width:64px;flex:none;background:var(--hb);color:var(--ht);display:flex;flex-direction:column;align-items:center;gap:.4em;padding:.8em 0}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:1em;margin-bottom:1em}
.stat b{display:block;font-size:1.5em}
.splitp{display:flex;min-height:100vh;flex-wrap:wrap}
.splitp .brandp{flex:1 1 340px;background:var(--brand);color:var(--on-brand);padding:3em 2.5em}
.splitp .brandp .logo .mark{background:var(--on-brand);color:var(--brand)}
.splitp .formp{flex:1 1 420px;padding:2.5em 2em;min-width:0}
.backdrop{position:fixed;inset:0;background:rgba(0,0,0,.45);z-index:60}
.dialog{position:absolute;left:50%;transform:translateX(-50%);top:6vh;width:calc(100% - 24px);max-width:var(--cw,600px);z-index:70;
background:var(--surface);border-radius:var(--radius);box-shadow:0 10px 40px rgba(0,0,0,.35);padding:1.2em 1.4em}
.dialog .dh{display:flex;justify-content:space-between;align-items:center;margin-bottom:.6em}
@media (max-width:800px){.cols{display:block}.cols>.aside{width:auto}.side{display:none}.splitp .brandp{padding:1.2em;flex-basis:100%}
.hdr .hin{padding:.5em .8em;gap:.6em}.wrap{padding:.8em}.dialog{top:12px;padding:1em}}
"""


def _crumbs(rng, title):
    parts = ["Home"] + rng.sample(words.NAV_LABELS[1:], 1) + [title]
    return '<div class="crumbs">%s</div>' % " › ".join(esc(p) for p in parts)


def render(ctx, frame, main, opts):
    """Returns the <body> inner HTML of the page: the chrome of `frame` around the component `main`."""
    rng = ctx.rng
    ch = Chrome(ctx, opts)
    if frame in ("modal", "split", "widget", "widget_bare", "widget_panel", "dashboard", "docs"):
        ch.cookie = "none"
    title = opts.get("title", "")
    h1 = ("<h1>%s</h1>" % esc(title)) if title else ""
    intro = opts.get("intro", "")
    intro_html = ('<p class="muted">%s</p>' % esc(intro)) if intro else ""
    filler = paras(rng, opts.get("filler_above", 0))
    w, h = ctx.vp
    head_html = h1 + intro_html + filler
    out = []
    if frame in ("topnav", "shop"):
        out.append(ch.cookie_banner() if ch.cookie == "top" else "")
        out.append(ch.header())
        if frame == "shop":
            cats = pick_labels(rng, words.PRODUCT_TYPES, 6 if w >= 900 else 3, ch.avoid)
            out.append('<div class="catbar">%s</div>' % "".join(chrome_link(c.title()) for c in cats))
        inner = (_crumbs(rng, title) if frame == "shop" and title else "") + \
            (ch.hero() if rng.random() < 0.4 and not opts.get("no_hero") else "") + head_html + main
        aside = ""
        if w >= 1000 and rng.random() < 0.6:
            aside = '<div class="aside">%s<div class="card"><h4>%s</h4><p class="small">%s</p></div></div>' % (
                ch.ad(), esc(rng.choice(["Popular this week", "Did you know?", "Need help?", "Latest news"])), esc(para(rng, 2)))
        out.append('<div class="wrap"><div class="cols"><div class="mainc">%s</div>%s</div></div>' % (inner, aside))
        out.append(ch.footer())
    elif frame == "sidebar":
        out.append(ch.cookie_banner() if ch.cookie == "top" else "")
        out.append(ch.header(nav_k=0))
        side = "".join(chrome_link(x) for x in pick_labels(rng, words.NAV_LABELS + words.LINK_LABELS[:10], 7, ch.avoid))
        out.append('<div class="shell"><nav class="side">%s</nav><div class="mainc">%s%s</div></div>'
                   % (side, head_html, main))
    elif frame == "centered":
        cw = rng.choice([440, 520, 600, 680])
        out.append(ch.cookie_banner() if ch.cookie == "top" else "")
        out.append('<div class="centerbg" style="--cw:%dpx"><div style="margin-bottom:1em">%s</div>'
                   '<div class="centercard card">%s%s%s</div><p class="small muted">%s</p></div>'
                   % (cw, ch.logo(), opts.get("header_slot") or "", head_html, main, " · ".join(chrome_link(x) for x in pick_labels(rng, words.LINK_LABELS, 3, ch.avoid))))
    elif frame == "article":
        out.append(ch.cookie_banner() if ch.cookie == "top" else "")
        out.append(ch.header(nav_k=4))
        topic = rng.choice(words.ARTICLE_TOPICS)
        art_title = rng.choice(["A beginner's guide to %s", "What we learned about %s", "Ten tips for %s",
                                "Why %s matters", "Notes on %s"]) % topic
        name = "%s %s" % (rng.choice(words.FIRST_NAMES), rng.choice(words.LAST_NAMES))
        out.append('<div class="article"><h1>%s</h1><p class="byline">By %s · %d min read</p>%s%s%s%s</div>'
                   % (esc(art_title.capitalize()), esc(name), rng.randint(3, 12), paras(rng, rng.randint(1, 2)),
                      ("<h2>%s</h2>" % esc(title)) if title else "", intro_html + filler + main, paras(rng, 2)))
        out.append(ch.footer(2))
    elif frame == "docs":
        out.append(ch.header(nav_k=4))
        toc = "".join(chrome_link(x) for x in pick_labels(rng, words.LINK_LABELS, 8, ch.avoid))
        left = '<nav class="aside toc" style="width:200px">%s</nav>' % toc if w >= 900 else ""
        out.append('<div class="wrap"><div class="cols">%s<div class="mainc">%s%s%s</div></div></div>'
                   % (left, _crumbs(rng, title or "Guide"), head_html, main))
        out.append(ch.footer(2))
    elif frame in ("widget", "widget_bare"):
        if frame == "widget":
            out.append('<div class="wtitle">%s</div>' % esc(opts.get("widget_title") or title or ctx.site))
            head_html = intro_html + filler
        slot = opts.get("header_slot") or ""
        out.append('<div class="widget">%s%s%s</div>' % (('<div style="margin-bottom:.5em">%s</div>' % slot) if slot else "",
                                                          head_html if frame == "widget" else (("<h3>%s</h3>" % esc(title)) if title else "") + intro_html + filler,
                                                          main))
    elif frame == "widget_panel":
        slot = opts.get("header_slot") or ""
        out.append('<div class="panel"><div class="ph"><span>%s</span><span class="muted small">%s</span></div><div class="pb">%s%s%s</div></div>'
                   % (esc(opts.get("widget_title") or title or ctx.site),
                      esc(rng.choice(["", "Help", "v2.%d" % rng.randint(0, 9), "Beta", "Updated today"])),
                      slot, intro_html + filler, main))
    elif frame == "dashboard":
        rail = "" if w < 700 or opts.get("no_icons") else '<div class="rail">%s</div>' % "".join(
            '<button class="iconbtn" data-chrome aria-label="%s">%s</button>' % (n, icons.svg(n))
            for n in rng.sample(CHROME_ICONS, 4))
        stats = "".join('<div class="card stat"><span class="muted small">%s</span><b>%s</b></div>' % (
            esc(lbl), esc(val)) for lbl, val in rng.sample([
                ("Active users", "%d,%03d" % (rng.randint(1, 40), rng.randint(0, 999))), ("Revenue", "$%d.%dk" % (rng.randint(10, 99), rng.randint(0, 9))),
                ("Open tickets", str(rng.randint(3, 90))), ("Conversion", "%d.%d%%" % (rng.randint(1, 9), rng.randint(0, 9))),
                ("Uptime", "99.%d%%" % rng.randint(80, 99))], 3 if w >= 700 else 2))
        out.append(ch.header(nav_k=0))
        out.append('<div class="shell">%s<div class="mainc"><div class="stats">%s</div>%s<div class="card">%s</div></div></div>'
                   % (rail, stats, head_html, main))
    elif frame == "split":
        bullets = "".join("<li>%s</li>" % esc(s) for s in rng.sample(words.FILLER_SENTENCES, 3))
        out.append('<div class="splitp"><div class="brandp">%s<h1>%s</h1>%s</div><div class="formp">%s%s%s</div></div>'
                   % (ch.logo(), esc(rng.choice(words.HEADLINES)),
                      ("<ul>%s</ul>" % bullets) if w >= 800 else "", opts.get("header_slot") or "", head_html, main))
    elif frame == "modal":
        cw = rng.choice([480, 560, 640, 720])
        out.append(ch.header(nav_k=4, with_slot=False))
        out.append('<div class="wrap" aria-hidden="true">%s%s</div>' % (ch.hero(), paras(rng, 4)))
        out.append('<div class="backdrop"></div><div class="dialog" role="dialog" style="--cw:%dpx"><div class="dh"><b>%s</b></div>%s%s%s</div>'
                   % (cw, esc(opts.get("widget_title") or title or ctx.site), opts.get("header_slot") or "",
                      intro_html + filler, main))
    else:
        raise ValueError("unknown frame " + frame)
    if ch.cookie in ("bottom", "corner"):
        out.append(ch.cookie_banner())
        out.append('<div style="height:%dpx"></div>' % (150 if ch.cookie == "corner" else 90))
    return "\n".join(x for x in out if x)
