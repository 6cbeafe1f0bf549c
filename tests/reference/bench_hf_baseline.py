"""Same-card baseline for bench_serve: HF transformers NemotronH (pure PyTorch paths, no mamba_ssm) plus, by
default, the HF RADIO vision tower and the VL wrapper's pixel shuffle + mlp1 projector, at the Holotron-12B
shapes with random bf16 weights, on the agent workload at the concurrency it can handle.

Each step of each session adds one 1280x720 screenshot (3 tiles of force_image_size: a 2x1 grid plus the
thumbnail) and 200 text tokens, then generates 100 tokens greedily (no EOS), continuing the session's cache
(stateful). With --vision (the default) the step encodes the screenshot: B sessions advancing together run
one RadioModel forward over B x 3 tiles of random normalised pixels, pixel shuffle (downsample_ratio), mlp1
→ B x 768 rows of the LLM width; the LLM's input is then inputs_embeds = [768 image rows ; 200 text-token
embeddings (random ids through the embedding table)] per session. The vision forward is timed inside the
step's latency: it is part of the workload. HF has no class for the VL wrapper, so the wrapper's pieces are
put together here (as in golden_model.py). --no-vision feeds the screenshot as 768 random token ids instead,
which leaves the vision tower's cost out and flatters the baseline.

C sessions run in groups of --batch: a group's sessions advance together in one batched forward (their
prompts have equal lengths, so no padding), groups one after the other. The reference SSD scan's memory
grows with batch x tokens (it runs out at 16 x 1024), which bounds the batch. The vision intermediates are
freed before the LLM prefill (only the projected rows are kept), so the tower adds its weights, not its
activations, to the peak.

`surf bench serve --hf-baseline B` (apps/bench/bench_serve.cpp) runs it as
  python3 tests/reference/bench_hf_baseline.py --config <dir>/config.json --steps S --concurrency B --batch B
and echoes the lines; the last one starts with "| HF transformers baseline".

usage: python3 tests/reference/bench_hf_baseline.py [--steps 2] [--concurrency 1] [--batch 1] [--new-tokens 100]
           [--config tests/fixtures/holotron_12b/config.json] [--vision | --no-vision] [--device cuda] [--no-warmup]
CPU smoke test: --device cpu with a tiny config (same keys, small sizes), --steps 1 --new-tokens 3.
"""
import argparse
import contextlib
import json
import os
import time

# The reference SSD scan allocates one ~48 GiB intermediate per prefill at batch 6; with fixed-size segments
# the freed block gets split by the growing cache and the next step's copy no longer fits (fragmentation,
# not a real shortage). Set before torch touches CUDA; an explicit setting from the caller wins.
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import torch  # noqa: E402
from transformers import NemotronHConfig, NemotronHForCausalLM, RadioConfig, RadioModel  # noqa: E402

# Small, import-side-effect-free pieces shared with the golden fixtures (math/torch imports only).
from golden_model import Mlp1, pixel_shuffle_v2  # noqa: E402

TILES_PER_SCREENSHOT = 3  # 1280x720 at 512-px tiles: 2x1 grid + thumbnail (spec/holotron.md tiling)
TEXT_TOKENS = 200

# timm ViT names that RADIO's vision_config.args.model uses → (width, depth, heads); as model/checkpoint/config.cpp.
TIMM_VIT = {"vit_huge_patch16_224": (1280, 32, 16), "vit_large_patch16_224": (1024, 24, 16),
            "vit_base_patch16_224": (768, 12, 12)}


@contextlib.contextmanager
def default_dtype(dtype):
    # Build straight in bf16: building in fp32 and casting would hold a 4-byte copy of all weights (~46 GiB
    # for 12B) on the card for a moment and inflate the peak.
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def build_llm(llm, device):
    cfg = NemotronHConfig(
        vocab_size=llm["vocab_size"], hidden_size=llm["hidden_size"], hybrid_override_pattern=llm["hybrid_override_pattern"],
        num_hidden_layers=llm["num_hidden_layers"], intermediate_size=llm["intermediate_size"],
        num_attention_heads=llm["num_attention_heads"], num_key_value_heads=llm["num_key_value_heads"], head_dim=llm["head_dim"],
        mamba_num_heads=llm["mamba_num_heads"], mamba_head_dim=llm["mamba_head_dim"], ssm_state_size=llm["ssm_state_size"],
        n_groups=llm["n_groups"], conv_kernel=llm["conv_kernel"], chunk_size=llm["chunk_size"], use_conv_bias=True,
        mlp_hidden_act="relu2", layer_norm_epsilon=1e-5, tie_word_embeddings=False, use_mamba_kernels=False)
    with torch.device(device), default_dtype(torch.bfloat16):
        return NemotronHForCausalLM(cfg).to(torch.bfloat16).eval()


def radio_dims(vl):
    """The tower's sizes from the VL config the way model/checkpoint/config.cpp reads them: args.model names a timm ViT,
    explicit HF RadioConfig-style fields win; prefix rows = cls tokens + registers."""
    vc = vl["vision_config"]
    args = vc.get("args", {})
    width, depth, heads = TIMM_VIT.get(args.get("model", ""), (None, None, None))
    width = vc.get("hidden_size", width)
    depth = vc.get("num_hidden_layers", depth)
    heads = vc.get("num_attention_heads", heads)
    if width is None or depth is None or heads is None:
        raise SystemExit(f"vision_config: unknown args.model {args.get('model')!r} and no hidden_size/"
                         "num_hidden_layers/num_attention_heads")
    n_cls = vc.get("num_cls_tokens", 1)
    reg_mult = args.get("register_multiple")
    n_reg = vc.get("num_registers", reg_mult - n_cls % reg_mult if reg_mult else 0)
    return dict(hidden=width, layers=depth, heads=heads, mlp_ratio=vc.get("intermediate_size", 4 * width) / width,
                patch=vc.get("patch_size", 16), eps=vc.get("layer_norm_eps", 1e-6), n_cls=n_cls, n_reg=n_reg,
                max_img=vc.get("max_img_size", vc.get("max_resolution", args.get("cpe_max_size", 2048))))


def build_vision(vl, device):
    """RadioModel (sdpa attention where HF accepts it, else eager) + mlp1, bf16, random init."""
    d = radio_dims(vl)
    tile = vl.get("force_image_size", 512)
    if vl.get("vit_hidden_size", d["hidden"]) != d["hidden"]:
        raise SystemExit(f"vit_hidden_size {vl['vit_hidden_size']} differs from the tower width {d['hidden']}")
    rcfg = RadioConfig(hidden_size=d["hidden"], num_hidden_layers=d["layers"], num_attention_heads=d["heads"],
                       mlp_ratio=d["mlp_ratio"], hidden_act="gelu", qkv_bias=True, layer_norm_eps=d["eps"],
                       patch_size=d["patch"], image_size=tile, max_img_size=d["max_img"],
                       num_cls_tokens=d["n_cls"], num_registers=d["n_reg"], summary_idxs=list(range(d["n_cls"])),
                       layerscale_value=1.0)
    radio, attn = None, None
    for attn in ("sdpa", "eager"):
        try:
            rcfg._attn_implementation = attn
            with torch.device(device), default_dtype(torch.bfloat16):
                radio = RadioModel(rcfg).to(torch.bfloat16).eval()
            attn = radio.config._attn_implementation
            break
        except (ValueError, ImportError) as e:
            print(f"# RADIO attention '{attn}' refused: {e}", flush=True)
    # Pixels arrive normalised (preprocessing does it), so the tower's own conditioner is detached.
    radio.make_preprocessor_external()
    ratio = vl.get("downsample_ratio", 0.5)
    c_in = int(round(d["hidden"] / (ratio * ratio)))
    with torch.device(device), default_dtype(torch.bfloat16):
        mlp1 = Mlp1(c_in, vl["projector_hidden_size"], vl["llm_config"]["hidden_size"]).to(torch.bfloat16).eval()
    return radio, mlp1, attn, ratio


def encode(radio, mlp1, ratio, pixels):
    """pixels [n_tile, 3, tile, tile] bf16 → [n_tile * tokens_per_tile, hidden] bf16. Only the projected rows
    survive: the tower's features and the shuffled rows are dropped before returning."""
    feats = radio(pixels).features  # [n_tile, n_patch, C], prefix rows already dropped by HF
    n, n_patch, c = feats.shape
    g = int(round(n_patch ** 0.5))
    shuffled = pixel_shuffle_v2(feats.reshape(n, g, g, c), ratio).reshape(n, -1, int(round(c / (ratio * ratio))))
    del feats
    projected = mlp1(shuffled).reshape(-1, mlp1.fc2.weight.shape[0])
    del shuffled
    return projected


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tests/fixtures/holotron_12b/config.json")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vision", action=argparse.BooleanOptionalAction, default=True,
                    help="encode each step's screenshot with the RADIO tower + mlp1 (default on)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                    help="one short untimed step first (kernel selection, lazy init), as bench_serve warms up")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    vl = json.load(open(args.config))
    llm_cfg = vl["llm_config"]
    tile = vl.get("force_image_size", 512)
    per_side = tile // vl.get("patch_size", 16)
    tokens_per_tile = int(round(per_side * vl.get("downsample_ratio", 0.5))) ** 2
    n_img = TILES_PER_SCREENSHOT * tokens_per_tile  # 768 at the real shapes
    n_new = n_img + TEXT_TOKENS
    vocab = llm_cfg["vocab_size"]
    id_lo, id_hi = min(1000, vocab // 8), min(131000, vocab)  # ordinary text ids, clear of the special ones

    torch.manual_seed(0)
    t0 = time.time()
    model = build_llm(llm_cfg, dev)
    sync()
    card = torch.cuda.get_device_name(dev) if cuda else "cpu"
    print(f"# HF NemotronH {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B params built in {time.time() - t0:.1f} s "
          f"on {card}", flush=True)
    if args.vision:
        t0 = time.time()
        radio, mlp1, attn, ratio = build_vision(vl, dev)
        sync()
        print(f"# HF RadioModel {sum(p.numel() for p in radio.parameters()) / 1e6:.1f} M params (attention '{attn}') + "
              f"mlp1 {sum(p.numel() for p in mlp1.parameters()) / 1e6:.1f} M built in {time.time() - t0:.1f} s; "
              f"{TILES_PER_SCREENSHOT} tiles of {tile} px → {n_img} image rows per screenshot", flush=True)
        label = f"vision on, {attn}"
    else:
        label = "vision off"
    embed = model.get_input_embeddings()
    B = args.batch
    if args.warmup:
        # Untimed: the vision tower on a batch of tiles, a short prefill and two decode steps at batch B.
        t0 = time.time()
        with torch.no_grad():
            if args.vision:
                pixels = torch.randn(B * TILES_PER_SCREENSHOT, 3, tile, tile, device=dev).to(torch.bfloat16)
                rows = encode(radio, mlp1, ratio, pixels)
                del pixels, rows
            out = model(input_ids=torch.randint(id_lo, id_hi, (B, 64), device=dev), use_cache=True)
            for _ in range(2):
                out = model(input_ids=out.logits[:, -1:].argmax(-1), past_key_values=out.past_key_values, use_cache=True)
            del out
        sync()
        print(f"# warm-up step (untimed) {time.time() - t0:.1f} s", flush=True)
    generated = processed = 0
    latencies, vision_s = [], []
    t_start = time.time()
    for c in range(0, args.concurrency, B):
        past = None
        for s in range(args.steps):
            if args.vision:
                pixels = torch.randn(B * TILES_PER_SCREENSHOT, 3, tile, tile, device=dev).to(torch.bfloat16)
                ids = torch.randint(id_lo, id_hi, (B, TEXT_TOKENS), device=dev)
            else:
                ids = torch.randint(id_lo, id_hi, (B, n_new), device=dev)
            sync()
            ts = time.time()
            with torch.no_grad():
                if args.vision:
                    rows = encode(radio, mlp1, ratio, pixels).view(B, n_img, -1)  # [B, 768, hidden] bf16
                    sync()
                    vision_s.append(time.time() - ts)
                    embeds = torch.cat([rows, embed(ids)], dim=1)  # [B, 968, hidden]: image rows, then text
                    del rows
                    out = model(inputs_embeds=embeds, past_key_values=past, use_cache=True)
                    del embeds
                else:
                    out = model(input_ids=ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tok = out.logits[:, -1:].argmax(-1)
                for _ in range(args.new_tokens - 1):
                    out = model(input_ids=tok, past_key_values=past, use_cache=True)
                    past = out.past_key_values
                    tok = out.logits[:, -1:].argmax(-1)
            sync()
            latencies.append(time.time() - ts)
            generated += B * args.new_tokens
            processed += B * (n_new + args.new_tokens)
            vis = f" (vision {vision_s[-1]:.2f} s)" if args.vision else ""
            print(f"sessions {c}..{c + B - 1} step {s}: {latencies[-1]:.2f} s{vis}", flush=True)
    wall = time.time() - t_start
    peak = f"{torch.cuda.max_memory_allocated(dev) / 2**30:.1f} GiB" if cuda else "n/a (cpu)"
    vis = f" | vision mean {sum(vision_s) / len(vision_s):.2f} s" if args.vision else ""
    print(f"| HF transformers baseline ({label}) | C={args.concurrency} (batches of {B}) | output {generated / wall:.1f} tok/s | "
          f"total {processed / wall:.1f} tok/s | step mean {sum(latencies) / len(latencies):.2f} s{vis} | peak GPU {peak} |")


if __name__ == "__main__":
    main()
