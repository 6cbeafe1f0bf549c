"""Diagnostic: where in surf-tiny does the place of an element survive? surf-tiny's layout at a small tile (fast on
the CPU), from a fresh initialisation, on synthetic pages with one component. A linear head per probed layer scores
each image token's hidden state; the cross-entropy of picking the token whose patches hold the component (chance:
log of the image tokens, 2.77 at a 128-px tile) is printed per layer. The model trains with the heads.

  python3 dev/layer_probe.py --fonts FONTS_DIR [--tile 128] [--steps 200] [--rows-only]

--rows-only probes the projector's rows alone (the vision tower and projector train, no language model).
"""
import argparse
import json
import os
import random
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import read_probe  # noqa: E402
from train.surf_tiny import synth  # noqa: E402
from train.surf_tiny.model import SurfTiny, init_weights  # noqa: E402
from train.surf_tiny.train import normalise  # noqa: E402


def one_component_page(maker, rng):
    size = rng.choice(synth.VIEWPORTS)
    for _ in range(10):
        page = synth.Page(rng, maker.fonts, *size).paint_sparse(1)
        if page.elements:
            return page
    return page


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fonts", required=True)
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--pages", type=int, default=16)
    ap.add_argument("--rows-only", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    model_dir = read_probe.small_model_dir(a.tile)
    model = SurfTiny(json.load(open(os.path.join(model_dir, "config.json"))))
    init_weights(model, 1)
    maker = synth.Maker(model_dir, a.fonts, per_page=1)
    hidden = model.config["llm_config"]["hidden_size"]
    layers = [0] if a.rows_only else sorted({0, 1, 4, 8, len(model.llm.model.layers)})
    heads = torch.nn.ModuleList([torch.nn.Linear(hidden, 1) for _ in layers])
    parts = [model.radio, model.mlp1, heads] + ([] if a.rows_only else [model.llm])
    opt = torch.optim.AdamW([p for part in parts for p in part.parameters()], lr=1e-3)
    rng = random.Random(0)
    for s in range(a.steps):
        items = []
        for _ in range(a.pages):
            page = one_component_page(maker, rng)
            items.append((page.img, maker.sequences(page)))
        tokens, _, _, tiles, index, targets = (torch.from_numpy(x) for x in maker.collate(items))
        if a.rows_only:
            states = [model.image_rows(normalise(tiles, "cpu"))[index]]
        else:
            is_image = tokens == model.image_id
            emb = model.embed(tokens, normalise(tiles, "cpu"), index)
            out = model.llm.model(inputs_embeds=emb, use_cache=False, output_hidden_states=True)
            states = [out.hidden_states[k][is_image] for k in layers]
        losses = [F.cross_entropy(head(h.reshape(tokens.shape[0], -1, hidden))[..., 0], targets)
                  for head, h in zip(heads, states)]
        opt.zero_grad()
        sum(losses).backward()
        opt.step()
        if s % 10 == 0:
            names = ["rows"] if a.rows_only else [f"layer {k}" for k in layers]
            print(f"step {s} " + "  ".join(f"{n} {float(l.detach()):.2f}" for n, l in zip(names, losses)), flush=True)


if __name__ == "__main__":
    main()
