#!/usr/bin/env python3
"""surf-tiny task generator: writes self-contained HTML task pages and a tasks.jsonl in surf's eval format.

    python3 train/tasks/generate.py --split train|eval --seed S --count N --out DIR [--families a,b,...]

--count is the number of tasks per family. Output is deterministic given (split, seed, count, families).
Each task's random stream is seeded by sha256("<split>|<seed>|<family>|<n>"), so train and eval seeds never
coincide; layouts (frames and component variants) and English phrasings are split into disjoint train and
eval subsets (see README.md).
"""
import argparse
import hashlib
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fam_click  # noqa: E402
import fam_forms  # noqa: E402
import fam_nav  # noqa: E402
import fam_qa  # noqa: E402
import frames  # noqa: E402
import novel  # noqa: E402
import page  # noqa: E402
import phrasing  # noqa: E402
from themes import Theme  # noqa: E402

FAMILIES = {
    "click_button": fam_click.build_click_button,
    "click_link": fam_click.build_click_link,
    "click_tab": fam_click.build_click_tab,
    "click_icon": fam_click.build_click_icon,
    "type_submit": fam_forms.build_type_submit,
    "checkbox": fam_forms.build_checkbox,
    "radio": fam_forms.build_radio,
    "dropdown": fam_forms.build_dropdown,
    "listbox": fam_forms.build_listbox,
    "login": fam_forms.build_login,
    "search_open": fam_nav.build_search_open,
    "menu_walk": fam_nav.build_menu_walk,
    "table_page": fam_nav.build_table_page,
    "qa_price": fam_qa.build_qa_price,
    "qa_date": fam_qa.build_qa_date,
    "qa_name": fam_qa.build_qa_name,
}

# (viewport, weight): desktop 1280x720 is the most common (~40%).
VIEWPORTS = [((1280, 720), 40), ((1366, 768), 8), ((1280, 800), 8), ((1024, 768), 8), ((800, 600), 8),
             ((360, 640), 8), ((480, 360), 7), ((400, 300), 7), ((320, 240), 6)]


def size_class(vp):
    w, h = vp
    if h <= 400:
        return "small"
    if w <= 480:
        return "phone"
    return "large"


def task_seed(split, seed, family, n):
    digest = hashlib.sha256(("%s|%s|%s|%d" % (split, seed, family, n)).encode()).hexdigest()
    return int(digest[:16], 16)


class Ctx:
    """Everything a family builder may use for one task: random stream, split, viewport, theme, frame,
    and `novel` (a novel.Novel that invents the task's labels, or None)."""

    def __init__(self, split, family, n, seed):
        self.split, self.family, self.n = split, family, n
        self.task_id = "%s-%s-%d" % (split, family, n)
        tseed = task_seed(split, seed, family, n)
        self.rng = random.Random(tseed)
        # Invented labels (train split only, about 40% of tasks); None means the words.py vocabularies.
        self.novel = novel.for_task(split, tseed)
        rng = self.rng
        self.vp = rng.choices([v for v, _ in VIEWPORTS], weights=[w for _, w in VIEWPORTS])[0]
        self.size = size_class(self.vp)
        pool = (frames.EVAL_FRAMES if split == "eval" else frames.TRAIN_FRAMES)[self.size]
        self.frame = rng.choice(pool)
        self.theme = Theme(rng, small=self.size == "small")
        self.site = frames.site_name(rng)
        self.lang = phrasing.pick_lang(rng)

    def content_width(self):
        """A rough width (CSS px) of the column that holds the component in this frame."""
        w = self.vp[0]
        est = {"article": min(740, w) - 40, "centered": min(560, w - 60), "modal": min(600, w - 60), "split": w // 2 - 60 if w > 800 else w - 60,
               "docs": w - 300 if w >= 900 else w - 40, "topnav": w - 320 if w >= 1000 else w - 40, "shop": w - 320 if w >= 1000 else w - 40,
               "sidebar": w - 300 if w > 800 else w - 60, "dashboard": w - 160 if w >= 700 else w - 60}
        return max(200, est.get(self.frame, w - 30))

    def variant(self, train_variants, eval_variants):
        """Picks a component variant from the split's own subset."""
        return self.rng.choice(eval_variants if self.split == "eval" else train_variants)

    def phrase(self, key, **vals):
        return phrasing.phrase(self.rng, self.split, key, self.lang, **vals)


def generate(split, seed, count, out, families):
    out = os.path.abspath(out)
    os.makedirs(os.path.join(out, "pages"), exist_ok=True)
    lines = []
    for fam in families:
        for n in range(count):
            ctx = Ctx(split, fam, n, seed)
            spec = FAMILIES[fam](ctx)
            html = page.assemble(ctx, spec)
            path = os.path.join(out, "pages", ctx.task_id + ".html")
            with open(path, "w", encoding="utf-8") as f:
                f.write(html)
            steps = spec.get("steps", 1) + 1
            lines.append({"id": ctx.task_id, "web_name": "surf-tiny", "ques": spec["ques"], "web": "file://" + path,
                          "family": fam, "max_steps": 2 * steps + 2 + spec.get("scroll_slack", 2),
                          "viewport": list(ctx.vp), "check": "(answer) => window.__surfTask.check(answer)",
                          "lang": ctx.lang, "frame": ctx.frame, "kind": spec["kind"]})
    with open(os.path.join(out, "tasks.jsonl"), "w", encoding="utf-8") as f:
        for rec in lines:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=["train", "eval"], required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=10, help="tasks per family")
    ap.add_argument("--out", required=True)
    ap.add_argument("--families", default="", help="comma-separated subset (default: all)")
    args = ap.parse_args(argv)
    fams = [f for f in args.families.split(",") if f] or list(FAMILIES)
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        ap.error("unknown families: %s (known: %s)" % (", ".join(bad), ", ".join(FAMILIES)))
    lines = generate(args.split, args.seed, args.count, args.out, fams)
    print("wrote %d tasks to %s" % (len(lines), os.path.abspath(args.out)))


if __name__ == "__main__":
    main()
