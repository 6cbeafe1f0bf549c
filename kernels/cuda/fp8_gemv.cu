// The small-m FP8 GEMM of decode steps (one to four rows): fp8_gemm()'s contract for m ≤ 4, memory-bound on
// the one-byte weight stream. Each warp reads two weight rows with 16-byte streaming loads (16 E4M3 codes
// each), turns the codes into floats in registers (every E4M3 value is exact in half and in float, so the
// products are those of the CPU reference), dots them with the rows' E4M3 activation codes in fp32, reduces
// across the warp, then applies x_scale[m]·w_scale[n], beta·y and ReLU² as fp8_gemm's epilogue kernel does.
// Rows of few outputs split k across the block's warps, as gemv.cu does.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 2;    // weight rows (outputs n) per warp
constexpr int kLoadsInFlight = 4;  // 16-byte weight loads per row per lane before the FMAs
constexpr int kMaxM = 4;

using detail::from_float;
using detail::to_float;

// The 16 E4M3 codes of a 16-byte vector as floats, in memory order.
__device__ __forceinline__ void decode16(const uint4& v, float (&f)[16]) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const auto pair = static_cast<__nv_fp8x2_storage_t>((words[i] >> (16 * h)) & 0xFFFFu);
            const float2 two = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
            f[4 * i + 2 * h] = two.x, f[4 * i + 2 * h + 1] = two.y;
        }
    }
}

__device__ __forceinline__ float dot16(const float (&w)[16], const float (&x)[16]) {
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < 16; ++e) s = fmaf(w[e], x[e], s);
    return s;
}

// The warp's partial dot products of its row pair with the M activation rows over vectors [v_begin, v_end).
template <int M>
__device__ __forceinline__ void accumulate(const Fp8GemmParams& p, const uint4* const (&wrow)[kRowsPerWarp],
                                           int64_t v_begin, int64_t v_end, int lane,
                                           float (&acc)[M][kRowsPerWarp]) {
    const int64_t x_vecs = p.k / 16;
    detail::stream_weight_rows<kRowsPerWarp, kLoadsInFlight>(
        wrow, v_begin, v_end, lane, [&](int64_t v, const uint4(&wv)[kRowsPerWarp]) {
            float wf[kRowsPerWarp][16];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) decode16(wv[r], wf[r]);
#pragma unroll
            for (int m = 0; m < M; ++m) {
                float xf[16];
                decode16(__ldg(reinterpret_cast<const uint4*>(p.x) + m * x_vecs + v), xf);
#pragma unroll
                for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] += dot16(wf[r], xf);
            }
        });
}

// y[m, n] = (Σ_k xq[m, k]·wq[n, k])·x_scale[m]·w_scale[n] (+ beta·y[m, n]), rounded to TY, then ReLU² of the
// rounded value where asked. The block's warps form kWarps / KS row groups of kRowsPerWarp rows; the KS warps
// of a group each take one slice of k (slice_vecs 16-byte vectors, a multiple of 32) and, where KS > 1, add
// their partial sums in shared memory.
template <int M, typename TY, int KS>
__global__ void __launch_bounds__(kThreads)
    fp8_gemv_kernel(Fp8GemmParams p, int64_t ldy, int64_t slice_vecs, bool relu2) {
    detail::pdl_prologue();
    constexpr int kGroups = kWarps / KS;
    __shared__ float partial[KS > 1 ? kWarps : 1][M][kRowsPerWarp];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = warp / KS, slice = warp % KS;
    const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGroups + group) * kRowsPerWarp;
    const int64_t vecs = p.k / 16, v_begin = slice * slice_vecs, v_end = min(vecs, v_begin + slice_vecs);
    const uint4* wrow[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
        wrow[r] = reinterpret_cast<const uint4*>(p.w + min(n0 + r, p.n - 1) * p.k);
    float acc[M][kRowsPerWarp] = {};
    if (n0 < p.n) accumulate<M>(p, wrow, v_begin, v_end, lane, acc);
    if (!detail::reduce_split_k<M, kRowsPerWarp, KS>(acc, partial, warp, slice, lane)) return;
    if (lane != 0 || n0 >= p.n) return;
    TY* y = static_cast<TY*>(p.y);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t n = n0 + r;
        if (n >= p.n) break;
#pragma unroll
        for (int m = 0; m < M; ++m) {
            float out = acc[m][r] * p.x_scale[m] * p.w_scale[n];
            if (p.beta != 0.0f) out += p.beta * to_float(y[m * ldy + n]);
            if (relu2) {
                const float rounded = fmaxf(to_float(from_float<TY>(out)), 0.0f);
                out = rounded * rounded;
            }
            y[m * ldy + n] = from_float<TY>(out);
        }
    }
}

template <int M, int KS>
void launch_split(const Fp8GemmParams& p, int64_t ldy, cudaStream_t stream) {
    const int64_t vecs = p.k / 16, slice_vecs = (vecs + KS * 32 - 1) / (KS * 32) * 32;
    const unsigned blocks = detail::grid_1d(p.n, kWarps / KS * kRowsPerWarp);
    const bool relu2 = p.activation == GemmActivation::kReluSquared;
    if (p.y_dtype == DType::kF32)
        detail::launch_kernel(fp8_gemv_kernel<M, float, KS>, blocks, kThreads, 0, stream, p, ldy, slice_vecs,
                              relu2);
    else
        detail::launch_kernel(fp8_gemv_kernel<M, bf16, KS>, blocks, kThreads, 0, stream, p, ldy, slice_vecs,
                              relu2);
}

template <int M>
void launch_m(const Fp8GemmParams& p, int64_t ldy, int k_split, cudaStream_t stream) {
    switch (k_split) {
        case 1: launch_split<M, 1>(p, ldy, stream); break;
        case 2: launch_split<M, 2>(p, ldy, stream); break;
        case 4: launch_split<M, 4>(p, ldy, stream); break;
        default: launch_split<M, 8>(p, ldy, stream); break;
    }
}

}  // namespace

bool fp8_gemv_supported(const Fp8GemmParams& p) {
    return p.m >= 1 && p.m <= kMaxM && p.n > 0 && p.k > 0 && p.k % 16 == 0 && !p.bias &&
           p.activation != GemmActivation::kGeluTanh && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
}

int fp8_gemv_k_split(int64_t n, int64_t k) {
    // As gemv_k_split: double the split while the grid has fewer than 8 blocks an SM and each warp's slice
    // keeps at least one full round of loads (32 lanes × kLoadsInFlight vectors).
    const int64_t want_blocks = 8 * static_cast<int64_t>(detail::device_sm_count()), vecs = k / 16;
    int ks = 1;
    while (ks < kWarps && (n + kWarps / ks * kRowsPerWarp - 1) / (kWarps / ks * kRowsPerWarp) < want_blocks &&
           vecs >= int64_t{2} * ks * 32 * kLoadsInFlight) {
        ks *= 2;
    }
    return ks;
}

void fp8_gemv(const Fp8GemmParams& p, cudaStream_t stream, int k_split) {
    SURF_CHECK(p.x && p.x_scale && p.w && p.w_scale && p.y, "fp8_gemv: null pointer");
    SURF_CHECK(fp8_gemv_supported(p), "fp8_gemv: m ", p.m, " n ", p.n, " k ", p.k, " (m ≤ ", kMaxM,
               ", k a multiple of 16, x and w 16-byte aligned)");
    SURF_CHECK(k_split == 0 || k_split == 1 || k_split == 2 || k_split == 4 || k_split == 8,
               "fp8_gemv: k_split ", k_split, " (0 = automatic, 1, 2, 4 or 8)");
    const int64_t ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldy >= p.n, "fp8_gemv: ldy ", ldy, " < n ", p.n);
    const int ks = k_split ? k_split : fp8_gemv_k_split(p.n, p.k);
    switch (p.m) {
        case 1: launch_m<1>(p, ldy, ks, stream); break;
        case 2: launch_m<2>(p, ldy, ks, stream); break;
        case 3: launch_m<3>(p, ldy, ks, stream); break;
        default: launch_m<4>(p, ldy, ks, stream); break;
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
