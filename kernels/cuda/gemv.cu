// The small-m GEMM of decode steps (one to four rows), memory-bound on the weight stream: each warp reads
// two weight rows with 16-byte streaming loads, four per row in flight per lane, dots them with the (L1-
// cached) rows of x in fp32, and reduces across the warp. H100, one decode row: cuBLASLt reads these weights at
// 2.5–2.8 TB/s; GemmContext times this kernel beside cuBLASLt's candidates and keeps whichever is faster.
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
constexpr int kRowsPerWarp = 2;   // weight rows (outputs n) per warp
constexpr int kLoadsInFlight = 4; // 16-byte weight loads per row per lane before the FMAs
constexpr int kMaxM = 4;

using detail::from_float;
using detail::to_float;
using detail::unpack_bf16x8;
using detail::warp_sum;

__device__ __forceinline__ float dot8(const uint4& w, const float (&x)[8]) {
    float wf[8];
    unpack_bf16x8(w, wf);
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) s = fmaf(wf[e], x[e], s);
    return s;
}

// y[m, n] = alpha · Σ_k x[m, k]·w[n, k] (+ bias[n]) + beta · y[m, n] for m < M; TY is y's (and bias's) type.
template <int M, typename TY>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemmParams p, int64_t ldx, int64_t ldw, int64_t ldy) {
    detail::pdl_prologue();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp) * kRowsPerWarp;
    if (n0 >= p.n) return;
    const int64_t vecs = p.k / 8;
    const uint4* wrow[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) wrow[r] = reinterpret_cast<const uint4*>(p.w + min(n0 + r, p.n - 1) * ldw);
    float acc[M][kRowsPerWarp] = {};
    for (int64_t v0 = lane; v0 < vecs; v0 += 32 * kLoadsInFlight) {
        uint4 wv[kRowsPerWarp][kLoadsInFlight];
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) {
            const int64_t v = v0 + u * 32;
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) {
                if (v < vecs) wv[r][u] = __ldcs(wrow[r] + v);  // read once: stream past L1/L2
            }
        }
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) {
            const int64_t v = v0 + u * 32;
            if (v >= vecs) break;
#pragma unroll
            for (int m = 0; m < M; ++m) {
                float xf[8];
                unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(p.x + m * ldx) + v), xf);
#pragma unroll
                for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] += dot8(wv[r][u], xf);
            }
        }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] = warp_sum(acc[m][r]);
    }
    if (lane != 0) return;
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

template <int M>
void launch_m(const GemmParams& p, int64_t ldx, int64_t ldw, int64_t ldy, cudaStream_t stream) {
    const unsigned blocks = detail::grid_1d(p.n, kGemvWarps * kRowsPerWarp);
    if (p.y_dtype == DType::kF32)
        detail::launch_kernel(gemv_kernel<M, float>, blocks, kGemvThreads, 0, stream, p, ldx, ldw, ldy);
    else
        detail::launch_kernel(gemv_kernel<M, bf16>, blocks, kGemvThreads, 0, stream, p, ldx, ldw, ldy);
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

bool gemv_supported(const GemmParams& p) {
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k;
    return p.m >= 1 && p.m <= kMaxM && p.n > 0 && p.k > 0 && p.k % 8 == 0 && ldx % 8 == 0 && ldw % 8 == 0 && aligned16(p.x) &&
           aligned16(p.w) && p.activation == GemmActivation::kNone;
}

void gemv(const GemmParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.w && p.y, "gemv: null pointer");
    SURF_CHECK(gemv_supported(p), "gemv: m ", p.m, " n ", p.n, " k ", p.k, " (m ≤ ", kMaxM, ", k and row strides multiples of 8, 16-byte aligned, no activation)");
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k, ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldx >= p.k && ldw >= p.k && ldy >= p.n, "gemv: leading dims ", ldx, " ", ldw, " ", ldy);
    switch (p.m) {
        case 1: launch_m<1>(p, ldx, ldw, ldy, stream); break;
        case 2: launch_m<2>(p, ldx, ldw, ldy, stream); break;
        case 3: launch_m<3>(p, ldx, ldw, ldy, stream); break;
        default: launch_m<4>(p, ldx, ldw, ldy, stream); break;
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
