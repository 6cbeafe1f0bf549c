// CUDA kernels of the Holotron engine. Each op takes a params struct (pointers, sizes, strides)
// and a stream; nothing allocates inside a launch. Ops that need scratch expose `*_workspace_bytes(params)`
// and take the caller's workspace. Shapes use spec/holotron.md's notation; "row stride" is in elements.
// Conventions:
//   * bf16 activations and weights of matrices; small per-channel vectors (norm weights, conv weights and
//     bias, A, D, dt_bias) are fp32, converted once at load.
//   * residual streams are fp32; SSM state fp32 by default (bf16 optional), conv state fp32 or bf16.
//   * every launch SURF_CHECKs its invariants (sizes, alignment) and checks the launch error.
// Host-includable: plain C++ with the CUDA runtime headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace surf::kernels::cuda {

using bf16 = __nv_bfloat16;

enum class DType : uint8_t { kF32, kBF16 };
inline size_t dtype_size(DType t) {
    return t == DType::kF32 ? 4 : 2;
}

// Programmatic dependent launch (launch.cpp, common.cuh launch_kernel): while on (the default), this
// library's kernels are launched so that each may be scheduled while the kernel before it in its stream
// finishes, then waits on the device for that kernel's results (griddepcontrol). Results are identical either
// way. Process-wide: it applies to launches (and CUDA-graph captures) issued after the call, on every device
// and stream.
void set_programmatic_launch(bool on);
bool programmatic_launch();

// ---------------------------------------------------------------------------------------------------
// GEMM (gemm.cu): y[m, n] = alpha · x[m, k] · w[n, k]ᵀ (+ bias[n]) + beta · y, fp32 accumulation,
// through cuBLASLt. One GemmContext per stream-user: it owns the handle, a workspace and a cache of
// chosen algorithms per shape. Not thread-safe; create one per thread.

class GemmContext {
public:
    explicit GemmContext(size_t workspace_bytes = size_t{32} << 20);
    ~GemmContext();
    GemmContext(const GemmContext&) = delete;
    GemmContext& operator=(const GemmContext&) = delete;

    // Autotuning (off by default): each shape's cuBLASLt heuristic candidates (up to 8) are timed, writing
    // to scratch memory, and the fastest kept. Shapes of up to 128 rows are tuned on first use, larger
    // ones once they have run 3 times (prefill row counts vary; one-off counts keep the heuristic's pick).
    // Every row count is tuned on its own: an algorithm tuned for one m can be far slower at another. Never
    // while the stream is being captured into a graph (such a shape is tuned on a later uncaptured use).
    void set_autotune(bool on);
    // > 0: plan GEMMs for this many SMs (cuBLASLt's SM count target), leaving the rest of the device to work
    // on other streams. Applies to shapes planned after the call; 0 (default) plans for the whole device.
    void set_sm_count_target(int sms);
    // Off by default. On: a new shape of more than 128 rows first looks for a tuned shape that differs only
    // in m, within the same 64-row bucket (⌈m/64⌉ equal: the same count of 64-, 128- and 256-row tiles); if
    // that shape's chosen algorithm is among this shape's heuristic candidates (so valid for it), it is used
    // without tuning. Mixed steps' row counts (decode rows + a prompt's chunk) vary by a few rows from step
    // to step, and each one tuned on its own costs a tuning stall inside a step. A new shape of at most 128
    // rows likewise takes the choice (algorithm, or the small-m kernel) of the nearest tuned shape of 1 to 7
    // rows more (decode-graph buckets and logits rows are warmed up at every 4 or 8 rows).
    void set_reuse_tuned_in_bucket(bool on);
    // Off by default. On: every new shape is tuned on its first use, whatever its row count (warm-ups, whose
    // throw-away steps then run each shape once instead of three times).
    void set_tune_on_first_use(bool on);
    int64_t reused_count() const;  // shapes that took a neighbour's tuned algorithm
    // The small-m kernel (gemv below) for shapes it supports: kTuned (default) times it beside the cuBLASLt
    // candidates whenever such a shape is tuned and keeps it if it is faster (so only with autotuning);
    // kAlways uses it for every supported shape (tests); kNever not at all.
    enum class SmallM { kTuned, kAlways, kNever };
    void set_small_m_kernel(SmallM mode);
    // The small-m kernel's k split (gemv's k_split: 0 = its automatic choice, 1 = one warp a row pair, 2, 4,
    // 8).
    void set_small_m_k_split(int k_split);
    // The Hopper GEMM of our own (gemm_wgmma below, both tile widths) for shapes it supports: kTuned times it
    // beside the cuBLASLt candidates whenever such a shape is tuned and keeps it if it is faster (with
    // autotuning only); kAlways uses it (tile 256) for every supported shape (tests); kNever (default) not at
    // all; kReluSquared uses it (tile 256, untimed) for every supported ReLU² GEMM of at least
    // kWgmmaReluSquaredMinRows rows, whose epilogue then replaces the relu_squared pass, and cuBLASLt (tuned)
    // for everything else: an A/B for the 1,024-row MLP up projection with cold weights, where bench_gemm has
    // it ahead but the tuner (rerunning one weight buffer) never picks it; serving does not gain from it
    // (docs/BENCHMARKS.md).
    enum class WgmmaGemm { kTuned, kAlways, kNever, kReluSquared };
    static constexpr int64_t kWgmmaReluSquaredMinRows = 512;
    void set_wgmma_gemm(WgmmaGemm mode);
    struct TuneRecord {
        int64_t m = 0, n = 0, k = 0;
        int candidates = 0, chosen = 0;  // candidates timed, index of the fastest (0 = heuristic's pick)
        bool gemv_timed = false,
             gemv_chosen = false;  // the small-m kernel was timed too / beat every candidate
        float gemv_us = 0;
        bool wgmma_timed = false, wgmma_chosen = false;  // gemm_wgmma was timed too / beat every other choice
        float wgmma_us = 0;                              // its faster tile width's time
        int wgmma_tile_n = 0;                            // that tile width
        float heuristic_us = 0, best_us = 0;             // per GEMM
        float tune_ms = 0;  // GPU time the tuning runs took (the host waits once for them)
    };
    const std::vector<TuneRecord>& tune_log() const;

    struct Impl;
    Impl* impl() { return impl_.get(); }

private:
    std::unique_ptr<Impl> impl_;
};

// Turns GemmContext::set_tune_on_first_use on for its lifetime (a warm-up's scope).
class TuneOnFirstUse {
public:
    explicit TuneOnFirstUse(GemmContext& gemm) : gemm_(gemm) { gemm_.set_tune_on_first_use(true); }
    ~TuneOnFirstUse() { gemm_.set_tune_on_first_use(false); }
    TuneOnFirstUse(const TuneOnFirstUse&) = delete;
    TuneOnFirstUse& operator=(const TuneOnFirstUse&) = delete;

private:
    GemmContext& gemm_;
};

// A pointwise function applied to x·Wᵀ + bias before the output is rounded to y's dtype.
// kGeluTanh: cuBLASLt's GELU epilogue, the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// It differs from exact-erf GELU (RADIO's nn.GELU) by at most 4.8e-4 absolute (largest near x = −2.7, where
// GELU ≈ −0.009), which is under half a bf16 ulp of any output of magnitude ≥ 0.125; the kernel test compares
// against the exact-erf reference. Fusing saves the separate in-place pass over the activations.
// kReluSquared: relu(v)² of the value rounded to y's dtype, then rounded again — exactly the linear's output
// followed by relu_squared (the Nemotron-H MLP). cuBLASLt has no such epilogue: gemm() runs relu_squared
// after it (y bf16, row stride n), while gemm_wgmma fuses it.
enum class GemmActivation { kNone, kGeluTanh, kReluSquared };

struct GemmParams {
    const bf16* x = nullptr;     // [m, k] (row stride ldx, 0 → k)
    const bf16* w = nullptr;     // [n, k] (row stride ldw, 0 → k): PyTorch Linear weight [out, in]
    const void* bias = nullptr;  // [n] or null, same dtype as y (cuBLASLt bias epilogue)
    void* y = nullptr;           // [m, n] (row stride ldy, 0 → n)
    DType y_dtype = DType::kBF16;
    int64_t m = 0, n = 0, k = 0;
    int64_t ldx = 0, ldw = 0, ldy = 0;
    float alpha = 1.0f, beta = 0.0f;                    // beta = 1 with an fp32 y adds into a residual stream
    GemmActivation activation = GemmActivation::kNone;  // applied after bias (and the beta·y term)
};
void gemm(GemmContext& ctx, const GemmParams& p, cudaStream_t stream);

// Small-m GEMM (gemv.cu) for decode steps: gemm()'s contract for m ≤ 4 rows whose k and row strides of x and
// w are multiples of 8, with x and w 16-byte aligned and no activation (gemv_supported). Each warp streams
// two weight rows with 16-byte loads; fp32 accumulation, in another order than cuBLASLt's. gemm() routes to
// it per GemmContext::set_small_m_kernel. k_split: warps that share a row pair, each over a slice of k (1, 2,
// 4, 8; 0 = gemv_k_split's choice).
bool gemv_supported(const GemmParams& p);
void gemv(const GemmParams& p, cudaStream_t stream, int k_split = 0);
// The automatic k_split: doubled from 1 while the grid has fewer than 8 blocks an SM (few long rows, e.g. n =
// 5,120 at k = 20,480) and every warp's slice keeps a full round of loads (32 lanes × 4 vectors).
int gemv_k_split(int64_t n, int64_t k);

// A Hopper GEMM of our own (gemm_wgmma.cu; compute capability 9.0): gemm()'s contract, persistent blocks of
// 128 × tile_n (256 or 128) outputs, TMA loads into a ring, two consumer warpgroups on wgmma, the epilogue
// (alpha, beta, bias, activation) from the accumulators. Supported where k and the x / w row strides are
// multiples of 8 with x and w 16-byte aligned, n and y's row stride even (gemm_wgmma_supported). gemm() times
// it beside the cuBLASLt candidates per GemmContext::set_wgmma_gemm; fp32 accumulation in another order than
// cuBLASLt's.
bool gemm_wgmma_supported(const GemmParams& p);
// cluster_pairs: blocks in clusters of two along m sharing each weight slice by TMA multicast (where m >
// 128). max_blocks > 0: at most that many persistent blocks (rounded down to whole clusters, at least one),
// leaving the other SMs to kernels on other streams; 0 = one block on every SM that holds one.
void gemm_wgmma(const GemmParams& p, int tile_n, cudaStream_t stream, bool cluster_pairs = true,
                int max_blocks = 0);
// Blocks of that kernel resident on the current device at once (the persistent grid's size; benchmarks).
int gemm_wgmma_resident_blocks(int tile_n, bool cluster_pairs);

// ---------------------------------------------------------------------------------------------------
// FP8 E4M3 (fp8.cu): the W8A8 scheme of the language model's linear layers (kernels/cpu/fp8.h is the
// reference): E4M3 codes (torch.float8_e4m3fn) with fp32 scales per row, fp32 accumulation.

// Per-row quantization of a bf16 or fp32 matrix (activations per token, weights per output channel):
//   scale[r] = max_i |x[r, i]| / 448 (1 for an all-zero row),  q[r, i] = e4m3(x[r, i] / scale[r]),
// or with static_scale > 0 (a checkpoint's calibrated input_scale): q = e4m3(x / static_scale), scale[r] =
// static_scale. e4m3() saturates at ±448 and rounds to nearest even; the division is IEEE (as the CPU's),
// so the codes equal kernels/cpu/fp8's bit for bit on the same fp32 values (a NaN's sign bit aside).
struct Fp8QuantParams {
    const void* x = nullptr;  // [rows, cols] (row stride ldx, 0 → cols)
    DType x_dtype = DType::kBF16;
    uint8_t* q = nullptr;       // [rows, cols] E4M3 codes, contiguous
    float* scale = nullptr;     // [rows]
    float static_scale = 0.0f;  // > 0: a static per-tensor scale; 0: per row from the row's amax
    int64_t rows = 0, cols = 0, ldx = 0;
};
void quantize_e4m3(const Fp8QuantParams& p, cudaStream_t stream);

// A producer's E4M3 output beside its bf16 result (rmsnorm, gated_rmsnorm, fp8_gemm): the result's rows
// quantized as quantize_e4m3 quantizes the bf16 result (the same codes and scales), written in the same pass
// where the producer's kernel allows, else by quantize_e4m3 after it. It spares the next GEMM's
// quantization pass: one read of the row and a launch.
struct Fp8RowOut {
    uint8_t* q = nullptr;       // [rows, cols] E4M3 codes, contiguous, 8-byte aligned; null: no FP8 output
    float* scale = nullptr;     // [rows]
    float static_scale = 0.0f;  // as Fp8QuantParams
    // false: the bf16 result is not needed, and a kernel that quantizes in the same pass does not write it
    // (fp8_gemm's fused epilogue; the norms always write it).
    bool keep_y = true;
};
// out from a bf16 result y [rows, cols] (row stride ldy, 0 → cols) already written: the producers' way where
// their kernel does not quantize in the same pass.
void quantize_e4m3(const Fp8RowOut& out, const bf16* y, int64_t rows, int64_t cols, int64_t ldy,
                   cudaStream_t stream);

// y[m, n] = (Σ_k xq[m, k]·wq[n, k]) · x_scale[m] · w_scale[n] + beta · y[m, n], fp32 accumulation, then
// `activation` (kNone or kReluSquared, as gemm()'s: on the value rounded to y's bf16). Both operands are
// K-major ("TN", the layout Hopper's FP8 tensor cores take). k a multiple of 16, x and w 16-byte aligned.
struct Fp8GemmParams {
    const uint8_t* x = nullptr;      // [m, k] E4M3 (contiguous)
    const float* x_scale = nullptr;  // [m]
    const uint8_t* w = nullptr;      // [n, k] E4M3 (contiguous)
    const float* w_scale = nullptr;  // [n]
    void* y = nullptr;               // [m, n] (row stride ldy, 0 → n)
    DType y_dtype = DType::kBF16;
    int64_t m = 0, n = 0, k = 0, ldy = 0;
    float beta = 0.0f;           // 1 with an fp32 y adds into a residual stream
    const void* bias = nullptr;  // [n] or null, same dtype as y, added before beta·y and the activation
    // kReluSquared (a bf16 y of row stride n) or kGeluTanh (a bf16 y), after the bias and beta·y.
    GemmActivation activation = GemmActivation::kNone;
    Fp8RowOut fp8_out;  // y's rows quantized (bf16 y only); fused into the epilogue path's kernel
};

// The FP8 GEMM's state: cuBLASLt handle, workspace, a plan per shape. cuBLASLt applies the two scale vectors
// itself (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS ≥ 12.9 on Hopper); where it offers no algorithm
// for a shape that way (every shape on sm_90 with cuBLAS 13.1), that shape runs with unit scales into a
// scratch (fp32, or bf16 per set_bf16_products) and an epilogue kernel applies scales, beta and activation,
// or, where tuning finds it faster, on CUTLASS's kernel with the scales in its epilogue (set_cutlass).
// Autotuning as GemmContext's (candidates timed on first use up to 128 rows, after 3 uses above, never while
// capturing). Rows of ≤ 4 go to fp8_gemv. Not thread-safe.
class Fp8GemmContext {
public:
    explicit Fp8GemmContext(size_t workspace_bytes = size_t{32} << 20);
    ~Fp8GemmContext();
    Fp8GemmContext(const Fp8GemmContext&) = delete;
    Fp8GemmContext& operator=(const Fp8GemmContext&) = delete;
    void set_autotune(bool on);
    void set_tune_on_first_use(bool on);  // warm-ups: every new shape tuned on its first use
    // Tests: every shape on the unit-scale GEMM + epilogue kernel path.
    void set_force_epilogue(bool on);
    // GEMMs of ≤ 4 rows on fp8_gemv instead of cuBLASLt (default on).
    void set_small_m_kernel(bool on);
    // The epilogue path's unscaled products in bf16 instead of fp32 (default off): half the scratch's bytes
    // written and read, for one more rounding (2^-9 relative) before the scales. Before the first GEMM.
    void set_bf16_products(bool on);
    // cuBLASLt's fast FP8 accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM; default off): the tensor cores'
    // accumulator carries the sum over all of k instead of being promoted into fp32 registers every few
    // k-steps. Faster; its error grows with k, since the tensor cores keep fewer bits in each addition than
    // fp32 (gpu_test_fp8 measures it up to k = 20,480). Before the first GEMM.
    void set_fast_accum(bool on);
    // CUTLASS's FP8 GEMM with the scales in its own epilogue (fp8_cutlass.h), where it is built and takes the
    // shape (fp8_cutlass::supports), with fast accumulation (its kernels accumulate so): kTuned (default)
    // times its configs beside cuBLASLt's matmul + epilogue pass whenever such a shape is tuned (with
    // autotuning only) and keeps the fastest; kAlways runs config `config` on every shape it takes (tests);
    // kNever not at all.
    enum class Cutlass { kTuned, kAlways, kNever };
    void set_cutlass(Cutlass mode, int config = 0);
    static bool cutlass_available();  // built with CUTLASS's headers
    // Shapes planned so far, how many of them run the epilogue path, and how many run on CUTLASS.
    int64_t planned() const;
    int64_t epilogue_planned() const;
    int64_t cutlass_planned() const;

    struct Impl;
    Impl* impl() { return impl_.get(); }

private:
    std::unique_ptr<Impl> impl_;
};
void fp8_gemm(Fp8GemmContext& ctx, const Fp8GemmParams& p, cudaStream_t stream);

// The small-m FP8 GEMM (fp8_gemv.cu) for decode steps: fp8_gemm()'s contract for m ≤ 4 rows with k a multiple
// of 16, x and w 16-byte aligned, no bias and no GELU; one-byte weights streamed by 16-byte loads, codes
// decoded in registers, fp32 accumulation in another order than cuBLASLt's, the scale / beta / ReLU² epilogue
// in the same kernel. fp8_gemm() routes to it per Fp8GemmContext::set_small_m_kernel. k_split as gemv's (0 =
// fp8_gemv_k_split).
bool fp8_gemv_supported(const Fp8GemmParams& p);
void fp8_gemv(const Fp8GemmParams& p, cudaStream_t stream, int k_split = 0);
int fp8_gemv_k_split(int64_t n, int64_t k);

// ---------------------------------------------------------------------------------------------------
// Norms and activations (norm.cu)

// With residual: residual ← residual + x; y = w ⊙ residual / sqrt(mean(residual²) + eps).
// Without: y = w ⊙ x / sqrt(mean(x²) + eps). Statistics in fp32.
struct RmsNormParams {
    const void* x = nullptr;  // [rows, dim] (row stride x_stride, 0 → dim)
    DType x_dtype = DType::kBF16;
    float* residual = nullptr;      // [rows, dim] fp32 in/out, or null
    const float* weight = nullptr;  // [dim]
    bf16* y = nullptr;              // [rows, dim]
    int64_t rows = 0, dim = 0, x_stride = 0;
    float eps = 1e-5f;
    Fp8RowOut fp8_out;  // y's rows quantized; fused into the vector kernels
};
void rmsnorm(const RmsNormParams& p, cudaStream_t stream);

// LayerNorm with weight and bias, same residual fusion as rmsnorm. Statistics in fp32.
struct LayerNormParams {
    const void* x = nullptr;  // [rows, dim] (row stride x_stride, 0 → dim)
    DType x_dtype = DType::kBF16;
    float* residual = nullptr;      // [rows, dim] fp32 in/out, or null
    const float* weight = nullptr;  // [dim]
    const float* bias = nullptr;    // [dim] or null
    bf16* y = nullptr;              // [rows, dim]
    int64_t rows = 0, dim = 0, x_stride = 0;
    float eps = 1e-6f;
};
void layernorm(const LayerNormParams& p, cudaStream_t stream);

// Mamba-2 gated grouped RMSNorm (norm_before_gate=False): v = y ⊙ SiLU(z); each group of group_size
// channels is RMS-normalised; out = w ⊙ v.
struct GatedRmsNormParams {
    const void* y = nullptr;  // [rows, dim] (row stride y_stride, 0 → dim)
    DType y_dtype = DType::kF32;
    const bf16* z = nullptr;        // [rows, dim] (row stride z_stride, 0 → dim): the z slice of in_proj
    const float* weight = nullptr;  // [dim]
    bf16* out = nullptr;            // [rows, dim]
    int64_t rows = 0, dim = 0, group_size = 0, y_stride = 0, z_stride = 0;
    float eps = 1e-5f;
    // out's rows quantized; fused where a row's groups fit one block of warp teams (≤ 32 groups of ≤ 1,280)
    Fp8RowOut fp8_out;
};
void gated_rmsnorm(const GatedRmsNormParams& p, cudaStream_t stream);

// In place on bf16 [n]: ReLU(x)² (Nemotron MLP) and exact-erf GELU (RADIO MLP), fp32 math.
void relu_squared(bf16* x, int64_t n, cudaStream_t stream);
void gelu_erf(bf16* x, int64_t n, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// Causal depthwise conv1d + SiLU (conv1d.cu). Conv state per slot: [n_slots, channels, K-1], the K-1
// previous pre-conv inputs, oldest first.

// Prefill over packed sequences: sequence s owns tokens [cu_seqlens[s], cu_seqlens[s+1]); its left
// context is the state in slot slots[s] (zeros when has_initial_state is set and [s] == 0); afterwards
// the slot holds the last K-1 inputs of the sequence (older state entries shifted in when len < K-1).
struct ConvVarlenParams {
    const bf16* x = nullptr;        // [n_tok, channels] (row stride x_stride, 0 → channels)
    const float* weight = nullptr;  // [channels, K]
    const float* bias = nullptr;    // [channels] or null
    void* state = nullptr;          // [n_slots, channels, K-1]
    DType state_dtype = DType::kBF16;
    const int32_t* cu_seqlens = nullptr;         // [n_seq + 1]
    const int32_t* slots = nullptr;              // [n_seq]
    const uint8_t* has_initial_state = nullptr;  // [n_seq] or null (= all 1)
    bf16* out = nullptr;                         // [n_tok, channels]
    int64_t n_tok = 0, n_seq = 0, channels = 0, K = 4, x_stride = 0;
};
void causal_conv1d_varlen(const ConvVarlenParams& p, cudaStream_t stream);

// One new token per sequence (decode): out = SiLU(conv(state ++ x)); state shifts by one.
struct ConvUpdateParams {
    const bf16* x = nullptr;        // [batch, channels] (row stride x_stride, 0 → channels)
    const float* weight = nullptr;  // [channels, K]
    const float* bias = nullptr;    // [channels] or null
    void* state = nullptr;          // [n_slots, channels, K-1]
    DType state_dtype = DType::kBF16;
    const int32_t* slots = nullptr;  // [batch]
    bf16* out = nullptr;             // [batch, channels]
    int64_t batch = 0, channels = 0, K = 4, x_stride = 0;
};
void causal_conv1d_update(const ConvUpdateParams& p, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// Mamba-2 SSM (ssd.cu, ssu.cu). dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max) is computed
// inside; head h uses B/C group h / (H / G); y = SSM(x) + D ⊙ x.

// Chunked SSD scan over packed sequences; sequence s starts from slot slots[s] (zeros when
// has_initial_state[s] == 0) and its final state is written back to that slot. Chunks start at each
// sequence's own offsets 0, chunk, 2·chunk, …
struct SsdVarlenParams {
    const bf16* x = nullptr;         // [n_tok, H, P] (row stride x_stride)
    const bf16* B = nullptr;         // [n_tok, G, N] (row stride bc_stride)
    const bf16* C = nullptr;         // [n_tok, G, N] (row stride bc_stride)
    const bf16* dt_raw = nullptr;    // [n_tok, H]    (row stride dt_stride)
    const float* dt_bias = nullptr;  // [H]
    const float* A = nullptr;        // [H] (negative: −exp(A_log))
    const float* D = nullptr;        // [H] or null
    void* state = nullptr;           // [n_slots, H, P, N] (state_split: [n_slots, 2, H, P, N] uint16)
    DType state_dtype = DType::kF32;
    bool state_split = false;  // fp32 only: the state as two 16-bit planes (SsuParams::state_split)
    const int32_t* cu_seqlens = nullptr;         // [n_seq + 1]
    const int32_t* slots = nullptr;              // [n_seq]
    const uint8_t* has_initial_state = nullptr;  // [n_seq] or null (= all 1)
    void* y = nullptr;                           // [n_tok, H, P] contiguous
    DType y_dtype = DType::kF32;
    int64_t n_tok = 0, n_seq = 0, H = 0, P = 0, G = 0, N = 0, chunk = 128;
    int64_t x_stride = 0, bc_stride = 0, dt_stride = 0;
    float dt_min = 0.0f, dt_max = std::numeric_limits<float>::infinity();
    // Head-dim slices per head, each its own block (C·Bᵀ recomputed per slice): 0 = automatic (2 when the
    // (sequence, head) blocks would leave SMs idle, e.g. one long prompt), else must divide P into even
    // slices.
    int64_t p_split = 0;
    // The Hopper wgmma kernel (ssd_wgmma.cu) where it applies: N = 128, P = 80 (Holotron), compute
    // capability 9.0, 16-byte aligned rows, and at most one (sequence, head) block per SM (its block takes a
    // whole SM: 239 registers × 256 threads; with more blocks the mma.sync kernel's two blocks an SM are
    // faster). Whole heads per block (p_split does not apply). Off: the mma.sync kernel (A/B).
    bool wgmma = true;
};
size_t ssd_workspace_bytes(const SsdVarlenParams& p);
void ssd_varlen(const SsdVarlenParams& p, void* workspace, cudaStream_t stream);

// Selective state update (decode, one token per sequence) on the state in slot slots[b].
struct SsuParams {
    const bf16* x = nullptr;         // [batch, H, P] (row stride x_stride)
    const bf16* B = nullptr;         // [batch, G, N] (row stride bc_stride)
    const bf16* C = nullptr;         // [batch, G, N] (row stride bc_stride)
    const bf16* dt_raw = nullptr;    // [batch, H]    (row stride dt_stride)
    const float* dt_bias = nullptr;  // [H]
    const float* A = nullptr;        // [H]
    const float* D = nullptr;        // [H] or null
    void* state = nullptr;           // [n_slots, H, P, N] (state_split: [n_slots, 2, H, P, N] uint16)
    DType state_dtype = DType::kF32;
    // fp32 only, with replay: the state stored as two 16-bit planes per slot, each value rounded to bf16 then
    // the low 16 bits of its fp32 pattern (ssm_state.cuh). Joined they are the exact fp32 state; a row that
    // does not fold reads only the bf16 plane (half the bytes) for y (≤ 2⁻⁸ relative per value, as the
    // reference, which rounds the state to bf16 for S·C). Same bytes a slot as fp32; ssm_state_split /
    // ssm_state_join convert on the host.
    bool state_split = false;
    const int32_t* slots = nullptr;  // [batch]
    void* y = nullptr;               // [batch, H, P] contiguous
    DType y_dtype = DType::kF32;
    int64_t batch = 0, H = 0, P = 0, G = 0, N = 0;
    int64_t x_stride = 0, bc_stride = 0, dt_stride = 0;
    float dt_min = 0.0f, dt_max = std::numeric_limits<float>::infinity();
    // Blocks per (sequence, head), each over P / row_split state rows (P must divide evenly); 0 = 2 when what
    // a head stages is over 24 KB (fp32 at P·N = 80·128: 40 KB; bf16 or a split state's bf16 plane: 20 KB),
    // else 1. Smaller blocks stage less shared memory each, so more of them fit beside another kernel's
    // blocks on an SM.
    int64_t row_split = 0;
    // Each block's state rows staged into shared memory by one bulk copy on the copy engine (TMA, completing
    // on an mbarrier; compute capability ≥ 9.0) instead of 16-byte cp.async by every thread. Same bytes, same
    // math.
    bool bulk_stage = false;
    // The state's loads and stores marked evict-first in the L2 (detail::l2_policy): a decode step reads each
    // row's state once, so its ≈ 0.5 GB a layer need not push out what the step's other kernels reuse. Same
    // bytes, same math.
    bool l2_evict_first = false;
    // Replay (read-mostly decode steps; ReplaySSM, spec/serving.md §1.6), on when replay_window K > 0. The
    // state in slot slots[b] is then the state *before* the slot's replay_count[b] (0 ≤ count < K) pending
    // tokens, whose inputs are kept in `replay`: per slot K entries of ssm_replay_entry_elems(H, P, G, N)
    // bf16, each x [H·P] | B [G·N] | dt_raw [H] as the decode step received them. y covers the pending tokens
    // and this one: y = C·S after all of them + D·x, S = (Πdecay)·S₀ + Σⱼ (decay after j)·dtⱼ·xⱼ⊗Bⱼ. A row
    // whose count is below K − 1 only reads its state and stores this token's inputs as entry `count`; a row
    // at K − 1 folds all K tokens into its state (then the slot has none pending). Per K steps the state is
    // read K times and written once instead of K + K times. The caller keeps the counts (they must be < K).
    void* replay = nullptr;                 // [n_slots, K, entry] bf16
    const int32_t* replay_count = nullptr;  // [batch]
    int64_t replay_window = 0;
};
void selective_state_update(const SsuParams& p, cudaStream_t stream);
// Whether SsuParams::bulk_stage runs on the current device (compute capability 9.0 or later).
bool ssu_bulk_stage_available();
// The split layout (SsuParams::state_split) of `slots` fp32 states of hpn = H·P·N values each, and back.
void ssm_state_split(const float* plain, uint16_t* split, int64_t slots, int64_t hpn);
void ssm_state_join(const uint16_t* split, float* plain, int64_t slots, int64_t hpn);
// bf16 values per replay entry: x [H·P] | B [G·N] | dt_raw [H].
inline int64_t ssm_replay_entry_elems(int64_t H, int64_t P, int64_t G, int64_t N) {
    return H * P + G * N + H;
}
// Folds each row's replay_count[b] pending tokens (≤ K − 1; rows with none are left untouched) into the state
// in slots[b], so that the state is again the whole sequence's; x, B, C, dt_raw and y are not used. Run
// before anything else reads a slot's state (a prefill that continues it, a copy to the host).
void ssm_replay_fold(const SsuParams& p, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// Attention (attention.cu). Paged KV cache: [n_pages, page_size, n_kv_heads, head_dim] bf16 for K and for
// V; token j of sequence s lives in page block_table[s · max_pages_per_seq + j / page_size] at offset
// j % page_size. head_dim must be a multiple of 8 and ≤ 128; GQA: q head h uses kv head h / (n_heads /
// n_kv_heads). No positional encoding. scale 0 → 1/sqrt(head_dim).

// Writes new K/V rows into the cache: token i goes to flat row slot_mapping[i] = page·page_size +
// offset (negative → skipped, e.g. padding).
struct KvAppendParams {
    const bf16* k = nullptr;  // [n_tok, n_kv_heads, head_dim] (row stride k_stride)
    const bf16* v = nullptr;  // [n_tok, n_kv_heads, head_dim] (row stride v_stride)
    bf16* k_cache = nullptr;
    bf16* v_cache = nullptr;
    const int32_t* slot_mapping = nullptr;  // [n_tok]
    int64_t n_tok = 0, n_kv_heads = 0, head_dim = 0, k_stride = 0, v_stride = 0;
};
void kv_cache_append(const KvAppendParams& p, cudaStream_t stream);

// Varlen prefill (flash-style, online softmax, bf16 tensor cores with fp32 accumulation). Query token i
// of sequence s sits at position past_s + i where past_s = len_k(s) − len_q(s): causal masking lets it
// see keys 0..past_s + i; causal = false sees all len_k(s) keys (ViT).
// KV source: paged (k_cache set: block_table, seq_lens_k) or contiguous (k/v set: cu_seqlens_k).
struct AttentionPrefillParams {
    const bf16* q = nullptr;  // [n_tok, n_heads, head_dim] (row stride q_stride, 0 → n_heads·head_dim)
    bf16* out = nullptr;      // [n_tok, n_heads, head_dim] (row stride out_stride, 0 → n_heads·head_dim)
    const int32_t* cu_seqlens_q = nullptr;  // [n_seq + 1]
    // paged source
    const bf16* k_cache = nullptr;
    const bf16* v_cache = nullptr;
    const int32_t* block_table = nullptr;  // [n_seq, max_pages_per_seq]
    const int32_t* seq_lens_k = nullptr;   // [n_seq]: cached tokens including the new ones
    int64_t page_size = 0, max_pages_per_seq = 0;
    // contiguous source
    const bf16* k = nullptr;  // [n_tok_k, n_kv_heads, head_dim] (row stride kv_stride)
    const bf16* v = nullptr;
    const int32_t* cu_seqlens_k = nullptr;  // [n_seq + 1]
    int64_t kv_stride = 0;
    // Rows of the contiguous k/v buffers (0 = not given). Given, and with 16-byte aligned k/v and kv_stride,
    // the warp-specialized wgmma kernel copies K/V tiles by TMA (one thread, 2D tensor maps) instead of
    // cp.async. Must cover every key row the sequences name (≥ cu_seqlens_k[n_seq], which lives on the device
    // and is not checked here): the tensor maps read rows at or past kv_rows as zeros instead of faulting.
    int64_t kv_rows = 0;
    int64_t n_seq = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    int64_t q_stride = 0, out_stride = 0;
    int64_t max_seqlen_q = 0;  // ≥ every len_q(s): sizes the grid
    bool causal = true;
    float scale = 0.0f;
    // Split-KV: with few (row block, head, sequence) blocks for the GPU (one prompt chunk: 8 × 40 blocks on
    // 264 block slots runs as two waves, the second 20% full), each block takes 1/n_splits of its key
    // tiles and a second kernel merges the partial results through the workspace. n_splits 0 = automatic
    // when a workspace is given (needs n_tok_q = Σ len_q and max_seqlen_k ≥ every len_k), 1 = off.
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    int64_t n_splits = 0, n_tok_q = 0, max_seqlen_k = 0;
    // Query rows per warp: 16 (0, the default: 128-row blocks of 8 warps, or 64-row blocks of 4 when that
    // leaves too few blocks) or 32 (always 128-row blocks of 4 warps, each K and V fragment feeding the mma
    // of two 16-row m-tiles: half the shared-memory traffic per mma, half the warps per SM).
    int64_t rows_per_warp = 0;
    // Hopper warpgroup-MMA kernel (attention_wgmma.cu): 0 = off (the mma.sync kernels above), 64 or 128 = on,
    // with key tiles of that many keys; 128-row blocks of two warpgroups, S and P·V on wgmma. Used only on a
    // compute capability 9.0 device; elsewhere the request falls back to the mma.sync kernels
    // (rows_per_warp).
    int64_t wgmma_key_tile = 0;
    // With the wgmma kernel: warp-specialized blocks (attention_wgmma.cu): one warpgroup copies K/V tiles
    // into a 4-stage ring on mbarriers, two multiply, each issuing the next tile's S = Q·Kᵀ beside this
    // tile's O += P·V and running the softmax while P·V accumulates (FlashAttention-3's intra-warpgroup
    // overlap); one block an SM. False: two multiplying warpgroups that also copy, one block barrier a tile,
    // two blocks an SM.
    bool wgmma_warp_specialized = false;
};
// The values AttentionPrefillParams::wgmma_key_tile takes (0, 64, 128, 208; 208 runs as 128 except in the
// warp-specialized kernel with TMA copies at head dim 80, the ViT's).
constexpr bool valid_wgmma_key_tile(int64_t keys) {
    return keys == 0 || keys == 64 || keys == 128 || keys == 208;
}
void attention_prefill(const AttentionPrefillParams& p, cudaStream_t stream);
// The split count attention_prefill would use for p (1 = no split), and the workspace bytes it needs
// for n_tok_q query tokens at `splits` splits.
int64_t attention_prefill_splits(const AttentionPrefillParams& p);
size_t attention_prefill_workspace_bytes(int64_t n_tok_q, int64_t n_heads, int64_t head_dim, int64_t splits);

// Paged decode (one query token per sequence at position seq_lens[b] − 1, its K/V already appended):
// split-KV ("flash-decoding"): each block takes all query heads of one kv head over one partition of the
// keys; a second kernel merges the partitions. The split count depends on batch, kv heads, max_seq_len
// and the SM count; the workspace holds the partial results.
struct AttentionDecodeParams {
    const bf16* q = nullptr;  // [batch, n_heads, head_dim] (row stride q_stride, 0 → n_heads·head_dim)
    bf16* out = nullptr;      // [batch, n_heads, head_dim] contiguous
    const bf16* k_cache = nullptr;
    const bf16* v_cache = nullptr;
    const int32_t* block_table = nullptr;  // [batch, max_pages_per_seq]
    const int32_t* seq_lens = nullptr;     // [batch]
    int64_t page_size = 0, max_pages_per_seq = 0;
    int64_t batch = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, q_stride = 0;
    int64_t max_seq_len = 0;  // ≥ every seq_lens[b]: sizes the split grid
    int32_t n_splits = 0;     // 0 → chosen from the shapes; otherwise forced (tests)
    float scale = 0.0f;
    // Each warp keeps its next key tile in flight while it multiplies the current one (tiles of 16 keys, two
    // a warp, the same shared memory as one 32-key tile a warp); false: one 32-key tile a warp, copied then
    // multiplied. Alone the two run alike (three blocks an SM hide the copies either way); with fewer blocks
    // an SM, as beside a mixed step's prefill attention, the pipelined one is faster and shortens the pair
    // (docs/BENCHMARKS.md).
    bool pipelined = true;
    // The K/V loads marked evict-first in the L2 (detail::l2_policy): each row's KV is read once a step (2 GB
    // a layer at 100 rows × 5,000 keys), while a prefill beside it re-reads its own sequence's K/V from the
    // L2.
    bool l2_evict_first = false;
    // TMA kernel (attention_decode_tma.cu): persistent blocks whose warps stream 16-key K/V tiles by TMA
    // through 3-stage rings (≈ 64 KB in flight a block with one issuing thread a warp). Used where it can run
    // (head_dim 128, page_size a multiple of 16, cache_pages given, compute capability 9.0); otherwise the
    // cp.async kernels above. Rows past a sequence's length inside its last page may hold anything (the
    // kernel zeroes them in shared memory).
    bool tma = false;
    int64_t cache_pages = 0;  // pages in k_cache / v_cache (the extent of the TMA maps)
    // TMA kernel: resident blocks an SM. 1 pads its shared memory so that a second block never fits but one
    // block of the prefill attention does (a mixed step's pair); 2 for decode alone.
    int32_t persistent_blocks_per_sm = 1;
    // SMs the launch may use, for the split plan and the TMA kernel's persistent grid: a green context's
    // share (kernels/cuda/green_context.h); 0 = the device's.
    int32_t sm_count = 0;
};
int32_t attention_decode_splits(const AttentionDecodeParams& p);
// Whether p asks for the TMA kernel (tma) and it can run here (head_dim 128, page_size a multiple of 16,
// cache_pages given, compute capability 9.0); where it cannot, attention_decode runs the cp.async kernels.
bool attention_decode_tma_usable(const AttentionDecodeParams& p);
size_t attention_decode_workspace_bytes(const AttentionDecodeParams& p);
void attention_decode(const AttentionDecodeParams& p, void* workspace, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// Vision and embedding glue (vision.cu)

// Bilinear resize, PyTorch align_corners=False, channel-last: [in_h, in_w, C] → [out_h, out_w, C].
// (CPE: the 128×128 pos_embed grid → 32×32, computed once.) fp32 math, bf16 in/out.
struct BilinearParams {
    const bf16* in = nullptr;
    bf16* out = nullptr;
    int64_t channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
};
void bilinear_resize(const BilinearParams& p, cudaStream_t stream);

// Im2patch (RADIO): image [n_img, 3, H, W] fp32 → patches [n_img, (H/ps)·(W/ps), 3·ps·ps] bf16 with
// patch index py·(W/ps) + px and feature c·ps² + yy·ps + xx.
struct PatchifyParams {
    const float* images = nullptr;
    bf16* patches = nullptr;
    int64_t n_img = 0, height = 0, width = 0, patch = 16;
};
void patchify(const PatchifyParams& p, cudaStream_t stream);

// ViT token assembly: out[tile] = [prefix rows] ++ [patch_emb + pos] (fp32 residual stream).
struct VitTokensParams {
    const bf16* patch_emb = nullptr;  // [n_tiles · n_patches, width]
    const bf16* pos = nullptr;        // [n_patches, width] (resized CPE)
    const bf16* prefix = nullptr;     // [n_prefix, width] (cls_token.token)
    float* out = nullptr;             // [n_tiles · (n_prefix + n_patches), width]
    int64_t n_tiles = 0, n_patches = 0, n_prefix = 0, width = 0;
};
void vit_tokens(const VitTokensParams& p, cudaStream_t stream);

// Pixel shuffle v2 (spec §3.2), per tile: in [side·side, C] (rows of tile t start at t·in_tile_stride
// rows, so the ViT's prefix rows can be skipped) → out [(side/s)², s²·C] bf16.
struct PixelShuffleParams {
    const void* in = nullptr;
    DType in_dtype = DType::kF32;
    bf16* out = nullptr;
    int64_t n_tiles = 0, side = 0, channels = 0, factor = 2, in_tile_stride = 0;  // stride 0 → side²
};
void pixel_shuffle(const PixelShuffleParams& p, cudaStream_t stream);

// Embedding gather with image merge: out[i] = table[ids[i]] except tokens with id == image_token_id,
// which take image rows in order: the k-th image token of sequence s takes image row
// image_row_offset[s] + k. Tokens of sequence s are [cu_seqlens[s], cu_seqlens[s+1]).
// The workspace holds one int32 per token (the row index).
// Fed tokens (a step issued before the previous step's sampled tokens reach the host): token t < n_fed with
// fed_from[t] ≥ 0 takes the id fed_ids[fed_from[t]] instead of ids[t].
struct EmbedParams {
    const int32_t* ids = nullptr;       // [n_tok]
    const int32_t* fed_from = nullptr;  // [n_fed] index into fed_ids, or −1; null: no fed tokens
    const int32_t* fed_ids = nullptr;   // the previous step's sampled tokens (device)
    int64_t n_fed = 0;
    const bf16* table = nullptr;                // [vocab, dim]
    const bf16* image_rows = nullptr;           // [n_image_rows, dim] or null
    const int32_t* cu_seqlens = nullptr;        // [n_seq + 1]
    const int32_t* image_row_offset = nullptr;  // [n_seq] or null (no images)
    void* out = nullptr;                        // [n_tok, dim]
    DType out_dtype = DType::kF32;
    int64_t n_tok = 0, n_seq = 0, dim = 0, vocab = 0, n_image_rows = 0;
    int32_t image_token_id = -1;
};
size_t embed_workspace_bytes(const EmbedParams& p);
void embed_tokens(const EmbedParams& p, void* workspace, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// Sampling (sampling.cu): per row, the same function as model/sampler.h's sample_token with
// (seed[r], step[r]): temperature 0 or top_k 1 → argmax (first maximum, NaN skipped); otherwise
// candidates sorted by logit (desc, ties by id) cut to top_k, softmax at temperature, cut to top_p,
// inverse CDF at u·total. `allowed` (optional) is a per-row bitmask (bit i of word i/32 = token i
// allowed); a row that allows nothing yields −1.
struct SamplingParams {
    const float* logits = nullptr;       // [rows, vocab] (row stride logits_stride, 0 → vocab)
    const float* temperature = nullptr;  // [rows]
    const int32_t* top_k = nullptr;      // [rows] or null (= 0, off)
    const float* top_p = nullptr;        // [rows] or null (= 1, off)
    const uint64_t* seed = nullptr;      // [rows]
    const uint64_t* step = nullptr;      // [rows]
    const uint32_t* allowed = nullptr;   // [rows, allowed_stride] or null; stride 0: one mask for every row
    int32_t* tokens = nullptr;           // [rows]
    int64_t rows = 0, vocab = 0, logits_stride = 0, allowed_stride = 0;
    bool radix_only = false;  // every selection by radix digits, none by bins (tests compare the two)
};
void sample_tokens(const SamplingParams& p, cudaStream_t stream);

}  // namespace surf::kernels::cuda
