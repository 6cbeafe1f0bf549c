// The FP8 GEMM of decode steps with 5 to 64 rows (fp8_skinny): fp8_gemm()'s contract, memory-bound on the
// one-byte weight stream, on the tensor cores (mma.sync m16n8k32 E4M3, fp32 accumulators) with the scales,
// beta·y and ReLU² applied in the same kernel, so no products scratch and no epilogue pass.
//
// The weight rows are the MMA's M side (16 a warp) and the activation rows its N side (8 a tile, up to 8
// tiles), so a warp reads each weight byte once and the few activation rows from L1. Each lane loads 16
// contiguous bytes of a weight row (two rows, g and g + 8) and of an activation row per 64-wide k chunk and
// feeds them to two MMAs as they are: k is permuted inside the chunk, identically for both operands, which a
// dot product does not see. Rows of few outputs split k across the block's warps, whose sums meet in shared
// memory before the epilogue.
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 16;     // weight rows (outputs n) a warp
constexpr int kChunk = 64;    // k a lane-quad's 4 × 16 bytes cover: two m16n8k32 MMAs
constexpr int kUnroll = 4;    // chunks whose weight loads are issued before their MMAs
constexpr int kMaxTiles = 8;  // activation tiles of 8 rows: m ≤ 64
constexpr int kMinRows = 5;   // fewer rows run fp8_gemv

using detail::from_float;
using detail::to_float;

// d += A·B for one m16n8k32 tile of E4M3 codes (PTX ISA fragment layouts): a0 / a2 row g, a1 / a3 row g + 8;
// b0, b1 column g.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// y[m, n] = (Σ_k xq[m, k]·wq[n, k])·x_scale[m]·w_scale[n] (+ beta·y[m, n]), rounded to TY, then ReLU² of the
// rounded value where asked. T activation tiles (m ≤ 8·T). The block's warps form kWarps / ks groups of kRows
// weight rows; the ks warps of a group each take a contiguous slice of the k chunks.
template <int T, typename TY>
__global__ void __launch_bounds__(kThreads, 2)
    fp8_skinny_kernel(Fp8GemmParams p, int64_t ldy, int ks, bool relu2) {
    // Chunks whose weight loads are issued before their MMAs: fewer with more activation tiles, whose loads
    // and accumulators take the registers (two blocks an SM without spilling).
    constexpr int kUnroll = T <= 4 ? 4 : 2;
    detail::pdl_prologue();
    __shared__ float partial[kWarps][T * 4][32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const int groups = kWarps / ks, slice = warp % ks;
    const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * groups + warp / ks) * kRows;
    const int64_t chunks = (p.k + kChunk - 1) / kChunk;
    const int64_t c_begin = chunks * slice / ks, c_end = chunks * (slice + 1) / ks;
    // Rows past n or m read the last row (finite codes) and are never stored.
    const uint8_t* w_lo = p.w + min(n0 + g, p.n - 1) * p.k + q * 16;
    const uint8_t* w_hi = p.w + min(n0 + g + 8, p.n - 1) * p.k + q * 16;
    int32_t xo[T];  // the activation rows' offsets: m·k < 2^31 (m ≤ 64, k < 2^24)
#pragma unroll
    for (int t = 0; t < T; ++t) xo[t] = static_cast<int32_t>(min(static_cast<int64_t>(t * 8 + g), p.m - 1) * p.k + q * 16);
    float acc[T][4] = {};
    const uint4 zero = make_uint4(0, 0, 0, 0);
    if (n0 < p.n) {
        for (int64_t c0 = c_begin; c0 < c_end; c0 += kUnroll) {
            uint4 lo[kUnroll], hi[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll;
                 ++u) {  // a lane's 16 bytes lie wholly inside k or past it (k % 16 = 0)
                const int64_t off = (c0 + u) * kChunk;
                const bool in = c0 + u < c_end && off + q * 16 < p.k;
                lo[u] = in ? __ldcs(reinterpret_cast<const uint4*>(w_lo + off)) : zero;
                hi[u] = in ? __ldcs(reinterpret_cast<const uint4*>(w_hi + off)) : zero;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t off = (c0 + u) * kChunk;
                if (c0 + u >= c_end) break;
                const bool in = off + q * 16 < p.k;
#pragma unroll
                for (int t = 0; t < T; ++t) {
                    const uint4 b = in ? __ldg(reinterpret_cast<const uint4*>(p.x + xo[t] + off)) : zero;
                    mma_e4m3(acc[t], lo[u].x, hi[u].x, lo[u].y, hi[u].y, b.x, b.y);
                    mma_e4m3(acc[t], lo[u].z, hi[u].z, lo[u].w, hi[u].w, b.z, b.w);
                }
            }
        }
    }
    if (ks > 1) {  // the group's slices added in slice order by its first warp
#pragma unroll
        for (int t = 0; t < T; ++t) {
#pragma unroll
            for (int i = 0; i < 4; ++i) partial[warp][t * 4 + i][lane] = acc[t][i];
        }
        __syncthreads();
        if (slice != 0) return;
        for (int s = 1; s < ks; ++s) {
#pragma unroll
            for (int t = 0; t < T; ++t) {
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[t][i] += partial[warp + s][t * 4 + i][lane];
            }
        }
    }
    if (n0 >= p.n) return;
    TY* y = static_cast<TY*>(p.y);
#pragma unroll
    for (int t = 0; t < T; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // accumulator i: weight row g (+8 for i ≥ 2), activation row 2q (+1)
            const int64_t m = t * 8 + q * 2 + (i & 1), n = n0 + g + (i >> 1) * 8;
            if (m >= p.m || n >= p.n) continue;
            float out = acc[t][i] * p.x_scale[m] * p.w_scale[n];
            if (p.beta != 0.0f) out += p.beta * to_float(y[m * ldy + n]);
            if (relu2) {
                const float rounded = fmaxf(to_float(from_float<TY>(out)), 0.0f);
                out = rounded * rounded;
            }
            y[m * ldy + n] = from_float<TY>(out);
        }
    }
}

template <int T>
void launch_tiles(const Fp8GemmParams& p, int64_t ldy, int ks, cudaStream_t stream) {
    const unsigned blocks = detail::grid_1d(p.n, kWarps / ks * kRows);
    const bool relu2 = p.activation == GemmActivation::kReluSquared;
    if (p.y_dtype == DType::kF32)
        detail::launch_kernel(fp8_skinny_kernel<T, float>, blocks, kThreads, 0, stream, p, ldy, ks, relu2);
    else
        detail::launch_kernel(fp8_skinny_kernel<T, bf16>, blocks, kThreads, 0, stream, p, ldy, ks, relu2);
}

}  // namespace

bool fp8_skinny_supported(const Fp8GemmParams& p) {
    return p.m >= kMinRows && p.m <= 8 * kMaxTiles && p.n > 0 && p.k > 0 && p.k % 16 == 0 && !p.bias &&
           p.activation != GemmActivation::kGeluTanh && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
}

int fp8_skinny_k_split(int64_t n, int64_t k) {
    // Double the split while the grid has fewer than 2 blocks an SM and each warp keeps at least 16 chunks.
    const int64_t want_blocks = 2 * static_cast<int64_t>(detail::device_sm_count()),
                  chunks = (k + kChunk - 1) / kChunk;
    int ks = 1;
    while (ks < kWarps && (n + kWarps / ks * kRows - 1) / (kWarps / ks * kRows) < want_blocks &&
           chunks >= int64_t{2} * ks * 16) {
        ks *= 2;
    }
    return ks;
}

void fp8_skinny(const Fp8GemmParams& p, cudaStream_t stream, int k_split) {
    SURF_CHECK(p.x && p.x_scale && p.w && p.w_scale && p.y, "fp8_skinny: null pointer");
    SURF_CHECK(fp8_skinny_supported(p), "fp8_skinny: m ", p.m, " n ", p.n, " k ", p.k, " (", kMinRows,
               " ≤ m ≤ ", 8 * kMaxTiles, ", k a multiple of 16, x and w 16-byte aligned, no bias or GELU)");
    SURF_CHECK(k_split == 0 || k_split == 1 || k_split == 2 || k_split == 4 || k_split == 8,
               "fp8_skinny: k_split ", k_split, " (0 = automatic, 1, 2, 4 or 8)");
    const int64_t ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldy >= p.n, "fp8_skinny: ldy ", ldy, " < n ", p.n);
    const int ks = k_split ? k_split : fp8_skinny_k_split(p.n, p.k);
    switch ((p.m + 7) / 8) {
        case 1: launch_tiles<1>(p, ldy, ks, stream); break;
        case 2: launch_tiles<2>(p, ldy, ks, stream); break;
        case 3: launch_tiles<3>(p, ldy, ks, stream); break;
        case 4: launch_tiles<4>(p, ldy, ks, stream); break;
        case 5: launch_tiles<5>(p, ldy, ks, stream); break;
        case 6: launch_tiles<6>(p, ldy, ks, stream); break;
        case 7: launch_tiles<7>(p, ldy, ks, stream); break;
        default: launch_tiles<8>(p, ldy, ks, stream); break;
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
