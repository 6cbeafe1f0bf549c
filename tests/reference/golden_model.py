"""Model side of the golden fixtures: HF NemotronH + RadioModel + a hand-made mlp1, weight init, the renames
to the real checkpoint layout, the composed VL forward, and independent self-checks. See make_golden.py's
docstring."""

import math

import torch
import torch.nn.functional as F
from torch import nn

PATTERN_KIND = {"M": "mamba", "*": "attention", "-": "mlp"}


# ------------------------------------------------------------------------------------- configs

def llm_config_dict(s, ids):
    """llm_config with the field names of the real Nemotron-H config (spec §1.1)."""
    return {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "vocab_size": s["vocab_size"],
        "hidden_size": s["hidden"],
        "num_hidden_layers": len(s["pattern"]),
        "hybrid_override_pattern": s["pattern"],
        "intermediate_size": s["intermediate"],
        "num_attention_heads": s["n_heads"],
        "num_key_value_heads": s["n_kv_heads"],
        "head_dim": s["head_dim"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "sliding_window": None,
        "mamba_num_heads": s["mamba_heads"],
        "mamba_head_dim": s["mamba_head_dim"],
        "ssm_state_size": s["d_state"],
        "n_groups": s["n_groups"],
        "conv_kernel": s["conv_kernel"],
        "chunk_size": s["chunk"],
        "expand": 2,  # unused by HF/vLLM: d_inner = mamba_num_heads * mamba_head_dim
        "use_conv_bias": True,
        "use_bias": False,
        "mamba_proj_bias": False,
        "mlp_bias": False,
        "mlp_hidden_act": "relu2",
        "mamba_hidden_act": "silu",
        "layer_norm_epsilon": 1e-5,
        "time_step_min": 0.001,
        "time_step_max": 0.1,
        "time_step_floor": 1e-4,
        "residual_in_fp32": False,
        "rescale_prenorm_residual": True,
        "tie_word_embeddings": False,
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids["<SPECIAL_12>"],
        "pad_token_id": ids["<unk>"],
        "max_position_embeddings": 131072,
        "num_logits_to_keep": 1,
        "initializer_range": 0.02,
        "hidden_dropout": 0.0,
        "use_cache": True,
        "mamba_ssm_cache_dtype": "float32",
    }


def vision_config_dict(s, norm_mean, norm_std):
    """RADIO config with both the original `args` form and HF RadioConfig-style explicit fields (spec §3.1,
    §9)."""
    n_cls, reg_mult = s["vit_n_cls"], s["vit_register_multiple"]
    n_reg = reg_mult - (n_cls % reg_mult)  # RADIO cls_token.py rule (spec §4.4)
    return {
        "model_type": "radio",
        "args": {
            "model": s["vit_args_model"],
            "register_multiple": reg_mult,
            "cls_token_per_teacher": n_cls > 1,
            "teachers": [{"name": f"teacher_{i}"} for i in range(n_cls)],
            "cpe_max_size": s["vit_max_img"],
            "model_norm": False,
            "input_size": s["tile"],
        },
        "hidden_size": s["vit_hidden"],
        "num_hidden_layers": s["vit_layers"],
        "num_attention_heads": s["vit_heads"],
        "intermediate_size": 4 * s["vit_hidden"],
        "mlp_ratio": 4.0,
        "hidden_act": "gelu",
        "qkv_bias": True,
        "patch_size": 16,
        "max_img_size": s["vit_max_img"],
        "max_resolution": s["vit_max_img"],
        "preferred_resolution": [s["tile"], s["tile"]],
        "num_cls_tokens": n_cls,
        "num_registers": n_reg,
        "layer_norm_eps": 1e-6,
        "norm_mean": list(norm_mean),
        "norm_std": list(norm_std),
    }


def build_models(llm_cfg, vis_cfg, vl):
    from transformers import NemotronHConfig, NemotronHForCausalLM, RadioConfig, RadioModel
    hf_llm = {k: v for k, v in llm_cfg.items() if k not in ("architectures", "model_type")}
    cfg = NemotronHConfig(**hf_llm, use_mamba_kernels=False)
    cfg._attn_implementation = "eager"
    assert cfg.hybrid_override_pattern == llm_cfg["hybrid_override_pattern"]
    llm = NemotronHForCausalLM(cfg).eval()
    rcfg = RadioConfig(hidden_size=vis_cfg["hidden_size"], num_hidden_layers=vis_cfg["num_hidden_layers"],
                       num_attention_heads=vis_cfg["num_attention_heads"], mlp_ratio=4.0, hidden_act="gelu",
                       layer_norm_eps=vis_cfg["layer_norm_eps"], patch_size=16,
                       image_size=vl["force_image_size"], max_img_size=vis_cfg["max_img_size"],
                       num_cls_tokens=vis_cfg["num_cls_tokens"], num_registers=vis_cfg["num_registers"],
                       summary_idxs=list(range(vis_cfg["num_cls_tokens"])),
                       norm_mean=vis_cfg["norm_mean"], norm_std=vis_cfg["norm_std"], layerscale_value=1.0)
    rcfg._attn_implementation = "eager"
    radio = RadioModel(rcfg).eval()
    # Pixels are normalised in preprocessing (vLLM, spec §5 step 7), so the tower's own conditioner is
    # detached: normalisation is applied exactly once.
    radio.make_preprocessor_external()
    c4 = vis_cfg["hidden_size"] * 4
    mlp1 = Mlp1(c4, vl["projector_hidden_size"], llm_cfg["hidden_size"]).eval()
    return llm, radio, mlp1


class Mlp1(nn.Module):
    """mlp1 of the VL wrapper (spec §3.2 step 4): RMSNorm → Linear → ReLU² → Linear, no biases."""

    def __init__(self, c_in, c_hidden, c_out, eps=1e-5):
        super().__init__()
        self.norm_weight = nn.Parameter(torch.ones(c_in))
        self.fc1 = nn.Linear(c_in, c_hidden, bias=False)
        self.fc2 = nn.Linear(c_hidden, c_out, bias=False)
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        h = self.fc1(self.norm_weight * xf.to(dtype))
        return self.fc2(torch.relu(h) ** 2)


# ------------------------------------------------------------------------------------- init

def _normal(gen, shape, std, mean=0.0):
    return torch.randn(shape, generator=gen) * std + mean


def init_weights(llm, radio, mlp1, gen, s):
    """Realistic scales: Linear ~ N(0, 1/fan_in), norms ~ 1 ± 0.1, A_log = log U(1,16), D ~ 1 ± 0.1,
    dt_bias = softplus⁻¹(dt0) with dt0 log-uniform in [dt_lo, dt_hi]; the dt rows of in_proj are scaled down
    by dt_row_scale so that dt = softplus(dt_raw + dt_bias) stays above HF's floor time_step_min (checked at
    run time)."""
    with torch.no_grad():
        for name, p in llm.named_parameters():
            fan_in = p.shape[-1] if p.dim() >= 2 else 1
            if name.endswith("embeddings.weight"):
                p.copy_(_normal(gen, p.shape, 1.0))
            elif name == "lm_head.weight":
                p.copy_(_normal(gen, p.shape, s["lm_head_scale"] / math.sqrt(fan_in)))
            elif name.endswith("norm.weight") or name.endswith("norm_f.weight"):
                p.copy_(_normal(gen, p.shape, 0.1, 1.0))
            elif name.endswith("mixer.A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=gen) * 15.0 + 1.0))
            elif name.endswith("mixer.D"):
                p.copy_(_normal(gen, p.shape, 0.1, 1.0))
            elif name.endswith("mixer.dt_bias"):
                lo, hi = math.log(s["dt_lo"]), math.log(s["dt_hi"])
                dt0 = torch.exp(torch.rand(p.shape, generator=gen) * (hi - lo) + lo)
                p.copy_(dt0 + torch.log(-torch.expm1(-dt0)))  # inverse softplus
            elif name.endswith("conv1d.weight"):
                p.copy_(_normal(gen, p.shape, 1.0 / math.sqrt(p.shape[-1])))
            elif name.endswith("conv1d.bias"):
                p.copy_(_normal(gen, p.shape, 0.1))
            elif name.endswith("in_proj.weight"):
                w = _normal(gen, p.shape, 1.0 / math.sqrt(fan_in))
                n_heads = s["mamba_heads"]
                w[-n_heads:] *= s["dt_row_scale"]
                p.copy_(w)
            elif p.dim() == 2:
                p.copy_(_normal(gen, p.shape, 1.0 / math.sqrt(fan_in)))
            else:
                raise RuntimeError(f"no init rule for {name}")
        for name, p in radio.named_parameters():
            fan_in = p.shape[-1] if p.dim() >= 2 else 1
            if "layer_scale" in name:
                p.fill_(1.0)  # C-RADIO has no layer scale; HF's must be the identity
            elif name.endswith("position_embedding"):
                p.copy_(_normal(gen, p.shape, 0.5))
            elif name.endswith("cls_register_token"):
                p.copy_(_normal(gen, p.shape, 1.0))
            elif ("norm1" in name or "norm2" in name) and name.endswith("weight"):
                p.copy_(_normal(gen, p.shape, 0.1, 1.0))
            elif name.endswith("bias"):
                p.copy_(_normal(gen, p.shape, 0.05))
            elif p.dim() == 2:
                p.copy_(_normal(gen, p.shape, 1.0 / math.sqrt(fan_in)))
            else:
                raise RuntimeError(f"no init rule for {name}")
        mlp1.norm_weight.copy_(_normal(gen, mlp1.norm_weight.shape, 0.1, 1.0))
        mlp1.fc1.weight.copy_(_normal(gen, mlp1.fc1.weight.shape, 1.0 / math.sqrt(mlp1.fc1.weight.shape[1])))
        mlp1.fc2.weight.copy_(_normal(gen, mlp1.fc2.weight.shape, 1.0 / math.sqrt(mlp1.fc2.weight.shape[1])))
        if s.get("bigram_scale"):
            add_direct_path_bigrams(llm, gen, s)


def add_direct_path_bigrams(llm, gen, s):
    """Decisive-greedy init (greedy_bf16, see make_golden.py): lm_head row π(t) += bigram_scale/√d · E[t] for
    a seeded random permutation π, so the direct path embedding → lm_head favours π(t) after token t (the
    bigram table W_U·W_E that trained LMs learn first); the residual branches' output projections are scaled
    by residual_scale (1/√n_layers, the rescale_prenorm_residual rule) so the current token's embedding
    stays a large part of the final hidden state. Drawn after every other weight: the rest of the init is
    the same as without it. Returns π."""
    with torch.no_grad():
        E = llm.model.embeddings.weight
        n_vocab, d = E.shape
        perm = torch.randperm(n_vocab, generator=gen)
        llm.lm_head.weight[perm] += s["bigram_scale"] / math.sqrt(d) * E
        for name, p in llm.named_parameters():
            if name.endswith(("mixer.out_proj.weight", "mixer.o_proj.weight", "mixer.down_proj.weight")):
                p.mul_(s["residual_scale"])
    llm.bigram_successor = perm.tolist()
    return perm


def round_to_bf16(*modules):
    """Weights become exactly bf16-representable (stored bf16, computed in fp32 after upcast)."""
    with torch.no_grad():
        for m in modules:
            for p in m.parameters():
                p.copy_(p.bfloat16().float())


# ------------------------------------------------------------------------------------- renames (spec §9)

def checkpoint_state_dict(llm, radio, mlp1):
    """HF internal names → real VL checkpoint names (spec §1.6, §3.2, §4.5). q,k,v are fused into attn.qkv
    rows [q | k | v]; HF's layer_scale (all ones) is dropped; the RADIO buffers of the real checkpoint are
    kept."""
    out = {}
    for name, t in llm.state_dict().items():
        if name.startswith("model."):
            out["language_model.backbone." + name[len("model."):]] = t
        elif name == "lm_head.weight":
            out["language_model.lm_head.weight"] = t
        else:
            raise RuntimeError(f"unexpected LLM tensor {name}")
    rp = "vision_model.radio_model."
    sd = radio.state_dict()
    used = set()

    def take(src, dst):
        out[rp + dst] = sd[src]
        used.add(src)

    take("embeddings.patch_projection.weight", "model.patch_generator.embedder.weight")
    take("embeddings.position_embedding", "model.patch_generator.pos_embed")
    take("embeddings.cls_register_token", "model.patch_generator.cls_token.token")
    for i in range(radio.config.num_hidden_layers):
        h, b = f"encoder.layer.{i}.", f"model.blocks.{i}."
        for n in ("norm1", "norm2", "mlp.fc1", "mlp.fc2"):
            take(h + n + ".weight", b + n + ".weight")
            take(h + n + ".bias", b + n + ".bias")
        for kind in ("weight", "bias"):
            parts = [h + f"attention.attention.{q}.{kind}" for q in ("query", "key", "value")]
            out[rp + b + f"attn.qkv.{kind}"] = torch.cat([sd[p] for p in parts], 0)
            used.update(parts)
        take(h + "attention.output.dense.weight", b + "attn.proj.weight")
        take(h + "attention.output.dense.bias", b + "attn.proj.bias")
        for n in ("layer_scale1.lambda1", "layer_scale2.lambda1"):
            assert torch.all(sd[h + n] == 1.0), "HF layer scale must stay 1.0"
            used.add(h + n)
    take("summary_idxs", "summary_idxs")
    # The conditioner was detached (build_models): its buffers are rebuilt from the config, as the checkpoint
    # has them.
    out[rp + "input_conditioner.norm_mean"] = torch.tensor(radio.config.norm_mean).view(3, 1, 1)
    out[rp + "input_conditioner.norm_std"] = torch.tensor(radio.config.norm_std).view(3, 1, 1)
    leftover = set(sd) - used
    assert not leftover, f"RADIO tensors not mapped: {sorted(leftover)}"
    out["mlp1.0.weight"] = mlp1.norm_weight.detach()
    out["mlp1.1.weight"] = mlp1.fc1.weight.detach()
    out["mlp1.3.weight"] = mlp1.fc2.weight.detach()
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


# ------------------------------------------------------------------------------------- VL forward

def pixel_shuffle_v2(x, scale=0.5):
    """vLLM/InternVL pixel_shuffle with ps_version v2: x [n, w, h, c] → [n, h·s, w·s, c/s²]."""
    n, w, h, c = x.shape
    x = x.view(n, w, int(h * scale), int(c / scale))
    x = x.permute(0, 2, 1, 3).contiguous()
    x = x.view(n, int(h * scale), int(w * scale), int(c / (scale * scale)))
    return x.permute(0, 2, 1, 3).contiguous()


def vision_forward(radio, mlp1, pixel_values):
    """Spec §3.2 steps 1-4. Returns (features [n, np, C], projected [n·tpt, hidden])."""
    feats = radio(pixel_values).features  # prefix rows already dropped by HF
    n, n_patch, c = feats.shape
    g = int(round(math.sqrt(n_patch)))
    shuffled = pixel_shuffle_v2(feats.reshape(n, g, g, c)).reshape(n, -1, 4 * c)
    projected = mlp1(shuffled).reshape(-1, mlp1.fc2.weight.shape[0])
    return feats, shuffled, projected


class LlmRun:
    """Runs the HF LLM on inputs_embeds with a cache, recording per-block outputs, norm_f, min dt."""

    def __init__(self, llm):
        self.llm = llm
        self.layer_out = {}
        self.norm_f = None
        self.min_dt = float("inf")
        self.hooks = []
        for i, blk in enumerate(llm.model.layers):
            self.hooks.append(blk.register_forward_hook(self._block_hook(i)))
            if blk.block_type == "linear_attention":
                hook = self._dt_hook(blk.mixer)
                self.hooks.append(blk.mixer.register_forward_pre_hook(hook, with_kwargs=True))
        self.hooks.append(llm.model.norm_f.register_forward_hook(self._norm_hook))

    def _block_hook(self, i):
        def hook(mod, args, out):
            self.layer_out[i] = out.detach()[0].float().clone()
        return hook

    def _norm_hook(self, mod, args, out):
        self.norm_f = out.detach()[0].float().clone()

    def _dt_hook(self, mixer):
        def hook(mod, args, kwargs):
            hs = args[0] if args else kwargs["hidden_states"]
            with torch.no_grad():
                dt_raw = mixer.in_proj(hs)[..., -mixer.num_heads:].float()
                dt = F.softplus(dt_raw + mixer.dt_bias.float())
            self.min_dt = min(self.min_dt, dt.min().item())
        return hook

    def close(self):
        for h in self.hooks:
            h.remove()


def extract_states(llm, cache, pattern):
    """HF cache → fixture layout. conv: HF keeps the last K xBC inputs [1, conv_dim, K]; only the last K-1
    matter for the next token (the oldest column is overwritten before use), so state.conv = [conv_dim, K-1]
    oldest→newest. ssm: [1,H,P,N] → [H,P,N]. KV: [1, n_kv, T, hd] → [T, n_kv, hd]."""
    st = {}
    k = llm.config.conv_kernel
    for i, ch in enumerate(pattern):
        layer = cache.layers[i]
        if ch == "M":
            conv = layer.conv_states[0]
            assert conv.shape[-1] == k
            st[f"state.conv.{i}"] = conv[0, :, 1:].float().clone()
            st[f"state.ssm.{i}"] = layer.recurrent_states[0][0].float().clone()
        elif ch == "*":
            st[f"state.k.{i}"] = layer.keys[0].permute(1, 0, 2).float().clone()
            st[f"state.v.{i}"] = layer.values[0].permute(1, 0, 2).float().clone()
    return st


@torch.no_grad()
def prefill(llm, embeds):
    run = LlmRun(llm)
    try:
        out = llm(inputs_embeds=embeds[None], use_cache=True, logits_to_keep=0)
    finally:
        run.close()
    return out, run


@torch.no_grad()
def greedy(llm, first_logits, cache, n_new):
    """Greedy decode one token at a time through HF's cached path (conv update + SSM recurrence + KV append),
    continuing past EOS. Returns (tokens, per-step logits, min dt seen while decoding)."""
    run = LlmRun(llm)
    toks, logits_steps = [], []
    logits = first_logits
    try:
        for step in range(n_new):
            logits_steps.append(logits.clone())
            t = int(torch.argmax(logits))
            toks.append(t)
            if step + 1 == n_new:
                break
            out = llm(input_ids=torch.tensor([[t]]), past_key_values=cache, use_cache=True)
            logits = out.logits[0, -1].float()
    finally:
        run.close()
    return toks, logits_steps, run.min_dt


def margins(logits_steps):
    """Per step: (top1 - top2) / max|logit|."""
    res = []
    for lg in logits_steps:
        top = torch.topk(lg, 2).values
        res.append(float((top[0] - top[1]) / lg.abs().max()))
    return res


# ------------------------------------------------------------------------------------- self-checks

def manual_vit(ckpt, pixels, n_layers, n_heads, eps, patch=16):
    """Independent RADIO forward from the renamed checkpoint tensors (spec §4): im2patch, embed, CPE bilinear
    resize (align_corners=False, written out by hand), prefix tokens, pre-norm blocks with exact GELU, drop
    prefix."""
    rp = "vision_model.radio_model.model."
    x = pixels.double()
    n, c, hh, ww = x.shape
    gh, gw = hh // patch, ww // patch
    p = x.reshape(n, c, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5).reshape(n, gh * gw, c * patch * patch)
    emb = p @ ckpt[rp + "patch_generator.embedder.weight"].double().T
    pos = ckpt[rp + "patch_generator.pos_embed"].double()[0]
    g = int(round(math.sqrt(pos.shape[0])))
    pos = pos.reshape(g, g, -1)
    m = max(gh, gw)

    def axis(out_len, in_len):
        scale = in_len / out_len
        src = [max((d + 0.5) * scale - 0.5, 0.0) for d in range(out_len)]
        i0 = [min(int(math.floor(s)), in_len - 1) for s in src]
        i1 = [min(i + 1, in_len - 1) for i in i0]
        lam = [s - i for s, i in zip(src, i0)]
        return i0, i1, lam

    r0, r1, rl = axis(m, g)
    c0, c1, cl = axis(m, g)
    res = torch.zeros(m, m, pos.shape[-1], dtype=torch.float64)
    for a in range(m):
        for b in range(m):
            res[a, b] = ((1 - rl[a]) * ((1 - cl[b]) * pos[r0[a], c0[b]] + cl[b] * pos[r0[a], c1[b]])
                         + rl[a] * ((1 - cl[b]) * pos[r1[a], c0[b]] + cl[b] * pos[r1[a], c1[b]]))
    res = res[:gh, :gw].reshape(gh * gw, -1)
    h = emb + res[None]
    prefix = ckpt[rp + "patch_generator.cls_token.token"].double()
    h = torch.cat([prefix[None].expand(n, -1, -1), h], 1)
    dim = h.shape[-1]
    hd = dim // n_heads
    for i in range(n_layers):
        b = f"{rp}blocks.{i}."
        W = {k[len(b):]: v.double() for k, v in ckpt.items() if k.startswith(b)}
        y = F.layer_norm(h, (dim,), W["norm1.weight"], W["norm1.bias"], eps)
        qkv = y @ W["attn.qkv.weight"].T + W["attn.qkv.bias"]
        q, k, v = qkv.split(dim, -1)
        q, k, v = (t.reshape(n, -1, n_heads, hd).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) * hd ** -0.5, -1) @ v
        h = h + att.transpose(1, 2).reshape(n, -1, dim) @ W["attn.proj.weight"].T + W["attn.proj.bias"]
        y = F.layer_norm(h, (dim,), W["norm2.weight"], W["norm2.bias"], eps)
        u = y @ W["mlp.fc1.weight"].T + W["mlp.fc1.bias"]
        u = 0.5 * u * (1 + torch.erf(u / math.sqrt(2)))
        h = h + u @ W["mlp.fc2.weight"].T + W["mlp.fc2.bias"]
    return h[:, prefix.shape[0]:]


def check_pixel_shuffle(feats, shuffled):
    """Spec §3.2 step 3 index map: out[t, ch] = X[i, j, c], t = (i//2)·(g/2) + j//2,
    ch = (i%2)·2C + (j%2)·C + c."""
    n, n_patch, c = feats.shape
    g = int(round(math.sqrt(n_patch)))
    X = feats.reshape(n, g, g, c)
    ref = torch.empty(n, (g // 2) ** 2, 4 * c)
    for i in range(g):
        for j in range(g):
            t = (i // 2) * (g // 2) + j // 2
            ch = (i % 2) * 2 * c + (j % 2) * c
            ref[:, t, ch:ch + c] = X[:, i, j]
    assert torch.equal(ref, shuffled), "pixel shuffle v2 does not match the spec index map"


def manual_mamba(ckpt, layer, u, cfg, conv_init=None, ssm_init=None):
    """Token-by-token Mamba-2 mixer (spec §1.5, §2.1) in float64 from checkpoint tensors.
    u: [T, D] = the block's normed input. Returns (y [T, D], conv_state [conv_dim, K-1], ssm_state
    [H,P,N])."""
    p = f"language_model.backbone.layers.{layer}.mixer."
    W = {k[len(p):]: v.double() for k, v in ckpt.items() if k.startswith(p)}
    H, P, N, G, K = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["ssm_state_size"], cfg["n_groups"], \
        cfg["conv_kernel"]
    d_inner, conv_dim = H * P, H * P + 2 * G * N
    zxbcdt = u.double() @ W["in_proj.weight"].T
    z, xbc, dt_raw = zxbcdt.split([d_inner, conv_dim, H], -1)
    T = u.shape[0]
    if conv_init is None:
        hist = torch.zeros(K - 1, conv_dim, dtype=torch.float64)
    else:
        hist = conv_init.double().T.clone()
    S = torch.zeros(H, P, N, dtype=torch.float64) if ssm_init is None else ssm_init.double().clone()
    A = -torch.exp(W["A_log"])
    w = W["conv1d.weight"][:, 0, :]  # [conv_dim, K]
    ys = []
    for t in range(T):
        window = torch.cat([hist, xbc[t:t + 1]], 0)  # [K, conv_dim] oldest→newest
        conv = F.silu((window.T * w).sum(-1) + W["conv1d.bias"])
        hist = window[1:]
        x, B, C = conv.split([d_inner, G * N, G * N])
        x = x.view(H, P)
        B = B.view(G, N).repeat_interleave(H // G, 0)
        C = C.view(G, N).repeat_interleave(H // G, 0)
        dt = F.softplus(dt_raw[t] + W["dt_bias"])
        S = torch.exp(dt * A)[:, None, None] * S + (dt[:, None] * x)[:, :, None] * B[:, None, :]
        y = (S * C[:, None, :]).sum(-1) + W["D"][:, None] * x
        v = y.reshape(-1) * F.silu(z[t])
        v = v.view(G, -1)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + cfg["layer_norm_epsilon"])
        ys.append((W["norm.weight"] * v.reshape(-1)) @ W["out_proj.weight"].T)
    return torch.stack(ys), hist.T.contiguous(), S


def rel_err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def models_from_checkpoint(config, ckpt):
    """Inverse of checkpoint_state_dict: rebuilds the HF models from a fixture folder's config.json and
    tensors (upcast to fp32). Used to prove the saved files alone reproduce the expected outputs."""
    llm_cfg, vis_cfg = config["llm_config"], config["vision_config"]
    vl = {"force_image_size": config["force_image_size"],
          "projector_hidden_size": config["projector_hidden_size"]}
    llm, radio, mlp1 = build_models(llm_cfg, vis_cfg, vl)
    t = {k: v.float() if v.is_floating_point() else v for k, v in ckpt.items()}
    sd = {}
    for k, v in t.items():
        if k.startswith("language_model.backbone."):
            sd["model." + k[len("language_model.backbone."):]] = v
        elif k == "language_model.lm_head.weight":
            sd["lm_head.weight"] = v
    llm.load_state_dict(sd, strict=True)
    rp = "vision_model.radio_model."
    rs = {"embeddings.patch_projection.weight": t[rp + "model.patch_generator.embedder.weight"],
          "embeddings.position_embedding": t[rp + "model.patch_generator.pos_embed"],
          "embeddings.cls_register_token": t[rp + "model.patch_generator.cls_token.token"],
          "summary_idxs": t[rp + "summary_idxs"]}
    for i in range(vis_cfg["num_hidden_layers"]):
        h, b = f"encoder.layer.{i}.", f"{rp}model.blocks.{i}."
        for n in ("norm1", "norm2", "mlp.fc1", "mlp.fc2"):
            for kind in ("weight", "bias"):
                rs[f"{h}{n}.{kind}"] = t[f"{b}{n}.{kind}"]
        for kind in ("weight", "bias"):
            q, k_, v_ = t[f"{b}attn.qkv.{kind}"].chunk(3, 0)
            rs[f"{h}attention.attention.query.{kind}"] = q
            rs[f"{h}attention.attention.key.{kind}"] = k_
            rs[f"{h}attention.attention.value.{kind}"] = v_
            rs[f"{h}attention.output.dense.{kind}"] = t[f"{b}attn.proj.{kind}"]
        for n in ("layer_scale1.lambda1", "layer_scale2.lambda1"):
            rs[h + n] = torch.ones(vis_cfg["hidden_size"])
    radio.load_state_dict(rs, strict=True)
    mlp1.load_state_dict({"norm_weight": t["mlp1.0.weight"], "fc1.weight": t["mlp1.1.weight"],
                          "fc2.weight": t["mlp1.3.weight"]}, strict=True)
    return llm, radio, mlp1
