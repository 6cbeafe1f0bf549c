"""Themes: colours, fonts, sizes and shapes of a generated page, and the base CSS that uses them.

A theme is sampled per task. Brand colours are random hues; text colours are chosen so that the
contrast ratio against their background stays readable (at least 4.5:1 for body text).
"""
import colorsys

FONT_STACKS = [
    'sans-serif', 'serif', '"DejaVu Sans", sans-serif', '"Liberation Sans", Arial, sans-serif',
    '"Liberation Serif", "Times New Roman", serif', '"FreeSans", sans-serif', '"Noto Sans", sans-serif',
    '"DejaVu Serif", serif', 'Helvetica, Arial, sans-serif', '"Segoe UI", Roboto, sans-serif',
    'Georgia, serif', '"FreeSerif", serif', 'system-ui, sans-serif', '"DejaVu Sans Condensed", sans-serif',
]
MONO_STACKS = ['monospace', '"DejaVu Sans Mono", monospace', '"Liberation Mono", monospace']
BUTTON_STYLES = ["filled", "outline", "pill", "flat", "soft", "shadow", "square"]


def _hex(r, g, b):
    return "#%02x%02x%02x" % (int(round(r * 255)), int(round(g * 255)), int(round(b * 255)))


def hsl(h, s, l):
    """Returns the hex colour of hue h (degrees), saturation s and lightness l (0..1)."""
    r, g, b = colorsys.hls_to_rgb((h % 360) / 360.0, l, s)
    return _hex(r, g, b)


def luminance(hexcol):
    """Relative luminance of a #rrggbb colour (WCAG definition)."""
    vals = []
    for i in (1, 3, 5):
        c = int(hexcol[i:i + 2], 16) / 255.0
        vals.append(c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4)
    return 0.2126 * vals[0] + 0.7152 * vals[1] + 0.0722 * vals[2]


def contrast(a, b):
    la, lb = luminance(a), luminance(b)
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


def ensure_contrast(col, bg, target=4.5):
    """Darkens (on light backgrounds) or lightens (on dark ones) col until it reaches the target contrast."""
    r, g, b = (int(col[i:i + 2], 16) / 255.0 for i in (1, 3, 5))
    h, l, s = colorsys.rgb_to_hls(r, g, b)
    step = -0.03 if luminance(bg) > 0.4 else 0.03
    for _ in range(40):
        if contrast(col, bg) >= target:
            break
        l = min(1.0, max(0.0, l + step))
        col = _hex(*colorsys.hls_to_rgb(h, l, s))
    return col


def readable_on(bg, candidates=("#ffffff", "#111111")):
    """Returns the candidate text colour with the highest contrast on bg."""
    return max(candidates, key=lambda c: contrast(c, bg))


class Theme:
    """All visual choices for one page; `css()` renders them as the base stylesheet."""

    def __init__(self, rng, small=False):
        self.dark = rng.random() < 0.28
        hue = rng.randrange(360)
        sat = rng.uniform(0.45, 0.85)
        if self.dark:
            self.bg = hsl(hue + rng.choice([0, 180, 200]), rng.uniform(0.05, 0.25), rng.uniform(0.06, 0.13))
            self.surface = hsl(hue, rng.uniform(0.05, 0.2), rng.uniform(0.14, 0.2))
            self.surface2 = hsl(hue, rng.uniform(0.05, 0.2), rng.uniform(0.2, 0.26))
            self.text = hsl(hue, 0.1, rng.uniform(0.88, 0.96))
            self.muted = hsl(hue, 0.08, rng.uniform(0.66, 0.74))
            self.border = hsl(hue, 0.1, rng.uniform(0.28, 0.36))
            self.brand = hsl(hue, sat, rng.uniform(0.55, 0.68))
            self.link = hsl(hue + rng.choice([0, 30, -30]), 0.8, 0.72)
        else:
            self.bg = rng.choice(["#ffffff", "#fafafa", "#f5f6f8", hsl(hue, 0.3, 0.97), "#fdfcf8", "#f3f4f6"])
            self.surface = rng.choice(["#ffffff", "#ffffff", hsl(hue, 0.25, 0.985)])
            self.surface2 = hsl(hue, rng.uniform(0.1, 0.35), rng.uniform(0.92, 0.96))
            self.text = rng.choice(["#111827", "#1f2328", "#222222", "#2b2b2b", hsl(hue, 0.3, 0.14)])
            self.muted = rng.choice(["#5f6670", "#555b66", "#666666", hsl(hue, 0.12, 0.38)])
            self.border = rng.choice(["#d6d9de", "#e2e4e8", "#cccccc", hsl(hue, 0.15, 0.84)])
            self.brand = hsl(hue, sat, rng.uniform(0.3, 0.45))
            self.link = hsl(hue + rng.choice([0, 20, -20]), 0.75, 0.36)
        for bg in (self.surface, self.bg, self.surface2):
            self.link = ensure_contrast(self.link, bg)
            self.muted = ensure_contrast(self.muted, bg)
            self.text = ensure_contrast(self.text, bg, 7.0)
        self.on_brand = readable_on(self.brand)
        self.hue = hue
        self.accent = hsl(hue + rng.choice([120, 150, 200, 240]), 0.6, 0.5 if not self.dark else 0.62)
        self.font = rng.choice(FONT_STACKS)
        self.heading_font = self.font if rng.random() < 0.6 else rng.choice(FONT_STACKS)
        self.mono = rng.choice(MONO_STACKS)
        self.fs = rng.randint(12, 15) if small else rng.choice([13, 14, 14, 15, 15, 16, 16, 17, 18, 20])
        self.radius = rng.choice([0, 2, 4, 6, 8, 10, 14])
        self.btn_style = rng.choice(BUTTON_STYLES)
        self.btn_radius = 999 if self.btn_style == "pill" else (0 if self.btn_style == "square" else
                                                                 rng.choice([2, 4, 6, 8, 12]))
        self.pad = rng.choice([0.7, 0.85, 1.0, 1.15, 1.3])
        self.uppercase = rng.random() < 0.12
        self.shadow = rng.choice(["none", "0 1px 2px rgba(0,0,0,.12)", "0 2px 8px rgba(0,0,0,.10)",
                                  "0 4px 16px rgba(0,0,0,.12)"])
        self.header_style = rng.choice(["brand", "surface", "dark", "plain"])
        self.line = rng.choice([1.35, 1.45, 1.55])
        self.check_accent = self.brand

    def label(self, text):
        """Returns a button label as it is rendered (upper-cased when the theme shouts)."""
        return text.upper() if self.uppercase else text

    def header_colors(self):
        if self.header_style == "brand":
            return self.brand, self.on_brand
        if self.header_style == "dark":
            bg = "#1b1f24" if not self.dark else "#05070a"
            return bg, "#f3f4f6"
        if self.header_style == "surface":
            return self.surface, self.text
        return self.bg, self.text

    def css(self):
        """The base stylesheet: variables plus classes shared by every family's components."""
        hb, ht = self.header_colors()
        p = self.pad
        btn = {
            "filled": "background:var(--brand);color:var(--on-brand);border:1px solid var(--brand);",
            "outline": "background:transparent;color:var(--brand-text);border:2px solid var(--brand);",
            "pill": "background:var(--brand);color:var(--on-brand);border:1px solid var(--brand);",
            "flat": "background:var(--surface2);color:var(--text);border:1px solid transparent;",
            "soft": "background:color-mix(in srgb,var(--brand) 18%,var(--surface));color:var(--brand-text);border:1px solid transparent;",
            "shadow": "background:var(--brand);color:var(--on-brand);border:0;box-shadow:0 2px 6px rgba(0,0,0,.25);",
            "square": "background:var(--brand);color:var(--on-brand);border:1px solid var(--brand);",
        }[self.btn_style]
        brand_text = self.brand if contrast(self.brand, self.surface) >= 3.2 else self.text
        return f"""
:root{{--bg:{self.bg};--surface:{self.surface};--surface2:{self.surface2};--text:{self.text};--muted:{self.muted};
--border:{self.border};--brand:{self.brand};--on-brand:{self.on_brand};--brand-text:{brand_text};--link:{self.link};
--accent:{self.accent};--radius:{self.radius}px;--btn-radius:{self.btn_radius}px;--fs:{self.fs}px;--pad:{p};
--hb:{hb};--ht:{ht};--shadow:{self.shadow};}}
*{{box-sizing:border-box}}
html,body{{margin:0;padding:0}}
body{{background:var(--bg);color:var(--text);font-family:{self.font};font-size:var(--fs);line-height:{self.line};
overflow-wrap:anywhere}}
h1,h2,h3,h4{{font-family:{self.heading_font};line-height:1.2;margin:.4em 0 .5em}}
h1{{font-size:1.7em}} h2{{font-size:1.35em}} h3{{font-size:1.12em}} h4{{font-size:1em}}
p{{margin:.5em 0 .8em}}
a{{color:var(--link)}}
code,.mono{{font-family:{self.mono}}}
.muted{{color:var(--muted)}} .small{{font-size:.86em}}
.btn,.btn2{{display:inline-flex;align-items:center;justify-content:center;gap:.4em;font:inherit;
padding:calc(.45em*var(--pad)) calc(1em*var(--pad));border-radius:var(--btn-radius);cursor:pointer;
line-height:1.25;min-height:2em;text-decoration:none;white-space:nowrap}}
.btn{{{btn}}}
.btn2{{background:var(--surface);color:var(--text);border:1px solid var(--border)}}
.btn-link{{background:none;border:0;color:var(--link);text-decoration:underline;font:inherit;cursor:pointer;padding:.2em .3em}}
.btn:hover{{filter:brightness(1.08)}} .btn2:hover{{background:var(--surface2)}}
.card{{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);box-shadow:var(--shadow);
padding:calc(1em*var(--pad))}}
.row{{display:flex;flex-wrap:wrap;gap:calc(.6em*var(--pad));align-items:center}}
.row>*{{max-width:100%}}
.grow{{flex:1 1 160px;min-width:0}}
.stack>*+*{{margin-top:calc(.7em*var(--pad))}}
label{{cursor:pointer}}
.field{{display:flex;flex-direction:column;gap:.25em;margin:0 0 calc(.8em*var(--pad))}}
.field>span{{font-weight:600;font-size:.92em}}
input[type=text],input[type=email],input[type=password],input[type=search],input[type=tel],input[type=url],textarea{{
font:inherit;color:var(--text);background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);
padding:.45em .6em;width:100%;max-width:100%}}
input:focus,textarea:focus{{outline:2px solid var(--brand);outline-offset:1px}}
input[type=checkbox],input[type=radio]{{accent-color:var(--brand);width:1.05em;height:1.05em;margin:0 .45em 0 0;
vertical-align:middle;flex:none}}
.opt{{display:flex;align-items:center;padding:.3em 0}}
.switch{{position:relative;display:inline-block;width:2.4em;height:1.35em;border-radius:1em;background:var(--border);
flex:none;margin-right:.6em;transition:none}}
.switch::after{{content:"";position:absolute;top:.15em;left:.15em;width:1.05em;height:1.05em;border-radius:50%;background:#fff;
box-shadow:0 1px 2px rgba(0,0,0,.3)}}
input:checked+.switch{{background:var(--brand)}} input:checked+.switch::after{{left:1.2em}}
.vh{{position:absolute;opacity:0;width:1px;height:1px;overflow:hidden;pointer-events:none}}
.box{{display:inline-flex;width:1.15em;height:1.15em;border:2px solid var(--muted);border-radius:3px;margin-right:.5em;
align-items:center;justify-content:center;flex:none;font-size:.85em;line-height:1;color:var(--on-brand)}}
input:checked+.box{{background:var(--brand);border-color:var(--brand)}} input:checked+.box::after{{content:"✓"}}
.dot{{display:inline-block;width:1.1em;height:1.1em;border:2px solid var(--muted);border-radius:50%;margin-right:.5em;flex:none}}
input:checked+.dot{{border:5px solid var(--brand)}}
.badge{{display:inline-block;padding:.1em .5em;border-radius:1em;background:var(--surface2);font-size:.8em}}
.status{{margin:.6em 0;padding:.5em .8em;border-radius:var(--radius);background:var(--surface2);border-left:4px solid var(--brand)}}
.status:empty{{display:none}}
.error{{color:#b42318;background:#fde8e7;border-left-color:#b42318}}
.hidden{{display:none!important}}
table{{border-collapse:collapse;width:100%}}
th,td{{text-align:left;padding:.45em .55em;border-bottom:1px solid var(--border);vertical-align:top}}
th{{font-weight:700;background:var(--surface2)}}
.iconbtn{{display:inline-flex;align-items:center;justify-content:center;width:2.3em;height:2.3em;border-radius:var(--btn-radius);
border:1px solid transparent;background:transparent;color:inherit;cursor:pointer;padding:0;position:relative}}
.iconbtn:hover{{background:var(--surface2)}}
.iconbtn svg{{width:62%;height:62%;stroke:currentColor;fill:none;stroke-width:2;stroke-linecap:round;stroke-linejoin:round}}
.iconbtn.on svg{{fill:currentColor}}
.iconbtn[data-tip]:hover::after{{content:attr(data-tip);position:absolute;top:110%;left:50%;transform:translateX(-50%);
background:#222;color:#fff;font-size:.75em;padding:.2em .5em;border-radius:4px;white-space:nowrap;z-index:50}}
"""
