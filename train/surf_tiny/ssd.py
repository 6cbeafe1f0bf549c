"""The Mamba-2 mixer's training forward as batched matrix products (the chunked SSD algorithm of the Mamba-2
paper, Dao & Gu 2024, §6): transformers' PyTorch fallback computes the same sums as broadcast products and
spends most of a training step there when mamba_ssm is not installed (it is not on the GPU machine).

Within a chunk of Q positions the output is a masked (Q×Q) attention-like product with decays
exp(cumA_i − cumA_j); across chunks one state per chunk carries the rest. The result equals the recurrence
h_t = exp(dt_t·A)·h_{t−1} + dt_t·B_t·x_tᵀ, y_t = C_t·h_t + D·x_t, which surf's engine runs at inference."""

import types

import torch
import torch.nn.functional as F


def segsum(a):
    """a [..., Q] → [..., Q, Q] with out[i, j] = a[j+1] + … + a[i] for i ≥ j and −inf above the diagonal."""
    q = a.shape[-1]
    cs = torch.cumsum(a, dim=-1)
    out = cs[..., :, None] - cs[..., None, :]
    keep = torch.tril(torch.ones(q, q, dtype=torch.bool, device=a.device))
    return out.masked_fill(~keep, float("-inf"))


def ssd(x, dt, A, B, C, chunk):
    """x [b, L, h, p], dt [b, L, h] (after softplus), A [h] (negative), B and C [b, L, g, n]; fp32.
    Returns y [b, L, h, p] without the D term, from a zero initial state."""
    b, L, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    pad = (-L) % chunk
    if pad:  # zero steps at the end: they change nothing before them
        x, dt = F.pad(x, (0, 0, 0, 0, 0, pad)), F.pad(dt, (0, 0, 0, pad))
        B, C = F.pad(B, (0, 0, 0, 0, 0, pad)), F.pad(C, (0, 0, 0, 0, 0, pad))
    c = x.shape[1] // chunk
    rep = h // g
    # [b, h, c, q, ·]: heads outermost so that every product below is a batched matmul.
    X = (x * dt[..., None]).view(b, c, chunk, h, p).permute(0, 3, 1, 2, 4)
    Bh = B.repeat_interleave(rep, dim=2).view(b, c, chunk, h, n).permute(0, 3, 1, 2, 4)
    Ch = C.repeat_interleave(rep, dim=2).view(b, c, chunk, h, n).permute(0, 3, 1, 2, 4)
    a = (dt * A).view(b, c, chunk, h).permute(0, 3, 1, 2)  # [b, h, c, q]
    cum = torch.cumsum(a, dim=-1)
    # 1. Within each chunk.
    decay = torch.exp(segsum(a))  # [b, h, c, q, q]
    y = (Ch @ Bh.transpose(-1, -2) * decay) @ X
    # 2. The state each chunk leaves behind, from its own inputs.
    to_end = torch.exp(cum[..., -1:] - cum)  # [b, h, c, q]
    states = (Bh * to_end[..., None]).transpose(-1, -2) @ X  # [b, h, c, n, p]
    # 3. States carried across chunks: state entering chunk k = Σ_{j<k} decay(j→k) · states[j].
    ends = F.pad(cum[..., -1], (1, 0))  # [b, h, c+1]
    carry = torch.exp(segsum(ends))[..., :-1, 1:]  # [b, h, c, c]: [k, j] = Π decay of chunks j+1 … k−1
    entering = (carry @ states.flatten(-2)).view(b, h, c, n, p)
    # 4. The entering state read out at each position of the chunk.
    y = y + (Ch @ entering) * torch.exp(cum)[..., None]
    return y.permute(0, 2, 3, 1, 4).reshape(b, c * chunk, h, p)[:, :L]


def mixer_forward(self, hidden_states, *args, **kwargs):
    """NemotronHMamba2Mixer.forward for a whole sequence without a cache or padding mask (training); any
    other call goes to transformers' own forward."""
    cached = args or any(kwargs.get(k) is not None for k in ("cache", "cache_params", "attention_mask"))
    if cached or not torch.is_grad_enabled():
        return self._hf_forward(hidden_states, *args, **kwargs)
    bsz, L, _ = hidden_states.shape
    dtype = hidden_states.dtype
    I, G, N, H, P = self.intermediate_size, self.n_groups, self.ssm_state_size, self.num_heads, self.head_dim
    z, xBC, dt = self.in_proj(hidden_states).split([I, self.conv_dim, H], dim=-1)
    xBC = F.silu(self.conv1d(xBC.transpose(1, 2))[..., :L].transpose(1, 2))
    x, B, C = xBC.split([I, G * N, G * N], dim=-1)
    lo, hi = self.time_step_limit
    dt = F.softplus(dt.float() + self.dt_bias.float())
    if lo > 0 or hi != float("inf"):
        dt = dt.clamp(lo, hi)
    with torch.autocast(x.device.type, enabled=False):
        xf = x.float().view(bsz, L, H, P)
        y = ssd(xf, dt, -torch.exp(self.A_log.float()), B.float().view(bsz, L, G, N), C.float().view(bsz, L, G, N),
                self.chunk_size)
        y = (y + xf * self.D.float()[:, None]).reshape(bsz, L, I)
    return self.out_proj(self.norm(y, z).to(dtype))


def install(model):
    """Gives every Mamba-2 mixer of an HF NemotronH model the matmul SSD for training."""
    for layer in model.model.layers:
        if hasattr(layer.mixer, "A_log"):  # the Mamba-2 mixers (block type "mamba" or "linear_attention")
            mixer = layer.mixer
            mixer._hf_forward = mixer.forward
            mixer.forward = types.MethodType(mixer_forward, mixer)
