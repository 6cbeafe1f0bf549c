"""Diagnostic: can surf-tiny learn to point at a lone button whose label never changes? Only the image tells
where it is, so a falling loss means the vision pathway reaches the reply. Runs on the CPU in minutes.

  python3 dev/vision_probe.py --model MODEL_DIR --init WEIGHTS_DIR --fonts FONTS_DIR [--steps 60]
"""
import argparse
import json
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train.surf_tiny import synth  # noqa: E402
from train.surf_tiny.model import SurfTiny, init_weights  # noqa: E402
from train.surf_tiny.train import normalise  # noqa: E402


def batch(maker, rng, n, size=(640, 640)):
    items = []
    for _ in range(n):
        page = synth.Page(rng, maker.fonts, *size)
        x, y = rng.randrange(0, size[0] - 120), rng.randrange(0, size[1] - 50)
        page.button(x, y, "OK", filled=True)
        items.append((page.img, maker.sequences(page)[:1]))
    tokens, mask, _, tiles, index, _ = maker.collate(items)
    return (torch.from_numpy(tokens), torch.from_numpy(mask), normalise(torch.from_numpy(tiles), "cpu"),
            torch.from_numpy(index))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--init")
    ap.add_argument("--fonts", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--rebalance", action="store_true")
    ap.add_argument("--fresh-vision", action="store_true")
    ap.add_argument("--scale-weight", type=float, default=0.1)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = SurfTiny(json.load(open(os.path.join(a.model, "config.json"))))
    init_weights(model, 1)
    if a.init:
        from train.surf_tiny.export import load_into
        load_into(model, a.init, language_model_only=a.fresh_vision)
    maker0 = synth.Maker(a.model, a.fonts, per_page=1)
    if a.rebalance:
        model.rebalance(batch(maker0, random.Random(7), 4)[2])
    model.scale_weight = a.scale_weight
    model.train()
    maker = synth.Maker(a.model, a.fonts, per_page=1)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95))
    rng = random.Random(0)
    test = batch(maker, random.Random(99), a.n)
    for s in range(a.steps):
        tokens, mask, px, idx = batch(maker, rng, a.n)
        loss, reply, n = model(tokens, mask, px, idx)
        opt.zero_grad()
        loss.backward()
        g = {k: sum(float(p.grad.norm()) ** 2 for p in m.parameters() if p.grad is not None) ** 0.5
             for k, m in (("radio", model.radio), ("mlp1", model.mlp1), ("llm", model.llm))}
        for part in (model.radio, model.mlp1, model.llm):
            torch.nn.utils.clip_grad_norm_(part.parameters(), 1.0)
        opt.step()
        if s % 5 == 0 or s == a.steps - 1:
            with torch.no_grad():
                tl = float(model(*test[:2], test[2], test[3])[1])
            print(f"step {s} train {float(reply):.3f} scales " + " ".join(f"{float(x):.3g}" for x in model.last_scales) + f" test {tl:.3f} grad " + " ".join(f"{k} {v:.3g}" for k, v in g.items()), flush=True)


if __name__ == "__main__":
    main()
