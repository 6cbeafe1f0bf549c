"""Synthetic grounding data drawn on the GPU machine while it trains: web-like pages painted with Pillow
(navigation bars, headings, text, buttons, links, tabs, fields, check boxes, radio buttons, tables, cards)
in the colours of train/tasks/themes.py and the fonts Chromium uses here, and localizer sequences that ask
for their elements exactly as surf's localizer prompt does ("the \"Save\" button" -> {"x":..,"y":..}).

Recorded demonstrations are few per upload (the GPU machine takes little data per call) and a screenshot
shows the model the same labels every epoch; these pages are new at every step, so the vision tower learns to
read labels and find them rather than remember them. Element descriptions follow the recorder's rules
(apps/record/page_elements.h) and points are the centre of the element's box on the 0-1000 grid.

  python3 -m train.surf_tiny.synth --fonts DIR --out DIR [--pages N]     # pages and their elements, to look at
"""

import argparse
import collections
import json
import os
import random

import sys

import numpy as np

# The task generator's modules import each other by their plain names.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks"))
import novel  # noqa: E402
import words  # noqa: E402
from themes import Theme  # noqa: E402

from . import spec
from .spec import ga

STOP = "<SPECIAL_12>"
# (regular, bold) font files per family; a family with a missing file is skipped.
FAMILIES = [("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"), ("DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf"),
            ("LiberationSans-Regular.ttf", "LiberationSans-Bold.ttf"),
            ("LiberationSerif-Regular.ttf", "LiberationSerif-Bold.ttf"), ("FreeSans.ttf", "FreeSansBold.ttf"),
            ("DejaVuSansCondensed.ttf", "DejaVuSansCondensed-Bold.ttf")]
# Viewports of the recordings (train/tasks/generate.py), most often the default desktop one.
VIEWPORTS = [(1280, 720)] * 4 + [(1366, 768), (1280, 800), (1024, 768), (360, 640), (400, 300), (800, 600),
                                 (480, 360), (320, 240)]


class Fonts:
    def __init__(self, folder):
        self.folder = folder
        self.families = [f for f in FAMILIES if all(os.path.exists(os.path.join(folder, x)) for x in f)]
        if not self.families:
            raise SystemExit(f"synth: no fonts of {[f[0] for f in FAMILIES]} in {folder}")
        self.cache = {}

    def get(self, family, bold, size):
        from PIL import ImageFont
        key = (family, bold, size)
        if key not in self.cache:
            self.cache[key] = ImageFont.truetype(os.path.join(self.folder, self.families[family][bold]), size)
        return self.cache[key]


def rgb(hexcol):
    return tuple(int(hexcol[i:i + 2], 16) for i in (1, 3, 5))


class Page:
    """One painted page: the image and its described elements [(description, (x, y, w, h))]."""

    def __init__(self, rng, fonts, width, height):
        from PIL import Image, ImageDraw
        self.rng, self.fonts, self.W, self.H = rng, fonts, width, height
        self.theme = Theme(rng, small=width < 600)
        self.novel = novel.Novel(rng)
        self.family = rng.randrange(len(fonts.families))
        self.fs = self.theme.fs
        self.img = Image.new("RGB", (width, height), rgb(self.theme.bg))
        self.draw = ImageDraw.Draw(self.img)
        self.elements, self.used = [], set()

    # ---- text and labels ---------------------------------------------------------------------------
    def font(self, scale=1.0, bold=False):
        return self.fonts.get(self.family, bold, max(8, int(round(self.fs * scale))))

    def label(self, pool=None):
        """A label not yet on the page: from `pool` (real UI words) or invented (train/tasks/novel.py)."""
        r = self.rng
        for _ in range(20):
            if pool and r.random() < 0.5:
                s = r.choice(pool)
            else:
                k = r.random()
                s = self.novel.label() if k < 0.5 else (self.novel.person() if k < 0.6 else (
                    self.novel.product() if k < 0.7 else (self.novel.code() if k < 0.8 else
                                                          " ".join(r.choice(novel.REAL_WORDS) for _ in range(r.randint(1, 2))).capitalize())))
            if s.lower() not in self.used and 0 < len(s) <= 40:
                self.used.add(s.lower())
                return self.theme.label(s) if pool is words.NAV_LABELS else s
        return None

    def text(self, x, y, s, font, fill):
        self.draw.text((x, y), s, font=font, fill=rgb(fill))
        asc, desc = font.getmetrics()
        return font.getlength(s), asc + desc

    def add(self, desc, box):
        x, y, w, h = box
        if desc and w >= 4 and h >= 4 and x >= 0 and y >= 0 and x + w <= self.W and y + h <= self.H:
            self.elements.append((desc, (x, y, w, h)))

    # ---- components: each paints at (x, y) within width w and returns the height it used ----------
    def heading(self, x, y, w):
        f = self.font(self.rng.choice([1.12, 1.35, 1.7]), bold=True)
        s = self.label(words.HEADLINES if self.rng.random() < 0.3 else None)
        if not s:
            return 0
        tw, th = self.text(x, y, s, f, self.theme.text)
        self.add(f'the "{s}" heading', (x, y, tw, th))
        return th + self.fs // 2

    def paragraph(self, x, y, w):
        f = self.font(muted := self.rng.random() < 0.3 and 0.86 or 1.0)
        s = self.rng.choice(words.FILLER_SENTENCES) if self.rng.random() < 0.6 else self.label()
        if not s:
            return 0
        line = []
        lines = []
        for word in s.split():
            if line and f.getlength(" ".join(line + [word])) > w:
                lines.append(" ".join(line))
                line = []
            line.append(word)
        lines.append(" ".join(line))
        lh = int(sum(f.getmetrics()) * self.theme.line)
        colour = self.theme.muted if muted != 1.0 else self.theme.text
        for i, ln in enumerate(lines):
            self.draw.text((x, y + i * lh), ln, font=f, fill=rgb(colour))
        if len(lines) == 1 and len(s) <= 60 and s.lower() not in self.used | {""}:
            self.used.add(s.lower())
            self.add(f'the text "{s}"', (x, y, f.getlength(s), lh))
        return lh * len(lines) + self.fs // 2

    def button(self, x, y, s, filled=None):
        t, r = self.theme, self.rng
        f = self.font(bold=r.random() < 0.5)
        tw = f.getlength(s)
        pw, ph = int(self.fs * t.pad * r.uniform(0.8, 1.4)), int(self.fs * t.pad * r.uniform(0.4, 0.7))
        asc, desc = f.getmetrics()
        w, h = tw + 2 * pw, asc + desc + 2 * ph
        style = t.btn_style if filled is None else ("filled" if filled else "outline")
        rad = min(t.btn_radius, h // 2)
        if style in ("filled", "pill", "shadow", "square"):
            self.draw.rounded_rectangle((x, y, x + w, y + h), rad, fill=rgb(t.brand))
            fg = t.on_brand
        elif style == "outline":
            self.draw.rounded_rectangle((x, y, x + w, y + h), rad, outline=rgb(t.brand), width=2)
            fg = t.link
        elif style == "soft":
            self.draw.rounded_rectangle((x, y, x + w, y + h), rad, fill=rgb(t.surface2))
            fg = t.text
        else:
            fg = t.link
        self.draw.text((x + pw, y + ph), s, font=f, fill=rgb(fg))
        self.add(f'the "{s}" button', (x, y, w, h))
        return w, h

    def row(self, x, y, w, make, gap):
        """Paints items left to right (make(x, y) -> (w, h) or None) while they fit; returns the height."""
        cx, hmax = x, 0
        for _ in range(self.rng.randint(1, 5)):
            mark = len(self.elements), self.img.copy()
            res = make(cx, y)
            if res is None:
                break
            iw, ih = res
            if cx + iw > x + w:  # it does not fit: undo it
                del self.elements[mark[0]:]
                self.img.paste(mark[1])
                break
            cx += iw + gap
            hmax = max(hmax, ih)
        return hmax + self.fs // 2 if hmax else 0

    def buttons(self, x, y, w):
        pool = self.rng.choice(words.BUTTON_GROUPS)
        return self.row(x, y, w, lambda cx, cy: (lambda s: self.button(cx, cy, s) if s else None)(self.label(pool)),
                        int(self.fs * self.rng.uniform(0.5, 1.2)))

    def link(self, x, y, s, colour=None, underline=None):
        f = self.font()
        tw, th = self.text(x, y, s, f, colour or self.theme.link)
        if underline if underline is not None else self.rng.random() < 0.6:
            asc = f.getmetrics()[0]
            self.draw.line((x, y + asc + 1, x + tw, y + asc + 1), fill=rgb(colour or self.theme.link), width=1)
        self.add(f'the "{s}" link', (x, y, tw, th))
        return tw, th

    def links(self, x, y, w):
        pool = words.LINK_LABELS
        return self.row(x, y, w, lambda cx, cy: (lambda s: self.link(cx, cy, s) if s else None)(self.label(pool)),
                        int(self.fs * self.rng.uniform(1.0, 2.0)))

    def tabs(self, x, y, w):
        t, f = self.theme, self.font()
        labels = [s for s in (self.label(self.rng.choice(words.TAB_SETS)) for _ in range(self.rng.randint(2, 5))) if s]
        active = self.rng.randrange(len(labels)) if labels else 0
        cx, pad = x, int(self.fs * 0.9)
        asc, desc = f.getmetrics()
        h = asc + desc + 2 * pad
        for i, s in enumerate(labels):
            tw = f.getlength(s)
            if cx + tw + 2 * pad > x + w:
                break
            if i == active:
                self.draw.rectangle((cx, y + h - 3, cx + tw + 2 * pad, y + h), fill=rgb(t.brand))
            self.text(cx + pad, y + pad, s, f, t.text if i == active else t.muted)
            self.add(f'the "{s}" tab', (cx, y, tw + 2 * pad, h))
            cx += tw + 2 * pad
        self.draw.line((x, y + h, x + w, y + h), fill=rgb(t.border))
        return h + self.fs

    def field(self, x, y, w):
        t, r = self.theme, self.rng
        lab = self.novel.field_label() if r.random() < 0.5 else self.label([f[0] for f in words.TEXT_FIELDS])
        if not lab:
            return 0
        f, fb = self.font(), self.font(0.92, bold=True)
        top = y
        placeholder = r.random() < 0.35
        if not placeholder or r.random() < 0.5:
            _, lh = self.text(x, y, lab, fb, t.text)
            y += lh + 4
        iw = min(w, int(r.uniform(0.4, 1.0) * w))
        ih = sum(f.getmetrics()) + int(self.fs * 0.9)
        self.draw.rounded_rectangle((x, y, x + iw, y + ih), min(t.radius, ih // 2), fill=rgb(t.surface),
                                    outline=rgb(t.border), width=1)
        if placeholder:
            ph = lab if r.random() < 0.5 else "e.g. " + self.novel.word()
            self.text(x + self.fs // 2, y + int(self.fs * 0.45), ph, f, t.muted)
            desc = f'the "{lab}" field' if y > top else f'the field showing "{ph}"'
        else:
            desc = f'the "{lab}" field'
        self.add(desc, (x, y, iw, ih))
        return y + ih - top + self.fs

    def choices(self, x, y, w):
        """A column of check boxes or radio buttons with their labels."""
        t, r = self.theme, self.rng
        radio = r.random() < 0.4
        f = self.font()
        asc, desc = f.getmetrics()
        lh = int((asc + desc) * 1.6)
        box = max(10, int(self.fs * 0.95))
        pool = r.choice(words.CHECKBOX_SETS)
        n = r.randint(2, 5)
        for i in range(n):
            s = self.label(pool)
            if not s:
                break
            by = y + i * lh + (asc + desc - box) // 2
            on = r.random() < 0.3
            if radio:
                self.draw.ellipse((x, by, x + box, by + box), outline=rgb(t.border if not on else t.brand), width=2)
                if on:
                    self.draw.ellipse((x + box // 4, by + box // 4, x + box - box // 4, by + box - box // 4),
                                      fill=rgb(t.brand))
                self.add(f'the "{s}" radio button', (x, by, box, box))
            else:
                self.draw.rounded_rectangle((x, by, x + box, by + box), 2, fill=rgb(t.brand) if on else None,
                                            outline=rgb(t.brand if on else t.border), width=2)
                self.add(f'the checkbox next to "{s}"', (x, by, box, box))
            tw, th = self.text(x + box + 8, y + i * lh, s, f, t.text)
            if r.random() < 0.3:
                self.add(f'the text "{s}"', (x + box + 8, y + i * lh, tw, th))
        return n * lh + self.fs // 2

    def table(self, x, y, w):
        t, r = self.theme, self.rng
        cols, rows = r.randint(2, 4), r.randint(2, 6)
        f, fb = self.font(0.95), self.font(0.95, bold=True)
        rh = int(sum(f.getmetrics()) * 1.9)
        cw = w // cols
        self.draw.rectangle((x, y, x + cols * cw, y + rh), fill=rgb(t.surface2))
        for j in range(cols):
            s = self.label(["Name", "Price", "Date", "Status", "City", "Owner", "Total", "Plan"])
            if s:
                tw, th = self.text(x + j * cw + 8, y + (rh - sum(fb.getmetrics())) // 2, s, fb, t.text)
                self.add(f'the text "{s}"', (x + j * cw, y, cw, rh))
        for i in range(1, rows + 1):
            yy = y + i * rh
            self.draw.line((x, yy, x + cols * cw, yy), fill=rgb(t.border))
            for j in range(cols):
                s = self.cell(j)
                if s and f.getlength(s) < cw - 12:
                    self.text(x + j * cw + 8, yy + (rh - sum(f.getmetrics())) // 2, s, f, t.text)
                    if s.lower() not in self.used:
                        self.used.add(s.lower())
                        self.add(f'the text "{s}"', (x + j * cw, yy, cw, rh))
        return (rows + 1) * rh + self.fs

    def cell(self, j):
        r = self.rng
        k = r.randrange(5)
        if k == 0:
            return "%s%d.%02d" % (r.choice(["$", "€", "£", ""]), r.randint(1, 999), r.randrange(100))
        if k == 1:
            return "%d %s" % (r.randint(1, 28), r.choice(words.MONTHS)[:3])
        if k == 2:
            return r.choice(words.CITIES)
        return self.novel.person() if k == 3 else self.novel.label()

    def nav(self):
        t, r = self.theme, self.rng
        bg, fg = t.header_colors()
        f = self.font()
        h = int(sum(f.getmetrics()) * r.uniform(2.2, 3.2))
        self.draw.rectangle((0, 0, self.W, h), fill=rgb(bg))
        x = int(self.fs * 1.2)
        brand = self.novel.company() if r.random() < 0.5 else self.novel.word()
        tw, th = self.text(x, (h - sum(self.font(1.2, True).getmetrics())) // 2, brand, self.font(1.2, True), fg)
        x += tw + self.fs * 2
        ty = (h - sum(f.getmetrics())) // 2
        for _ in range(r.randint(2, 6)):
            s = self.label(words.NAV_LABELS)
            if not s or x + f.getlength(s) > self.W - self.fs:
                break
            tw, _ = self.link(x, ty, s, colour=fg, underline=False)
            x += tw + int(self.fs * r.uniform(1.2, 2.2))
        return h

    def card(self, x, y, w):
        """A box on the surface colour: a title, a line of text and, often, a button."""
        t, r = self.theme, self.rng
        inner = int(self.fs * 0.9)
        title, line = self.label(), (self.novel.product() if r.random() < 0.5 else self.cell(0))
        action = self.label(r.choice(words.BUTTON_GROUPS)) if r.random() < 0.7 else None
        if not title:
            return 0
        fh, f = self.font(1.12, bold=True), self.font(0.92)
        hh, lh = sum(fh.getmetrics()), int(sum(f.getmetrics()) * 1.4)
        bh = sum(self.font().getmetrics()) + int(self.fs * t.pad * 1.4) if action else 0
        h = inner + hh + 6 + lh + (bh + inner // 2 if action else 0) + inner
        self.draw.rounded_rectangle((x, y, x + w, y + h), t.radius, fill=rgb(t.surface), outline=rgb(t.border))
        cy = y + inner
        if fh.getlength(title) < w - 2 * inner:
            tw, _ = self.text(x + inner, cy, title, fh, t.text)
            self.add(f'the "{title}" heading', (x + inner, cy, tw, hh))
        cy += hh + 6
        if f.getlength(line) < w - 2 * inner:
            tw, _ = self.text(x + inner, cy, line, f, t.muted)
            if line.lower() not in self.used:
                self.used.add(line.lower())
                self.add(f'the text "{line}"', (x + inner, cy, tw, lh))
        cy += lh
        if action and self.font().getlength(action) + 4 * self.fs < w - 2 * inner:
            mark = len(self.elements)
            bw, bh2 = self.button(x + inner, cy, action)
            if cy + bh2 > y + h:  # taller than planned: keep the box honest by dropping the description
                del self.elements[mark:]
        return h + self.fs

    def paint_sparse(self, k):
        """k components at random places on an empty page (no two overlap): a page where finding the element
        is easy and its place is what the answer needs."""
        r = self.rng
        parts = [self.buttons, self.links, self.heading, self.field, self.choices, self.paragraph]
        for _ in range(k * 4):
            if len(self.elements) >= k:
                break
            x, y = r.randrange(0, max(1, int(self.W * 0.75))), r.randrange(0, max(1, int(self.H * 0.85)))
            w = min(self.W - x, r.randint(120, 420))
            mark, before = len(self.elements), self.img.copy()
            r.choice(parts)(x, y, w)
            new = self.elements[mark:]
            overlap = any(_overlap(b, e) for _, b in new for _, e in self.elements[:mark])
            if overlap or not new:
                del self.elements[mark:]
                self.img.paste(before)
        return self.keep_unique()

    def keep_unique(self):
        """Drops every element whose description the page repeats (the recorder asks only about unique ones)."""
        count = collections.Counter(d for d, _ in self.elements)
        self.elements = [e for e in self.elements if count[e[0]] == 1]
        return self

    def paint(self):
        r = self.rng
        y = self.nav() + self.fs if r.random() < 0.7 else self.fs
        margin = int(r.uniform(0.02, 0.2) * self.W) if self.W > 600 else int(self.fs * 0.8)
        ncol = 1 if self.W < 700 else r.choice([1, 1, 2, 3])
        gap = self.fs * 2
        cw = (self.W - 2 * margin - (ncol - 1) * gap) // ncol
        parts = [self.heading, self.paragraph, self.buttons, self.links, self.tabs, self.field, self.choices,
                 self.table, self.card]
        weights = [2, 2, 3, 1.5, 1, 2, 1.5, 1, 1]
        for c in range(ncol):
            x, yy = margin + c * (cw + gap), y
            while yy < self.H - self.fs * 2:
                used = r.choices(parts, weights)[0](x, yy, cw)
                yy += max(used, self.fs)
        return self.keep_unique()


def _overlap(a, b, pad=4):
    return not (a[0] + a[2] + pad <= b[0] or b[0] + b[2] + pad <= a[0] or a[1] + a[3] + pad <= b[1] or
                b[1] + b[3] + pad <= a[1])


def to_1000(v, extent):
    return int(min(1000, max(0, round(1000.0 * v / extent))))


# The reading task (Maker.reading): a training-only prompt, never one the agent sends.
READ_PROMPT = ("Read the screenshot ({width}×{height} pixels) top to bottom: each element, then its centre as x "
               "and y from 0 to 1000 of the width and height.")
READ_MAX = 24  # elements listed per reading sequence


class Maker:
    """Localizer sequences of synthetic pages, tokenized as data.encode_session tokenizes recorded ones; with
    `read`, also one reading sequence per page."""

    def __init__(self, model_dir, fonts_dir, per_page=8, sparse=False, read=False, viewports=None, max_rows=64):
        from .data import Encoder
        self.sparse = sparse
        self.viewports = viewports or VIEWPORTS
        self.max_rows = max_rows
        self.read = read
        self.enc = Encoder(model_dir)
        self.fonts = Fonts(fonts_dir)
        self.per_page = per_page
        # The localizer prompt of the model folder, else the shipped surf-tiny's (the GPU machine's model folder
        # carries only the config and the tokenizer).
        path = os.path.join(model_dir, "prompts", "localizer.md")
        if not os.path.exists(path):
            path = os.path.join(spec.REPO, "models", "surf-tiny", "prompts", "localizer.md")
        self.prompt = open(path, encoding="utf-8").read()
        if "{schema}" in self.prompt:
            raise SystemExit(f"synth: {path} shows the output schema; surf-tiny's prompts leave it out")

    def parts(self, width, height, element):
        """The localizer call's text before and after the image, as surf renders it: the chat template with an
        empty system prompt around the prompt file's text."""
        user = self.prompt.replace("{width}", str(width)).replace("{height}", str(height)).replace("{element}", element)
        return f"<SPECIAL_10>System\n\n<SPECIAL_11>User\n{user}", "\n<SPECIAL_11>Assistant\n<think></think>"

    def page(self, rng, size):
        for _ in range(5):
            p = Page(rng, self.fonts, *size)
            p = p.paint_sparse(rng.randint(1, 3)) if self.sparse else p.paint()
            if p.elements:
                return p
        return p

    def sequences(self, page):
        """[(tokens, loss mask, point)] for up to per_page of the page's elements, point = the element's centre on
        the 0-1000 grid (None for a reading sequence); the image span holds <image> tokens."""
        ids, W, H = self.enc.ids, page.W, page.H
        n_img = spec.image_token_count(W, H)
        out = []
        for desc, (x, y, w, h) in page.rng.sample(page.elements, min(self.per_page, len(page.elements))):
            before, after = self.parts(W, H, desc)
            point = (to_1000(x + w / 2, W), to_1000(y + h / 2, H))
            reply = json.dumps({"x": point[0], "y": point[1]}, separators=(",", ":"))
            a = self.enc.text(before) + [ids["<img>"]] + [ids["<image>"]] * n_img + [ids["</img>"]] + self.enc.text(after)
            b = self.enc.text(reply) + [ids[STOP]]
            out.append((a + b, [0] * len(a) + [1] * len(b), point))
        if self.read:
            out.append(self.reading(page))
        return out

    def reading(self, page):
        """(tokens, loss mask) of the page read aloud: the elements in reading order (rows of 16 pixels, then left
        to right), each as its description and its centre. Every line of the reply needs the image, where a
        localizer reply needs it for six digits, so the path from the image rows to the reply gets a dense
        gradient; the language model alone learns to ignore the image otherwise."""
        ids, W, H = self.enc.ids, page.W, page.H
        shown = sorted(page.elements, key=lambda e: (e[1][1] // 16, e[1][0]))[:READ_MAX]
        lines = [desc + " " + json.dumps({"x": to_1000(x + w / 2, W), "y": to_1000(y + h / 2, H)},
                                         separators=(",", ":")) for desc, (x, y, w, h) in shown]
        user = READ_PROMPT.replace("{width}", str(W)).replace("{height}", str(H))
        a = (self.enc.text(f"<SPECIAL_10>System\n\n<SPECIAL_11>User\n{user}") + [ids["<img>"]] +
             [ids["<image>"]] * spec.image_token_count(W, H) + [ids["</img>"]] +
             self.enc.text("\n<SPECIAL_11>Assistant\n<think></think>"))
        b = self.enc.text("\n".join(lines)) + [ids[STOP]]
        return a + b, [0] * len(a) + [1] * len(b), None

    def batch(self, seed, token_budget):
        """One batch of pages of one viewport size, within token_budget and max_rows: collate()'s arrays."""
        rng = random.Random(seed)
        size = rng.choice(self.viewports)
        max_rows = self.max_rows
        items, rows, longest = [], 0, 0
        while True:
            page = self.page(rng, size)
            seqs = self.sequences(page)
            longest = max([longest] + [len(s[0]) for s in seqs])
            if items and (longest * (rows + len(seqs)) > token_budget or rows + len(seqs) > max_rows):
                break
            items.append((page.img, seqs))
            rows += len(seqs)
        return self.collate(items)

    def collate(self, items):
        """[(screenshot, its sequences)] → (tokens [B, T], loss mask, text mask, tiles [n, S, S, 3] uint8,
        projector-row index of every <image> token in (row, position) order, pointer targets [B]), the first
        five as train.make_batch gives. A pointer target is the index, among its sequence's image tokens, of the
        one whose patches hold the element's centre (-1: none; one tile per screenshot)."""
        side = spec.SIZES["tile"] // 32
        per_tile = side**2
        rows, tiles, gather, targets = [], [], [], []
        cell = lambda v: min(side - 1, v * side // 1000)  # noqa: E731 (a grid cell of a 0-1000 coordinate)
        for img, seqs in items:
            t, _ = ga.tile_image(img, spec.SIZES["tile"], spec.SIZES["max_tiles"], True)
            first = len(tiles) * per_tile
            tiles += [np.asarray(x, np.uint8) for x in t]
            for s in seqs:
                rows.append(s[:2])
                point = s[2] if len(s) > 2 else None
                targets.append(cell(point[1]) * side + cell(point[0]) if point and len(t) == 1 else -1)
                gather.append(np.arange(first, first + len(t) * per_tile))
        T = max(len(t) for t, _ in rows)
        pad = self.enc.ids["<unk>"]
        first_image = min(self.enc.ids[x] for x in ga.IMAGE_TOKENS)
        tokens = np.full((len(rows), T), pad, np.int64)
        mask = np.zeros((len(rows), T), np.uint8)
        text = np.zeros((len(rows), T), np.uint8)
        for i, (t, m) in enumerate(rows):
            tokens[i, :len(t)], mask[i, :len(m)] = t, m
            text[i, :len(t)] = (np.array(m) == 0) & (np.array(t) < first_image)
        return tokens, mask, text, np.stack(tiles), np.concatenate(gather), np.array(targets, np.int64)


_MAKER = None


def _init(model_dir, fonts_dir, options):
    global _MAKER
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _MAKER = Maker(model_dir, fonts_dir, **options)


def _batch(args):
    return _MAKER.batch(*args)


class Stream:
    """Synthetic batches made by worker processes ahead of the training loop."""

    def __init__(self, model_dir, fonts_dir, token_budget, workers, seed, **options):
        """options: Maker's keyword arguments."""
        import multiprocessing as mp
        self.pool = mp.get_context("spawn").Pool(workers, _init, (model_dir, fonts_dir, options))
        self.it = self.pool.imap(_batch, ((seed * 1_000_003 + k, token_budget) for k in range(10 ** 9)),
                                 chunksize=1)

    def next(self):
        return next(self.it)

    def close(self):
        self.pool.terminate()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fonts", required=True)
    ap.add_argument("--model", default="models/surf-tiny")
    ap.add_argument("--out", required=True)
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sparse", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    m = Maker(a.model, a.fonts, sparse=a.sparse)
    for k in range(a.pages):
        rng = random.Random(a.seed * 1000 + k)
        p = m.page(rng, rng.choice(VIEWPORTS))
        from PIL import ImageDraw
        shown = p.img.copy()
        d = ImageDraw.Draw(shown)
        for desc, (x, y, w, h) in p.elements:
            d.rectangle((x, y, x + w, y + h), outline=(255, 0, 0))
        shown.save(os.path.join(a.out, f"page{k}.png"))
        p.img.save(os.path.join(a.out, f"page{k}_clean.png"))
        json.dump(p.elements, open(os.path.join(a.out, f"page{k}.json"), "w"), indent=1)
        print(f"page{k}: {p.W}x{p.H}, {len(p.elements)} elements")


if __name__ == "__main__":
    main()
