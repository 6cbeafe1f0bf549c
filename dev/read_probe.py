"""Diagnostic: does a language model start reading the image when it trains on pointing? surf-tiny's layout
shrunk to a small tile (fast on the CPU), trained on synthetic pages of 1-3 components; every few steps the
reply loss on fixed test pages is printed with the real images and with every image mirrored both ways
(turned half a turn, so that reading x or y shows). A gap between the two means the replies depend on the image.

  python3 dev/read_probe.py --fonts FONTS_DIR [--init MODEL_DIR] [--tile 128] [--steps 400]

--init takes the language model from trained weights (the vision tower starts new), to compare with a model
that starts from nothing.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train.surf_tiny import spec, synth  # noqa: E402
from train.surf_tiny.model import SurfTiny, highpass_patches, init_weights, saliency_init  # noqa: E402
from train.surf_tiny.train import normalise  # noqa: E402


def small_model_dir(tile):
    spec.SIZES["tile"] = tile
    spec.SIZES["vit_max_img"] = tile
    src = os.path.join(spec.REPO, "models", "surf-tiny")
    ids = spec.token_ids(json.load(open(os.path.join(src, "tokenizer.json"))))
    out = tempfile.mkdtemp(prefix="read_probe_")
    json.dump(spec.configs(ids)[0], open(os.path.join(out, "config.json"), "w"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), out)
    return out


def batch(maker, rng, pages, components=0, viewports=None):
    items = []
    for _ in range(pages):
        size = rng.choice(viewports or synth.VIEWPORTS)
        page = maker.page(rng, size)
        while components and len(page.elements) != components:
            page = synth.Page(rng, maker.fonts, *size).paint_sparse(components)
        items.append((page.img, maker.sequences(page)))
    tokens, mask, _, tiles, index, points = maker.collate(items)
    return tuple(torch.from_numpy(x).to(DEVICE) for x in (tokens, mask, tiles, index, points))


def reply_loss(model, tokens, mask, tiles, index):
    _, loss, _ = model(tokens, mask, normalise(tiles, DEVICE), index)
    return loss


DEVICE = "cpu"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fonts", required=True)
    ap.add_argument("--init")
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--point-weight", type=float, default=0.0)
    ap.add_argument("--components", type=int, default=0, help="exactly this many components per page (0: 1-3)")
    ap.add_argument("--rows-scale", type=float, default=1.0,
                    help="projector rows at this multiple of the text embeddings' RMS (from the start)")
    ap.add_argument("--every", type=int, default=25)
    ap.add_argument("--highpass", type=float, default=0.0,
                    help="this share of the patch filters sums to zero (model.highpass_patches)")
    ap.add_argument("--saliency", action="store_true", help="model.saliency_init (elements share a direction)")
    ap.add_argument("--viewports", default="", help="WxH,... the pages' sizes (default synth.VIEWPORTS)")
    ap.add_argument("--constant-prompt", action="store_true",
                    help="every localizer prompt asks for \"the element\" at one size (no description, no viewport)")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    viewports = [tuple(int(v) for v in s.split("x")) for s in a.viewports.split(",")] if a.viewports else None
    torch.manual_seed(0)
    model_dir = small_model_dir(a.tile)
    model = SurfTiny(json.load(open(os.path.join(model_dir, "config.json"))))
    init_weights(model, 1)
    model.mlp1.fc2.weight.data.mul_(a.rows_scale)
    highpass_patches(model, a.highpass)
    if a.saliency:
        saliency_init(model)
    if a.init:
        from train.surf_tiny.export import load_into
        load_into(model, a.init, language_model_only=True)
    model.to(DEVICE)
    maker = synth.Maker(model_dir, a.fonts, per_page=3, sparse=True)
    if a.constant_prompt:
        parts = maker.parts
        maker.parts = lambda width, height, element: parts(1280, 720, "the element")
    test = batch(maker, random.Random(99), 16, a.components, viewports)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.05)
    rng = random.Random(0)
    for s in range(a.steps + 1):
        if s % a.every == 0:
            model.eval()
            with torch.no_grad():
                own = float(reply_loss(model, *test[:4]))
                mirrored = float(reply_loss(model, test[0], test[1], test[2].flip((1, 2)), test[3]))
            model.train()
            print(f"step {s} test loss {own:.3f} mirrored {mirrored:.3f} gap {mirrored - own:+.3f} pointer "
                  f"{model.last_pointer}", flush=True)
        if s == a.steps:
            break
        tokens, mask, tiles, index, points = batch(maker, rng, a.pages, a.components, viewports)
        loss = model(tokens, mask, normalise(tiles, DEVICE), index, points=points, point_weight=a.point_weight)[0]
        opt.zero_grad()
        loss.backward()
        for part in (model.radio, model.mlp1, model.llm, model.point_head):
            torch.nn.utils.clip_grad_norm_(part.parameters(), 1.0)
        opt.step()
    shutil.rmtree(model_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
