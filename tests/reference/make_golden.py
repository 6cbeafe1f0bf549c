#!/usr/bin/env python3
"""Golden fixtures for surf's Holotron CPU-forward parity tests (issue 3 item 1).

Usage:  python tests/reference/make_golden.py [--only tiny_fp32|small_bf16|greedy_bf16] [--out DIR] [--search]
Needs:  torch (CPU), transformers 5.17 (NemotronH*, RadioModel), tokenizers, torchvision, pillow, jinja2,
        safetensors. About a minute per fixture on 2 CPU cores. CI never runs it: the outputs are committed.
        Re-running reproduces the committed files byte for byte on the same versions (checked for tiny_fp32).

What it builds
--------------
Tiny random models IN THE REAL CHECKPOINT LAYOUT of
nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL (architecture NemotronH_Nano_VL_V2, spec /work/shared/spec/holotron.md):
the LLM is HF `NemotronHForCausalLM`, the vision tower HF `RadioModel`, and the VL wrapper (which transformers
does not have) is composed by hand exactly as spec §3.2: static tiling (§5) → RadioModel → drop the
cls+register prefix rows → pixel shuffle v2 → mlp1 (RMSNorm → Linear → ReLU² → Linear, no biases) → the
projected rows replace the `<image>` token embeddings, in order → NemotronH on inputs_embeds. Each fixture is
a folder tests/fixtures/golden/<name>/ that looks like a model dir:

  config.json: VL layout: llm_config (real Nemotron-H field names), vision_config (RADIO `args` AND HF
      RadioConfig-style explicit fields; explicit fields are authoritative, args.model is a made-up name),
      force_image_size, patch_size, downsample_ratio, ps_version, use_thumbnail, max_num_tiles, norm_mean/std,
      vit_hidden_size, projector_hidden_size, image token strings/ids
  generation_config.json: eos_token_id [2, 12]
  preprocessor_config.json: image_size, max_num_tiles, use_thumbnail, norm_mean/std
  tokenizer.json: byte-level BPE trained here; ids 0..19 control tokens (<unk> <s> </s> <SPECIAL_3..19>),
      <think>=20 and </think>=21 (added, not special), then the BPE vocabulary, then <image>, <img>, </img> at
      text_vocab, +1, +2. It carries a BOS-adding post-processor that chat prompts must NOT use (tokenized
      with add_special_tokens=False, spec §6.1)
  tokenizer_config.json: chat_template inside (prompts/chat_template_nemotron_nano_v2_vl.jinja if that exists
      at generation time, else the fallback written in golden_assets.py from spec §6.2)
  image.png: the raw input image
  model.safetensors: (tiny_fp32)  or model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json
  expected.safetensors: reference inputs/outputs, below
  manifest.json: generator, versions, seed, configs, prompts, min dt, self-check errors, sha256 of files

expected.safetensors (float tensors F32, ids I64; T = prompt length, V = vocab rows): input_ids [T];
pixel_values [n_tiles,3,S,S] (already normalised with norm_mean/std: do NOT apply the input_conditioner
buffers again); vision.features [n_tiles, n_patches, vit_hidden] (prefix rows dropped, before the shuffle);
vision.projected [n_tiles·tokens_per_tile, hidden]; embeds [T, hidden] (after the merge); layers.{i} [T,
hidden] (residual stream after block i, every i); norm_f [T, hidden]; logits [T, V]; greedy_tokens [32];
state.conv.{i} [conv_dim, K-1] and state.ssm.{i} [H, P, N] for every Mamba layer i, state.k.{i} / state.v.{i}
[T, n_kv_heads, head_dim] for every attention layer i, all after the prompt prefill; text.input_ids,
text.logits, text.greedy_tokens for a text-only chat prompt; bf16 fixtures only: bf16.logits [T, V] from HF run
natively in bfloat16 (vision, projector and LLM), for the looser bf16 threshold.

Choices (and why)
-----------------
* dt floor: HF 5.17's Mamba mixer clamps dt = softplus(dt_raw + dt_bias) at time_step_min = 0.001 in the
  chunked (prefill) path; vLLM applies no clamp; the decode path clamps nothing. We keep every dt above the
  floor instead of changing HF: dt_bias = softplus⁻¹(dt0), dt0 log-uniform in [dt_lo, dt_hi], and the dt rows
  of in_proj are scaled down (dt_row_scale). Forward pre-hooks on every mixer recompute dt for every token of
  every run (prefill and each decode step) and the script asserts min dt > 0.001; the minimum is in
  manifest.json ("min_dt"). So the clamp is a no-op and an engine that follows vLLM (no clamp) must match.
  config.json has no time_step_limit (= no clamp).
* Conv-state layout: HF's cache keeps the last K pre-conv xBC inputs as [1, conv_dim, K]; the oldest column is
  never used again (decode concatenates and keeps the last K). The fixture stores the last K-1 as [conv_dim,
  K-1], oldest → newest (spec §2.1), i.e. HF[0, :, 1:]. Checked against a float64 token-by-token recurrence.
* SSM state: HF [1, H, P, N] → [H, P, N] (fp32). KV: HF [1, n_kv, T, hd] → [T, n_kv, hd]. No RoPE anywhere.
* CPE: RadioModel resizes the stored pos_embed grid (max_img_size/16 per side, larger than the tile grid) to
  the tile grid with F.interpolate(bilinear, align_corners=False), as RADIO eval and vLLM do (spec §4.3). The
  manual ViT self-check re-derives the bilinear weights by hand.
* Renames (spec §9): model.* → language_model.backbone.*, lm_head → language_model.lm_head; RADIO:
  embeddings.patch_projection → model.patch_generator.embedder, embeddings.position_embedding →
  model.patch_generator.pos_embed, embeddings.cls_register_token → model.patch_generator.cls_token.token,
  encoder.layer.{i}.attention.attention.{query,key,value} → model.blocks.{i}.attn.qkv (rows q|k|v),
  attention.output.dense → attn.proj, norm1/norm2/mlp.fc1/mlp.fc2 unchanged under model.blocks.{i}; HF's
  layer_scale{1,2} must be 1.0 and are not saved. The checkpoint's RADIO buffers are saved too, as the real
  checkpoint has them: vision_model.radio_model.summary_idxs (I64) and input_conditioner.norm_mean/norm_std
  [3,1,1] (unused: pixels are normalised in preprocessing). mlp1.{0,1,3}.weight hold the projector.
* Prompts: rendered with the chat template (jinja2 sandbox, as HF apply_chat_template; cross-checked against
  transformers' tokenizer loaded from the fixture folder), `<image>` expanded to `<img>` +
  `<image>`×(tiles·tokens) + `</img>`, tokenized without BOS. The image prompt is longer than chunk_size and
  not a multiple of it, so the chunked prefill crosses chunk boundaries with a ragged tail.
* Precision: tiny_fp32 is fp32 end to end. small_bf16 stores bf16 weights; its main outputs are fp32 math on
  the bf16 weights upcast to fp32 (what the CPU engine does), so greedy tokens must match exactly. bf16.logits
  is HF natively in bfloat16 (pixels cast to bf16 as vLLM does).
* Greedy: 32 new tokens through HF's cached decode path (conv update, SSM recurrence, KV append), no early
  stop. Every step's top-1 − top-2 margin must exceed MARGIN = 2e-3·max|logit| (image and text case), else the
  next seed is tried (the FIXTURES seeds are the first that pass, so a re-run needs no search); the tokens are
  also re-derived by a cache-free teacher-forced forward.
* bf16.logits vs logits (fp32 math on the same bf16 weights) differ by max|Δ|/max|ref| ≈ 2.7e-2 on small_bf16
  (manifest self_checks.bf16_vs_fp32_logits_rel): HF's native bf16 keeps the residual stream and activations
  in bf16. An fp32-math engine should be compared with `logits`; bf16.logits needs a threshold above that
  number.
* The tokenizer is trained on a self-contained seeded corpus (golden_assets.training_corpus), so it depends
  only on the seed. The prompt length must exceed chunk_size and not be a multiple of it; else the next seed
  is tried.
* Shapes are chosen so that no two weight matrices of a block are confusable by transposition in small_bf16
  (attention q dim 8·40 = 320 ≠ hidden 256; mamba head_dim 24 with 3 heads per group; projector hidden 320).
* Decisive greedy (greedy_bf16). With random weights the reference's top-1 − top-2 logit margins are tiny
  (small_bf16: 0.21% of max|logit| at worst), so a bf16 engine (logits within ~2e-2 of max|logit|) may flip
  the argmax legitimately and its greedy continuation diverge. greedy_bf16 is built so that EVERY one of the
  64 greedy steps (32 image prompt, 32 text prompt) has margin ≥ 6% of that row's max|logit| (3× the 2e-2
  threshold), so an engine within the threshold must reproduce all 64 tokens. Method:
  - Not row-norm tails or a larger lm_head_scale: the relative margin is invariant to a global scale, and
    log-normal row norms (σ 0.5…3) still leave 15-20% of steps under 6% when the hidden state is random
    (simulated; 20% measured on this model with σ 0.7 and 1.4), so 64 decisive steps in a row never happen.
    A clear winner needs structure, not tails.
  - Direct-path bigrams: lm_head row π(t) += bigram_scale/√d · E[t] (E = input embeddings, π a seeded random
    permutation of the vocabulary), i.e. W_U·W_E holds a bigram table, the first thing trained LMs learn
    (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"). The residual branches' output
    projections (Mamba out_proj, attention o_proj, MLP down_proj) are scaled by residual_scale = 1/√n_layers
    (the rescale_prenorm_residual rule of GPT-2/Mamba init), so the current token's embedding stays a large
    part of the final hidden state and its successor π(t) wins clearly; everything else (all layers, the
    image) still moves every logit, and the logits themselves are compared at 1e-4 (CPU) / 2e-2 (GPU).
    golden_model.add_direct_path_bigrams; π is drawn after every other weight.
  - Seed: a deterministic search (--search) from seed_search_from upward; the recorded seed is the first that
    passes, so a plain re-run needs no search. The criterion is the REFERENCE's margins (never agreement
    with any engine): every step > margin (0.06), ≥ min_distinct (4) distinct tokens per continuation, prompt
    length > chunk and not a multiple of it. manifest.json "greedy" records the rule, the chosen seed, each
    continuation's minimum margin and per-step margins, its distinct tokens, and
    steps_not_bigram_successor_* (steps whose token is not π(previous token): decided by the rest of the
    hidden state).
  - What it does not show: the bigram dominates, so the two continuations can coincide (both prompts end in
    `<think></think>`) and only a few steps are decided by the context (seed 1305: the image and text
    continuations are the same 32 tokens, and 1 step of each is not π(previous token)); an engine whose
    decode state were wrong could still reproduce most tokens here. Seeds that also make the continuations
    differ were all among those with sub-6% steps: of 165 seeds tried (1300-1388, 1400-1475), 42 passed the
    margin rule and none of them had differing continuations. The state itself is checked by the logits and state
    tensors of every fixture and by prefill(k) + decode(N−k) tests; small_bf16 stays the fixture whose greedy
    path depends on the whole context.
  - Shapes: tiny_fp32's (GPU-tested head_dim 16, d_state 16, chunk 16, hidden 64) in bf16, 3 tiles, one
    shard: the folder stays ≈2 MB.
* Self-checks (errors recorded in manifest.json): manual float64 ViT vs RadioModel features; pixel shuffle vs
  the spec's index map; each Mamba layer vs a float64 token-by-token recurrence (output, conv and SSM state);
  prefill(N) vs prefill(k) + prefill(N−k) with k inside a chunk (logits and every state); cached greedy vs
  teacher forcing; tokenizer ids vs transformers' PreTrainedTokenizerFast.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_assets as ga  # noqa: E402
import golden_model as gm  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
N_GREEDY = 32
MARGIN = 2e-3  # relative top-1 − top-2 gap required at every greedy step (brief: > 1e-3)
SEED_GREEDY = 1305  # greedy_bf16: the first seed ≥ seed_search_from that meets its criteria (--search re-derives)
SEED_TRIES = 400
DT_FLOOR = 0.001

FIXTURES = {
    "tiny_fp32": dict(
        seed=1250, dtype="float32", shards=1,
        text_vocab=1024, hidden=64, pattern="M-*M-M*-M", intermediate=128,
        n_heads=4, n_kv_heads=2, head_dim=16,
        mamba_heads=8, mamba_head_dim=16, n_groups=2, d_state=16, conv_kernel=4, chunk=16,
        vit_hidden=32, vit_layers=2, vit_heads=2, vit_n_cls=2, vit_register_multiple=4, vit_max_img=160,
        vit_args_model="vit_test_tiny_patch16", tile=64, max_tiles=12, projector_hidden=256,
        image_size=(190, 130),  # → 3×2 grid + thumbnail = 7 tiles
        dt_lo=0.01, dt_hi=0.2, dt_row_scale=0.3, lm_head_scale=2.0,
    ),
    "small_bf16": dict(
        seed=4326, dtype="bfloat16", shards=2,
        text_vocab=2048, hidden=256, pattern="M-M*-M-*M-M-", intermediate=320,
        n_heads=8, n_kv_heads=2, head_dim=40,  # 8·40 = 320 ≠ hidden on purpose
        mamba_heads=12, mamba_head_dim=24, n_groups=4, d_state=32, conv_kernel=4, chunk=32,  # 3 heads/group
        vit_hidden=64, vit_layers=3, vit_heads=4, vit_n_cls=1, vit_register_multiple=8, vit_max_img=128,
        vit_args_model="vit_test_small_patch16", tile=96, max_tiles=12, projector_hidden=320,
        image_size=(150, 70),  # → 2×1 grid + thumbnail = 3 tiles
        dt_lo=0.01, dt_hi=0.2, dt_row_scale=0.3, lm_head_scale=2.0,
    ),
    # tiny_fp32's shapes in bf16 with 3 tiles (≈2 MB), a direct-path bigram table in lm_head and damped
    # residual branches: every greedy step decisive (margin ≥ 6%), see "Decisive greedy" in the docstring.
    "greedy_bf16": dict(
        seed=SEED_GREEDY, seed_search_from=1300, dtype="bfloat16", shards=1,
        text_vocab=1024, hidden=64, pattern="M-*M-M*-M", intermediate=128,
        n_heads=4, n_kv_heads=2, head_dim=16,
        mamba_heads=8, mamba_head_dim=16, n_groups=2, d_state=16, conv_kernel=4, chunk=16,
        vit_hidden=32, vit_layers=2, vit_heads=2, vit_n_cls=2, vit_register_multiple=4, vit_max_img=160,
        vit_args_model="vit_test_tiny_patch16", tile=64, max_tiles=12, projector_hidden=256,
        image_size=(150, 70),  # → 2×1 grid + thumbnail = 3 tiles
        dt_lo=0.01, dt_hi=0.2, dt_row_scale=0.3, lm_head_scale=2.0,
        bigram_scale=4.0, residual_scale=1 / 3,  # 1/√9 layers
        margin=0.06, min_distinct=4,
    ),
}

IMAGE_MESSAGES = [
    {"role": "system", "content": "You are Surfer, a careful web agent. Answer briefly. /no_think"},
    {"role": "user", "content": [
        {"type": "image"},
        {"type": "text", "text": "Describe this image in detail, then say which button to click."}]},
]
TEXT_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant. /no_think"},
    {"role": "user", "content": "Write a short note about the weather in Paris and the colour of the sky "
                                "today, then list three things to click on the page."},
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def save_weights(folder, ckpt, dtype, shards):
    from safetensors.torch import save_file
    tensors = {}
    for k, v in ckpt.items():
        tensors[k] = v if v.dtype == torch.int64 else v.to(getattr(torch, dtype)).contiguous()
    if shards == 1:
        save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        return
    names = sorted(tensors)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    files, acc = [], 0
    for n in names:
        idx = min(int(acc * shards / total), shards - 1)
        files.append(idx)
        acc += tensors[n].numel() * tensors[n].element_size()
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n, f in zip(names, files) if f == s}
        assert part, "empty shard"
        save_file(part, os.path.join(folder, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    write_json(os.path.join(folder, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})


def expand_image_tokens(text, n_image_tokens):
    assert text.count("<image>") == 1
    return text.replace("<image>", "<img>" + "<image>" * n_image_tokens + "</img>")


def top_config(s, llm_cfg, vis_cfg, ids, dtype):
    return {
        "architectures": ["NemotronH_Nano_VL_V2"],
        "model_type": "NemotronH_Nano_VL_V2",
        "torch_dtype": dtype,
        "llm_config": llm_cfg,
        "vision_config": vis_cfg,
        "force_image_size": s["tile"],
        "patch_size": 16,
        "downsample_ratio": 0.5,
        "ps_version": "v2",
        "image_tag_type": "internvl",
        "use_thumbnail": True,
        "max_num_tiles": s["max_tiles"],
        "norm_mean": list(CLIP_MEAN),
        "norm_std": list(CLIP_STD),
        "vit_hidden_size": s["vit_hidden"],
        "projector_hidden_size": s["projector_hidden"],
        "img_context_token": "<image>",
        "img_start_token": "<img>",
        "img_end_token": "</img>",
        "img_context_token_id": ids["<image>"],
        "img_start_token_id": ids["<img>"],
        "img_end_token_id": ids["</img>"],
        "tie_word_embeddings": False,
        "vocab_size": llm_cfg["vocab_size"],
    }


def write_tokenizer(folder, tok_json, template, ids, text_vocab):
    write_json(os.path.join(folder, "tokenizer.json"), tok_json)
    added = {}
    for e in tok_json["added_tokens"]:
        added[str(e["id"])] = {"content": e["content"], "lstrip": False, "normalized": False, "rstrip": False,
                               "single_word": False, "special": e["special"]}
    write_json(os.path.join(folder, "tokenizer_config.json"), {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "<SPECIAL_12>", "unk_token": "<unk>", "pad_token": "<unk>",
        "add_bos_token": False, "add_eos_token": False, "clean_up_tokenization_spaces": False,
        "model_max_length": 131072, "added_tokens_decoder": added, "chat_template": template,
    })


def tokenize(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def run_case(llm, embeds, pattern):
    """Prefill + states + greedy. Returns dict of outputs and diagnostics."""
    out, run = gm.prefill(llm, embeds)
    logits = out.logits[0].float().clone()
    states = gm.extract_states(llm, out.past_key_values, pattern)
    layers = {f"layers.{i}": run.layer_out[i] for i in range(len(pattern))}
    toks, steps, dt_dec = gm.greedy(llm, logits[-1], out.past_key_values, N_GREEDY)
    return dict(logits=logits, states=states, layers=layers, norm_f=run.norm_f, greedy=toks,
                margins=gm.margins(steps), min_dt=min(run.min_dt, dt_dec))


@torch.no_grad()
def teacher_forced_check(llm, embeds, toks):
    """Cache-free forward over prompt + greedy tokens: the argmax at each position must reproduce the greedy
    tokens."""
    emb_new = llm.model.embeddings(torch.tensor(toks[:-1]))
    full = torch.cat([embeds, emb_new], 0)
    lg = llm(inputs_embeds=full[None], use_cache=False, logits_to_keep=0).logits[0]
    got = torch.argmax(lg[embeds.shape[0] - 1:], -1).tolist()
    assert got == toks, f"teacher-forced argmax {got} != cached greedy {toks}"


@torch.no_grad()
def split_prefill_check(llm, embeds, pattern, k, ref_logits, ref_states):
    out1, _ = gm.prefill(llm, embeds[:k])
    out2 = llm(inputs_embeds=embeds[None, k:], past_key_values=out1.past_key_values, use_cache=True,
               logits_to_keep=0)
    err = {"logits": gm.rel_err(out2.logits[0], ref_logits[k:])}
    st = gm.extract_states(llm, out2.past_key_values, pattern)
    for name, ref in ref_states.items():
        err[name] = gm.rel_err(st[name], ref)
    worst = max(err.values())
    assert worst < 1e-4, f"prefill({k}) + prefill(rest) differs from prefill(all): {err}"
    return worst


def mamba_checks(ckpt, llm, llm_cfg, embeds, layers, states, pattern):
    worst = 0.0
    prev = embeds
    for i, ch in enumerate(pattern):
        if ch == "M":
            blk = llm.model.layers[i]
            with torch.no_grad():
                u = blk.norm(prev[None])[0]
            y, conv, ssm = gm.manual_mamba(ckpt, i, u, llm_cfg)
            errs = [gm.rel_err(layers[f"layers.{i}"] - prev, y), gm.rel_err(states[f"state.conv.{i}"], conv),
                    gm.rel_err(states[f"state.ssm.{i}"], ssm)]
            assert max(errs) < 1e-4, f"layer {i}: HF vs manual Mamba recurrence (out, conv, ssm) = {errs}"
            worst = max(worst, *errs)
        prev = layers[f"layers.{i}"]
    return worst


def generate(name, s, out_root, seed):
    folder = os.path.join(out_root, name)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    tok_json, ids = ga.build_tokenizer(s["text_vocab"], seed)
    vocab = s["text_vocab"] + len(ga.IMAGE_TOKENS)
    s = dict(s, vocab_size=vocab)
    template, template_src = ga.chat_template(REPO)
    llm_cfg = gm.llm_config_dict(s, ids)
    vis_cfg = gm.vision_config_dict(s, CLIP_MEAN, CLIP_STD)
    config = top_config(s, llm_cfg, vis_cfg, ids, s["dtype"])
    llm, radio, mlp1 = gm.build_models(llm_cfg, vis_cfg, {"force_image_size": s["tile"],
                                                          "projector_hidden_size": s["projector_hidden"]})
    gm.init_weights(llm, radio, mlp1, gen, s)
    if s["dtype"] == "bfloat16":
        gm.round_to_bf16(llm, radio, mlp1)
    ckpt = gm.checkpoint_state_dict(llm, radio, mlp1)
    assert ckpt["language_model.backbone.embeddings.weight"].shape[0] == vocab

    tmp = tempfile.mkdtemp(prefix=f"golden_{name}_")
    try:
        # ---- inputs: image, tiles, prompts
        img = ga.make_image(*s["image_size"], seed)
        img.save(os.path.join(tmp, "image.png"))
        from PIL import Image
        img = Image.open(os.path.join(tmp, "image.png"))
        img.load()
        tiles, grid = ga.tile_image(img, s["tile"], s["max_tiles"], use_thumbnail=True)
        pixel_values = ga.tiles_to_pixels(tiles, s["tile"], CLIP_MEAN, CLIP_STD)
        n_tiles = pixel_values.shape[0]
        assert grid[0] * grid[1] >= 2 and n_tiles == grid[0] * grid[1] + 1
        tpt = (s["tile"] // 16 // 2) ** 2
        write_tokenizer(tmp, tok_json, template, ids, s["text_vocab"])
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
        rendered = ga.render_chat(template, IMAGE_MESSAGES)
        prompt_text = expand_image_tokens(rendered, n_tiles * tpt)
        input_ids = tokenize(tok, prompt_text)
        text_rendered = ga.render_chat(template, TEXT_MESSAGES)
        text_ids = tokenize(tok, text_rendered)
        check_with_transformers(tmp, rendered, text_rendered, prompt_text, input_ids, text_ids)
        T = len(input_ids)
        if T <= s["chunk"] or T % s["chunk"] == 0:  # the tokenizer depends on the seed
            raise SeedRejected(f"prompt length {T} must exceed chunk {s['chunk']} and not be a multiple")

        # ---- reference forward (fp32 math)
        with torch.no_grad():
            feats, shuffled, projected = gm.vision_forward(radio, mlp1, pixel_values)
        gm.check_pixel_shuffle(feats, shuffled)
        vit_err = gm.rel_err(feats, gm.manual_vit(ckpt, pixel_values, s["vit_layers"], s["vit_heads"], 1e-6))
        assert vit_err < 1e-4, f"RadioModel vs manual ViT: {vit_err}"
        ids_t = torch.tensor(input_ids)
        with torch.no_grad():
            embeds = llm.model.embeddings(ids_t).clone()
        img_pos = (ids_t == ids["<image>"]).nonzero()[:, 0]
        assert img_pos.numel() == projected.shape[0]
        embeds[img_pos] = projected
        res = run_case(llm, embeds, s["pattern"])
        with torch.no_grad():
            text_embeds = llm.model.embeddings(torch.tensor(text_ids)).clone()
        text_res = run_case(llm, text_embeds, s["pattern"])
        min_margin = min(res["margins"] + text_res["margins"])
        check_greedy_criteria(s, res, text_res, min_margin)  # before the slow self-checks: cheap seed search
        mamba_err = mamba_checks(ckpt, llm, llm_cfg, embeds, res["layers"], res["states"], s["pattern"])
        k = s["chunk"] + 3
        split_err = split_prefill_check(llm, embeds, s["pattern"], k, res["logits"], res["states"])
        teacher_forced_check(llm, embeds, res["greedy"])
        teacher_forced_check(llm, text_embeds, text_res["greedy"])
        min_dt = min(res["min_dt"], text_res["min_dt"])
        assert min_dt > DT_FLOOR, f"dt {min_dt} under HF's floor {DT_FLOOR}: redraw dt_bias"

        expected = {"input_ids": ids_t, "pixel_values": pixel_values, "vision.features": feats,
                    "vision.projected": projected, "embeds": embeds, **res["layers"], "norm_f": res["norm_f"],
                    "logits": res["logits"], "greedy_tokens": torch.tensor(res["greedy"]), **res["states"],
                    "text.input_ids": torch.tensor(text_ids), "text.logits": text_res["logits"],
                    "text.greedy_tokens": torch.tensor(text_res["greedy"])}
        extra = {}
        if s["dtype"] == "bfloat16":
            bf = native_bf16_logits(llm, radio, mlp1, pixel_values, ids_t, img_pos)
            expected["bf16.logits"] = bf
            extra["bf16_vs_fp32_logits_rel"] = gm.rel_err(bf, res["logits"])

        # ---- write the folder
        save_weights(tmp, ckpt, s["dtype"], s["shards"])
        write_json(os.path.join(tmp, "config.json"), config)
        write_json(os.path.join(tmp, "generation_config.json"), {
            "bos_token_id": ids["<s>"], "eos_token_id": [ids["</s>"], ids["<SPECIAL_12>"]],
            "pad_token_id": ids["<unk>"], "do_sample": False})
        write_json(os.path.join(tmp, "preprocessor_config.json"), {
            "image_processor_type": "NemotronNanoVLV2ImageProcessor", "image_size": s["tile"],
            "max_num_tiles": s["max_tiles"], "use_thumbnail": True, "patch_size": 16, "downsample_ratio": 0.5,
            "norm_mean": list(CLIP_MEAN), "norm_std": list(CLIP_STD)})
        from safetensors.torch import save_file
        save_file({k: (v.long() if v.dtype in (torch.int32, torch.int64) else v.float()).contiguous()
                   for k, v in expected.items()}, os.path.join(tmp, "expected.safetensors"),
                  metadata={"format": "pt"})
        manifest = make_manifest(name, s, seed, config, template_src, rendered, prompt_text, text_rendered,
                                 grid, n_tiles, tpt, T, len(text_ids), min_dt, min_margin, res, text_res,
                                 dict(vit_features_rel=vit_err, mamba_manual_rel=mamba_err,
                                      split_prefill_rel=split_err, split_prefill_k=k, **extra), tmp)
        if "margin" in s:
            manifest["greedy"].update(decisive_greedy_record(s, llm, input_ids[-1], text_ids[-1], res, text_res,
                                                              seed))
        manifest["self_checks"]["reload_from_files_rel"] = reload_check(tmp)
        write_json(os.path.join(tmp, "manifest.json"), manifest)
        if os.path.exists(folder):
            shutil.rmtree(folder)
        shutil.copytree(tmp, folder)
        os.chmod(folder, 0o755)
        for f in os.listdir(folder):
            os.chmod(os.path.join(folder, f), 0o644)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


@torch.no_grad()
def reload_check(folder):
    """Rebuilds the models from the folder's config.json + safetensors only, reruns the VL prefill and
    compares with expected.safetensors: proves the renames, the sharding and the config are complete."""
    from safetensors.torch import load_file
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    files = [f for f in sorted(os.listdir(folder)) if f.startswith("model") and f.endswith(".safetensors")]
    ckpt = {}
    for f in files:
        ckpt.update(load_file(os.path.join(folder, f)))
    if len(files) > 1:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            assert set(json.load(f)["weight_map"]) == set(ckpt)
    exp = load_file(os.path.join(folder, "expected.safetensors"))
    llm, radio, mlp1 = gm.models_from_checkpoint(config, ckpt)
    feats, _, projected = gm.vision_forward(radio, mlp1, exp["pixel_values"])
    ids_t = exp["input_ids"]
    embeds = llm.model.embeddings(ids_t).clone()
    embeds[ids_t == config["img_context_token_id"]] = projected
    logits = llm(inputs_embeds=embeds[None], use_cache=False, logits_to_keep=0).logits[0]
    errs = [gm.rel_err(feats, exp["vision.features"]), gm.rel_err(embeds, exp["embeds"]),
            gm.rel_err(logits, exp["logits"])]
    assert max(errs) < 1e-5, f"reloaded model differs from expected (features, embeds, logits): {errs}"
    return max(errs)


class SeedRejected(RuntimeError):
    """The seed gave a fixture that misses a requirement (greedy margin, prompt length): try the next one."""


def check_greedy_criteria(s, res, text_res, min_margin):
    """Seed acceptance on the reference alone (never on any engine's output): every step's relative
    top-1 − top-2 margin above the fixture's threshold; for decisive fixtures also ≥ min_distinct distinct
    tokens per continuation and, with continuations_differ, image and text continuations that differ (the
    prompt, not only the shared last prompt token, decides)."""
    threshold = s.get("margin", MARGIN)
    if min_margin <= threshold:
        raise SeedRejected(f"greedy margin {min_margin:.2e} <= {threshold}")
    for case in (res, text_res):
        if len(set(case["greedy"])) < s.get("min_distinct", 0):
            raise SeedRejected(f"greedy continuation has {len(set(case['greedy']))} distinct tokens")
    if s.get("continuations_differ") and res["greedy"] == text_res["greedy"]:
        raise SeedRejected("image and text prompts give the same greedy continuation")


def decisive_greedy_record(s, llm, last_id, text_last_id, res, text_res, seed):
    """Manifest facts for a decisive fixture: per-continuation minimum margins, distinct tokens, and how many
    steps the direct-path bigram alone does not explain (token ≠ π(previous token)): those were decided by
    the rest of the hidden state."""
    succ = llm.bigram_successor
    out = {"margin_threshold_rel": s["margin"],
           "seed_search": {"from": s["seed_search_from"], "chosen": seed,
                           "rule": "first seed >= from whose reference greedy continuations (image and text) "
                                   "have every step's (top1 - top2)/max|logit| > margin and >= min_distinct "
                                   "distinct tokens each" + (", and differ from each other"
                                                             if s.get("continuations_differ") else "")
                                   + "; prompt length > chunk and not a multiple of it"}}
    for key, case, last in (("image", res, last_id), ("text", text_res, text_last_id)):
        toks = case["greedy"]
        out[f"min_margin_rel_{key}"] = min(case["margins"])
        out[f"margins_rel_{key}"] = [round(m, 5) for m in case["margins"]]
        out[f"distinct_tokens_{key}"] = len(set(toks))
        out[f"steps_not_bigram_successor_{key}"] = sum(
            1 for p, t in zip([last] + toks[:-1], toks) if succ[p] != t)
    return out


@torch.no_grad()
def native_bf16_logits(llm, radio, mlp1, pixel_values, ids_t, img_pos):
    import copy
    llm_b, radio_b, mlp1_b = (copy.deepcopy(m).to(torch.bfloat16) for m in (llm, radio, mlp1))
    _, _, projected = gm.vision_forward(radio_b, mlp1_b, pixel_values.to(torch.bfloat16))
    embeds = llm_b.model.embeddings(ids_t).clone()
    embeds[img_pos] = projected.to(embeds.dtype)
    return llm_b(inputs_embeds=embeds[None], use_cache=False, logits_to_keep=0).logits[0].float()


def check_with_transformers(folder, rendered, text_rendered, prompt_text, input_ids, text_ids):
    """The fixture's tokenizer files load in transformers and give the same text and ids."""
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast.from_pretrained(folder)
    for msgs, want in ((IMAGE_MESSAGES, rendered), (TEXT_MESSAGES, text_rendered)):
        got = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        assert got == want, f"transformers renders {got!r}, jinja2 {want!r}"
    assert hf(prompt_text, add_special_tokens=False)["input_ids"] == input_ids
    assert hf(text_rendered, add_special_tokens=False)["input_ids"] == text_ids
    assert hf.decode(input_ids) == prompt_text, "tokenizer does not round-trip the prompt"


def make_manifest(name, s, seed, config, template_src, rendered, prompt_text, text_rendered, grid, n_tiles,
                  tpt, T, T_text, min_dt, min_margin, res, text_res, checks, folder):
    import PIL
    import safetensors
    import tokenizers
    import torchvision
    import transformers
    files = {f: sha256(os.path.join(folder, f)) for f in sorted(os.listdir(folder))}
    return {
        "generator": "tests/reference/make_golden.py (+ golden_assets.py, golden_model.py)",
        "fixture": name,
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "pillow": PIL.__version__, "torchvision": torchvision.__version__,
                     "safetensors": safetensors.__version__},
        "seed": seed,
        "spec": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.items()},
        "config": config,
        "chat_template_source": template_src,
        "image": {"file": "image.png", "size": list(s["image_size"]), "grid_cols_rows": list(grid),
                  "n_tiles": n_tiles, "tokens_per_tile": tpt},
        "prompt": {"messages": IMAGE_MESSAGES, "rendered": rendered, "expanded": prompt_text, "n_tokens": T,
                   "add_special_tokens": False},
        "text_prompt": {"messages": TEXT_MESSAGES, "rendered": text_rendered, "n_tokens": T_text,
                        "add_special_tokens": False},
        "greedy": {"n_new": N_GREEDY, "tokens": res["greedy"], "text_tokens": text_res["greedy"],
                   "min_margin_rel": min_margin, "margin_threshold_rel": MARGIN, "stops_at_eos": False},
        "min_dt": min_dt,
        "dt_floor_reference": DT_FLOOR,
        "math": "fp32 on bf16-rounded weights" if s["dtype"] == "bfloat16" else "fp32",
        "self_checks": checks,
        "sha256": files,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(FIXTURES))
    ap.add_argument("--search", action="store_true",
                    help="start a fixture's seed search at its seed_search_from instead of its recorded seed")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "golden"))
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    for name, spec in FIXTURES.items():
        if args.only and name != args.only:
            continue
        first = spec.get("seed_search_from", spec["seed"]) if args.search else spec["seed"]
        for attempt in range(SEED_TRIES if "margin" in spec else 20):
            seed = first + attempt
            try:
                m = generate(name, spec, args.out, seed)
                break
            except SeedRejected as e:
                print(f"{name}: seed {seed}: {e}; trying the next seed")
        else:
            raise SystemExit(f"{name}: no seed gave comfortable greedy margins")
        size = sum(os.path.getsize(os.path.join(args.out, name, f)) for f in m["sha256"])
        print(f"{name}: seed {seed}, T={m['prompt']['n_tokens']} (text {m['text_prompt']['n_tokens']}), "
              f"tiles {m['image']['n_tiles']}, min dt {m['min_dt']:.4g}, "
              f"min margin {m['greedy']['min_margin_rel']:.3g}, "
              f"checks {m['self_checks']}, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
