// Causal depthwise conv1d + SiLU over packed sequences (prefill) and for one new token (decode).
// The conv state holds the K-1 most recent pre-conv inputs of each sequence, oldest first (spec §2.1).
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::to_float;
using detail::from_float;

constexpr int kK = 4;               // conv_kernel of every Nemotron-H config; dispatch checks it
constexpr int kTokensPerThread = 8;
constexpr int kConvThreads = 128;

__device__ __forceinline__ int find_seq(const int32_t* cu_seqlens, int64_t n_seq, int64_t t) {
    // Largest s with cu_seqlens[s] <= t (sequences may be empty).
    int lo = 0, hi = static_cast<int>(n_seq) - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (cu_seqlens[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Thread = one channel × kTokensPerThread consecutive packed tokens (which may cross sequences).
template <typename TS>
__global__ void __launch_bounds__(kConvThreads) conv_varlen_kernel(ConvVarlenParams p, int64_t x_stride) {
    const int64_t c = blockIdx.y * static_cast<int64_t>(kConvThreads) + threadIdx.x;
    if (c >= p.channels) return;
    const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kTokensPerThread;
    float w[kK];
#pragma unroll
    for (int k = 0; k < kK; ++k) w[k] = p.weight[c * kK + k];
    const float bias = p.bias ? p.bias[c] : 0.0f;
    int s = find_seq(p.cu_seqlens, p.n_seq, t0);
    for (int64_t t = t0; t < t0 + kTokensPerThread && t < p.n_tok; ++t) {
        while (t >= p.cu_seqlens[s + 1]) ++s;
        const int64_t start = p.cu_seqlens[s];
        const bool init = p.has_initial_state == nullptr || p.has_initial_state[s] != 0;
        const TS* state = static_cast<const TS*>(p.state) + (static_cast<int64_t>(p.slots[s]) * p.channels + c) * (kK - 1);
        float acc = bias;
#pragma unroll
        for (int k = 0; k < kK; ++k) {
            const int64_t src = t - (kK - 1) + k;  // packed index of tap k
            float v;
            if (src >= start) v = to_float(p.x[src * x_stride + c]);
            else v = init ? to_float(state[kK - 1 + (src - start)]) : 0.0f;
            acc += w[k] * v;
        }
        p.out[t * p.channels + c] = __float2bfloat16_rn(detail::silu(acc));
    }
}

// After the conv: slot ← last K-1 entries of (old state ++ the sequence's inputs).
template <typename TS>
__global__ void conv_state_writeback_kernel(ConvVarlenParams p, int64_t x_stride) {
    const int64_t c = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int s = blockIdx.x;
    if (c >= p.channels) return;
    const int64_t start = p.cu_seqlens[s], len = p.cu_seqlens[s + 1] - start;
    const bool init = p.has_initial_state == nullptr || p.has_initial_state[s] != 0;
    TS* state = static_cast<TS*>(p.state) + (static_cast<int64_t>(p.slots[s]) * p.channels + c) * (kK - 1);
    float old[kK - 1];
#pragma unroll
    for (int k = 0; k < kK - 1; ++k) old[k] = init ? to_float(state[k]) : 0.0f;
#pragma unroll
    for (int k = 0; k < kK - 1; ++k) {
        const int64_t u = len + k;  // index into the combined [old (K-1) | inputs (len)] sequence
        float v;
        if (u < kK - 1) {
            // Only reachable when len < K-1; u is a compile-time-unknown index into `old`, so pick by loop.
            v = 0.0f;
#pragma unroll
            for (int j = 0; j < kK - 1; ++j) v = (j == u) ? old[j] : v;
        } else {
            v = to_float(p.x[(start + u - (kK - 1)) * x_stride + c]);
        }
        state[k] = from_float<TS>(v);
    }
}

template <typename TS>
__global__ void conv_update_kernel(ConvUpdateParams p, int64_t x_stride) {
    const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t b = blockIdx.y;
    if (c >= p.channels) return;
    TS* state = static_cast<TS*>(p.state) + (static_cast<int64_t>(p.slots[b]) * p.channels + c) * (kK - 1);
    float win[kK];
#pragma unroll
    for (int k = 0; k < kK - 1; ++k) win[k] = to_float(state[k]);
    win[kK - 1] = to_float(p.x[b * x_stride + c]);
    float acc = p.bias ? p.bias[c] : 0.0f;
#pragma unroll
    for (int k = 0; k < kK; ++k) acc += p.weight[c * kK + k] * win[k];
    p.out[b * p.channels + c] = __float2bfloat16_rn(detail::silu(acc));
#pragma unroll
    for (int k = 0; k < kK - 1; ++k) state[k] = from_float<TS>(win[k + 1]);
}

}  // namespace

void causal_conv1d_varlen(const ConvVarlenParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.state && p.cu_seqlens && p.slots && p.out, "conv1d_varlen: null pointer");
    SURF_CHECK(p.K == kK, "conv1d_varlen: only K = ", kK, " is instantiated, got ", p.K);
    SURF_CHECK(p.n_seq > 0 && p.channels > 0 && p.n_tok >= 0, "conv1d_varlen: n_seq ", p.n_seq, " channels ", p.channels);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.channels;
    SURF_CHECK(x_stride >= p.channels, "conv1d_varlen: x_stride ", x_stride);
    const unsigned cblocks = detail::grid_1d(p.channels, kConvThreads);
    if (p.n_tok > 0) {
        const dim3 grid(detail::grid_1d(p.n_tok, kTokensPerThread), cblocks);
        if (p.state_dtype == DType::kF32) conv_varlen_kernel<float><<<grid, kConvThreads, 0, stream>>>(p, x_stride);
        else conv_varlen_kernel<bf16><<<grid, kConvThreads, 0, stream>>>(p, x_stride);
        SURF_CUDA_CHECK_LAUNCH();
    }
    const dim3 grid2(static_cast<unsigned>(p.n_seq), cblocks);
    if (p.state_dtype == DType::kF32) conv_state_writeback_kernel<float><<<grid2, kConvThreads, 0, stream>>>(p, x_stride);
    else conv_state_writeback_kernel<bf16><<<grid2, kConvThreads, 0, stream>>>(p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void causal_conv1d_update(const ConvUpdateParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.state && p.slots && p.out, "conv1d_update: null pointer");
    SURF_CHECK(p.K == kK, "conv1d_update: only K = ", kK, " is instantiated, got ", p.K);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.channels;
    if (p.batch == 0) return;
    const dim3 grid(detail::grid_1d(p.channels, 256), static_cast<unsigned>(p.batch));
    if (p.state_dtype == DType::kF32) conv_update_kernel<float><<<grid, 256, 0, stream>>>(p, x_stride);
    else conv_update_kernel<bf16><<<grid, 256, 0, stream>>>(p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
