"""Trains surf-tiny on packed demonstrations (data.py pack) on one GPU, resumable, from one command:

  python3 -m train.surf_tiny.train --data DATA_DIR --model MODEL_DIR --steps N --ckpt CKPT_DIR [--out OUT]

MODEL_DIR holds config.json and the tokenizer (data.py tokenizer). Batches are drawn by a seeded sampler in
token-budget buckets of similar length; images are tiled once at the start, exactly as surf tiles them
(golden_assets.tile_image: Pillow bicubic), and kept on the device. Every --save-every steps the model, the optimiser and the sampler's
position are saved to CKPT_DIR/last.pt; a run finds it there and continues. At the end the weights are exported
in the checkpoint layout (export.py) to --out.
"""

import argparse
import json
import math
import os
import shutil
import time

import numpy as np
import torch

from . import heldout, spec
from .model import SurfTiny, highpass_patches, init_weights, saliency_init
from .spec import ga


class Packed:
    """sequences.npz of one or more packed folders: tokens, loss masks and image positions (with the index of
    the screenshot in shot_paths) of every training sequence; a folder that is missing is skipped with a warning (the GPU machine may have lost it)."""

    def __init__(self, folders):
        self.tokens, self.mask, self.lengths, self.images_of = [], [], [], []
        self.shot_paths, self.shot_of, self.role, self.episode_key = [], {}, [], []
        for folder in folders:
            if not os.path.exists(os.path.join(folder, "sequences.npz")):
                print(f"warning: no packed data in {folder}; skipped", flush=True)
                continue
            z = np.load(os.path.join(folder, "sequences.npz"))
            # Each z[...] decompresses the whole array: read every array once.
            offsets, names, tokens, mask = z["offsets"], z["shot_names"], z["tokens"], z["mask"]
            self.role.append(z["role"])
            # Older packs have no episode keys: their sequences are keyed by their first screenshot (heldout.py).
            keys = z["episode_keys"][z["episode"]] if "episode" in z.files else None
            first = len(self.lengths)
            for i in range(len(offsets) - 1):
                a, b = offsets[i], offsets[i + 1]
                self.tokens.append(tokens[a:b])
                self.mask.append(mask[a:b])
                self.lengths.append(b - a)
                self.images_of.append([])
                self.episode_key.append(str(keys[i]) if keys is not None else None)
            for seq, pos, shot in z["images"]:
                path = os.path.join(folder, "shots", str(names[shot]))
                if path not in self.shot_of:
                    self.shot_of[path] = len(self.shot_paths)
                    self.shot_paths.append(path)
                self.images_of[first + int(seq)].append((int(pos), self.shot_of[path]))
            print(f"{folder}: {len(offsets) - 1} sequences", flush=True)
        if not self.lengths:
            raise SystemExit("no packed data found")
        self.n = len(self.lengths)
        self.lengths = np.array(self.lengths, np.int64)
        self.role = np.concatenate(self.role)  # 0 policy, 1 localizer, 2 validator (data.pack)
        self.images_of = [sorted(x) for x in self.images_of]
        self.first_shot = np.array([x[0][1] if x else -1 for x in self.images_of], np.int64)

    def sequence(self, i):
        return self.tokens[i].astype(np.int64), self.mask[i], self.images_of[i]


def batches(seqs, lengths, first_shot, token_budget, rng, max_rows=64, bucket=64):
    """Index lists over seqs (sequence indices, a repeated one drawn that often) of similar length, each padded
    batch within token_budget, shuffled. Within a length bucket the sequences of one screenshot sit together,
    so that a batch encodes each screenshot once for all its sequences (the policy turn, the localizer
    questions, the validator)."""
    shot_rank = rng.permutation(int(first_shot.max()) + 2)[first_shot[seqs] + 1]
    order = seqs[np.lexsort((rng.random(len(seqs)), shot_rank, lengths[seqs] // bucket))]
    out, cur, longest = [], [], 0
    for i in order:
        l = int(lengths[i])
        if cur and (max(longest, l) * (len(cur) + 1) > token_budget or len(cur) >= max_rows):
            out.append(cur)
            cur, longest = [], 0
        cur.append(int(i))
        longest = max(longest, l)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def epoch_sequences(packed, usable, policy_repeat, localizer_per_shot, rng):
    """The sequence indices of one epoch: every usable one, the policy sessions `policy_repeat` times, and,
    with localizer_per_shot > 0, a fresh random draw of at most that many localizer questions per screenshot
    (a screenshot carries up to 40 of them and one policy turn)."""
    policy = np.flatnonzero((packed.role == 0) & usable)
    loc = np.flatnonzero((packed.role == 1) & usable)
    rest = np.flatnonzero((packed.role == 2) & usable)
    if localizer_per_shot > 0 and len(loc):
        loc = loc[rng.permutation(len(loc))]
        shot = packed.first_shot[loc]
        order = np.argsort(shot, kind="stable")
        loc, shot = loc[order], shot[order]
        rank = np.arange(len(loc)) - np.searchsorted(shot, shot, side="left")
        loc = loc[rank < localizer_per_shot]
    return np.concatenate([policy] * max(1, policy_repeat) + [loc, rest])


def load_tiles(path):
    """A screenshot's tiles exactly as surf tiles it (Pillow bicubic), [n, S, S, 3] uint8."""
    from PIL import Image
    with Image.open(path) as im:
        tiles, _ = ga.tile_image(im.convert("RGB"), spec.SIZES["tile"], spec.SIZES["max_tiles"], True)
    return np.stack([np.asarray(t, np.uint8) for t in tiles])


class TileCache:
    """Every screenshot of the data tiled once, in parallel, and kept on the device: a batch then gathers its
    tiles by index instead of decoding images."""

    def __init__(self, paths, device, workers, only=None):
        """`only`: the indices of the screenshots to tile (default all); the others get no tiles."""
        import multiprocessing as mp
        t0 = time.time()
        only = range(len(paths)) if only is None else list(only)
        with mp.get_context("fork").Pool(max(1, workers)) as pool:
            arrays = pool.map(load_tiles, [paths[i] for i in only], chunksize=16)
        counts = np.zeros(len(paths), np.int64)
        counts[list(only)] = [len(a) for a in arrays]
        self.start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.count = counts
        self.tiles = torch.from_numpy(np.concatenate(arrays)).to(device)
        print(f"{len(arrays)} screenshots -> {self.tiles.shape[0]} tiles on {device} "
              f"({self.tiles.numel() / 2**30:.1f} GiB) in {time.time() - t0:.0f} s", flush=True)


def make_batch(packed, cache, rows, pad_id, device):
    """(tokens [B, T], loss mask [B, T], tiles of the batch's distinct screenshots [n, S, S, 3] uint8, index
    of the projector row of every <image> token in the batch's (row, position) order, mask of the prompt's
    text tokens [B, T]: neither replies nor image tokens nor padding)."""
    seqs = [packed.sequence(i) for i in rows]
    T = max(len(t) for t, _, _ in seqs)
    tokens = np.full((len(seqs), T), pad_id, np.int64)
    mask = np.zeros((len(seqs), T), np.uint8)
    text = np.zeros_like(mask)
    for r, (t, m, _) in enumerate(seqs):
        tokens[r, :len(t)] = t
        mask[r, :len(m)] = m
        text[r, :len(t)] = (m == 0) & (t < packed.first_image_id)
    per_tile = (spec.SIZES["tile"] // 32) ** 2
    first_row, tile_idx, gather = {}, [], []
    for _, _, imgs in seqs:
        for _, shot in imgs:
            if shot not in first_row:
                first_row[shot] = len(tile_idx) * per_tile
                tile_idx.extend(range(cache.start[shot], cache.start[shot] + cache.count[shot]))
            gather.append(np.arange(first_row[shot], first_row[shot] + cache.count[shot] * per_tile))
    tiles = cache.tiles[torch.tensor(tile_idx, dtype=torch.long, device=device)] if tile_idx else \
        cache.tiles[:0]
    index = torch.from_numpy(np.concatenate(gather)).to(device) if gather else None
    return (torch.from_numpy(tokens).to(device), torch.from_numpy(mask).to(device), tiles, index,
            torch.from_numpy(text).to(device))


def normalise(px_uint8, device):
    x = px_uint8.to(device, non_blocking=True).permute(0, 3, 1, 2).float() / 255.0
    mean = torch.tensor(spec.CLIP_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(spec.CLIP_STD, device=device).view(1, 3, 1, 1)
    return (x - mean) / std


def lr_at(step, total, peak, warmup, time_frac=0.0, constant=False):
    """Linear warmup, then a cosine to 10% of the peak over the steps or, when the run has a time limit and
    that comes first, over the time; or, with `constant`, the peak throughout (a run that a later call
    continues, or a diagnostic)."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if constant:
        return peak
    frac = max((step - warmup) / max(1, total - warmup), time_frac)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


class ReadCheck:
    """Whether the model reads the image: the reply loss on a fixed batch of synthetic pages with the real
    screenshots and with each mirrored both ways (turned half a turn, so that reading x or y shows). Equal
    losses mean the replies ignore the image; a model from scratch sits there for a while before it starts to
    read (docs/BENCHMARKS.md, "What was tried for surf-tiny")."""

    def __init__(self, model_dir, fonts_dir, token_budget, options, device):
        from . import synth
        maker = synth.Maker(model_dir, fonts_dir, **options)
        tokens, mask, _, tiles, index, _ = maker.batch(99, token_budget)
        to = lambda x: torch.from_numpy(x).to(device)  # noqa: E731
        self.batch = (to(tokens), to(mask), to(tiles), to(index))
        self.device = device
        self.gaps = []

    @torch.no_grad()
    def measure(self, model, step):
        tokens, mask, tiles, index = self.batch
        was_training = model.training
        model.eval()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
            own = float(model(tokens, mask, normalise(tiles, self.device), index)[1])
            mirrored = float(model(tokens, mask, normalise(tiles.flip((1, 2)), self.device), index)[1])
        model.train(was_training)
        self.gaps.append(mirrored - own)
        print(f"reads at step {step}: loss {own:.4f} mirrored {mirrored:.4f} gap {mirrored - own:+.4f}", flush=True)

    def reading(self, gap):
        """The last two checks both showed at least `gap`."""
        return len(self.gaps) >= 2 and min(self.gaps[-2:]) >= gap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="", help="packed folders, comma-separated (none with --synth-only)")
    ap.add_argument("--model", required=True, help="folder with config.json and tokenizer.json")
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--tokens-per-batch", type=int, default=65536)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--schedule", choices=["cosine", "constant"], default="cosine",
                    help="after the warmup: a cosine to 10%% of --lr over the steps or the time, or --lr throughout")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--save-every", type=int, default=500)
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (and save) after this long; 0 = no limit")
    ap.add_argument("--workers", type=int, default=12, help="processes that tile the screenshots at the start")
    ap.add_argument("--text-weight", type=float, default=0.0, help="weight of the loss on the prompt's text tokens")
    ap.add_argument("--policy-repeat", type=int, default=1, help="draw each policy session this often per epoch")
    ap.add_argument("--localizer-per-shot", type=int, default=0,
                    help="draw at most this many localizer sequences per screenshot each epoch (0 = all)")
    ap.add_argument("--profile-at", type=int, default=-1, help="print a profile of the steps from this one")
    ap.add_argument("--init", help="start from these exported weights (a model folder) instead of random")
    ap.add_argument("--fresh-vision", action="store_true",
                    help="with --init: take only the language model from it; the vision tower and projector start new")
    ap.add_argument("--holdout", type=float, default=0.03,
                    help="share of screenshots kept out of training and measured at the start and end (heldout.py)")
    ap.add_argument("--holdout-limit", type=int, default=300, help="held-out sequences measured per role")
    ap.add_argument("--rebalance", action="store_true",
                    help="rescale the vision tower and projector to their working scales first (model.rebalance)")
    ap.add_argument("--scale-weight", type=float, default=0.1, help="weight of model.scale_penalty in the loss")
    ap.add_argument("--rows-scale", type=float, default=1.0,
                    help="the projector rows' RMS over the text embeddings' that scale_penalty holds (model.rows_scale)")
    ap.add_argument("--highpass", type=float, default=0.0,
                    help="a fresh ViT's patch filters: this share sums to zero (model.highpass_patches)")
    ap.add_argument("--saliency", action="store_true",
                    help="a fresh model starts from model.saliency_init (page elements share a direction in the rows)")
    ap.add_argument("--synth-fonts", help="font folder: mix synthetic grounding pages (synth.py) into training")
    ap.add_argument("--synth-share", type=float, default=0.5, help="share of the steps that train on synthetic pages")
    ap.add_argument("--synth-workers", type=int, default=12, help="processes that paint synthetic pages")
    ap.add_argument("--synth-sparse", action="store_true", help="synthetic pages of 1-3 components (synth.py)")
    ap.add_argument("--synth-viewports", default="",
                    help="WxH,... the synthetic pages' sizes (default synth.VIEWPORTS); small ones fill the tile "
                         "with few, large elements")
    ap.add_argument("--synth-rows", type=int, default=64, help="most sequences in one synthetic batch")
    ap.add_argument("--point-weight", type=float, default=0.0,
                    help="weight of model.pointer_loss on the synthetic localizer sequences (0 = off)")
    ap.add_argument("--synth-read", action="store_true",
                    help="each synthetic page also trains one reading sequence (synth.Maker.reading)")
    ap.add_argument("--synth-only", action="store_true",
                    help="train on synthetic pages only (the grounding phase before mixed training; needs --synth-fonts)")
    ap.add_argument("--read-check", type=int, default=0,
                    help="every N steps, the reply loss on fixed synthetic pages with real and mirrored images")
    ap.add_argument("--until-gap", type=float, default=0.0,
                    help="with --read-check: stop once the mirrored loss exceeds the real one by this, twice running")
    ap.add_argument("--out", help="export the final model folder (bf16 safetensors, config, tokenizer) here")
    ap.add_argument("--weights-out", help="export only the final weights (bf16 safetensors) into this folder")
    a = ap.parse_args()
    if a.synth_only and not a.synth_fonts:
        ap.error("--synth-only needs --synth-fonts")
    if not a.data and not a.synth_only:
        ap.error("--data is required unless --synth-only")
    if a.read_check and not a.synth_fonts:
        ap.error("--read-check measures on synthetic pages: it needs --synth-fonts")

    t_start = time.time()
    torch.manual_seed(a.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    config = json.load(open(os.path.join(a.model, "config.json")))
    model = SurfTiny(config)
    init_weights(model, a.seed)
    model.rows_scale = a.rows_scale
    if not a.init:  # a fresh projector starts at that scale; trained weights keep theirs (scale_penalty pulls)
        with torch.no_grad():
            model.mlp1.fc2.weight.mul_(a.rows_scale)
        highpass_patches(model, a.highpass)
        if a.saliency:
            saliency_init(model)
    if a.init:
        from .export import load_into
        load_into(model, a.init, language_model_only=a.fresh_vision)
        if a.fresh_vision:
            print("vision tower and projector start fresh; the language model from --init", flush=True)
    model.to(device).train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=a.lr, betas=(0.9, 0.95), weight_decay=0.05, fused=device.type == "cuda")
    ids = spec.token_ids(json.load(open(os.path.join(a.model, "tokenizer.json"))))
    pad_id = ids["<unk>"]
    packed = Packed(a.data.split(",")) if a.data else None
    if packed:
        packed.first_image_id = min(ids[t] for t in spec.ga.IMAGE_TOKENS)  # <image> <img> </img> end the vocabulary
    os.makedirs(a.ckpt, exist_ok=True)
    state = {"step": 0, "epoch": 0, "batch": 0}
    last = os.path.join(a.ckpt, "last.pt")
    if os.path.exists(last):
        ck = torch.load(last, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state = ck["state"]
        print(f"resumed at step {state['step']}", flush=True)

    def save():
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, last + ".tmp")
        os.replace(last + ".tmp", last)

    cache = TileCache(packed.shot_paths, device, a.workers) if packed else None
    model.scale_weight = a.scale_weight
    if a.rebalance and state["step"] == 0 and cache:
        model.rebalance(normalise(cache.tiles[:16], device))
        print("rebalanced: ViT output RMS 1, projector rows at the text embeddings' RMS", flush=True)
    held = heldout.held_out(packed, a.holdout) if packed else np.zeros(0, bool)
    held_rows = np.random.default_rng(a.seed).permutation(np.flatnonzero(held))
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))

    def measure(when):
        if len(held_rows):
            r = heldout.evaluate(model, packed, held_rows, cache, pad_id, ids["<SPECIAL_12>"], tokenizer,
                                 make_batch, normalise, limit=a.holdout_limit)
            print(f"held-out ({when}, {int(held.sum())} sequences): {json.dumps(r)}", flush=True)

    if a.init and state["step"] == 0:
        measure("start")
    data = f"{packed.n} sequences, {int(packed.lengths.sum())} tokens" if packed else "synthetic pages only"
    print(f"{data}; {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters", flush=True)
    stream = None
    synth_options = {"sparse": a.synth_sparse, "max_rows": a.synth_rows,
                     "viewports": [tuple(int(v) for v in s.split("x")) for s in a.synth_viewports.split(",") if s]}
    if a.synth_fonts:
        from . import synth
        stream = synth.Stream(a.model, a.synth_fonts, a.tokens_per_batch, a.synth_workers, a.seed + state["step"],
                              read=a.synth_read, **synth_options)
    log = {"t": time.time(), "real": [0.0, 0], "synth": [0.0, 0]}
    stop, prof, synth_due = False, None, 0.0
    reads = ReadCheck(a.model, a.synth_fonts, a.tokens_per_batch, synth_options, device) if a.read_check else None

    def step(kind, tokens, mask, tiles, index, text, points=None):
        nonlocal prof
        for g in opt.param_groups:
            g["lr"] = lr_at(state["step"], a.steps, a.lr, a.warmup,
                            (time.time() - t_start) / (60 * a.max_minutes) if a.max_minutes else 0.0,
                            a.schedule == "constant")
        if state["step"] == a.profile_at and prof is None:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss, reply_loss, n = model(tokens, mask, normalise(tiles, device), index, text, a.text_weight, points,
                                        a.point_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # Each part is clipped on its own: under one global norm, a part with a large gradient (the projector,
        # whose inner activations are big) scales the others' gradients below Adam's epsilon and freezes them.
        for part in (model.radio, model.mlp1, model.llm, model.point_head):
            torch.nn.utils.clip_grad_norm_(part.parameters(), 1.0)
        opt.step()
        if prof is not None and state["step"] == a.profile_at + 2:
            if device.type == "cuda":
                torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            print(prof.key_averages().table(sort_by="self_cuda_time_total" if device.type == "cuda"
                                            else "self_cpu_time_total", row_limit=25), flush=True)
        state["step"] += 1
        log[kind][0] += float(reply_loss.detach()) * n
        log[kind][1] += n
        if state["step"] % 25 == 0:
            dt = time.time() - log["t"]
            parts = " ".join(f"{k} {v[0] / v[1]:.4f}" for k, v in log.items() if k != "t" and v[1])
            sc = model.last_scales
            scales = f" scales {float(sc[0]):.3g} {float(sc[1]):.3g} {float(sc[2]) / float(model.text_rms()):.3g}" \
                if sc else ""
            if model.last_pointer is not None:
                scales += f" pointer {model.last_pointer:.3f}"
            print(f"step {state['step']} epoch {state['epoch']} loss {parts}{scales} "
                  f"lr {opt.param_groups[0]['lr']:.2e} {25 / dt:.2f} steps/s", flush=True)
            log.update(t=time.time(), real=[0.0, 0], synth=[0.0, 0])
        if state["step"] % a.save_every == 0:
            save()
        if reads and state["step"] % a.read_check == 0:
            reads.measure(model, state["step"])

    def out_of_time():
        return a.max_minutes and time.time() - t_start > 60 * a.max_minutes

    def synthetic_step():
        tokens, mask, text, tiles, index, points = stream.next()
        to = lambda x: torch.from_numpy(x).to(device, non_blocking=True)
        step("synth", to(tokens), to(mask), to(tiles), to(index), to(text), to(points))

    def read_enough():
        return a.until_gap > 0 and reads is not None and reads.reading(a.until_gap)

    while a.synth_only and state["step"] < a.steps and not out_of_time() and not read_enough():
        synthetic_step()
    while not a.synth_only and state["step"] < a.steps and not stop:
        rng = np.random.default_rng(a.seed + state["epoch"])
        seqs = epoch_sequences(packed, ~held, a.policy_repeat, a.localizer_per_shot, rng)
        lists = batches(seqs, packed.lengths, packed.first_shot, a.tokens_per_batch, rng)
        for rows in lists[state["batch"]:]:
            # share s of the steps are synthetic: s / (1 - s) of them per recorded batch
            synth_due += a.synth_share / max(1e-6, 1 - a.synth_share) if stream else 0.0
            while synth_due >= 1 and state["step"] < a.steps and not out_of_time():
                synthetic_step()
                synth_due -= 1
            step("real", *make_batch(packed, cache, rows, pad_id, device))
            state["batch"] += 1
            if state["step"] >= a.steps or out_of_time() or read_enough():
                stop = True
                break
        else:
            state["epoch"] += 1
            state["batch"] = 0
    if stream:
        stream.close()
    save()
    print(f"finished at step {state['step']} after {(time.time() - t_start) / 60:.1f} min", flush=True)
    # The weights leave first: the held-out measure takes a minute or more, and a call that runs out of time
    # during it still returns them.
    from .export import export
    # Each folder is written beside its place and then renamed into it, so a folder is either the old
    # export or the complete new one (a chain's next call may start from it; gpu_train.sh).
    for folder, weights_only in ((a.out, False), (a.weights_out, True)):
        if folder:
            partial = folder.rstrip("/") + ".partial"
            shutil.rmtree(partial, ignore_errors=True)
            export(model, a.model, partial, weights_only=weights_only)
            shutil.rmtree(folder, ignore_errors=True)
            os.rename(partial, folder)
            print(f"exported to {folder}", flush=True)
    measure("end")


if __name__ == "__main__":
    main()
