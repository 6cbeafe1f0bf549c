// The small-m GEMM of decode steps (one to four rows), memory-bound on the weight stream: each warp reads
// two weight rows with 16-byte streaming loads, four per row in flight per lane, dots them with the (L1-
// cached) rows of x in fp32, and reduces across the warp. GemmContext times this kernel beside cuBLASLt's
// candidates and keeps whichever is faster.
// Few long rows (n = 5,120 at k = 10,240 / 20,480: 320 blocks of 16 rows, 2.4 an SM, the SMs holding three
// finish last) split k across the block's warps instead (KS warps a row pair, partial sums added in shared
// memory), so that the grid has ≥ 8 blocks an SM (gemv_k_split).
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
constexpr int kRowsPerWarp = 2;    // weight rows (outputs n) per warp
constexpr int kLoadsInFlight = 4;  // 16-byte weight loads per row per lane before the FMAs
constexpr int kMaxM = 4;

using detail::from_float;
using detail::to_float;
using detail::unpack_bf16x8;

__device__ __forceinline__ float dot8(const uint4& w, const float (&x)[8]) {
    float wf[8];
    unpack_bf16x8(w, wf);
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) s = fmaf(wf[e], x[e], s);
    return s;
}

// y[m, n] = alpha · Σ_k x[m, k]·w[n, k] (+ bias[n]) + beta · y[m, n] for m < M; TY is y's (and bias's) type.
// The block's warps form kGemvWarps / KS row groups of kRowsPerWarp rows; the KS warps of a group each take
// one slice of k (slice_vecs 16-byte vectors, a multiple of 32) and, where KS > 1, add their partial sums in
// shared memory.
template <int M, typename TY, int KS>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_kernel(GemmParams p, int64_t ldx, int64_t ldw, int64_t ldy, int64_t slice_vecs) {
    detail::pdl_prologue();
    constexpr int kGroups = kGemvWarps / KS;
    __shared__ float partial[KS > 1 ? kGemvWarps : 1][M][kRowsPerWarp];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = warp / KS, slice = warp % KS;
    const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGroups + group) * kRowsPerWarp;
    const int64_t vecs = p.k / 8, v_begin = slice * slice_vecs, v_end = min(vecs, v_begin + slice_vecs);
    const uint4* wrow[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
        wrow[r] = reinterpret_cast<const uint4*>(p.w + min(n0 + r, p.n - 1) * ldw);
    float acc[M][kRowsPerWarp] = {};
    if (n0 < p.n) {
        detail::stream_weight_rows<kRowsPerWarp, kLoadsInFlight>(
            wrow, v_begin, v_end, lane, [&](int64_t v, const uint4(&wv)[kRowsPerWarp]) {
#pragma unroll
                for (int m = 0; m < M; ++m) {
                    float xf[8];
                    unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(p.x + m * ldx) + v), xf);
#pragma unroll
                    for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] += dot8(wv[r], xf);
                }
            });
    }
    if (!detail::reduce_split_k<M, kRowsPerWarp, KS>(acc, partial, warp, slice, lane)) return;
    if (lane != 0 || n0 >= p.n) return;
    const TY* bias = static_cast<const TY*>(p.bias);
    TY* y = static_cast<TY*>(p.y);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t n = n0 + r;
        if (n >= p.n) break;
        const float b = bias ? to_float(bias[n]) : 0.0f;
#pragma unroll
        for (int m = 0; m < M; ++m) {
            float out = p.alpha * acc[m][r] + b;
            if (p.beta != 0.0f) out += p.beta * to_float(y[m * ldy + n]);
            y[m * ldy + n] = from_float<TY>(out);
        }
    }
}

template <int M, int KS>
void launch_split(const GemmParams& p, int64_t ldx, int64_t ldw, int64_t ldy, cudaStream_t stream) {
    const int64_t vecs = p.k / 8, slice_vecs = (vecs + KS * 32 - 1) / (KS * 32) * 32;
    const unsigned blocks = detail::grid_1d(p.n, kGemvWarps / KS * kRowsPerWarp);
    if (p.y_dtype == DType::kF32)
        detail::launch_kernel(gemv_kernel<M, float, KS>, blocks, kGemvThreads, 0, stream, p, ldx, ldw, ldy,
                              slice_vecs);
    else
        detail::launch_kernel(gemv_kernel<M, bf16, KS>, blocks, kGemvThreads, 0, stream, p, ldx, ldw, ldy,
                              slice_vecs);
}

template <int M>
void launch_m(const GemmParams& p, int64_t ldx, int64_t ldw, int64_t ldy, int k_split, cudaStream_t stream) {
    switch (k_split) {
        case 1: launch_split<M, 1>(p, ldx, ldw, ldy, stream); break;
        case 2: launch_split<M, 2>(p, ldx, ldw, ldy, stream); break;
        case 4: launch_split<M, 4>(p, ldx, ldw, ldy, stream); break;
        default: launch_split<M, 8>(p, ldx, ldw, ldy, stream); break;
    }
}

bool aligned16(const void* ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

}  // namespace

bool gemv_supported(const GemmParams& p) {
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k;
    return p.m >= 1 && p.m <= kMaxM && p.n > 0 && p.k > 0 && p.k % 8 == 0 && ldx % 8 == 0 && ldw % 8 == 0 &&
           aligned16(p.x) && aligned16(p.w) && p.activation == GemmActivation::kNone;
}

int gemv_k_split(int64_t n, int64_t k) {
    // Double the split while the grid has fewer than 8 blocks an SM and each warp's slice keeps at least one
    // full round of loads (32 lanes × kLoadsInFlight vectors).
    const int64_t want_blocks = 8 * static_cast<int64_t>(detail::device_sm_count()), vecs = k / 8;
    int ks = 1;
    while (ks < kGemvWarps &&
           (n + kGemvWarps / ks * kRowsPerWarp - 1) / (kGemvWarps / ks * kRowsPerWarp) < want_blocks &&
           vecs >= int64_t{2} * ks * 32 * kLoadsInFlight) {
        ks *= 2;
    }
    return ks;
}

void gemv(const GemmParams& p, cudaStream_t stream, int k_split) {
    SURF_CHECK(p.x && p.w && p.y, "gemv: null pointer");
    SURF_CHECK(gemv_supported(p), "gemv: m ", p.m, " n ", p.n, " k ", p.k, " (m ≤ ", kMaxM,
               ", k and row strides multiples of 8, 16-byte aligned, no activation)");
    SURF_CHECK(k_split == 0 || k_split == 1 || k_split == 2 || k_split == 4 || k_split == 8, "gemv: k_split ",
               k_split, " (0 = automatic, 1, 2, 4 or 8)");
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k, ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldx >= p.k && ldw >= p.k && ldy >= p.n, "gemv: leading dims ", ldx, " ", ldw, " ", ldy);
    const int ks = k_split ? k_split : gemv_k_split(p.n, p.k);
    switch (p.m) {
        case 1: launch_m<1>(p, ldx, ldw, ldy, ks, stream); break;
        case 2: launch_m<2>(p, ldx, ldw, ldy, ks, stream); break;
        case 3: launch_m<3>(p, ldx, ldw, ldy, ks, stream); break;
        default: launch_m<4>(p, ldx, ldw, ldy, ks, stream); break;
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
