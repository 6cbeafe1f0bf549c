// CPU kernels (fp32). They are the CPU backend's building blocks and the oracle the CUDA kernels are tested
// against. Each takes a params struct of pointers and sizes; none allocates more than per-call scratch
// (packing buffers, blocks of attention scores), none knows about files or models. Shapes use the notation
// of spec/holotron.md.
//
// Every op whose fast form is not an obvious loop has a `*_reference` twin: the naive loops that define
// it. tests/unit/test_cpu_ops.cpp and test_cpu_fast_ops.cpp hold the fast forms to their references on
// random inputs, odd sizes included.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>

namespace surf::kernels::cpu {

// Runs fn(begin, end) over [0, n) split across the worker threads (a small static pool).
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_per_thread = 1);
int worker_count();

// The instruction sets the GEMM has microkernels for. kPortable is plain C++ (any CPU); the others are
// used when the running CPU (and OS) support them.
enum class CpuIsa { kPortable, kAvx2, kAvx512 };
CpuIsa detected_isa();
bool isa_supported(CpuIsa isa);
const char* isa_name(CpuIsa isa);

// C[m, n] = A[m, k] · B[k, n] (+ bias[n]), or C += that when `accumulate` is set. Operands are addressed
// through element strides so that a transposed operand needs no copy:
//   A(i, p) = a[i·a_row + p·a_col],  B(p, j) = b[p·b_row + j·b_col],  C(i, j) = c[i·ldc + j].
// A PyTorch weight w [n, k] used as B is b_row = 1, b_col = k.
struct GemmParams {
    const float* a = nullptr;
    int64_t a_row = 0, a_col = 1;
    const float* b = nullptr;
    int64_t b_row = 0, b_col = 1;
    const float* bias = nullptr;  // [n] or null
    float* c = nullptr;
    int64_t ldc = 0;
    int64_t m = 0, n = 0, k = 0;
    bool accumulate = false;
};
// Cache-blocked and register-tiled (packed panels, an MR×NR microkernel of the detected ISA), split over
// the worker threads; run inside a parallel_for task it stays on that thread.
void gemm(const GemmParams& p);
void gemm_with_isa(const GemmParams& p, CpuIsa isa);  // tests: one microkernel (isa must be supported)
void gemm_reference(const GemmParams& p);             // the triple loop, p in k order

// y[m, n] = Σ_k x[m, k] · w[n, k] (+ bias[n])   — a PyTorch Linear with weight [out, in].
struct LinearParams {
    const float* x = nullptr;     // [m, k]
    const float* w = nullptr;     // [n, k]
    const float* bias = nullptr;  // [n] or null
    float* y = nullptr;           // [m, n]
    int64_t m = 0, n = 0, k = 0;
};
void linear(const LinearParams& p);            // through gemm
void linear_reference(const LinearParams& p);  // one dot product per output

// y = w ⊙ x / sqrt(mean(x²) + eps), per row. When `residual` is set it is added first:
// residual ← residual + x; y = norm(residual) (the fused pre-norm of a residual block).
struct RmsNormParams {
    const float* x = nullptr;       // [rows, dim]
    float* residual = nullptr;      // [rows, dim] in/out, or null
    const float* weight = nullptr;  // [dim]
    float* y = nullptr;             // [rows, dim]
    int64_t rows = 0, dim = 0;
    float eps = 1e-5f;
};
void rmsnorm(const RmsNormParams& p);
void rmsnorm_reference(const RmsNormParams& p);

// Gated grouped RMSNorm (Mamba-2 mixer.norm, norm_before_gate=False):
// v = y ⊙ SiLU(z); each contiguous group of `group_size` channels is RMS-normalised; out = w ⊙ v.
struct GatedRmsNormParams {
    const float* y = nullptr;       // [rows, dim]
    const float* z = nullptr;       // [rows, dim] (row stride z_stride)
    const float* weight = nullptr;  // [dim]
    float* out = nullptr;           // [rows, dim]
    int64_t rows = 0, dim = 0, group_size = 0, z_stride = 0;
    float eps = 1e-5f;
};
void gated_rmsnorm(const GatedRmsNormParams& p);
void gated_rmsnorm_reference(const GatedRmsNormParams& p);

// LayerNorm with weight and bias, per row.
struct LayerNormParams {
    const float* x = nullptr;  // [rows, dim]
    const float* weight = nullptr;
    const float* bias = nullptr;
    float* y = nullptr;  // [rows, dim]
    int64_t rows = 0, dim = 0;
    float eps = 1e-6f;
};
void layernorm(const LayerNormParams& p);
void layernorm_reference(const LayerNormParams& p);

// Depthwise causal conv1d over T new tokens with SiLU, continuing from `state` (the K-1 previous
// pre-conv inputs, oldest first); `state` is updated to the last K-1 inputs.
// out[t, c] = SiLU(bias[c] + Σ_k w[c, k] · in_{t-K+1+k}[c])
struct CausalConv1dParams {
    const float* x = nullptr;       // [T, channels] (row stride x_stride)
    const float* weight = nullptr;  // [channels, K]
    const float* bias = nullptr;    // [channels] or null
    float* state = nullptr;         // [channels, K-1] in/out
    float* out = nullptr;           // [T, channels]
    int64_t T = 0, channels = 0, K = 4, x_stride = 0;
};
void causal_conv1d(const CausalConv1dParams& p);            // time-major, vectorised over channels
void causal_conv1d_reference(const CausalConv1dParams& p);  // one channel at a time

// Mamba-2 SSD over T tokens of one sequence, continuing from `state` [H, P, N] (updated in place).
//   dA = exp(dt·A);  S ← dA·S + dt·x⊗B;  y = S·C + D·x
// `chunk` > 0 runs the chunked (SSD) form with chunks of that many tokens; 0 runs the token recurrence.
// Both compute the same function (spec §2.2); the tests hold them to each other. ssd() runs the chunked form
// as matrix products (gemm); ssd_reference() runs it (or the recurrence) as the scalar loops of the spec.
struct SsdParams {
    const float* x = nullptr;   // [T, H, P] (row stride x_stride per token)
    const float* dt = nullptr;  // [T, H]    (after softplus and clamp; row stride dt_stride)
    const float* A = nullptr;   // [H]       (negative)
    const float* B = nullptr;   // [T, G, N] (row stride bc_stride)
    const float* C = nullptr;   // [T, G, N] (row stride bc_stride)
    const float* D = nullptr;   // [H]
    float* state = nullptr;     // [H, P, N] in/out
    float* y = nullptr;         // [T, H, P]
    int64_t T = 0, H = 0, P = 0, G = 0, N = 0;
    int64_t x_stride = 0, dt_stride = 0, bc_stride = 0;
    int64_t chunk = 0;
};
void ssd(const SsdParams& p);
void ssd_reference(const SsdParams& p);

// Causal GQA attention of T new queries against a KV cache of L = past + T tokens (no positional
// encoding). Query t sits at position past + t and sees keys 0..past+t. scale = 1/sqrt(head_dim).
// With causal = false every query sees all L keys (the ViT's bidirectional attention).
struct AttentionParams {
    const float* q = nullptr;  // [T, n_heads, head_dim] (row stride q_stride)
    const float* k = nullptr;  // [L, n_kv_heads, head_dim] (row stride kv_stride)
    const float* v = nullptr;  // [L, n_kv_heads, head_dim] (row stride kv_stride)
    float* out = nullptr;      // [T, n_heads, head_dim]
    int64_t T = 0, L = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    int64_t q_stride = 0, kv_stride = 0;
    bool causal = true;
    float scale = 0.0f;  // 0 → 1/sqrt(head_dim)
};
void attention(const AttentionParams& p);  // per head and block of queries: S = QKᵀ, softmax, SV (gemm)
void attention_reference(const AttentionParams& p);  // one query at a time

// Elementwise activations in place. gelu_erf and silu evaluate erf and exp with the vectorisable
// approximations of kernels/cpu/vec_math.h (a few ulp); the _reference forms call std::erf / std::exp.
void relu_squared(float* x, int64_t n);
void gelu_erf(float* x, int64_t n);
void silu(float* x, int64_t n);
void gelu_erf_reference(float* x, int64_t n);
void silu_reference(float* x, int64_t n);
inline float softplus(float x) {
    return x > 20.0f ? x : std::log1p(std::exp(x));
}

// Bilinear resize of a [channels, in_h, in_w] grid to [channels, out_h, out_w] with PyTorch's
// F.interpolate(mode="bilinear", align_corners=False, antialias=False) semantics.
struct BilinearParams {
    const float* in = nullptr;
    float* out = nullptr;
    int64_t channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
};
void bilinear_resize(const BilinearParams& p);

// Pixel shuffle v2 (InternVL/Nemotron-VL): X [side, side, C] → out [(side/s)², s²·C] with
// out[(i/s)·(side/s) + j/s, (i%s)·s·C + (j%s)·C + c] = X[i, j, c]   (spec §3.2, s = 2).
struct PixelShuffleParams {
    const float* in = nullptr;  // [side·side, C]
    float* out = nullptr;       // [(side/s)², s²·C]
    int64_t side = 0, channels = 0, factor = 2;
};
void pixel_shuffle(const PixelShuffleParams& p);

}  // namespace surf::kernels::cpu
