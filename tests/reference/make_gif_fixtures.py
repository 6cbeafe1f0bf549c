#!/usr/bin/env python3
"""GIF fixtures for surf's GIF decoding (model/vision/image_gif.cpp), decoded by Pillow.

Writes tests/fixtures/image/gif/: GIFs that Pillow encodes from tests/fixtures/image/sources (a 256-colour noise
image, interlaced and not, so the LZW codes reach 12 bits and the table resets; a greyscale one), and GIFs written
byte by byte here for what Pillow's writer never produces: a first frame smaller than the screen (with and
without a transparent index), a frame reaching past the screen, indices past the palette, no palette at all, a
local palette over the global one. gif.json holds, per file, PIL's `Image.open(path).convert("RGB")`: size,
CRC-32 (zlib) of its bytes and sampled pixels.

Run from the repo root: python3 tests/reference/make_gif_fixtures.py
"""
import io
import json
import os
import struct

import numpy as np
from PIL import Image

from make_webp_fixtures import crc32, samples  # the same fixture entries as the WebP files

SRC = "tests/fixtures/image/sources"
OUT = "tests/fixtures/image/gif"


def lzw(indices, min_size):
    """GIF's LZW: a clear code first, codes LSB-first, the width growing once the next free code needs another
    bit, a clear code when the table is full."""
    clear, end = 1 << min_size, (1 << min_size) + 1
    out, acc, nbits = bytearray(), 0, 0
    width = min_size + 1

    def emit(code):
        nonlocal acc, nbits
        acc |= code << nbits
        nbits += width
        while nbits >= 8:
            out.append(acc & 255)
            acc >>= 8
            nbits -= 8

    table, nxt = {(i,): i for i in range(clear)}, end + 1
    emit(clear)
    w = ()
    for k in indices:
        if w + (k,) in table:
            w = w + (k,)
            continue
        emit(table[w])
        if nxt < 4096:
            table[w + (k,)] = nxt
            nxt += 1
            if nxt > (1 << width) and width < 12:
                width += 1
        else:
            emit(clear)
            table, nxt, width = {(i,): i for i in range(clear)}, end + 1, min_size + 1
        w = (k,)
    if w:
        emit(table[w])
    emit(end)
    if nbits:
        out.append(acc & 255)
    return bytes(out)


def palette_bytes(pal):
    bits = max(1, int(np.ceil(np.log2(max(2, len(pal))))))
    return bits, bytes(np.array(pal, np.uint8).ravel()) + bytes(3 * ((1 << bits) - len(pal)))


def gif(screen, box, indices, gpal=None, lpal=None, min_size=None, transparency=None):
    """A one-frame GIF89a: screen (w, h), frame box (x, y, w, h), its indices row by row."""
    b = bytearray(b"GIF89a") + struct.pack("<HH", *screen)
    if gpal is not None:
        bits, raw = palette_bytes(gpal)
        b += bytes([0x80 | (bits - 1), 0, 0]) + raw
    else:
        b += bytes([0, 0, 0])
    if transparency is not None:
        b += bytes([0x21, 0xF9, 4, 1, 0, 0, transparency, 0])
    b += bytes([0x21, 0xFE, 5]) + b"hello" + bytes([0])  # a comment extension, to be skipped
    flags, local = 0, b""
    if lpal is not None:
        bits, local = palette_bytes(lpal)
        flags |= 0x80 | (bits - 1)
    b += bytes([0x2C]) + struct.pack("<HHHH", *box) + bytes([flags]) + local
    size = min_size or max(2, int(np.ceil(np.log2(max(indices) + 1))))
    stream = lzw(list(indices), size)
    b += bytes([size])
    for i in range(0, len(stream), 255):
        b += bytes([len(stream[i:i + 255])]) + stream[i:i + 255]
    return bytes(b + bytes([0, 0x3B]))


def crafted(rng):
    four = [(10, 20, 30), (200, 0, 0), (0, 200, 0), (0, 0, 200)]
    noise = rng.integers(0, 4, 40 * 30).tolist()
    return {
        "offset_frame.gif": gif((64, 48), (10, 7, 40, 30), noise, gpal=four),
        "offset_transparent.gif": gif((64, 48), (10, 7, 40, 30), noise, gpal=four, transparency=2),
        "past_screen.gif": gif((20, 10), (12, 4, 16, 12), rng.integers(0, 4, 16 * 12).tolist(), gpal=four),
        "past_palette.gif": gif((16, 16), (0, 0, 16, 16), rng.integers(0, 8, 256).tolist(), gpal=four, min_size=3),
        "no_palette.gif": gif((32, 8), (0, 0, 32, 8), rng.integers(0, 256, 256).tolist(), min_size=8),
        "local_palette.gif": gif((16, 8), (0, 0, 16, 8), rng.integers(0, 4, 128).tolist(), gpal=four,
                                 lpal=[(1, 2, 3), (250, 250, 0), (0, 250, 250), (90, 90, 90)]),
        "long_runs.gif": gif((300, 200), (0, 0, 300, 200), np.repeat(rng.integers(0, 4, 600), 100).tolist(), gpal=four),
    }


def main():
    rng = np.random.default_rng(11)
    os.makedirs(OUT, exist_ok=True)
    files = crafted(rng)
    noise = Image.open(os.path.join(SRC, "noise_rgb.png")).convert("RGB").resize((160, 120))
    for name, options in (("noise_interlaced.gif", {"interlace": True}), ("noise.gif", {"interlace": False})):
        buf = io.BytesIO()
        noise.quantize(256).save(buf, "GIF", **options)
        files[name] = buf.getvalue()
    buf = io.BytesIO()
    Image.open(os.path.join(SRC, "grey.png")).convert("L").save(buf, "GIF")
    files["grey.gif"] = buf.getvalue()
    out = {}
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        im = Image.open(os.path.join(OUT, name))
        rgb = np.asarray(im.convert("RGB"))
        out[name] = {"mode": im.mode, "width": rgb.shape[1], "height": rgb.shape[0], "crc32": crc32(rgb),
                     "samples": samples(rgb, rng)}
    with open(os.path.join(OUT, "gif.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
