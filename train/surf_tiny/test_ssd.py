"""Checks ssd.py against the plain recurrence in float64 (outputs and gradients of every input) and a whole
mixer against transformers' own forward:  python3 -m train.surf_tiny.test_ssd"""

import copy
import json
import os

import torch

from . import ssd
from .model import SurfTiny, init_weights
from .spec import REPO


def recurrence(x, dt, A, B, C):
    b, L, h, p = x.shape
    g = B.shape[2]
    Bh, Ch = B.repeat_interleave(h // g, 2), C.repeat_interleave(h // g, 2)
    state, ys = torch.zeros(b, h, p, B.shape[3], dtype=x.dtype), []
    for t in range(L):
        state = state * torch.exp(dt[:, t] * A)[:, :, None, None] + \
            dt[:, t, :, None, None] * x[:, t, :, :, None] * Bh[:, t, :, None, :]
        ys.append((state * Ch[:, t, :, None, :]).sum(-1))
    return torch.stack(ys, 1)


def check_scan():
    torch.manual_seed(1)
    b, L, h, p, g, n = 2, 150, 4, 8, 2, 16  # L not a multiple of the chunk: the padded tail is exercised
    d = torch.double
    inputs = [torch.randn(b, L, h, p, dtype=d), torch.rand(b, L, h, dtype=d) * 0.5, -torch.rand(h, dtype=d) * 3,
              torch.randn(b, L, g, n, dtype=d), torch.randn(b, L, g, n, dtype=d)]
    weight = torch.randn(b, L, h, p, dtype=d)
    results = []
    for f in (recurrence, lambda *a: ssd.ssd(*a, 32)):
        xs = [t.clone().requires_grad_() for t in inputs]
        y = f(*xs)
        (y * weight).sum().backward()
        results.append((y.detach(), [t.grad for t in xs]))
    err = (results[0][0] - results[1][0]).abs().max().item()
    gerr = max(((a - c).abs().max() / a.abs().max()).item() for a, c in zip(results[0][1], results[1][1]))
    print(f"scan: max |y - recurrence| {err:.1e}, worst relative gradient error {gerr:.1e}")
    assert err < 1e-10 and gerr < 1e-10


def check_mixer():
    config = json.load(open(os.path.join(REPO, "models", "surf-tiny", "config.json")))
    model = SurfTiny(config)
    init_weights(model, 3)
    mixer = next(l.mixer for l in model.llm.model.layers if hasattr(l.mixer, "A_log"))
    x = torch.randn(2, 150, config["llm_config"]["hidden_size"])
    with torch.no_grad():
        reference = mixer._hf_forward(x)
    ours = mixer(x.requires_grad_())  # grad enabled, no cache: the matmul path
    rel = ((ours.detach() - reference).norm() / reference.norm()).item()
    print(f"mixer: relative difference to transformers' forward {rel:.1e}")
    assert rel < 1e-5


if __name__ == "__main__":
    check_scan()
    check_mixer()
    print("ok")
