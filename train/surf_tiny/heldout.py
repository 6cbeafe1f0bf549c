"""Held-out measures of a training run: the screenshots whose name hashes below a fraction never train, and at
the end of the run (or on exported weights, `python3 -m train.surf_tiny.heldout`) their sequences give

  - per role: the teacher-forced reply loss and the share of reply tokens predicted exactly, and the loss with
    every screenshot mirrored both ways (turned half a turn, so that reading x or y shows): equal losses mean
    the model does not read the image at all;
  - localizer: the greedy point against the recorded one (both on the 0-1000 grid), as the share within 30
    and within 60 units on both axes and the median of the larger axis error, also apart for screenshots of
    one tile and of a grid of tiles;
  - validator: the share of verdicts ("success": true/false) predicted right, teacher-forced up to the verdict.

The localizer's greedy point is what a run with surf's engine uses, so this is the grounding measure that the
end-to-end eval depends on, at a fraction of its cost.

  python3 -m train.surf_tiny.heldout --model MODEL_DIR --data DATA_DIR[,..] [--fraction 0.03]
"""

import argparse
import hashlib
import json
import os
import re

import numpy as np
import torch
import torch.nn.functional as F

ROLES = ("policy", "localizer", "validator")
POINT = re.compile(r'"x"\s*:\s*(-?\d+)\s*,\s*"y"\s*:\s*(-?\d+)')


def held_out(packed, fraction):
    """Boolean per sequence: its episode's key (data.pack: the episode's first screenshot), or for older packs
    its own first screenshot's name, hashes below `fraction`. Stable across runs and data sets, since recorded
    names are content hashes. A split by episode keeps every step of a held-out task out of training; the
    split by screenshot of older packs lets other steps of the same page train, which flatters the measure."""
    if fraction <= 0:
        return np.zeros(packed.n, bool)
    cut = int(fraction * 2**32)
    below = lambda name: int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) < cut
    shot_held = np.array([below(os.path.basename(p)) for p in packed.shot_paths], bool)
    return np.array([below(k + ".webp") if k is not None else (s >= 0 and shot_held[s])
                     for k, s in zip(packed.episode_key, packed.first_shot)], bool)


def _logits(model, tokens, tiles, index, normalise):
    emb = model.embed(tokens, normalise(tiles, tokens.device), index)
    return model.llm.lm_head(model.llm.model(inputs_embeds=emb, use_cache=False).last_hidden_state).float()


@torch.no_grad()
def evaluate(model, packed, rows, cache, pad_id, stop_id, tokenizer, make_batch, normalise, batch=24, limit=300):
    """The measures above over the held-out sequences `rows` (at most `limit` per role), as a dict."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = {}
    for role_id, role in enumerate(ROLES):
        mine = [int(r) for r in rows if packed.role[r] == role_id][:limit]
        if not mine:
            continue
        loss_sum = mirrored_sum = right = total = 0
        points, verdicts, tiles_of = [], [], []
        for k in range(0, len(mine), batch):
            chunk = mine[k:k + batch]
            tokens, mask, tiles, index, _ = make_batch(packed, cache, chunk, pad_id, device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits = _logits(model, tokens, tiles, index, normalise)
            use = mask[:, 1:].bool()
            target = tokens[:, 1:]
            pred = logits[:, :-1].argmax(-1)
            loss_sum += float(F.cross_entropy(logits[:, :-1][use], target[use], reduction="sum"))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                mirrored = _logits(model, tokens, tiles.flip((1, 2)), index, normalise)
            mirrored_sum += float(F.cross_entropy(mirrored[:, :-1][use], target[use], reduction="sum"))
            right += int((pred[use] == target[use]).sum())
            total += int(use.sum())
            if role == "validator":
                verdicts += _verdicts(tokens, mask, pred, tokenizer)
            if role == "localizer":
                points += _greedy_points(model, tokens, mask, tiles, index, normalise, pad_id, stop_id, tokenizer)
                tiles_of += [int(cache.count[packed.first_shot[r]]) for r in chunk]
        out[role] = {"sequences": len(mine), "loss": loss_sum / max(1, total), "token_acc": right / max(1, total),
                     "loss_mirrored": mirrored_sum / max(1, total)}
        if points:
            err = np.array([max(abs(p[0] - t[0]), abs(p[1] - t[1])) if p else 1000 for p, t in points])
            out[role].update({"within_30": float((err <= 30).mean()), "within_60": float((err <= 60).mean()),
                              "median_err": float(np.median(err))})
            # One tile (a small page) against a grid + thumbnail: where a point needs the tile's place too.
            one = np.array(tiles_of) == 1
            for name, sel in (("one_tile", one), ("grid", ~one)):
                if sel.any():
                    out[role][name] = {"n": int(sel.sum()), "within_30": float((err[sel] <= 30).mean()),
                                       "median_err": float(np.median(err[sel]))}
        if verdicts:
            out[role]["verdict_acc"] = float(np.mean(verdicts))
    model.train(was_training)
    return out


def _first_reply(mask_row):
    on = np.flatnonzero(mask_row)
    return int(on[0]) if len(on) else -1


def _greedy_points(model, tokens, mask, tiles, index, normalise, pad_id, stop_id, tokenizer, max_new=16):
    """[(greedy point or None, recorded point)] of a batch of localizer sequences (one turn each)."""
    t_np, m_np = tokens.cpu().numpy(), mask.cpu().numpy()
    starts = [_first_reply(m) for m in m_np]
    targets = [_point(tokenizer.decode([int(x) for x in t_np[r, s:][m_np[r, s:] == 1]])) for r, s in enumerate(starts)]
    # Right padding: a row's next token depends only on the tokens before it.
    work = torch.full((len(starts), max(starts) + max_new), pad_id, dtype=tokens.dtype, device=tokens.device)
    for r, s in enumerate(starts):
        work[r, :s] = tokens[r, :s]
    length = list(starts)
    done = [False] * len(starts)
    for _ in range(max_new):
        with torch.autocast(tokens.device.type, dtype=torch.bfloat16, enabled=tokens.device.type == "cuda"):
            logits = _logits(model, work, tiles, index, normalise)
        for r in range(len(starts)):
            if done[r]:
                continue
            nxt = int(logits[r, length[r] - 1].argmax())
            work[r, length[r]] = nxt
            length[r] += 1
            done[r] = nxt == stop_id
        if all(done):
            break
    w = work.cpu().numpy()
    return [(_point(tokenizer.decode([int(x) for x in w[r, s:length[r]] if x != stop_id])), targets[r])
            for r, s in enumerate(starts)]


def _point(text):
    m = POINT.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _verdicts(tokens, mask, pred, tokenizer):
    """Per validator sequence: whether the argmax at the reply's true/false token matches it."""
    t_np, m_np, p_np = tokens.cpu().numpy(), mask.cpu().numpy(), pred.cpu().numpy()
    out = []
    for r in range(len(t_np)):
        on = np.flatnonzero(m_np[r])
        for pos in on[::-1]:
            piece = tokenizer.decode([int(t_np[r, pos])])
            if "true" in piece or "false" in piece:
                out.append(bool(p_np[r, pos - 1] == t_np[r, pos]))
                break
    return out


def main():
    from tokenizers import Tokenizer

    from . import spec
    from .export import load_into
    from .model import SurfTiny
    from .train import Packed, TileCache, make_batch, normalise
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="an exported model folder")
    ap.add_argument("--data", required=True, help="packed folders, comma-separated")
    ap.add_argument("--fraction", type=float, default=1.0, help="held-out share of screenshots (1 = all)")
    ap.add_argument("--limit", type=int, default=200, help="sequences per role")
    a = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SurfTiny(json.load(open(os.path.join(a.model, "config.json"))))
    load_into(model, a.model)
    model.to(device)
    packed = Packed(a.data.split(","))
    tok_json = json.load(open(os.path.join(a.model, "tokenizer.json")))
    ids = spec.token_ids(tok_json)
    packed.first_image_id = min(ids[t] for t in spec.ga.IMAGE_TOKENS)
    rows = np.flatnonzero(held_out(packed, a.fraction))
    rows = np.random.default_rng(0).permutation(rows)
    needed = sorted({s for r in rows for _, s in packed.images_of[r]})
    cache = TileCache(packed.shot_paths, device, os.cpu_count() or 1, only=needed)
    result = evaluate(model, packed, rows, cache, ids["<unk>"], ids["<SPECIAL_12>"],
                      Tokenizer.from_file(os.path.join(a.model, "tokenizer.json")), make_batch, normalise,
                      limit=a.limit)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
