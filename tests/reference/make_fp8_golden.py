#!/usr/bin/env python3
"""FP8 (E4M3) golden fixtures: a PyTorch reference of surf's FP8 scheme for the language model's GEMMs.

Usage:  python tests/reference/make_fp8_golden.py [--out DIR] [--search]
Needs:  what make_golden.py needs (torch with float8_e4m3fn, transformers with NemotronH, tokenizers,
        safetensors). Under a minute on 2 CPU cores. CI never runs it: the outputs are committed.

The scheme (the same math as kernels/cpu/fp8.h, written here independently with torch.float8_e4m3fn casts)
---------------------------------------------------------------------------------------------------------
Every language-model linear layer (Mamba in_proj/out_proj, attention q/k/v/o_proj, MLP up/down_proj; never
lm_head, the embeddings or the vision tower) becomes Fp8Linear:
  e4m3(v)  = v.clamp(-448, 448).to(torch.float8_e4m3fn)          (round to nearest even, saturating)
  weights  W_q = e4m3(W / s_w) with s_w from the scheme below
  inputs   dynamic per token: s_x = amax(|x_row|) / 448 (1 for a zero row), x_q = e4m3(x / s_x);
           static per tensor (ModelOpt): s_x = input_scale, x_q = e4m3(x / input_scale)
  output   y = (x_q · W_qᵀ) · s_x · s_w, in fp32 (E4M3 values upcast to fp32; products exact, sums fp32)
Everything else runs as make_golden.py's references do: fp32 math on bf16-rounded weights, SSM state fp32.

Fixtures (tests/fixtures/fp8/)
------------------------------
* on_load/: quantize-on-load (`--quantize fp8`) of tests/fixtures/golden/greedy_bf16 (the model is not
  copied: the test loads that folder). Per-output-channel s_w = amax(|W_row|)/448 (1 for a zero row), dynamic
  per-token inputs. expected.safetensors: input_ids [T] (a window of N_PROMPT ids of greedy_bf16's text
  prompt, see "Decisive quantization"), logits [T, V] of the prefill, greedy_tokens [N_GREEDY] through HF's cached decode path, and
  greedy_logits [N_GREEDY, V] (the logits each greedy token is taken from).
* modelopt/ and compressed_tensors/: two FP8 checkpoints of one small text-only model (NemotronHForCausalLM
  layout, `backbone.*` names) built with golden_model.py's builders and initialisation (MODEL below, bf16
  weights, a decisive-greedy bigram table as in greedy_bf16), smaller than the golden fixtures so that both
  stay a few hundred KB.
  - modelopt/: quant_method modelopt / quant_algo FP8 in config.json's quantization_config AND
    hf_quant_config.json (ModelOpt writes both). Per tensor: weight_scale = amax(|W|)/448 (F32 scalar),
    weight F8_E4M3, input_scale = calibrated amax(|x|)/448 (F32 scalar) from a calibration prompt that is not
    the test prompt, so the test prompt saturates some inputs at ±448 (counted in manifest.json).
  - compressed_tensors/: quant_method compressed-tensors, one config group (targets Linear): weights float
    8-bit per channel (weight_scale [out, 1], stored BF16 as llm-compressor stores it; the reference uses the
    stored BF16 value), input activations float 8-bit per token, dynamic.
  - Both leave lm_head unquantized and each ignores one more linear layer (a glob for ModelOpt, a "re:"
    regex for compressed-tensors) that stays BF16 in the file: the ignore lists are exercised.
  Each folder holds config.json, tokenizer.json, generation_config.json, model.safetensors,
  expected.safetensors (input_ids, logits, greedy_tokens, greedy_logits as above) and manifest.json.
* e4m3_table.safetensors: codes [256] U8 with decoded [256] F32 (torch's float8_e4m3fn → float32; NaN for
  0x7F/0xFF), and inputs [n] F32 with expected [n] U8 = e4m3(inputs) for every midpoint between adjacent
  E4M3 values (ties), the floats either side of each midpoint, random magnitudes from 2^-12 to 2^10, the
  subnormal range, and saturation (±448, beyond, ±inf), both signs.

Decisive quantization (the prompts)
-----------------------------------
Two fp32 implementations of the scheme sum in different orders, so a scaled input v = x / s that lies within
a few fp32 ulps of an E4M3 rounding boundary (a midpoint between adjacent E4M3 values) may round up in one and
down in the other; that one code then moves the logits by far more than fp32 rounding (an E4M3 step is an
eighth of the value), and through the recurrent state for every later token. Such values are rare, but a
prompt of a few dozen tokens meets some. So each case takes the FIRST N_PROMPT-token window of its
token stream (greedy_bf16's text prompt; PROMPT_TEXT for the checkpoints) whose reference prefill and greedy
steps keep every quantized input with |v| >= TIE_MIN (smaller values move the outputs negligibly) more than
TIE_ULPS fp32 ulps from a boundary, and whose greedy margins pass. The rule looks at the reference alone,
never at an engine's output, like make_golden.py's margin rule; manifest.json records the window.

Self-checks (asserted; numbers in the manifests): unquantized HF on greedy_bf16 reproduces that fixture's
text.logits; every greedy step's top-1 − top-2 margin of the FP8 reference exceeds MARGIN·max|logit|; no
greedy token is an image token (the engine never samples those); a cache-free teacher-forced forward
reproduces each greedy continuation; dt stays above HF's floor. MODEL's seed is the first whose cases all
find a window (--search re-derives it).
"""

import argparse
import copy
import json
import math
import os
import shutil
import sys
import tempfile

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_assets as ga  # noqa: E402
import golden_model as gm  # noqa: E402
import make_golden as mg  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE = os.path.join(REPO, "tests", "fixtures", "golden", "greedy_bf16")
E4M3_MAX = 448.0
N_PROMPT = 20  # > chunk (16) and not a multiple of it: the chunked prefill has a ragged tail
N_GREEDY = 16
MARGIN = 1e-3  # relative top-1 − top-2 margin every greedy step of an FP8 reference must exceed
TIE_ULPS = 8  # quantized inputs |v| >= TIE_MIN stay more than this many fp32 ulps of v from a rounding boundary
TIE_MIN = 1 / 32
LINEARS = ("in_proj", "out_proj", "q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj")

MODEL = dict(
    seed=7100, dtype="bfloat16",
    text_vocab=320, hidden=64, pattern="M-*M-", intermediate=128,
    n_heads=4, n_kv_heads=2, head_dim=16,
    mamba_heads=4, mamba_head_dim=16, n_groups=2, d_state=16, conv_kernel=4, chunk=16,
    dt_lo=0.01, dt_hi=0.2, dt_row_scale=0.3, lm_head_scale=2.0,
    bigram_scale=4.0, residual_scale=1 / math.sqrt(5),
)
MODELOPT_IGNORE = ["lm_head", "*layers.0.mixer.out_proj"]
CT_IGNORE = ["lm_head", r"re:.*layers\.4\.mixer\.down_proj$"]
PROMPT_TEXT = ("Write a short note about the weather in Paris and the colour of the sky today, then list "
               "three things to click on the page. Describe this image in detail, then say which button to "
               "click, and answer briefly with the price and the date of the form you submit.")
CALIBRATION_TEXT = "You are Surfer, a careful web agent. Answer briefly and describe the button to click."


# ------------------------------------------------------------------------------------- the scheme

def e4m3(v):
    return v.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def e4m3_boundaries():
    """The rounding boundaries of E4M3 below 448: midpoints between adjacent values (0 included)."""
    values = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    grid = torch.cat([torch.zeros(1), values[(values > 0) & ~values.isnan()].unique()])
    return (grid[:-1] + grid[1:]) / 2


BOUNDARIES = e4m3_boundaries()


def near_boundary(v):
    """How many scaled inputs v (x / s, before the clamp) with TIE_MIN <= |v| < 448 lie within TIE_ULPS fp32
    ulps of an E4M3 rounding boundary: the ones whose code another fp32 implementation could round the other
    way (it sums in another order)."""
    a = v.abs().reshape(-1).float()
    a = a[(a >= TIE_MIN) & (a < E4M3_MAX)]
    i = torch.searchsorted(BOUNDARIES, a).clamp(1, len(BOUNDARIES) - 1)
    d = torch.minimum((a - BOUNDARIES[i - 1]).abs(), (a - BOUNDARIES[i]).abs())
    return int((d <= TIE_ULPS * torch.finfo(torch.float32).eps * a).sum())


def quantize_rows(x):
    """Per-row symmetric E4M3: (codes, scale [.., 1]) with scale = amax/448, 1 for an all-zero row."""
    amax = x.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return e4m3(x / scale), scale


class Fp8Linear(nn.Module):
    """y = (x_q · W_qᵀ) · s_x · s_w in fp32; x_q per token (input_scale None) or with the static scale."""

    def __init__(self, w_q, w_scale, input_scale=None):
        super().__init__()
        assert w_q.dtype == torch.float8_e4m3fn
        self.register_buffer("w", w_q.float())
        self.register_buffer("w_scale", w_scale.float().reshape(-1))
        self.input_scale = None if input_scale is None else input_scale.float().reshape(())
        self.saturated = 0  # static-scale inputs beyond ±448 before the clamp, in the checked run

    watch = None  # a list collecting near_boundary counts while a reference run is checked

    def forward(self, x):
        x = x.float()
        if self.input_scale is None:
            x_q, s_x = quantize_rows(x)
        else:
            s_x = self.input_scale
            x_q = e4m3(x / s_x)
        if Fp8Linear.watch is not None:
            Fp8Linear.watch.append(near_boundary(x / s_x))
            if self.input_scale is not None:
                self.saturated += int(((x / s_x).abs() > E4M3_MAX).sum())
        return (x_q.float() @ self.w.t()) * s_x * self.w_scale


def lm_linears(llm, prefix):
    """(module name in the checkpoint, mixer, attribute) of every language-model nn.Linear."""
    for i, blk in enumerate(llm.model.layers):
        for attr in LINEARS:
            if isinstance(getattr(blk.mixer, attr, None), nn.Linear):
                yield f"{prefix}layers.{i}.mixer.{attr}", blk.mixer, attr


def quantized_on_load(llm):
    """--quantize fp8: every LM linear per output channel, dynamic per-token inputs."""
    q = copy.deepcopy(llm)
    for _, mixer, attr in list(lm_linears(q, "")):
        w_q, s_w = quantize_rows(getattr(mixer, attr).weight.detach().float())
        setattr(mixer, attr, Fp8Linear(w_q, s_w))
    return q


# ------------------------------------------------------------------------------------- reference runs

def build_llm(llm_cfg):
    """HF NemotronHForCausalLM from an llm_config dict, as golden_model.build_models builds it (the vision
    tower is not needed here)."""
    from transformers import NemotronHConfig, NemotronHForCausalLM
    cfg = NemotronHConfig(**{k: v for k, v in llm_cfg.items() if k not in ("architectures", "model_type")})
    cfg._attn_implementation = "eager"
    return NemotronHForCausalLM(cfg).eval()


@torch.no_grad()
def reference_run(llm, ids, image_ids=()):
    """Prefill logits, greedy tokens through HF's cached path, their logits and margins, min dt. Rejects a
    prompt whose prefill or greedy steps quantize an input next to an E4M3 rounding boundary (near_boundary)."""
    embeds = llm.model.embeddings(torch.tensor(ids)).clone()
    for m in llm.modules():
        if isinstance(m, Fp8Linear):
            m.saturated = 0
    Fp8Linear.watch = []
    try:
        out, run = gm.prefill(llm, embeds)
        logits = out.logits[0].float().clone()
        toks, steps, dt_dec = gm.greedy(llm, logits[-1], out.past_key_values, N_GREEDY)
        near = sum(Fp8Linear.watch)
    finally:
        Fp8Linear.watch = None
    if near:
        raise mg.SeedRejected(f"{near} quantized inputs within {TIE_ULPS} ulps of an E4M3 rounding boundary")
    mg.teacher_forced_check(llm, embeds, toks)
    margins = gm.margins(steps)
    if min(margins) <= MARGIN:
        raise mg.SeedRejected(f"greedy margin {min(margins):.2e} <= {MARGIN}")
    assert not set(toks) & set(image_ids), f"greedy picks an image token: {toks}"
    min_dt = min(run.min_dt, dt_dec)
    assert min_dt > mg.DT_FLOOR, f"dt {min_dt} under HF's floor"
    return dict(logits=logits, greedy=toks, greedy_logits=torch.stack(steps), margins=margins, min_dt=min_dt)


def expected_tensors(ids, res):
    return {"input_ids": torch.tensor(ids, dtype=torch.int64), "logits": res["logits"],
            "greedy_tokens": torch.tensor(res["greedy"], dtype=torch.int64),
            "greedy_logits": res["greedy_logits"].float()}


def save_expected(folder, tensors):
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(folder, "expected.safetensors"),
              metadata={"format": "pt"})


def manifest(name, folder, extra):
    import safetensors
    import transformers
    return {"generator": "tests/reference/make_fp8_golden.py (+ golden_model.py, golden_assets.py)",
            "fixture": name,
            "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                         "transformers": transformers.__version__, "safetensors": safetensors.__version__},
            **extra,
            "sha256": {f: mg.sha256(os.path.join(folder, f)) for f in sorted(os.listdir(folder))}}


def summary(res):
    return {"greedy_tokens": res["greedy"], "min_margin_rel": min(res["margins"]), "min_dt": res["min_dt"]}


# ------------------------------------------------------------------------------------- on_load

@torch.no_grad()
def make_on_load(out_root):
    with open(os.path.join(SOURCE, "config.json")) as f:
        config = json.load(f)
    from safetensors.torch import load_file
    ckpt = load_file(os.path.join(SOURCE, "model.safetensors"))
    exp = load_file(os.path.join(SOURCE, "expected.safetensors"))
    llm = build_llm(config["llm_config"])
    llm.load_state_dict({("model." + k[len("language_model.backbone."):] if k.startswith("language_model.backbone.")
                          else "lm_head.weight"): v.float() for k, v in ckpt.items()
                         if k.startswith("language_model.")}, strict=True)
    text_ids = exp["text.input_ids"].tolist()
    # The HF version in use must reproduce the source fixture's unquantized reference.
    embeds = llm.model.embeddings(torch.tensor(text_ids))
    base = llm(inputs_embeds=embeds[None], use_cache=False, logits_to_keep=0).logits[0]
    base_err = gm.rel_err(base, exp["text.logits"])
    assert base_err < 1e-5, f"HF does not reproduce greedy_bf16's text.logits: {base_err}"
    image_ids = [config["img_context_token_id"], config["img_start_token_id"], config["img_end_token_id"]]
    start, ids, res = first_decisive_window(quantized_on_load(llm), text_ids, image_ids)
    folder = os.path.join(out_root, "on_load")
    os.makedirs(folder, exist_ok=True)
    save_expected(folder, expected_tensors(ids, res))
    extra = {"model": "tests/fixtures/golden/greedy_bf16 (loaded from there, not copied)",
             "scheme": "quantize on load: per-output-channel weight scales, dynamic per-token inputs",
             "prompt": f"greedy_bf16 text.input_ids[{start}:{start + N_PROMPT}]", **summary(res), "self_checks": {"unquantized_vs_greedy_bf16_text_logits_rel": base_err}}
    write_manifest(folder, "on_load", extra)
    return res


def first_decisive_window(llm, stream, image_ids=()):
    """The first N_PROMPT-token window of `stream` whose reference run passes every check of reference_run
    (greedy margins, no quantized input next to a rounding boundary): (start, ids, result)."""
    reasons = []
    for start in range(len(stream) - N_PROMPT + 1):
        try:
            ids = stream[start:start + N_PROMPT]
            return start, ids, reference_run(llm, ids, image_ids)
        except mg.SeedRejected as e:
            reasons.append(f"window {start}: {e}")
    raise mg.SeedRejected("no decisive prompt window: " + "; ".join(reasons))


def write_manifest(folder, name, extra):
    path = os.path.join(folder, "manifest.json")
    if os.path.exists(path):
        os.remove(path)
    mg.write_json(path, manifest(name, folder, extra))


# ------------------------------------------------------------------------------------- FP8 checkpoints

def build_model(seed):
    s = dict(MODEL, vocab_size=MODEL["text_vocab"] + len(ga.IMAGE_TOKENS))
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    tok_json, ids = ga.build_tokenizer(s["text_vocab"], seed)
    llm_cfg = gm.llm_config_dict(s, ids)
    llm = build_llm(llm_cfg)
    # golden_model's initialisation; the vision tower and projector it also draws are not part of this model.
    gm.init_weights(llm, nn.Module(), gm.Mlp1(4, 4, s["hidden"]), gen, s)
    gm.round_to_bf16(llm)
    return llm, llm_cfg, tok_json, ids


def text_ids(tok_json, text):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_str(json.dumps(tok_json))
    return tok.encode(text, add_special_tokens=False).ids


@torch.no_grad()
def input_amax(llm, ids):
    """amax(|x|) of every LM linear's input over a calibration prompt (ModelOpt's max calibration)."""
    amax, hooks = {}, []
    for name, mixer, attr in lm_linears(llm, "backbone."):
        def hook(mod, args, name=name):
            amax[name] = max(amax.get(name, 0.0), float(args[0].abs().max()))
        hooks.append(getattr(mixer, attr).register_forward_pre_hook(hook))
    llm(inputs_embeds=llm.model.embeddings(torch.tensor(ids))[None], use_cache=False)
    for h in hooks:
        h.remove()
    return amax


def ignored(name, entries):
    """The ignore lists as written in MODELOPT_IGNORE / CT_IGNORE (a name suffix, a glob, a "re:" regex)."""
    import fnmatch
    import re
    for e in entries:
        if e.startswith("re:"):
            if re.match(e[3:], name):
                return True
        elif "*" in e:
            if fnmatch.fnmatchcase(name, e):
                return True
        elif name == e or name.endswith("." + e):
            return True
    return False


@torch.no_grad()
def quantize_checkpoint(llm, method, calib_ids):
    """The FP8 model of `method` and its checkpoint tensors. Quantized layers read back exactly what is saved
    (E4M3 codes, the stored scales)."""
    q = copy.deepcopy(llm)
    amax = input_amax(llm, calib_ids) if method == "modelopt" else {}
    tensors, n_fp8 = {}, 0
    for name, mixer, attr in list(lm_linears(q, "backbone.")):
        if ignored(name, MODELOPT_IGNORE if method == "modelopt" else CT_IGNORE):
            continue
        w = getattr(mixer, attr).weight.detach().float()
        if method == "modelopt":
            s_w = w.abs().max() / E4M3_MAX
            s_in = torch.tensor(amax[name] / E4M3_MAX, dtype=torch.float32)
            w_q = e4m3(w / s_w)
            tensors.update({name + ".weight": w_q, name + ".weight_scale": s_w.reshape(()),
                            name + ".input_scale": s_in})
            setattr(mixer, attr, Fp8Linear(w_q, s_w.expand(w.shape[0]), s_in))
        else:
            amax_row = w.abs().amax(dim=1, keepdim=True)
            s_w = torch.where(amax_row > 0, amax_row / E4M3_MAX, torch.ones_like(amax_row)).bfloat16()
            w_q = e4m3(w / s_w.float())
            tensors.update({name + ".weight": w_q, name + ".weight_scale": s_w})
            setattr(mixer, attr, Fp8Linear(w_q, s_w))
        n_fp8 += 1
    return q, tensors, n_fp8


def quant_configs(method):
    """(config.json quantization_config, hf_quant_config.json or None)."""
    if method == "modelopt":
        producer = {"name": "modelopt", "version": "surf make_fp8_golden.py"}
        return ({"quant_method": "modelopt", "quant_algo": "FP8", "ignore": MODELOPT_IGNORE,
                 "kv_cache_scheme": None, "producer": producer},
                {"producer": producer, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None,
                                                        "exclude_modules": MODELOPT_IGNORE}})
    args = {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "block_structure": None,
            "actorder": None, "observer": "minmax", "observer_kwargs": {}}
    return ({"quant_method": "compressed-tensors", "format": "float-quantized",
             "quantization_status": "compressed", "global_compression_ratio": None,
             "config_groups": {"group_0": {
                 "targets": ["Linear"], "output_activations": None,
                 "weights": dict(args, strategy="channel", dynamic=False),
                 "input_activations": dict(args, strategy="token", dynamic=True, observer=None)}},
             "ignore": CT_IGNORE, "kv_cache_scheme": None}, None)


def save_checkpoint(folder, llm, tensors):
    """Text-only layout: HF model.* → backbone.*; quantized linears replaced by their FP8 tensors."""
    from safetensors.torch import save_file
    out = {}
    for name, t in llm.state_dict().items():
        key = "backbone." + name[len("model."):] if name.startswith("model.") else name
        out[key] = t.detach().to(torch.bfloat16).contiguous()
    for key, t in tensors.items():
        out[key] = t.contiguous()
    save_file(out, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})


def make_checkpoints(out_root, seed):
    llm, llm_cfg, tok_json, ids = build_model(seed)
    stream = text_ids(tok_json, PROMPT_TEXT)
    calib = text_ids(tok_json, CALIBRATION_TEXT)
    results = {}
    for method, name in (("modelopt", "modelopt"), ("compressed-tensors", "compressed_tensors")):
        q, tensors, n_fp8 = quantize_checkpoint(llm, method, calib)
        start, prompt, res = first_decisive_window(q, stream)
        saturated = sum(m.saturated for m in q.modules() if isinstance(m, Fp8Linear))
        results[name] = (q, tensors, n_fp8, res, saturated, start, prompt)
    for name, (q, tensors, n_fp8, res, saturated, start, prompt) in results.items():
        folder = os.path.join(out_root, name)
        tmp = tempfile.mkdtemp(prefix=f"fp8_{name}_")
        try:
            config, hf_quant = quant_configs("modelopt" if name == "modelopt" else "compressed-tensors")
            mg.write_json(os.path.join(tmp, "config.json"),
                          dict(llm_cfg, torch_dtype="bfloat16", quantization_config=config))
            if hf_quant:
                mg.write_json(os.path.join(tmp, "hf_quant_config.json"), hf_quant)
            mg.write_json(os.path.join(tmp, "tokenizer.json"), tok_json)
            mg.write_json(os.path.join(tmp, "generation_config.json"), {
                "bos_token_id": ids["<s>"], "eos_token_id": [ids["</s>"], ids["<SPECIAL_12>"]],
                "pad_token_id": ids["<unk>"], "do_sample": False})
            save_checkpoint(tmp, llm, tensors)
            save_expected(tmp, expected_tensors(prompt, res))
            extra = {"seed": seed, "model_spec": MODEL, "method": name, "fp8_linear_layers": n_fp8,
                     "prompt_text": PROMPT_TEXT, "prompt": f"its tokens [{start}:{start + N_PROMPT}]",
                     "calibration_text": CALIBRATION_TEXT, **summary(res),
                     "static_inputs_saturated": saturated}
            write_manifest(tmp, name, extra)
            if os.path.exists(folder):
                shutil.rmtree(folder)
            shutil.copytree(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {k: (v[3], v[4]) for k, v in results.items()}


# ------------------------------------------------------------------------------------- E4M3 table

def make_table(out_root):
    from safetensors.torch import save_file
    gen = torch.Generator().manual_seed(8)
    codes = torch.arange(256, dtype=torch.uint8)
    decoded = codes.view(torch.float8_e4m3fn).float()
    pos = decoded[(decoded > 0) & ~decoded.isnan()].unique()
    grid = torch.cat([torch.zeros(1), pos, torch.tensor([480.0])])  # 480: the next step above 448
    mids = (grid[:-1] + grid[1:]) / 2
    inf = torch.tensor(float("inf"))
    parts = [mids, torch.nextafter(mids, inf), torch.nextafter(mids, -inf), pos,
             torch.exp2(torch.rand(2000, generator=gen) * 22 - 12),
             torch.rand(500, generator=gen) * 2.0 ** -6,
             torch.rand(200, generator=gen) * 1600 + 400,
             torch.tensor([0.0, 448.0, 464.0, 1e30, float("inf"), 1e-40, 2.0 ** -10, 2.0 ** -126])]
    mags = torch.cat(parts).float()
    inputs = torch.cat([mags, -mags])
    expected = e4m3(inputs).view(torch.uint8)
    save_file({"codes": codes, "decoded": decoded, "inputs": inputs, "expected": expected},
              os.path.join(out_root, "e4m3_table.safetensors"), metadata={"format": "pt"})
    return inputs.numel()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "fp8"))
    ap.add_argument("--search", action="store_true", help="search the model seed from MODEL['seed'] upward")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    n = make_table(args.out)
    print(f"e4m3_table: {n} inputs")
    res = make_on_load(args.out)
    print(f"on_load: min margin {min(res['margins']):.3g}, greedy {res['greedy']}")
    for attempt in range(50 if args.search else 1):
        seed = MODEL["seed"] + attempt
        try:
            done = make_checkpoints(args.out, seed)
            break
        except mg.SeedRejected as e:
            print(f"model seed {seed}: {e}; trying the next seed")
    else:
        raise SystemExit("no seed gave decisive greedy margins (try --search)")
    for name, (r, saturated) in done.items():
        print(f"{name}: seed {seed}, min margin {min(r['margins']):.3g}, saturated inputs {saturated}, "
              f"greedy {r['greedy']}")
    for name in ("on_load", "modelopt", "compressed_tensors"):
        with open(os.path.join(args.out, name, "manifest.json")) as f:
            print(f"{name}: prompt {json.load(f)['prompt']}")
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(args.out) for f in fs)
    print(f"{args.out}: {total / 1e3:.0f} KB")


if __name__ == "__main__":
    main()
