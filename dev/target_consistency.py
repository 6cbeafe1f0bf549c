"""Diagnostic, at a random initialisation of surf-tiny's layout (640-px tile, rows at 30x the text RMS): does
the image row of the token that holds the target point the same way in every image? For each image, that row
minus the image's median row, normalised; printed is the mean cosine over pairs of images, for a white square
on black, a square in random colours on random backgrounds, and synthetic pages of one component. A fixed
query finds a target whose direction is the same everywhere from the first step.

  python3 dev/target_consistency.py --fonts FONTS_DIR [--saliency]
"""
import argparse
import json
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from read_probe import small_model_dir  # noqa: E402
from train.surf_tiny import spec, synth  # noqa: E402
from train.surf_tiny.model import SurfTiny, init_weights, saliency_init  # noqa: E402
from train.surf_tiny.train import normalise  # noqa: E402

TILE, SQUARE, IMAGES = 640, 80, 24
SIDE = TILE // 32


def consistency(model, images, centres):
    """Mean pairwise cosine of (target token's row − median row) over the images; centres on the 0-1000 grid."""
    with torch.no_grad():
        rows = model.image_rows(normalise(torch.from_numpy(np.stack(images)), "cpu")).float()
    rows = rows.view(len(images), SIDE * SIDE, -1)
    dirs = []
    for k, (cx, cy) in enumerate(centres):
        token = min(SIDE - 1, cy * SIDE // 1000) * SIDE + min(SIDE - 1, cx * SIDE // 1000)
        v = rows[k, token] - rows[k].median(0).values
        dirs.append(v / v.norm())
    v = torch.stack(dirs)
    n = len(dirs)
    return float(((v @ v.T).sum() - n) / (n * n - n))


def squares(rng, colours):
    images, centres = [], []
    for _ in range(IMAGES):
        img = np.zeros((TILE, TILE, 3), np.uint8)
        colour = np.array([255, 255, 255])
        if colours:  # a random background, the square at least 240 away from it (L1)
            back = np.array([rng.randrange(256) for _ in range(3)])
            img[:] = back
            while True:
                colour = np.array([rng.randrange(256) for _ in range(3)])
                if np.abs(colour - back).sum() >= 240:
                    break
        x, y = rng.randrange(0, TILE - SQUARE), rng.randrange(0, TILE - SQUARE)
        img[y:y + SQUARE, x:x + SQUARE] = colour
        images.append(img)
        centres.append(((x + SQUARE // 2) * 1000 // TILE, (y + SQUARE // 2) * 1000 // TILE))
    return images, centres


def pages(rng, maker):
    images, centres = [], []
    while len(images) < IMAGES:
        page = synth.Page(rng, maker.fonts, *rng.choice([(400, 300), (320, 240), (480, 360)])).paint_sparse(1)
        if not page.elements:
            continue
        tiles, _ = spec.ga.tile_image(page.img, TILE, spec.SIZES["max_tiles"], True)
        images.append(np.asarray(tiles[0], np.uint8))
        centres.append(maker.sequences(page)[0][2])
    return images, centres


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fonts", required=True)
    ap.add_argument("--saliency", action="store_true", help="model.saliency_init first")
    a = ap.parse_args()
    mdir = small_model_dir(TILE)
    model = SurfTiny(json.load(open(os.path.join(mdir, "config.json"))))
    init_weights(model, 1)
    model.mlp1.fc2.weight.data.mul_(30)
    if a.saliency:
        saliency_init(model)
    model.eval()
    rng = random.Random(5)
    maker = synth.Maker(mdir, a.fonts, sparse=True)
    print(f"white square on black: {consistency(model, *squares(rng, False)):.3f}")
    print(f"square in random colours: {consistency(model, *squares(rng, True)):.3f}")
    print(f"one-component pages: {consistency(model, *pages(rng, maker)):.3f}")


if __name__ == "__main__":
    main()
