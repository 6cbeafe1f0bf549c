#!/usr/bin/env python3
"""Reference fixtures for surf's image decoding and InternVL tiling (model/image*.cpp).

The reference is Pillow + torchvision, the stack vLLM uses for Nemotron-Nano-VL / Holotron
(vLLM `dynamic_preprocess` + `build_transform`, spec/holotron.md §5). Writes tests/fixtures/image/:

  sources/*.png|jpg     input images: synthetic (gradients, noise, RGBA, grey, grey+alpha, palette,
                        1-bit, 16-bit grey, JPEG) and headless-Chromium screenshots of local HTML
  grids.json            candidate-grid orders (CPython set order) and the chosen grid for 200 random
                        sizes, the spec's worked examples and exact-tie sizes
  decode.json           per source: PIL `convert("RGB")` size, CRC-32 (zlib) of its bytes, sampled pixels;
                        for RGBA sources also vLLM's loader result (alpha composited onto white)
  *.rgb                 full PIL-decoded RGB bytes of the JPEG sources (stb and libjpeg differ slightly)
  resize.json           Pillow BICUBIC resizes: CRC-32 (zlib) of the whole output + sampled pixels
  tiling.json           whole pipeline: plan, per-tile CRC-32 (zlib) of the uint8 tiles, sampled
                        ToTensor+Normalize floats per tile
  MANIFEST.md           versions, seed, file sizes

Run from the repo root: python3 tests/reference/make_image_fixtures.py [--screenshots]
Screenshots are re-taken only with --screenshots (or when missing), so re-running is reproducible.
"""
import argparse
import hashlib
import io
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import PIL
import torch
import torchvision
import torchvision.transforms as T
from PIL import Image

SEED = 20240611
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "image")
SRC = os.path.join(OUT, "sources")

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# ---- the reference pipeline (vLLM internvl.py / nemotron_vl.py, written out here) ----------------

def get_target_ratios(min_num, max_num):
    target_ratios = {(i, j)
                     for n in range(min_num, max_num + 1)
                     for i in range(1, n + 1)
                     for j in range(1, n + 1) if min_num <= i * j <= max_num}
    return sorted(target_ratios, key=lambda x: x[0] * x[1])


def find_closest_aspect_ratio(aspect_ratio, target_ratios, width, height, image_size):
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in target_ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif ratio_diff == best_ratio_diff:
            if area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
                best_ratio = ratio
    return best_ratio


def tied_ratios(aspect_ratio, target_ratios):
    """The distinct grid ratios tied for closest (more than one grid when the tie rule matters)."""
    diffs = [(abs(aspect_ratio - r[0] / r[1]), r) for r in target_ratios]
    best = min(d for d, _ in diffs)
    tied = [r for d, r in diffs if d == best]
    return tuple(sorted({r[0] / r[1] for r in tied})) if len(tied) > 1 else None


def plan(width, height, image_size=512, min_num=1, max_num=12, use_thumbnail=True):
    ratios = get_target_ratios(min_num, max_num)
    cols, rows = find_closest_aspect_ratio(width / height, ratios, width, height, image_size)
    blocks = cols * rows
    n_tiles = blocks + (1 if use_thumbnail and blocks != 1 else 0)
    return cols, rows, n_tiles


def dynamic_preprocess(image, image_size=512, min_num=1, max_num=12, use_thumbnail=True, resize=None):
    resize = resize or (lambda im, size: im.resize(size))  # default resample: BICUBIC
    orig_width, orig_height = image.size
    ratios = get_target_ratios(min_num, max_num)
    cols, rows = find_closest_aspect_ratio(orig_width / orig_height, ratios, orig_width, orig_height,
                                           image_size)
    target_width, target_height = image_size * cols, image_size * rows
    blocks = cols * rows
    resized_img = resize(image, (target_width, target_height))
    processed = []
    for i in range(blocks):
        box = ((i % (target_width // image_size)) * image_size,
               (i // (target_width // image_size)) * image_size,
               ((i % (target_width // image_size)) + 1) * image_size,
               ((i // (target_width // image_size)) + 1) * image_size)
        processed.append(resized_img.crop(box))
    if use_thumbnail and len(processed) != 1:
        processed.append(resize(image, (image_size, image_size)))
    return (cols, rows), processed


def resize_h_first(image, size):
    """Pillow <= 12.1's pass order (always horizontal, then vertical), composed from two one-axis
    resizes of the installed Pillow; checked equal to real Pillow 12.1.0 on 793 random size pairs."""
    w, h = size
    if w != image.width and h != image.height:
        return image.resize((w, image.height)).resize((w, h))
    return image.resize((w, h))


def build_transform(input_size, mean, std):
    return T.Compose([
        T.Lambda(lambda img: img.convert("RGB") if img.mode != "RGB" else img),
        T.Resize((input_size, input_size), interpolation=T.InterpolationMode.BICUBIC),
        T.ToTensor(),
        T.Normalize(mean=mean, std=std),
    ])


# ---- sources ----------------------------------------------------------------------------------

def make_synthetic(rng):
    os.makedirs(SRC, exist_ok=True)
    yy, xx = np.mgrid[0:200, 0:300].astype(np.float64)
    grad = np.stack([xx / 299 * 255, yy / 199 * 255, (xx + yy) / 498 * 255], -1)
    grad[::17, :, :] = 255 - grad[::17, :, :]  # thin lines: sharp edges exercise ringing and clipping
    grad[:, 150:153, :] = 0
    Image.fromarray(grad.round().astype(np.uint8), "RGB").save(os.path.join(SRC, "gradient_rgb.png"))

    Image.fromarray(rng.integers(0, 256, (61, 97, 3), dtype=np.uint8), "RGB").save(
        os.path.join(SRC, "noise_rgb.png"))

    rgba = rng.integers(0, 256, (90, 160, 4), dtype=np.uint8)
    rgba[:, :80, 3] = 0  # fully transparent half: convert("RGB") keeps the colour under it
    Image.fromarray(rgba, "RGBA").save(os.path.join(SRC, "rgba.png"))

    yy, xx = np.mgrid[0:77, 0:123]
    grey = ((xx * 2 + yy * 3) % 256).astype(np.uint8)
    grey[30:40, :] = rng.integers(0, 256, (10, 123), dtype=np.uint8)
    Image.fromarray(grey, "L").save(os.path.join(SRC, "grey.png"))

    la = np.stack([grey[:48, :64], rng.integers(0, 256, (48, 64), dtype=np.uint8)], -1)
    Image.fromarray(la, "LA").save(os.path.join(SRC, "grey_alpha.png"))

    pal = Image.fromarray(rng.integers(0, 16, (100, 150), dtype=np.uint8), "P")
    pal.putpalette(rng.integers(0, 256, 16 * 3, dtype=np.uint8).tolist())
    pal.save(os.path.join(SRC, "palette.png"), transparency=3)  # tRNS entry: stb adds alpha, dropped

    bits = (rng.random((40, 50)) > 0.5)
    Image.fromarray(bits).convert("1").save(os.path.join(SRC, "bilevel.png"))

    g16 = (rng.integers(0, 600, (30, 40))).astype(np.uint16)  # values above 255 clip in PIL
    Image.fromarray(g16).save(os.path.join(SRC, "grey16.png"))

    yy, xx = np.mgrid[0:90, 0:120].astype(np.float64)
    photo = np.stack([128 + 100 * np.sin(xx / 9), 128 + 100 * np.cos(yy / 7), (xx * yy) % 256], -1)
    photo += rng.normal(0, 12, photo.shape)
    photo = np.clip(photo, 0, 255).round().astype(np.uint8)
    Image.fromarray(photo, "RGB").save(os.path.join(SRC, "photo.jpg"), quality=90)
    Image.fromarray(photo[..., 0], "L").save(os.path.join(SRC, "grey.jpg"), quality=85)
    # Progressive, optimised Huffman tables, 4:4:4, restart markers: several scans and DHT segments.
    Image.fromarray(photo[:64, :80], "RGB").save(os.path.join(SRC, "progressive.jpg"), quality=80,
                                                 progressive=True, optimize=True, subsampling=0,
                                                 restart_marker_blocks=4)


SCREEN_HTML = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font-family: sans-serif; margin: 16px; background: {bg}; color: #222; }}
h1 {{ font-size: 28px; color: #1a4d8f; }} .small {{ font-size: 11px; color: #666; }}
.bar {{ height: 40px; background: linear-gradient(90deg, #e63946, #f1faee, #457b9d, #1d3557); }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #999; padding: 4px 8px; }}
button {{ background: #2a9d8f; color: white; border: 0; padding: 8px 14px; border-radius: 6px; }}
</style></head><body>
<h1>{title}</h1><div class="bar"></div>
<p>Flights from <b>Paris</b> to <i>New York</i>, departing 12 March. Prices include taxes.
The quick brown fox jumps over the lazy dog 0123456789.</p>
<form><input type="text" value="search query" size="24"> <button type="button">Search</button>
<label><input type="checkbox" checked> Direct only</label></form>
<table><tr><th>Airline</th><th>Depart</th><th>Price</th></tr>
<tr><td>Air One</td><td>08:15</td><td>$412</td></tr><tr><td>Blue Sky</td><td>13:40</td><td>$389</td></tr>
<tr><td>Coastal</td><td>19:05</td><td>$455</td></tr></table>
<svg width="220" height="90"><circle cx="45" cy="45" r="38" fill="#f4a261"/>
<rect x="95" y="10" width="110" height="70" fill="none" stroke="#264653" stroke-width="5"/>
<line x1="95" y1="80" x2="205" y2="10" stroke="#e76f51" stroke-width="2"/></svg>
<p class="small">Small print: fares are subject to availability. Ünïcödé — ✓ 日本語</p>
</body></html>"""

SCREENSHOTS = [  # (name, width, height, background, extra chromium flags)
    ("screen_1280x720.png", 1280, 720, "#ffffff", []),
    ("screen_390x844.png", 390, 844, "#fdf6e3", []),
    ("screen_1024x768_rgba.png", 1024, 768, "transparent", ["--default-background-color=00000000"]),
]


def take_screenshots(force):
    for name, w, h, bg, flags in SCREENSHOTS:
        path = os.path.join(SRC, name)
        if os.path.exists(path) and not force:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            html = os.path.join(tmp, "page.html")
            with open(html, "w", encoding="utf-8") as f:
                f.write(SCREEN_HTML.format(bg=bg, title=f"surf test page {w}x{h}"))
            subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--user-data-dir={tmp}/profile", f"--screenshot={path}",
                            f"--window-size={w},{h}", *flags, "file://" + html],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        im = Image.open(path)
        if im.size != (w, h):
            sys.exit(f"screenshot {name} has size {im.size}, expected {(w, h)}")


# ---- expectations ------------------------------------------------------------------------------

def sample_pixels(arr, rng, n):
    h, w = arr.shape[:2]
    pts = [(0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1)]
    pts += [(int(rng.integers(0, w)), int(rng.integers(0, h))) for _ in range(n)]
    return [[x, y, *[int(v) for v in arr[y, x]]] for x, y in pts]


def crc32(arr):
    return f"{zlib.crc32(np.ascontiguousarray(arr, dtype=np.uint8).tobytes()):08x}"


def grids_fixture(rng):
    orders = {}
    for lo, hi in [(1, m) for m in range(1, 41)] + [(2, 12), (3, 20), (4, 9), (6, 6), (1, 64)]:
        orders[f"{lo},{hi}"] = [list(r) for r in get_target_ratios(lo, hi)]
    cases = []

    def add(w, h, kind, image_size=512, max_num=12, use_thumbnail=True):
        cols, rows, n_tiles = plan(w, h, image_size, 1, max_num, use_thumbnail)
        cases.append({"width": w, "height": h, "kind": kind, "tile_size": image_size, "max_tiles": max_num,
                      "use_thumbnail": use_thumbnail, "cols": cols, "rows": rows, "n_tiles": n_tiles})

    for _ in range(100):  # uniform sizes
        add(int(rng.integers(1, 4001)), int(rng.integers(1, 4001)), "random")
    for _ in range(100):  # log-uniform sizes: many small and extreme aspect ratios
        w = int(round(np.exp(rng.uniform(0, np.log(4000)))))
        h = int(round(np.exp(rng.uniform(0, np.log(4000)))))
        add(max(1, w), max(1, h), "random")
    for w, h in [(1920, 1080), (1366, 768), (2560, 1440), (3840, 2160), (1280, 720), (1440, 900), (1024, 768),
                 (800, 600), (390, 844), (1080, 1920), (512, 512), (1, 1), (4000, 1), (1, 4000)]:
        add(w, h, "spec")
    # Sizes whose aspect ratio lies exactly between the two best grids: the tie rule decides.
    ratios = get_target_ratios(1, 12)
    picked = set()
    for w in range(1, 4001):
        for h in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 20, 24, 40, 48, 80, 100, 200, 400, 800, 1000, 1600, 2000):
            tied = tied_ratios(w / h, ratios)
            if tied is None:
                continue
            key = (tied, plan(w, h)[:2])  # one size per tied set and outcome (small vs large image)
            if key not in picked:
                picked.add(key)
                add(w, h, "tie")
    for _ in range(20):  # other configurations: the config must flow through
        add(int(rng.integers(1, 4001)), int(rng.integers(1, 4001)), "config", 448, 6, False)
    return {"orders": orders, "cases": cases}


def decode_fixture(rng):
    out = {}
    for name in sorted(os.listdir(SRC)):
        im = Image.open(os.path.join(SRC, name))
        mode = im.mode
        rgb = np.asarray(im.convert("RGB"))
        entry = {"mode": mode, "width": rgb.shape[1], "height": rgb.shape[0], "crc32": crc32(rgb),
                 "samples": sample_pixels(rgb, rng, 60)}
        if mode == "RGBA":  # vLLM's loader: convert_image_mode → rgba_to_rgb (paste onto white)
            white = Image.new("RGB", im.size, (255, 255, 255))
            white.paste(im, mask=im.split()[3])
            entry["crc32_on_white"] = crc32(np.asarray(white))
            entry["samples_on_white"] = sample_pixels(np.asarray(white), rng, 60)
        if name.endswith(".jpg"):
            raw = name[:-4] + ".rgb"
            with open(os.path.join(OUT, raw), "wb") as f:
                f.write(rgb.tobytes())
            entry["raw_rgb"] = raw
        out[name] = entry
    return out


RESIZES = [  # (source, width, height): up, down, one-axis, extreme
    ("noise_rgb.png", 512, 512), ("noise_rgb.png", 1024, 512), ("noise_rgb.png", 31, 17),
    ("noise_rgb.png", 97, 200), ("noise_rgb.png", 300, 61), ("noise_rgb.png", 1, 1),
    ("gradient_rgb.png", 1536, 1024), ("gradient_rgb.png", 512, 512), ("gradient_rgb.png", 77, 45),
    ("gradient_rgb.png", 299, 201), ("gradient_rgb.png", 3, 500),
    ("grey.png", 512, 1024), ("rgba.png", 2048, 1024), ("palette.png", 512, 512),
    ("screen_1280x720.png", 1024, 512), ("screen_1280x720.png", 512, 512), ("screen_1280x720.png", 333, 187),
    ("screen_390x844.png", 512, 1024), ("screen_1024x768_rgba.png", 2048, 1536),
    # Pillow 13 pass-order boundary: vertical first iff out_h < in_h and in_h - out_h > 2 (in_w - out_w).
    ("gradient_rgb.png", 290, 180), ("gradient_rgb.png", 290, 179), ("gradient_rgb.png", 400, 150),
    ("noise_rgb.png", 95, 20), ("noise_rgb.png", 60, 30), ("screen_1280x720.png", 1200, 400),
    ("screen_390x844.png", 512, 512), ("screen_1280x720.png", 2048, 512),
]


def resize_fixture(rng):
    out = []
    for name, w, h in RESIZES:
        rgb = Image.open(os.path.join(SRC, name)).convert("RGB")
        res = np.asarray(rgb.resize((w, h), Image.Resampling.BICUBIC))
        legacy = np.asarray(resize_h_first(rgb, (w, h)))
        out.append({"source": name, "width": w, "height": h, "crc32": crc32(res), "crc32_h_first": crc32(legacy),
                    "samples": sample_pixels(res, rng, 200)})
    return out


TILINGS = [  # (source, config)
    ("screen_1280x720.png", {}), ("screen_390x844.png", {}), ("screen_1024x768_rgba.png", {}),
    ("gradient_rgb.png", {}), ("noise_rgb.png", {}), ("grey.png", {}), ("rgba.png", {}),
    ("palette.png", {}), ("grey_alpha.png", {}), ("bilevel.png", {}), ("grey16.png", {}),
    ("photo.jpg", {}), ("grey.jpg", {}), ("progressive.jpg", {}),
    ("screen_1280x720.png", {"tile_size": 448, "max_tiles": 6, "use_thumbnail": False,
                             "norm_mean": IMAGENET_MEAN, "norm_std": IMAGENET_STD}),
    ("gradient_rgb.png", {"tile_size": 256, "max_tiles": 40, "use_thumbnail": True}),
]


def tiling_fixture(rng):
    out = []
    for name, cfg in TILINGS:
        tile = cfg.get("tile_size", 512)
        max_num = cfg.get("max_tiles", 12)
        thumb = cfg.get("use_thumbnail", True)
        mean = cfg.get("norm_mean", CLIP_MEAN)
        std = cfg.get("norm_std", CLIP_STD)
        # Load like vLLM's image loader: convert("RGB") right after decoding.
        image = Image.open(os.path.join(SRC, name)).convert("RGB")
        (cols, rows), tiles = dynamic_preprocess(image, tile, 1, max_num, thumb)
        transform = build_transform(tile, mean, std)
        pixel_values = torch.stack([transform(t) for t in tiles])  # [n, 3, tile, tile] f32
        assert pixel_values.dtype == torch.float32
        tile_hashes = [crc32(np.asarray(t)) for t in tiles]
        _, legacy = dynamic_preprocess(image, tile, 1, max_num, thumb, resize=resize_h_first)
        legacy_hashes = [crc32(np.asarray(t)) for t in legacy]
        samples = []
        pv = pixel_values.numpy()
        for k in range(pv.shape[0]):
            for _ in range(40):
                c, y, x = int(rng.integers(0, 3)), int(rng.integers(0, tile)), int(rng.integers(0, tile))
                samples.append([k, c, y, x, float(pv[k, c, y, x])])
        out.append({"source": name, "config": {"tile_size": tile, "max_tiles": max_num, "use_thumbnail": thumb,
                                               "norm_mean": list(mean), "norm_std": list(std)},
                    "cols": cols, "rows": rows, "n_tiles": len(tiles), "tile_crc32": tile_hashes,
                    "tile_crc32_h_first": legacy_hashes,
                    "float_sum": float(pv.astype(np.float64).sum()), "samples": samples})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--screenshots", action="store_true", help="re-take the Chromium screenshots")
    args = ap.parse_args()
    if int(PIL.__version__.split(".")[0]) < 13:
        sys.exit("needs Pillow >= 13: the expected 'crc32' values follow Pillow 13's resize pass order")
    rng = np.random.default_rng(SEED)
    random.seed(SEED)
    os.makedirs(OUT, exist_ok=True)
    make_synthetic(rng)
    take_screenshots(args.screenshots)

    def dump(name, obj):
        with open(os.path.join(OUT, name), "w") as f:
            json.dump(obj, f, separators=(",", ":"))
            f.write("\n")

    dump("grids.json", grids_fixture(rng))
    dump("decode.json", decode_fixture(rng))
    dump("resize.json", resize_fixture(rng))
    dump("tiling.json", tiling_fixture(rng))

    files = sorted(os.path.relpath(os.path.join(d, f), OUT) for d, _, fs in os.walk(OUT) for f in fs
                   if f != "MANIFEST.md")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in files)
    chromium = subprocess.run(["chromium", "--version"], capture_output=True, text=True).stdout.strip()
    with open(os.path.join(OUT, "MANIFEST.md"), "w") as f:
        f.write("# Image fixtures\n\nGenerated by `tests/reference/make_image_fixtures.py` (seed "
                f"{SEED}).\n\n- Python {platform.python_version()}, Pillow {PIL.__version__}, "
                f"numpy {np.__version__}, torch {torch.__version__}, torchvision {torchvision.__version__}\n"
                f"- Screenshots: {chromium}\n"
                "- `crc32`: the installed Pillow's resize; `crc32_h_first`: Pillow <= 12.1's pass order "
                "(horizontal, then vertical), composed from two one-axis resizes\n"
                "- Hash: CRC-32 (zlib) over the row-major RGB bytes\n\n"
                "| file | bytes | sha256 (first 16) |\n|---|---|---|\n")
        for name in files:
            data = open(os.path.join(OUT, name), "rb").read()
            f.write(f"| {name} | {len(data)} | {hashlib.sha256(data).hexdigest()[:16]} |\n")
        f.write(f"\nTotal: {total} bytes\n")
    print(f"wrote {len(files)} files, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
