// Row norms (RMSNorm / LayerNorm with the fused residual add), the Mamba-2 gated grouped RMSNorm and
// the elementwise activations. All of them are memory-bound, so the fast paths move 16 bytes per access
// (8 elements: two float4 of fp32 or one uint4 of bf16) and keep the row in registers between the
// statistics and the write, so each input byte is read from DRAM once. One block per row (per row
// group for the gated norm) with just enough threads that each holds ≤ kVecsPerThread vectors; rows
// that are not a multiple of 8 elements, misaligned, or too long for that take the generic kernels,
// which re-read the row from L1/L2 in the second pass.
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::block_sum;
using detail::to_float;

constexpr int kNormThreads = 256;
constexpr int kVec = 8;              // elements per 16-byte bf16 access (two float4 for fp32)
constexpr int kVecsPerThread = 4;    // registers: 32 fp32 values of the row per thread
constexpr int kMaxRowThreads = 512;  // vector path covers rows of ≤ 512·4·8 = 16384 elements

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

// Threads for a vector-path block over n_vec vectors: a multiple of 32 with ≤ kVecsPerThread each.
int64_t row_threads(int64_t n_vec) {
    const int64_t t = (n_vec + kVecsPerThread - 1) / kVecsPerThread;
    return std::max<int64_t>((t + 31) / 32 * 32, 32);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Loads this thread's vectors of a row (vector j at element (threadIdx.x + j·blockDim.x)·8) and folds
// in the residual (residual ← residual + x); all loads are issued before the residual stores. Returns
// the source values in v; vectors past n_vec are left untouched and must not be used.
template <typename TX>
__device__ __forceinline__ void load_row(const TX* x, float* residual, int n_vec,
                                         float (&v)[kVecsPerThread][kVec]) {
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) load8(x + static_cast<int64_t>(i) * kVec, v[j]);
    }
    if (residual == nullptr) return;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
            float r[kVec];
            load8(residual + static_cast<int64_t>(i) * kVec, r);
#pragma unroll
            for (int e = 0; e < kVec; ++e) v[j][e] += r[e];
        }
    }
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) store8(residual + static_cast<int64_t>(i) * kVec, v[j]);
    }
}

template <typename TX>
__global__ void __launch_bounds__(kMaxRowThreads) rmsnorm_vec_kernel(RmsNormParams p, int64_t x_stride) {
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const int n_vec = static_cast<int>(p.dim / kVec);
    float v[kVecsPerThread][kVec];
    float* residual = p.residual ? p.residual + row * p.dim : nullptr;
    load_row(static_cast<const TX*>(p.x) + row * x_stride, residual, n_vec, v);
    float sumsq = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) sumsq += v[j][e] * v[j][e];
        }
    }
    sumsq = block_sum(sumsq, scratch);
    const float inv = rsqrtf(sumsq / static_cast<float>(p.dim) + p.eps);
    bf16* y = p.y + row * p.dim;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
            float w[kVec], o[kVec];
            load8(p.weight + i * kVec, w);
#pragma unroll
            for (int e = 0; e < kVec; ++e) o[e] = w[e] * (v[j][e] * inv);
            store8(y + i * kVec, o);
        }
    }
}

template <typename TX>
__global__ void __launch_bounds__(kMaxRowThreads) layernorm_vec_kernel(LayerNormParams p, int64_t x_stride) {
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const int n_vec = static_cast<int>(p.dim / kVec);
    float v[kVecsPerThread][kVec];
    float* residual = p.residual ? p.residual + row * p.dim : nullptr;
    load_row(static_cast<const TX*>(p.x) + row * x_stride, residual, n_vec, v);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) sum += v[j][e];
        }
    }
    const float mean = block_sum(sum, scratch) / static_cast<float>(p.dim);
    // Variance as the mean of squared deviations (second pass, over registers): no cancellation.
    float dev = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) {
                v[j][e] -= mean;
                dev += v[j][e] * v[j][e];
            }
        }
    }
    const float var = block_sum(dev, scratch) / static_cast<float>(p.dim);
    const float inv = rsqrtf(var + p.eps);
    bf16* y = p.y + row * p.dim;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
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

// One block per (row, group); v = y ⊙ SiLU(z) stays in registers between the sum of squares and the write.
template <typename TY>
__global__ void __launch_bounds__(kMaxRowThreads)
    gated_rmsnorm_vec_kernel(GatedRmsNormParams p, int64_t y_stride, int64_t z_stride) {
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x, g0 = static_cast<int64_t>(blockIdx.y) * p.group_size;
    const TY* y = static_cast<const TY*>(p.y) + row * y_stride + g0;
    const bf16* z = p.z + row * z_stride + g0;
    const int n_vec = static_cast<int>(p.group_size / kVec);
    float v[kVecsPerThread][kVec], zv[kVecsPerThread][kVec];
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
            load8(y + i * kVec, v[j]);
            load8(z + i * kVec, zv[j]);
        }
    }
    float sumsq = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) {
                v[j][e] = v[j][e] * detail::silu(zv[j][e]);
                sumsq += v[j][e] * v[j][e];
            }
        }
    }
    sumsq = block_sum(sumsq, scratch);
    const float inv = rsqrtf(sumsq / static_cast<float>(p.group_size) + p.eps);
    bf16* out = p.out + row * p.dim + g0;
    const float* wg = p.weight + g0;
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n_vec) {
            float w[kVec], o[kVec];
            load8(wg + i * kVec, w);
#pragma unroll
            for (int e = 0; e < kVec; ++e) o[e] = w[e] * (v[j][e] * inv);
            store8(out + i * kVec, o);
        }
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
__global__ void __launch_bounds__(kNormThreads) gated_rmsnorm_kernel(GatedRmsNormParams p, int64_t y_stride,
                                                                    int64_t z_stride) {
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
    activation_kernel<kAct><<<static_cast<unsigned>(blocks), kActThreads, 0, stream>>>(x, n);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.y && p.dim > 0 && p.rows >= 0, "rmsnorm: bad params, dim ", p.dim);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.dim;
    if (p.rows == 0) return;
    SURF_CHECK(p.rows <= 0x7fffffff, "rmsnorm: rows ", p.rows);
    const auto grid = static_cast<unsigned>(p.rows);
    const bool f32 = p.x_dtype == DType::kF32;
    const int64_t threads = row_threads(p.dim / kVec);
    const bool vec = p.dim % kVec == 0 && threads <= kMaxRowThreads && x_stride % kVec == 0 &&
                     aligned16(p.x) && aligned16(p.residual) && aligned16(p.weight) && aligned16(p.y);
    const auto vt = static_cast<unsigned>(std::min<int64_t>(threads, kMaxRowThreads));
    if (vec && f32) rmsnorm_vec_kernel<float><<<grid, vt, 0, stream>>>(p, x_stride);
    else if (vec) rmsnorm_vec_kernel<bf16><<<grid, vt, 0, stream>>>(p, x_stride);
    else if (f32) rmsnorm_kernel<float><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    else rmsnorm_kernel<bf16><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void layernorm(const LayerNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.y && p.dim > 0 && p.rows >= 0, "layernorm: bad params, dim ", p.dim);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.dim;
    if (p.rows == 0) return;
    SURF_CHECK(p.rows <= 0x7fffffff, "layernorm: rows ", p.rows);
    const auto grid = static_cast<unsigned>(p.rows);
    const bool f32 = p.x_dtype == DType::kF32;
    const int64_t threads = row_threads(p.dim / kVec);
    const bool vec = p.dim % kVec == 0 && threads <= kMaxRowThreads && x_stride % kVec == 0 &&
                     aligned16(p.x) && aligned16(p.residual) && aligned16(p.weight) && aligned16(p.bias) &&
                     aligned16(p.y);
    const auto vt = static_cast<unsigned>(std::min<int64_t>(threads, kMaxRowThreads));
    if (vec && f32) layernorm_vec_kernel<float><<<grid, vt, 0, stream>>>(p, x_stride);
    else if (vec) layernorm_vec_kernel<bf16><<<grid, vt, 0, stream>>>(p, x_stride);
    else if (f32) layernorm_kernel<float><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    else layernorm_kernel<bf16><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void gated_rmsnorm(const GatedRmsNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.y && p.z && p.weight && p.out, "gated_rmsnorm: null pointer");
    SURF_CHECK(p.group_size > 0 && p.dim % p.group_size == 0, "gated_rmsnorm: dim ", p.dim, " group ",
               p.group_size);
    const int64_t y_stride = p.y_stride ? p.y_stride : p.dim, z_stride = p.z_stride ? p.z_stride : p.dim;
    if (p.rows == 0) return;
    SURF_CHECK(p.rows <= 0x7fffffff && p.dim / p.group_size <= 65535, "gated_rmsnorm: rows ", p.rows,
               " groups ", p.dim / p.group_size);
    const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.dim / p.group_size));
    const bool f32 = p.y_dtype == DType::kF32;
    const int64_t threads = row_threads(p.group_size / kVec);
    const bool vec = p.group_size % kVec == 0 && threads <= kMaxRowThreads && y_stride % kVec == 0 &&
                     z_stride % kVec == 0 && aligned16(p.y) && aligned16(p.z) && aligned16(p.weight) &&
                     aligned16(p.out);
    const auto vt = static_cast<unsigned>(std::min<int64_t>(threads, kMaxRowThreads));
    if (vec && f32) gated_rmsnorm_vec_kernel<float><<<grid, vt, 0, stream>>>(p, y_stride, z_stride);
    else if (vec) gated_rmsnorm_vec_kernel<bf16><<<grid, vt, 0, stream>>>(p, y_stride, z_stride);
    else if (f32) gated_rmsnorm_kernel<float><<<grid, kNormThreads, 0, stream>>>(p, y_stride, z_stride);
    else gated_rmsnorm_kernel<bf16><<<grid, kNormThreads, 0, stream>>>(p, y_stride, z_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void relu_squared(bf16* x, int64_t n, cudaStream_t stream) { launch_activation<0>(x, n, stream); }
void gelu_erf(bf16* x, int64_t n, cudaStream_t stream) { launch_activation<1>(x, n, stream); }

}  // namespace surf::kernels::cuda
