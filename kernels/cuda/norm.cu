// Row norms (RMSNorm / LayerNorm with the fused residual add), the Mamba-2 gated grouped RMSNorm and
// the elementwise activations. All of them are memory-bound, so the fast paths move 16 bytes per access
// (8 elements: two float4 of fp32 or one uint4 of bf16) and keep the row in registers between the
// statistics and the write, so each input byte is read from DRAM once. A row (a row group for the gated
// norm) is worked on by a team: one warp when it has ≤ 32·kWarpVecs vectors (kRowWarps rows a block, warp
// shuffles only), else a whole block with just enough threads that each holds ≤ kBlockVecs vectors. Rows
// that are not a multiple of 8 elements, misaligned, or too long for that take the generic kernels, which
// re-read the row from L1/L2 in the second pass. The RMSNorms can also write their output's E4M3 codes
// (Fp8RowOut) from the same registers, sparing the next FP8 GEMM its quantization pass.
#include <type_traits>

#include "kernels/cuda/fp8_common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::block_sum;
using detail::to_float;

constexpr int kNormThreads = 256;
constexpr int kVec = 8;              // elements per 16-byte bf16 access (two float4 for fp32)
constexpr int kBlockVecs = 4;        // block teams: 32 fp32 values of the row per thread
constexpr int kMaxRowThreads = 512;  // block teams cover rows of ≤ 512·4·8 = 16384 elements
// Warp teams: rows of ≤ 32·5·8 = 1,280 elements (the ViT's LayerNorm width and the Mamba gated norm's group
// of 1,280 channels). One block of 64 threads a row would leave those kernels well short of copy bandwidth:
// many tiny blocks, each with two block barriers.
constexpr int kWarpVecs = 5;
constexpr int kRowWarps = 8;  // warp teams per block

// ---- 8-element vector loads/stores (16-byte aligned) ----------------------------------------------

__device__ __forceinline__ void load8(const float* p, float (&v)[kVec]) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load8(const bf16* p, float (&v)[kVec]) {
    detail::unpack_bf16x8(*reinterpret_cast<const uint4*>(p), v);
}
__device__ __forceinline__ void store8(float* p, const float (&v)[kVec]) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
// Round-to-nearest-even per element, as __float2bfloat16_rn.
__device__ __forceinline__ void store8(bf16* p, const float (&v)[kVec]) {
    using detail::pack_bf16x2;
    *reinterpret_cast<uint4*>(p) = make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]),
                                              pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
}

// Threads for a block team over n_vec vectors: a multiple of 32 with ≤ kBlockVecs each.
int64_t row_threads(int64_t n_vec) {
    const int64_t t = (n_vec + kBlockVecs - 1) / kBlockVecs;
    return std::max<int64_t>((t + 31) / 32 * 32, 32);
}

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

bool aligned16(const void* p) {
    return aligned(p, 16);
}

// The threads working on one item (a row, or a row group of the gated norm): a warp (kWarp; item = warp of
// the grid, kRowWarps a block) or the block (item = block). Vector j of this thread is first + j·stride.
template <bool kWarp>
struct RowTeam {
    static constexpr int kVecs = kWarp ? kWarpVecs : kBlockVecs;  // vectors per thread, at most
    int first, stride;
    int64_t item;
    __device__ RowTeam() {
        if constexpr (kWarp) {
            first = threadIdx.x & 31, stride = 32;
            item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
        } else {
            first = threadIdx.x, stride = blockDim.x, item = blockIdx.x;
        }
    }
    __device__ int vec(int j) const { return first + j * stride; }
    // The team's sum, returned to each of its threads (block teams: every thread of the block must call it).
    __device__ float sum(float v, float* scratch) const {
        if constexpr (kWarp)
            return detail::warp_sum(v);
        else
            return block_sum(v, scratch);
    }
    __device__ float max(float v, float* scratch) const {
        if constexpr (kWarp)
            return detail::warp_max(v);
        else
            return detail::block_max(v, scratch);
    }
};

// A row's values as its bf16 output holds them (v is overwritten), and this thread's part of their amax.
template <int kVecs>
__device__ __forceinline__ float round_for_e4m3(float (&v)[kVecs][kVec], const bool (&have)[kVecs]) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        if (!have[j]) continue;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
            v[j][e] = detail::bf16_rounded(v[j][e]);
            amax = fmaxf(amax, fabsf(v[j][e]));
        }
    }
    return amax;
}

// This thread's vectors of a row (vector j at column vec(j)·8 of q) as E4M3 codes: quantize_e4m3's.
template <bool kWarp, int kVecs>
__device__ __forceinline__ void store_e4m3(const RowTeam<kWarp>& team, uint8_t* q,
                                           const float (&v)[kVecs][kVec], const bool (&have)[kVecs],
                                           float scale) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        if (have[j])
            *reinterpret_cast<uint2*>(q + static_cast<int64_t>(team.vec(j)) * kVec) =
                detail::e4m3x8(v[j], scale);
    }
}

// Loads this thread's vectors of a row and folds in the residual (residual ← residual + x); all loads are
// issued before the residual stores. Returns the source values in v; vectors past n_vec are left untouched
// and must not be used.
template <typename TX, bool kWarp>
__device__ __forceinline__ void load_row(const RowTeam<kWarp>& team, const TX* x, float* residual, int n_vec,
                                         float (&v)[RowTeam<kWarp>::kVecs][kVec]) {
    constexpr int kVecs = RowTeam<kWarp>::kVecs;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const int i = team.vec(j);
        if (i < n_vec) load8(x + static_cast<int64_t>(i) * kVec, v[j]);
    }
    if (residual == nullptr) return;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const int i = team.vec(j);
        if (i < n_vec) {
            float r[kVec];
            load8(residual + static_cast<int64_t>(i) * kVec, r);
#pragma unroll
            for (int e = 0; e < kVec; ++e) v[j][e] += r[e];
        }
    }
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const int i = team.vec(j);
        if (i < n_vec) store8(residual + static_cast<int64_t>(i) * kVec, v[j]);
    }
}

template <typename TX, bool kWarp>
__global__ void __launch_bounds__(kMaxRowThreads) rmsnorm_vec_kernel(RmsNormParams p, int64_t x_stride) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    constexpr int kVecs = RowTeam<kWarp>::kVecs;
    const RowTeam<kWarp> team;
    const int64_t row = team.item;
    if (kWarp && row >= p.rows) return;  // a warp team past the last row (no block barrier in warp teams)
    const int n_vec = static_cast<int>(p.dim / kVec);
    float v[kVecs][kVec];
    float* residual = p.residual ? p.residual + row * p.dim : nullptr;
    load_row(team, static_cast<const TX*>(p.x) + row * x_stride, residual, n_vec, v);
    float sumsq = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        if (team.vec(j) < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) sumsq += v[j][e] * v[j][e];
        }
    }
    sumsq = team.sum(sumsq, scratch);
    const float inv = rsqrtf(sumsq / static_cast<float>(p.dim) + p.eps);
    bf16* y = p.y + row * p.dim;
    bool have[kVecs];
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const int i = team.vec(j);
        have[j] = i < n_vec;
        if (have[j]) {
            float w[kVec];
            load8(p.weight + i * kVec, w);
#pragma unroll
            for (int e = 0; e < kVec; ++e) v[j][e] = w[e] * (v[j][e] * inv);
            store8(y + i * kVec, v[j]);
        }
    }
    if (p.fp8_out.q == nullptr) return;
    const float amax = team.max(round_for_e4m3(v, have), scratch);
    const float scale = detail::e4m3_row_scale(p.fp8_out.static_scale, amax);
    if (team.first == 0) p.fp8_out.scale[row] = scale;
    store_e4m3(team, p.fp8_out.q + row * p.dim, v, have, scale);
}

template <typename TX, bool kWarp>
__global__ void __launch_bounds__(kMaxRowThreads) layernorm_vec_kernel(LayerNormParams p, int64_t x_stride) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    constexpr int kVecs = RowTeam<kWarp>::kVecs;
    const RowTeam<kWarp> team;
    const int64_t row = team.item;
    if (kWarp && row >= p.rows) return;
    const int n_vec = static_cast<int>(p.dim / kVec);
    float v[kVecs][kVec];
    float* residual = p.residual ? p.residual + row * p.dim : nullptr;
    load_row(team, static_cast<const TX*>(p.x) + row * x_stride, residual, n_vec, v);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        if (team.vec(j) < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) sum += v[j][e];
        }
    }
    const float mean = team.sum(sum, scratch) / static_cast<float>(p.dim);
    // Variance as the mean of squared deviations (second pass, over registers): no cancellation.
    float dev = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        if (team.vec(j) < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) {
                v[j][e] -= mean;
                dev += v[j][e] * v[j][e];
            }
        }
    }
    const float var = team.sum(dev, scratch) / static_cast<float>(p.dim);
    const float inv = rsqrtf(var + p.eps);
    bf16* y = p.y + row * p.dim;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const int i = team.vec(j);
        if (i < n_vec) {
            float w[kVec], b[kVec] = {}, o[kVec];  // no bias adds 0, as the generic kernel does
            load8(p.weight + i * kVec, w);
            if (p.bias) load8(p.bias + i * kVec, b);
#pragma unroll
            for (int e = 0; e < kVec; ++e) o[e] = v[j][e] * inv * w[e] + b[e];
            store8(y + i * kVec, o);
        }
    }
}

// Item = (row, group) = row · groups + group; v = y ⊙ SiLU(z) stays in registers between the sum of squares
// and the write.
template <typename TY, bool kWarp>
__global__ void __launch_bounds__(kMaxRowThreads)
    gated_rmsnorm_vec_kernel(GatedRmsNormParams p, int64_t y_stride, int64_t z_stride) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    constexpr int kVecs = RowTeam<kWarp>::kVecs;
    const RowTeam<kWarp> team;
    const int64_t groups = p.dim / p.group_size;
    if (kWarp && team.item >= p.rows * groups) return;
    const int64_t row = team.item / groups, g0 = team.item % groups * p.group_size;
    const TY* y = static_cast<const TY*>(p.y) + row * y_stride + g0;
    const bf16* z = p.z + row * z_stride + g0;
    const int n_vec = static_cast<int>(p.group_size / kVec);
    float v[kVecs][kVec], zv[kVecs][kVec];
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const int i = team.vec(j);
        if (i < n_vec) {
            load8(y + i * kVec, v[j]);
            load8(z + i * kVec, zv[j]);
        }
    }
    float sumsq = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        if (team.vec(j) < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) {
                v[j][e] = v[j][e] * detail::silu(zv[j][e]);
                sumsq += v[j][e] * v[j][e];
            }
        }
    }
    sumsq = team.sum(sumsq, scratch);
    const float inv = rsqrtf(sumsq / static_cast<float>(p.group_size) + p.eps);
    bf16* out = p.out + row * p.dim + g0;
    const float* wg = p.weight + g0;
    bool have[kVecs];
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const int i = team.vec(j);
        have[j] = i < n_vec;
        if (have[j]) {
            float w[kVec];
            load8(wg + i * kVec, w);
#pragma unroll
            for (int e = 0; e < kVec; ++e) v[j][e] = w[e] * (v[j][e] * inv);
            store8(out + i * kVec, v[j]);
        }
    }
    // With an FP8 output the launch makes a block one row (a warp team per group): the row's amax is the
    // block's.
    if constexpr (kWarp) {
        if (p.fp8_out.q == nullptr) return;
        const float amax = detail::block_max(round_for_e4m3(v, have), scratch);
        const float scale = detail::e4m3_row_scale(p.fp8_out.static_scale, amax);
        if (threadIdx.x == 0) p.fp8_out.scale[row] = scale;
        store_e4m3(team, p.fp8_out.q + row * p.dim + g0, v, have, scale);
    }
}

// ---- generic kernels (any dim or alignment): block-strided, second pass re-reads from L1/L2 --------
// Pass 1 of both norms: fold x into the residual (when present) and return the row's source values'
// sum (kind 0) or sum of squares (kind 1) via `sum`; the source is the residual when there is one.
template <typename TX>
__device__ void residual_pass(const TX* x, float* residual, int64_t dim, float& sum, float& sumsq) {
    sum = 0.0f;
    sumsq = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = to_float(x[i]);
        if (residual) {
            v += residual[i];
            residual[i] = v;
        }
        sum += v;
        sumsq += v * v;
    }
}

template <typename TX>
__global__ void __launch_bounds__(kNormThreads) rmsnorm_kernel(RmsNormParams p, int64_t x_stride) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const TX* x = static_cast<const TX*>(p.x) + row * x_stride;
    float* residual = p.residual ? p.residual + row * p.dim : nullptr;
    float sum, sumsq;
    residual_pass(x, residual, p.dim, sum, sumsq);
    sumsq = block_sum(sumsq, scratch);  // the barrier inside also orders the residual writes
    const float inv = rsqrtf(sumsq / static_cast<float>(p.dim) + p.eps);
    bf16* y = p.y + row * p.dim;
    for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
        const float v = residual ? residual[i] : to_float(x[i]);
        y[i] = __float2bfloat16_rn(p.weight[i] * (v * inv));
    }
}

template <typename TX>
__global__ void __launch_bounds__(kNormThreads) layernorm_kernel(LayerNormParams p, int64_t x_stride) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const TX* x = static_cast<const TX*>(p.x) + row * x_stride;
    float* residual = p.residual ? p.residual + row * p.dim : nullptr;
    float sum, sumsq;
    residual_pass(x, residual, p.dim, sum, sumsq);
    const float mean = block_sum(sum, scratch) / static_cast<float>(p.dim);
    // Variance as the mean of squared deviations (second pass): no cancellation for large means.
    float dev = 0.0f;
    for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
        const float v = (residual ? residual[i] : to_float(x[i])) - mean;
        dev += v * v;
    }
    const float var = block_sum(dev, scratch) / static_cast<float>(p.dim);
    const float inv = rsqrtf(var + p.eps);
    bf16* y = p.y + row * p.dim;
    for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
        const float v = (residual ? residual[i] : to_float(x[i])) - mean;
        y[i] = __float2bfloat16_rn(v * inv * p.weight[i] + (p.bias ? p.bias[i] : 0.0f));
    }
}

// One block per (row, group).
template <typename TY>
__global__ void __launch_bounds__(kNormThreads)
    gated_rmsnorm_kernel(GatedRmsNormParams p, int64_t y_stride, int64_t z_stride) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x, g0 = static_cast<int64_t>(blockIdx.y) * p.group_size;
    const TY* y = static_cast<const TY*>(p.y) + row * y_stride + g0;
    const bf16* z = p.z + row * z_stride + g0;
    float sumsq = 0.0f;
    for (int64_t i = threadIdx.x; i < p.group_size; i += blockDim.x) {
        const float v = to_float(y[i]) * detail::silu(to_float(z[i]));
        sumsq += v * v;
    }
    sumsq = block_sum(sumsq, scratch);
    const float inv = rsqrtf(sumsq / static_cast<float>(p.group_size) + p.eps);
    bf16* out = p.out + row * p.dim + g0;
    const float* w = p.weight + g0;
    for (int64_t i = threadIdx.x; i < p.group_size; i += blockDim.x) {
        const float v = to_float(y[i]) * detail::silu(to_float(z[i]));
        out[i] = __float2bfloat16_rn(w[i] * (v * inv));
    }
}

// In-place activation. Each thread takes kActUnroll 16-byte vectors (8 bf16) a block-width apart and
// issues all loads before any math, so enough bytes are in flight to cover DRAM latency while erff
// (GELU) keeps the ALUs busy; n % 8 trailing elements are done by block 0.
constexpr int kActThreads = 256;
constexpr int kActUnroll = 4;

template <int kAct>
__device__ __forceinline__ float activation(float v) {
    if constexpr (kAct == 0) {
        const float r = fmaxf(v, 0.0f);
        return r * r;
    } else {
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

template <int kAct>
__global__ void __launch_bounds__(kActThreads) activation_kernel(bf16* x, int64_t n) {
    detail::pdl_prologue();
    const int64_t n_vec = n / 8;
    const int64_t base = static_cast<int64_t>(blockIdx.x) * kActUnroll * kActThreads + threadIdx.x;
    uint4 raw[kActUnroll];
#pragma unroll
    for (int j = 0; j < kActUnroll; ++j) {
        const int64_t i = base + j * kActThreads;
        if (i < n_vec) raw[j] = reinterpret_cast<const uint4*>(x)[i];
    }
#pragma unroll
    for (int j = 0; j < kActUnroll; ++j) {
        const int64_t i = base + j * kActThreads;
        if (i < n_vec) {
            auto* h = reinterpret_cast<__nv_bfloat162*>(&raw[j]);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 f = __bfloat1622float2(h[e]);
                h[e] = __floats2bfloat162_rn(activation<kAct>(f.x), activation<kAct>(f.y));
            }
            reinterpret_cast<uint4*>(x)[i] = raw[j];
        }
    }
    if (blockIdx.x == 0 && static_cast<int64_t>(threadIdx.x) < n - n_vec * 8) {
        const int64_t i = n_vec * 8 + threadIdx.x;
        x[i] = __float2bfloat16_rn(activation<kAct>(__bfloat162float(x[i])));
    }
}

template <int kAct>
void launch_activation(bf16* x, int64_t n, cudaStream_t stream) {
    SURF_CHECK(x != nullptr && n >= 0, "activation: x ", static_cast<void*>(x), " n ", n);
    SURF_CHECK(aligned16(x), "activation: x must be 16-byte aligned");
    if (n == 0) return;
    const int64_t per_block = int64_t{kActThreads} * kActUnroll;
    const int64_t blocks = std::max<int64_t>((n / 8 + per_block - 1) / per_block, 1);
    SURF_CHECK(blocks <= 0x7fffffff, "activation: n ", n);
    detail::launch_kernel(activation_kernel<kAct>, static_cast<unsigned>(blocks), kActThreads, 0, stream, x,
                          n);
    SURF_CUDA_CHECK_LAUNCH();
}

// Launch geometry of the vector path over `items` rows (row groups) of n_vec vectors each: warp teams when a
// row fits one warp, else block teams; `ok` is false where a row is too long for either.
struct VecLaunch {
    bool ok, warp;
    unsigned blocks, threads;
};
VecLaunch vec_launch(int64_t items, int64_t n_vec) {
    if (n_vec <= 32 * kWarpVecs)
        return {true, true, static_cast<unsigned>((items + kRowWarps - 1) / kRowWarps), 32 * kRowWarps};
    const int64_t threads = row_threads(n_vec);
    return {threads <= kMaxRowThreads, false, static_cast<unsigned>(items),
            static_cast<unsigned>(std::min<int64_t>(threads, kMaxRowThreads))};
}

// Launches the warp-team or the block-team instantiation of a vector-path kernel on L's geometry.
template <typename... Args>
void launch_rows(const VecLaunch& L, cudaStream_t stream, void (*warp_teams)(Args...),
                 void (*block_teams)(Args...), std::type_identity_t<Args>... args) {
    detail::launch_kernel((L.warp ? warp_teams : block_teams), L.blocks, L.threads, 0, stream, args...);
}

}  // namespace

void rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.y && p.dim > 0 && p.rows >= 0, "rmsnorm: bad params, dim ", p.dim);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.dim;
    if (p.rows == 0) return;
    SURF_CHECK(p.rows <= 0x7fffffff, "rmsnorm: rows ", p.rows);
    const bool f32 = p.x_dtype == DType::kF32;
    const VecLaunch L = vec_launch(p.rows, p.dim / kVec);
    const bool vec = L.ok && p.dim % kVec == 0 && x_stride % kVec == 0 && aligned16(p.x) &&
                     aligned16(p.residual) && aligned16(p.weight) && aligned16(p.y) &&
                     aligned(p.fp8_out.q, 8);
    SURF_CHECK(!p.fp8_out.q || p.fp8_out.scale, "rmsnorm: FP8 output without scales");
    if (vec && f32)
        launch_rows(L, stream, rmsnorm_vec_kernel<float, true>, rmsnorm_vec_kernel<float, false>, p,
                    x_stride);
    else if (vec)
        launch_rows(L, stream, rmsnorm_vec_kernel<bf16, true>, rmsnorm_vec_kernel<bf16, false>, p, x_stride);
    else if (f32)
        detail::launch_kernel(rmsnorm_kernel<float>, static_cast<unsigned>(p.rows), kNormThreads, 0, stream,
                              p, x_stride);
    else
        detail::launch_kernel(rmsnorm_kernel<bf16>, static_cast<unsigned>(p.rows), kNormThreads, 0, stream, p,
                              x_stride);
    SURF_CUDA_CHECK_LAUNCH();
    if (!vec && p.fp8_out.q) quantize_e4m3(p.fp8_out, p.y, p.rows, p.dim, 0, stream);
}

void layernorm(const LayerNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.y && p.dim > 0 && p.rows >= 0, "layernorm: bad params, dim ", p.dim);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.dim;
    if (p.rows == 0) return;
    SURF_CHECK(p.rows <= 0x7fffffff, "layernorm: rows ", p.rows);
    const bool f32 = p.x_dtype == DType::kF32;
    const VecLaunch L = vec_launch(p.rows, p.dim / kVec);
    const bool vec = L.ok && p.dim % kVec == 0 && x_stride % kVec == 0 && aligned16(p.x) &&
                     aligned16(p.residual) && aligned16(p.weight) && aligned16(p.bias) && aligned16(p.y);
    if (vec && f32)
        launch_rows(L, stream, layernorm_vec_kernel<float, true>, layernorm_vec_kernel<float, false>, p,
                    x_stride);
    else if (vec)
        launch_rows(L, stream, layernorm_vec_kernel<bf16, true>, layernorm_vec_kernel<bf16, false>, p,
                    x_stride);
    else if (f32)
        detail::launch_kernel(layernorm_kernel<float>, static_cast<unsigned>(p.rows), kNormThreads, 0, stream,
                              p, x_stride);
    else
        detail::launch_kernel(layernorm_kernel<bf16>, static_cast<unsigned>(p.rows), kNormThreads, 0, stream,
                              p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void gated_rmsnorm(const GatedRmsNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.y && p.z && p.weight && p.out, "gated_rmsnorm: null pointer");
    SURF_CHECK(p.group_size > 0 && p.dim % p.group_size == 0, "gated_rmsnorm: dim ", p.dim, " group ",
               p.group_size);
    const int64_t y_stride = p.y_stride ? p.y_stride : p.dim, z_stride = p.z_stride ? p.z_stride : p.dim;
    if (p.rows == 0) return;
    const int64_t groups = p.dim / p.group_size;
    SURF_CHECK(p.rows <= 0x7fffffff && groups <= 65535 && p.rows * groups <= 0x7fffffff,
               "gated_rmsnorm: rows ", p.rows, " groups ", groups);
    const bool f32 = p.y_dtype == DType::kF32;
    VecLaunch L = vec_launch(p.rows * groups, p.group_size / kVec);
    const bool vec = L.ok && p.group_size % kVec == 0 && y_stride % kVec == 0 && z_stride % kVec == 0 &&
                     aligned16(p.y) && aligned16(p.z) && aligned16(p.weight) && aligned16(p.out);
    SURF_CHECK(!p.fp8_out.q || p.fp8_out.scale, "gated_rmsnorm: FP8 output without scales");
    // The FP8 output in the same pass: one block a row, a warp team per group. Otherwise the kernels run
    // without it and quantize_e4m3 follows.
    const bool fused_fp8 = p.fp8_out.q && vec && L.warp && groups <= 32 && aligned(p.fp8_out.q, 8);
    GatedRmsNormParams kp = p;
    if (fused_fp8)
        L.blocks = static_cast<unsigned>(p.rows), L.threads = static_cast<unsigned>(32 * groups);
    else
        kp.fp8_out = {};
    if (vec && f32)
        launch_rows(L, stream, gated_rmsnorm_vec_kernel<float, true>, gated_rmsnorm_vec_kernel<float, false>,
                    kp, y_stride, z_stride);
    else if (vec)
        launch_rows(L, stream, gated_rmsnorm_vec_kernel<bf16, true>, gated_rmsnorm_vec_kernel<bf16, false>,
                    kp, y_stride, z_stride);
    else {
        const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>(groups));
        if (f32)
            detail::launch_kernel(gated_rmsnorm_kernel<float>, grid, kNormThreads, 0, stream, kp, y_stride,
                                  z_stride);
        else
            detail::launch_kernel(gated_rmsnorm_kernel<bf16>, grid, kNormThreads, 0, stream, kp, y_stride,
                                  z_stride);
    }
    SURF_CUDA_CHECK_LAUNCH();
    if (p.fp8_out.q && !fused_fp8) quantize_e4m3(p.fp8_out, p.out, p.rows, p.dim, 0, stream);
}

void relu_squared(bf16* x, int64_t n, cudaStream_t stream) {
    launch_activation<0>(x, n, stream);
}
void gelu_erf(bf16* x, int64_t n, cudaStream_t stream) {
    launch_activation<1>(x, n, stream);
}

}  // namespace surf::kernels::cuda
