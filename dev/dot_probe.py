"""Diagnostic: can surf-tiny's architecture learn to find one thing in an image and say where it is? The
smallest localizer task: a white square on black, the localizer prompt asking for "the white square", and the
reply its centre as surf-tiny writes it ({"x":…,"y":…} on the 0-1000 grid), or with --half one token saying
which half it is in. --distractors adds grey squares, so the reply must pick the one the prompt names. Prints
the reply loss, the loss on images mirrored both ways (turned half a turn; equal: the reply ignores the
image) and the mean error of the greedy first digit of x (hundreds; chance ≈ 3.3).

  python3 dev/dot_probe.py [--tile 128] [--steps 400] [--lr 1e-3] [--device cuda]

--tiles 128:1200,256:800,640 trains a curriculum: tiles of 128 pixels (16 image tokens) for 1,200 steps, then
256 for 800, then 640 (surf-tiny's tile) to the end; one model (its ViT position table at the largest tile,
resized to each tile as surf's engine does), the square an eighth of the tile, the batch --batch · 128 / tile
(at least 16). The test set is at the last tile.

--squares 320:500,160:500,80 keeps one tile and shrinks the square instead: 500 steps with squares of 320
pixels, 500 with 160, then 80 to the end (the test set's square is the last).
"""
import argparse
import json
import os
import shutil
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from read_probe import small_model_dir  # noqa: E402
from train.surf_tiny import spec  # noqa: E402
from train.surf_tiny.data import Encoder  # noqa: E402
from train.surf_tiny.model import SurfTiny, highpass_patches, init_weights, saliency_init  # noqa: E402
from train.surf_tiny.train import normalise  # noqa: E402


class Task:
    def __init__(self, mdir, tile, half, distractors, square, colours=False):
        self.enc = Encoder(mdir)
        self.colours = colours
        self.tile, self.half, self.distractors, self.square = tile, half, distractors, square
        prompt = open(os.path.join(spec.REPO, "models", "surf-tiny", "prompts", "localizer.md")).read()
        user = prompt.replace("{width}", str(tile)).replace("{height}", str(tile)).replace("{element}",
                                                                                         "the white square")
        ids = self.enc.ids
        self.n_img = (tile // 32) ** 2
        self.prefix = (self.enc.text(f"<SPECIAL_10>System\n\n<SPECIAL_11>User\n{user}") + [ids["<img>"]] +
                       [ids["<image>"]] * self.n_img + [ids["</img>"]] +
                       self.enc.text("\n<SPECIAL_11>Assistant\n<think></think>"))
        self.stop = ids["<SPECIAL_12>"]
        self.digit = [self.enc.text(str(d))[0] for d in range(10)]

    @staticmethod
    def colour(g, back):
        while True:
            c = torch.randint(0, 256, (3,), generator=g)
            if int((c - back.long()).abs().sum()) >= 240:
                return c.to(torch.uint8)

    def batch(self, g, n, device):
        S, q = self.tile, self.square
        tiles = torch.zeros(n, S, S, 3, dtype=torch.uint8)
        if self.colours:  # a random background per image; the square a colour at least 240 away from it (L1)
            back = torch.randint(0, 256, (n, 3), generator=g)
            tiles[:] = back[:, None, None, :].to(torch.uint8)
        rows, masks, xs = [], [], []
        for b in range(n):
            for _ in range(self.distractors):
                x, y = (int(v) for v in torch.randint(0, S - q, (2,), generator=g))
                tiles[b, y:y + q, x:x + q] = 110
            x, y = (int(v) for v in torch.randint(0, S - q, (2,), generator=g))
            tiles[b, y:y + q, x:x + q] = self.colour(g, tiles[b, 0, 0]) if self.colours else 255
            cx, cy = round((x + q / 2) * 1000 / S), round((y + q / 2) * 1000 / S)
            reply = self.enc.text("left" if cx < 500 else "right") if self.half else \
                self.enc.text(json.dumps({"x": cx, "y": cy}, separators=(",", ":")))
            reply = reply + [self.stop]
            rows.append(self.prefix + reply)
            masks.append([0] * len(self.prefix) + [1] * len(reply))
            xs.append(cx)
        T = max(len(r) for r in rows)
        tokens = torch.full((n, T), self.enc.ids["<unk>"], dtype=torch.long)
        mask = torch.zeros(n, T, dtype=torch.uint8)
        for i, (r, m) in enumerate(zip(rows, masks)):
            tokens[i, :len(r)], mask[i, :len(m)] = torch.tensor(r), torch.tensor(m)
        index = torch.arange(n * self.n_img)
        return tokens.to(device), mask.to(device), tiles, index.to(device), torch.tensor(xs)


def first_digit_error(model, task, tokens, mask, pixels, index, xs):
    """Mean |greedy hundreds digit of x − the true one| at the reply's first digit."""
    with torch.no_grad():
        emb = model.embed(tokens, pixels, index)
        hidden = model.llm.model(inputs_embeds=emb, use_cache=False).last_hidden_state
        first = mask.float().argmax(1)  # the reply's first token: '{"'; x's first digit is 3 tokens on
        pos = first + 2  # the position whose next token is x's first digit
        logits = model.llm.lm_head(hidden[torch.arange(len(first)), pos]).float()
        guess = logits[:, task.digit].argmax(1).cpu()
    true = torch.tensor([int(str(x)[0]) if x >= 100 else 0 for x in xs.tolist()])
    return float((guess - true).abs().float().mean())


def _ends(phases):
    """[(tile, the step its phase ends before)]."""
    out, end = [], 0
    for tile, steps in phases:
        end += steps
        out.append((tile, end))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--tiles", default="", help="curriculum: TILE:STEPS,...,TILE (see above)")
    ap.add_argument("--squares", default="", help="curriculum at one tile: SIDE:STEPS,...,SIDE (see above)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--half", action="store_true")
    ap.add_argument("--distractors", type=int, default=0)
    ap.add_argument("--square", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows-scale", type=float, default=1.0,
                    help="projector rows at this multiple of the text embeddings' RMS (from the start)")
    ap.add_argument("--pattern", default="", help="the language model's hybrid_override_pattern instead")
    ap.add_argument("--every", type=int, default=25)
    ap.add_argument("--highpass", type=float, default=0.0,
                    help="this share of the patch filters sums to zero (model.highpass_patches)")
    ap.add_argument("--saliency", action="store_true", help="model.saliency_init (elements share a direction)")
    ap.add_argument("--colours", action="store_true",
                    help="a random background colour per image and a square of another colour (not white on black)")
    ap.add_argument("--save", help="export the final model folder here (train.py --init takes it)")
    a = ap.parse_args()
    torch.manual_seed(0)
    split = lambda spec: [(int(p.split(":")[0]), int(p.split(":")[1]) if ":" in p else a.steps)  # noqa: E731
                          for p in spec.split(",")]
    if a.squares:  # phases of square sides at one tile: (tile, steps) and a side per phase
        sides = split(a.squares)
        phases = [(a.tile, steps) for _, steps in sides]
    else:
        phases = split(a.tiles) if a.tiles else [(a.tile, a.steps)]
    mdir = small_model_dir(phases[-1][0])
    config = json.load(open(os.path.join(mdir, "config.json")))
    if a.pattern:
        config["llm_config"]["hybrid_override_pattern"] = a.pattern
        config["llm_config"]["num_hidden_layers"] = len(a.pattern)
    model = SurfTiny(config)
    init_weights(model, 1)
    model.rows_scale = a.rows_scale
    model.mlp1.fc2.weight.data.mul_(a.rows_scale)
    highpass_patches(model, a.highpass)
    if a.saliency:
        saliency_init(model)
    model.to(a.device)
    square = (lambda tile: tile // 8) if a.tiles else (lambda tile: a.square)
    if a.squares:
        tasks = [Task(mdir, a.tile, a.half, a.distractors, side, a.colours) for side, _ in sides]
    else:
        tasks = [Task(mdir, tile, a.half, a.distractors, square(tile), a.colours) for tile, _ in phases]
    task = tasks[-1]
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.05)
    g, g_test = torch.Generator().manual_seed(1), torch.Generator().manual_seed(99)
    test = task.batch(g_test, 64, a.device)
    start = time.time()
    for s in range(a.steps + 1):
        if s % a.every == 0:
            model.eval()
            tokens, mask, tiles, index, xs = test
            with torch.no_grad():
                own = float(model(tokens, mask, normalise(tiles, a.device), index)[1])
                mirrored = float(model(tokens, mask, normalise(tiles.flip((1, 2)), a.device), index)[1])
            pixels = normalise(tiles, a.device)
            err = "" if a.half else \
                f" x-hundreds err {first_digit_error(model, task, tokens, mask, pixels, index, xs):.2f}"
            model.train()
            print(f"step {s} loss {own:.3f} mirrored {mirrored:.3f} gap {mirrored - own:+.3f}{err} "
                  f"({time.time() - start:.0f} s)", flush=True)
        if s == a.steps:
            break
        k = next((i for i, (_, end) in enumerate(_ends(phases)) if s < end), len(phases) - 1)
        batch = max(16, a.batch * 128 // phases[k][0]) if a.tiles else a.batch
        tokens, mask, tiles, index, _ = tasks[k].batch(g, batch, a.device)
        loss = model(tokens, mask, normalise(tiles, a.device), index)[0]
        opt.zero_grad()
        loss.backward()
        for part in (model.radio, model.mlp1, model.llm):
            torch.nn.utils.clip_grad_norm_(part.parameters(), 1.0)
        opt.step()
    if a.save:
        from train.surf_tiny.export import export
        export(model, mdir, a.save, weights_only=True)
    shutil.rmtree(mdir, ignore_errors=True)


if __name__ == "__main__":
    main()
