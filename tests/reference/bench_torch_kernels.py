"""PyTorch equivalents of the kernels in apps/bench_kernels, same shapes, same card, for docs/BENCHMARKS.md:
decode attention (torch SDPA, GQA 40/8 x 128, contiguous KV), the decode state update as transformers runs it
without mamba_ssm (pure PyTorch), and the transformers NemotronH Mamba-2 mixer's PyTorch chunked scan.
Prints a markdown table; times are medians of CUDA-event-timed repeats."""
import math
import torch
import torch.nn.functional as F


def bench(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    return times[len(times) // 2]


def copy_bw():
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    us = bench(lambda: y.copy_(x))
    return 2 * x.numel() * 4 / (us * 1e-6)


def main():
    torch.manual_seed(0)
    bw = copy_bw()
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}, copy {bw / 1e9:.0f} GB/s")
    print("| op (PyTorch) | shape | batch | us | GB/s | % copy |\n|---|---|---|---|---|---|")
    for B in (1, 16, 64, 100):
        q = torch.randn(B, 40, 1, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, 8, 4096, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        us = bench(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        byts = 2 * k.numel() * 2
        print(f"| SDPA decode attention | 40/8x128 ctx4096 | {B} | {us:.1f} | {byts / us / 1e3:.0f} | {100 * byts / (us * 1e-6) / bw:.1f} |")
    for B in (1, 16, 64, 100):
        state = torch.randn(B, 128, 80, 128, device="cuda", dtype=torch.float32)
        x = torch.randn(B, 128, 80, device="cuda", dtype=torch.bfloat16)
        dt = torch.rand(B, 128, device="cuda") * 0.1
        A = -torch.rand(128, device="cuda") * 8
        Bm = torch.randn(B, 8, 128, device="cuda", dtype=torch.bfloat16)
        Cm = torch.randn_like(Bm)

        def ssu():
            dA = torch.exp(dt * A)[:, :, None, None]
            Bh = Bm.float().repeat_interleave(16, dim=1)
            Ch = Cm.float().repeat_interleave(16, dim=1)
            new = state * dA + (dt[:, :, None, None] * x.float()[:, :, :, None]) * Bh[:, :, None, :]
            state.copy_(new)
            return torch.einsum("bhpn,bhn->bhp", new, Ch)
        us = bench(ssu)
        byts = 2 * state.numel() * 4
        print(f"| state update (PyTorch, fp32 state) | H128 P80 N128 G8 | {B} | {us:.1f} | {byts / us / 1e3:.0f} | {100 * byts / (us * 1e-6) / bw:.1f} |")
    try:
        from transformers import NemotronHConfig
        from transformers.models.nemotron_h import modeling_nemotron_h as m
        cfg = NemotronHConfig(hidden_size=5120, mamba_num_heads=128, mamba_head_dim=80, ssm_state_size=128, n_groups=8,
                              conv_kernel=4, chunk_size=128, hybrid_override_pattern="M", num_hidden_layers=1,
                              use_mamba_kernels=False)
        mixer = m.NemotronHMamba2Mixer(cfg, layer_idx=0).to("cuda", torch.bfloat16).eval()
        for L in (1024,):
            h = torch.randn(1, L, 5120, device="cuda", dtype=torch.bfloat16)
            with torch.no_grad():
                # transformers 5.x: forward() without a cache and outside training takes the PyTorch chunked
                # scan (mamba2_chunk_scan's torch fallback when mamba_ssm is absent).
                us = bench(lambda: mixer(h), reps=5, warmup=1)
            print(f"| transformers Mamba-2 mixer (PyTorch chunked scan, whole layer incl. projections) | 1x{L} | 1 | {us:.0f} | {L / (us * 1e-6) / 1e6:.2f} M tok/s | |")
            # The scan alone (its inputs as the mixer feeds them: x [1,L,H,P], dt [1,L,H], B/C [1,L,G,N]).
            x = torch.randn(1, L, 128, 80, device="cuda", dtype=torch.bfloat16)
            dt = torch.rand(1, L, 128, device="cuda", dtype=torch.bfloat16)
            Bs = torch.randn(1, L, 8, 128, device="cuda", dtype=torch.bfloat16)
            Cs = torch.randn_like(Bs)
            A = -torch.rand(128, device="cuda")
            with torch.no_grad():
                us = bench(lambda: m.mamba2_chunk_scan(x, dt, A, Bs, Cs, chunk_size=128, D=mixer.D, dt_bias=mixer.dt_bias,
                                                       dt_softplus=True, return_final_states=True), reps=5, warmup=1)
            print(f"| transformers mamba2_chunk_scan (PyTorch, scan only) | 1x{L} | 1 | {us:.0f} | {L / (us * 1e-6) / 1e6:.2f} M tok/s | |")
    except Exception as e:  # the mixer's API moves between transformers releases
        print(f"# transformers mixer not timed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
