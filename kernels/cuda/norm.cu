// Row norms (RMSNorm / LayerNorm with the fused residual add), the Mamba-2 gated grouped RMSNorm and
// the elementwise activations. One block per row (or row group); rows are at most a few tens of KB, so
// the second pass over a row reads it back from L1/L2 rather than holding it in registers.
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::block_sum;
using detail::to_float;

constexpr int kNormThreads = 256;

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

// 8 bf16 (16 bytes) per thread per step; a scalar tail handles n % 8.
template <int kAct>
__global__ void activation_kernel(bf16* x, int64_t n) {
    auto act = [](float v) {
        if constexpr (kAct == 0) {
            const float r = fmaxf(v, 0.0f);
            return r * r;
        } else {
            return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
        }
    };
    const int64_t n_vec = n / 8;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_vec; i += stride) {
        uint4 raw = reinterpret_cast<uint4*>(x)[i];
        auto* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 f = __bfloat1622float2(h[j]);
            h[j] = __floats2bfloat162_rn(act(f.x), act(f.y));
        }
        reinterpret_cast<uint4*>(x)[i] = raw;
    }
    for (int64_t i = n_vec * 8 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
        x[i] = __float2bfloat16_rn(act(__bfloat162float(x[i])));
    }
}

template <int kAct>
void launch_activation(bf16* x, int64_t n, cudaStream_t stream) {
    SURF_CHECK(x != nullptr && n >= 0, "activation: x ", static_cast<void*>(x), " n ", n);
    SURF_CHECK(reinterpret_cast<uintptr_t>(x) % 16 == 0, "activation: x must be 16-byte aligned");
    if (n == 0) return;
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>(std::max<int64_t>((n / 8 + threads - 1) / threads, 1), 4096);
    activation_kernel<kAct><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, n);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.y && p.dim > 0 && p.rows >= 0, "rmsnorm: bad params, dim ", p.dim);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.dim;
    if (p.rows == 0) return;
    SURF_CHECK(p.rows <= 0x7fffffff, "rmsnorm: rows ", p.rows);
    const auto grid = static_cast<unsigned>(p.rows);
    if (p.x_dtype == DType::kF32) rmsnorm_kernel<float><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    else rmsnorm_kernel<bf16><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void layernorm(const LayerNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.y && p.dim > 0 && p.rows >= 0, "layernorm: bad params, dim ", p.dim);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.dim;
    if (p.rows == 0) return;
    const auto grid = static_cast<unsigned>(p.rows);
    if (p.x_dtype == DType::kF32) layernorm_kernel<float><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    else layernorm_kernel<bf16><<<grid, kNormThreads, 0, stream>>>(p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void gated_rmsnorm(const GatedRmsNormParams& p, cudaStream_t stream) {
    SURF_CHECK(p.y && p.z && p.weight && p.out, "gated_rmsnorm: null pointer");
    SURF_CHECK(p.group_size > 0 && p.dim % p.group_size == 0, "gated_rmsnorm: dim ", p.dim, " group ", p.group_size);
    const int64_t y_stride = p.y_stride ? p.y_stride : p.dim, z_stride = p.z_stride ? p.z_stride : p.dim;
    if (p.rows == 0) return;
    const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.dim / p.group_size));
    if (p.y_dtype == DType::kF32) gated_rmsnorm_kernel<float><<<grid, kNormThreads, 0, stream>>>(p, y_stride, z_stride);
    else gated_rmsnorm_kernel<bf16><<<grid, kNormThreads, 0, stream>>>(p, y_stride, z_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void relu_squared(bf16* x, int64_t n, cudaStream_t stream) { launch_activation<0>(x, n, stream); }
void gelu_erf(bf16* x, int64_t n, cudaStream_t stream) { launch_activation<1>(x, n, stream); }

}  // namespace surf::kernels::cuda
