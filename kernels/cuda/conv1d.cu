// Causal depthwise conv1d + SiLU over packed sequences (prefill) and for one new token (decode).
// The conv state holds the K-1 most recent pre-conv inputs of each sequence, oldest first (spec §2.1).
// Prefill is memory-bound (one bf16 read and one bf16 write per element): the fast path gives each
// thread kCh = 4 channels (one 8-byte load/store per token) over a run of consecutive tokens and slides the
// K-1 previous inputs along in registers, so each input is read once (plus a K-1 token halo per run).
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::from_float;
using detail::to_float;

constexpr int kK = 4;  // conv_kernel of every Nemotron-H config; dispatch checks it
constexpr int kTokensPerThread = 8;
constexpr int kConvThreads = 128;
// Channels per thread on the vector path (8 bytes of bf16). At 8 channels (16-byte accesses) a thread needs ≈
// 150 registers (taps, window, a round of loads), so only three blocks fit on an SM and a prompt chunk runs
// far below DRAM bandwidth (docs/BENCHMARKS.md); 4 channels halve every per-thread array.
constexpr int kCh = 4;
constexpr int kRun = 16;  // tokens per thread on the vector path (halo overhead (K-1)/run)

__device__ __forceinline__ int find_seq(const int32_t* cu_seqlens, int64_t n_seq, int64_t t) {
    // Largest s with cu_seqlens[s] <= t (sequences may be empty).
    int lo = 0, hi = static_cast<int>(n_seq) - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (cu_seqlens[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Thread = one channel × kTokensPerThread consecutive packed tokens (which may cross sequences).
template <typename TS>
__global__ void __launch_bounds__(kConvThreads) conv_varlen_kernel(ConvVarlenParams p, int64_t x_stride) {
    detail::pdl_prologue();
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
        const TS* state =
            static_cast<const TS*>(p.state) + (static_cast<int64_t>(p.slots[s]) * p.channels + c) * (kK - 1);
        float acc = bias;
#pragma unroll
        for (int k = 0; k < kK; ++k) {
            const int64_t src = t - (kK - 1) + k;  // packed index of tap k
            float v;
            if (src >= start)
                v = to_float(p.x[src * x_stride + c]);
            else
                v = init ? to_float(state[kK - 1 + (src - start)]) : 0.0f;
            acc += w[k] * v;
        }
        p.out[t * p.channels + c] = __float2bfloat16_rn(detail::silu(acc));
    }
}

static_assert(kCh == 4, "the vector path moves 4 bf16 channels per 8-byte access");
using ChanRaw = uint2;  // kCh bf16 channels
// Four bf16 (one 8-byte load) to fp32, exactly (the bf16 bits are the high half of the fp32 bits).
__device__ __forceinline__ void unpack_chan(const ChanRaw& raw, float (&v)[kCh]) {
    v[0] = __uint_as_float(raw.x << 16), v[1] = __uint_as_float(raw.x & 0xffff0000u);
    v[2] = __uint_as_float(raw.y << 16), v[3] = __uint_as_float(raw.y & 0xffff0000u);
}

// win[j] ← the inputs at packed index t - (K-1) + j (j < K-1) of channels c0..c0+7, for token t of the
// sequence s starting at `start`: taps at or after `start` come from x, earlier ones from the slot's
// state (zeros when the sequence has no initial state). Runs only at a run's start and at sequence starts.
template <typename TS>
__device__ void load_window(const ConvVarlenParams& p, int64_t x_stride, int64_t c0, int s, int64_t start,
                            int64_t t, float (&win)[kK - 1][kCh]) {
    const bool init = p.has_initial_state == nullptr || p.has_initial_state[s] != 0;
    const int64_t slot = p.slots[s];
    const TS* state = static_cast<const TS*>(p.state) + (slot * p.channels + c0) * (kK - 1);
#pragma unroll
    for (int j = 0; j < kK - 1; ++j) {
        const int64_t src = t - (kK - 1) + j;
        if (src >= start) {
            unpack_chan(*reinterpret_cast<const ChanRaw*>(p.x + src * x_stride + c0), win[j]);
        } else {
            const int64_t k = kK - 1 + (src - start);  // state entry, 0 = oldest
#pragma unroll
            for (int e = 0; e < kCh; ++e) win[j][e] = init ? to_float(state[e * (kK - 1) + k]) : 0.0f;
        }
    }
}

// Thread = kCh channels × a run of kRun consecutive packed tokens (which may cross sequences). Same
// arithmetic, in the same order, as conv_varlen_kernel. Every x load of the run (its K−1 halo tokens before
// it included, speculatively: they are used only where they lie in the same sequence) and the weights are
// issued before any of them is used, so that a thread waits for DRAM about once instead of once per chunk of
// tokens: with one wave of threads covering a whole prompt chunk, the kernel's time would be that chain of
// round trips (docs/BENCHMARKS.md).
template <typename TS>
__global__ void __launch_bounds__(kConvThreads) conv_varlen_vec_kernel(ConvVarlenParams p, int64_t x_stride) {
    detail::pdl_prologue();
    const int64_t c0 = (blockIdx.y * static_cast<int64_t>(kConvThreads) + threadIdx.x) * kCh;
    const int64_t t_begin = static_cast<int64_t>(blockIdx.x) * kRun;
    if (c0 >= p.channels || t_begin >= p.n_tok) return;
    const int64_t t_end = min(t_begin + kRun, p.n_tok);
    ChanRaw halo[kK - 1], raw[kRun];
#pragma unroll
    for (int j = 0; j < kK - 1; ++j) {
        const int64_t t = t_begin - (kK - 1) + j;
        if (t >= 0) halo[j] = *reinterpret_cast<const ChanRaw*>(p.x + t * x_stride + c0);
    }
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
        if (t_begin + i < t_end)
            raw[i] = *reinterpret_cast<const ChanRaw*>(p.x + (t_begin + i) * x_stride + c0);
    }
    float w[kCh][kK], bias[kCh];
#pragma unroll
    for (int e = 0; e < kCh; ++e) {
        const float4 wv = reinterpret_cast<const float4*>(p.weight)[c0 + e];  // row c0+e of [channels, K=4]
        w[e][0] = wv.x, w[e][1] = wv.y, w[e][2] = wv.z, w[e][3] = wv.w;
        bias[e] = p.bias ? p.bias[c0 + e] : 0.0f;
    }
    int s = find_seq(p.cu_seqlens, p.n_seq, t_begin);
    int64_t seq_end = p.cu_seqlens[s + 1];
    // The window before t_begin: halo tokens of t_begin's sequence, the slot's state (or zeros) before its
    // start.
    float win[kK - 1][kCh];
    {
        const int64_t start = p.cu_seqlens[s];
        if (t_begin - (kK - 1) >= start) {
#pragma unroll
            for (int j = 0; j < kK - 1; ++j) unpack_chan(halo[j], win[j]);
        } else {
            load_window<TS>(p, x_stride, c0, s, start, t_begin, win);
        }
    }
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
        const int64_t t = t_begin + i;
        if (t >= t_end) break;
        if (t >= seq_end) {  // t starts a sequence (past any empty ones): its left context is the state
            while (t >= p.cu_seqlens[s + 1]) ++s;
            seq_end = p.cu_seqlens[s + 1];
            load_window<TS>(p, x_stride, c0, s, t, t, win);
        }
        float xv[kCh];
        unpack_chan(raw[i], xv);
        uint32_t packed[kCh / 2];
#pragma unroll
        for (int e = 0; e < kCh; e += 2) {
            float acc[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                acc[h] = bias[e + h];
#pragma unroll
                for (int k = 0; k < kK - 1; ++k) acc[h] += w[e + h][k] * win[k][e + h];
                acc[h] += w[e + h][kK - 1] * xv[e + h];
            }
            packed[e / 2] = detail::pack_bf16x2(detail::silu(acc[0]), detail::silu(acc[1]));
        }
        *reinterpret_cast<ChanRaw*>(p.out + t * p.channels + c0) = make_uint2(packed[0], packed[1]);
#pragma unroll
        for (int e = 0; e < kCh; ++e) {
#pragma unroll
            for (int k = 0; k < kK - 2; ++k) win[k][e] = win[k + 1][e];
            win[kK - 2][e] = xv[e];
        }
    }
}

// After the conv: slot ← last K-1 entries of (old state ++ the sequence's inputs).
template <typename TS>
__global__ void conv_state_writeback_kernel(ConvVarlenParams p, int64_t x_stride) {
    detail::pdl_prologue();
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
    detail::pdl_prologue();
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
    SURF_CHECK(p.n_seq > 0 && p.channels > 0 && p.n_tok >= 0, "conv1d_varlen: n_seq ", p.n_seq, " channels ",
               p.channels);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.channels;
    SURF_CHECK(x_stride >= p.channels, "conv1d_varlen: x_stride ", x_stride);
    const unsigned cblocks = detail::grid_1d(p.channels, kConvThreads);
    const bool f32_state = p.state_dtype == DType::kF32;
    const auto aligned = [](const void* ptr, uintptr_t bytes) {
        return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
    };
    const bool vec = p.channels % kCh == 0 && x_stride % kCh == 0 && aligned(p.x, sizeof(ChanRaw)) &&
                     aligned(p.out, sizeof(ChanRaw)) && aligned(p.weight, 16);
    if (p.n_tok > 0 && vec) {
        const int64_t cvecs = p.channels / kCh, runs = (p.n_tok + kRun - 1) / kRun;
        SURF_CHECK(runs <= 0x7fffffff, "conv1d_varlen: n_tok ", p.n_tok);
        const dim3 grid(static_cast<unsigned>(runs), detail::grid_1d(cvecs, kConvThreads));
        if (f32_state)
            detail::launch_kernel(conv_varlen_vec_kernel<float>, grid, kConvThreads, 0, stream, p, x_stride);
        else
            detail::launch_kernel(conv_varlen_vec_kernel<bf16>, grid, kConvThreads, 0, stream, p, x_stride);
        SURF_CUDA_CHECK_LAUNCH();
    } else if (p.n_tok > 0) {
        const dim3 grid(detail::grid_1d(p.n_tok, kTokensPerThread), cblocks);
        if (f32_state)
            detail::launch_kernel(conv_varlen_kernel<float>, grid, kConvThreads, 0, stream, p, x_stride);
        else
            detail::launch_kernel(conv_varlen_kernel<bf16>, grid, kConvThreads, 0, stream, p, x_stride);
        SURF_CUDA_CHECK_LAUNCH();
    }
    const dim3 grid2(static_cast<unsigned>(p.n_seq), cblocks);
    if (p.state_dtype == DType::kF32)
        detail::launch_kernel(conv_state_writeback_kernel<float>, grid2, kConvThreads, 0, stream, p,
                              x_stride);
    else
        detail::launch_kernel(conv_state_writeback_kernel<bf16>, grid2, kConvThreads, 0, stream, p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

void causal_conv1d_update(const ConvUpdateParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.weight && p.state && p.slots && p.out, "conv1d_update: null pointer");
    SURF_CHECK(p.K == kK, "conv1d_update: only K = ", kK, " is instantiated, got ", p.K);
    const int64_t x_stride = p.x_stride ? p.x_stride : p.channels;
    if (p.batch == 0) return;
    const dim3 grid(detail::grid_1d(p.channels, 256), static_cast<unsigned>(p.batch));
    if (p.state_dtype == DType::kF32)
        detail::launch_kernel(conv_update_kernel<float>, grid, 256, 0, stream, p, x_stride);
    else
        detail::launch_kernel(conv_update_kernel<bf16>, grid, 256, 0, stream, p, x_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
