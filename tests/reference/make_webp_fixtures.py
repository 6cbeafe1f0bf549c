#!/usr/bin/env python3
"""WebP fixtures for surf's image decoding (model/vision/image_opencv.cpp), made and decoded by Pillow.

Writes tests/fixtures/image/webp/: WebP files encoded by Pillow from sources in tests/fixtures/image/sources
(lossless RGB, lossy RGB, lossless RGBA), and webp.json: per file PIL's
`Image.open(path).convert("RGB")` size, CRC-32 (zlib) of its bytes and sampled pixels, and for RGBA files vLLM's
loader result (alpha composited onto white). Lossy files also get the full RGB bytes (*.rgb): libwebp's lossy
decoders of different versions may round the colour conversion differently.

Run from the repo root: python3 tests/reference/make_webp_fixtures.py
"""
import json
import os
import zlib

import numpy as np
from PIL import Image

SRC = "tests/fixtures/image/sources"
OUT = "tests/fixtures/image/webp"
FILES = [  # (output, source, Pillow save options)
    ("lossless_rgb.webp", "noise_rgb.png", {"lossless": True}),
    ("lossy_rgb.webp", "gradient_rgb.png", {"quality": 80}),
    ("lossless_rgba.webp", "rgba.png", {"lossless": True}),
]


def crc32(arr):
    return f"{zlib.crc32(np.ascontiguousarray(arr, dtype=np.uint8).tobytes()):08x}"


def samples(arr, rng, n=40):
    h, w = arr.shape[:2]
    pts = [(0, 0), (w - 1, h - 1)] + [(int(rng.integers(0, w)), int(rng.integers(0, h))) for _ in range(n)]
    return [[x, y, *[int(v) for v in arr[y, x]]] for x, y in pts]


def main():
    rng = np.random.default_rng(7)
    os.makedirs(OUT, exist_ok=True)
    out = {}
    for name, source, options in FILES:
        path = os.path.join(OUT, name)
        Image.open(os.path.join(SRC, source)).save(path, "WEBP", **options)
        im = Image.open(path)
        rgb = np.asarray(im.convert("RGB"))
        entry = {"mode": im.mode, "width": rgb.shape[1], "height": rgb.shape[0], "crc32": crc32(rgb),
                 "samples": samples(rgb, rng), "lossless": bool(options.get("lossless"))}
        if im.mode == "RGBA":
            white = Image.new("RGB", im.size, (255, 255, 255))
            white.paste(im, mask=im.split()[3])
            entry["crc32_on_white"] = crc32(np.asarray(white))
        if not entry["lossless"]:
            raw = name[:-5] + ".rgb"
            with open(os.path.join(OUT, raw), "wb") as f:
                f.write(rgb.tobytes())
            entry["raw_rgb"] = raw
        out[name] = entry
    with open(os.path.join(OUT, "webp.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
