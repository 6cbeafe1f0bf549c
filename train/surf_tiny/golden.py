"""Parity fixture for the shipped surf-tiny: PyTorch's outputs on the exported weights, which surf's CPU engine
must reproduce (tests/parity/test_surf_tiny.cpp): the logits at the last prompt position and 24 greedy tokens,
for a policy turn and a localizer turn taken from recorded episodes, with their screenshots.

  python3 -m train.surf_tiny.golden --model models/surf-tiny --episodes REC/episodes.jsonl \
      --out tests/fixtures/surf_tiny
"""

import argparse
import hashlib
import json
import os
import shutil

import numpy as np
import torch
from PIL import Image

from . import data, spec
from .export import load_into
from .model import SurfTiny
from .spec import ga

N_GREEDY = 24


def first_turn(enc, session, base):
    """Token ids of a session's first call (its prompt, up to the generation prompt) and its one image."""
    ids, image = [], None
    for part in session["turns"][0]["parts"]:
        if "text" in part:
            ids += enc.text(part["text"])
        else:
            image = os.path.join(base, part["image"])
            w, h = Image.open(image).size
            n = spec.image_token_count(w, h)
            ids += [enc.ids["<img>"]] + [enc.ids["<image>"]] * n + [enc.ids["</img>"]]
    return ids, image


@torch.no_grad()
def run(model, ids, image):
    tiles, _ = ga.tile_image(Image.open(image).convert("RGB"), spec.SIZES["tile"], spec.SIZES["max_tiles"], True)
    px = torch.from_numpy(np.stack([np.asarray(t, np.uint8) for t in tiles])).permute(0, 3, 1, 2).float() / 255
    px = (px - torch.tensor(spec.CLIP_MEAN).view(1, 3, 1, 1)) / torch.tensor(spec.CLIP_STD).view(1, 3, 1, 1)
    rows = model.image_rows(px)
    out, last = [], None
    seq = list(ids)
    for step in range(N_GREEDY):
        t = torch.tensor([seq])
        emb = model.llm.model.embeddings(t)
        emb = emb.masked_scatter((t == model.image_id)[..., None], rows)
        h = model.llm.model(inputs_embeds=emb, use_cache=False).last_hidden_state
        logits = model.llm.lm_head(h[0, -1]).float()
        if step == 0:
            last = logits.clone()
        # surf never samples the image placeholders (model/engine_input.h output_token_mask).
        masked = logits.clone()
        masked[[model.image_id, model.config["img_start_token_id"], model.config["img_end_token_id"]]] = float("-inf")
        nxt = int(torch.argmax(masked))
        out.append(nxt)
        seq.append(nxt)
    return last, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--episodes", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    config = json.load(open(os.path.join(a.model, "config.json")))
    model = SurfTiny(config).eval()
    load_into(model, a.model)
    enc = data.Encoder(a.model)
    # The smallest screenshots keep the fixture small: a policy and a localizer call on them.
    eps = sorted(data.read_episodes([a.episodes]), key=lambda e: e["viewport"][0] * e["viewport"][1])
    wanted, cases = ["policy", "localizer"], []
    for ep in eps:
        for s in ep["sessions"]:
            if wanted and s["role"] == wanted[0]:
                cases.append((s["role"], *first_turn(enc, s, ep["_base"])))
                wanted.pop(0)
    os.makedirs(a.out, exist_ok=True)
    expected, manifest = {}, {"model": os.path.relpath(a.model, spec.REPO), "greedy_tokens": N_GREEDY, "cases": []}
    for k, (role, ids, image) in enumerate(cases):
        last, greedy = run(model, ids, image)
        shutil.copy(image, os.path.join(a.out, f"case{k}.png"))
        expected[f"case{k}.input_ids"] = torch.tensor(ids, dtype=torch.int64)
        expected[f"case{k}.last_logits"] = last
        expected[f"case{k}.greedy_tokens"] = torch.tensor(greedy, dtype=torch.int64)
        manifest["cases"].append({"role": role, "tokens": len(ids), "image": f"case{k}.png",
                                  "greedy_text": enc.tok.decode(greedy, skip_special_tokens=False)})
    from safetensors.torch import save_file
    save_file(expected, os.path.join(a.out, "expected.safetensors"))
    weights = sorted(f for f in os.listdir(a.model) if f.endswith(".safetensors"))
    manifest["weights_sha256"] = {f: hashlib.sha256(open(os.path.join(a.model, f), "rb").read()).hexdigest()
                                  for f in weights}
    json.dump(manifest, open(os.path.join(a.out, "manifest.json"), "w"), indent=1, ensure_ascii=False)
    print(json.dumps(manifest, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
