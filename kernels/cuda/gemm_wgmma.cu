// A Hopper GEMM of our own (sm_90a): y[m,n] = act(alpha·x[m,k]·w[n,k]ᵀ + beta·y + bias), gemm()'s contract
// (ops.h), for the shapes where it beats cuBLASLt and for the epilogue cuBLASLt lacks (ReLU², the Nemotron-H
// MLP's activation, fused instead of a second pass over the up projection's output).
//
// Design (persistent, warp-specialized, as FlashAttention-3 / CUTLASS's sm90 kernels are; our own code):
//   * grid = min(tiles, resident blocks); block b computes output tiles b, b + grid, … of kBM × BN (BN = 256
//   or
//     128), the m index fastest: at any moment the resident blocks share ⌈grid / m-tiles⌉ columns of w, so
//     every weight tile is read from DRAM once and served from the L2 to the m-tiles' blocks (cuBLASLt's
//     kernels read the in_proj weights more than once, docs/BENCHMARKS.md); where m > 128 the blocks pair up
//     in clusters of two that share each weight slice by TMA multicast (below, CL = 2);
//   * warpgroup 0 is the producer: one thread streams k-slices of 64 columns of x (kBM rows) and w (BN rows)
//   by TMA
//     into a ring of stages, 128-byte swizzled (wgmma.cuh make_desc_sw128), each completing on its `full`
//     mbarrier by bytes; out-of-range rows and columns arrive as zeros, so m, n and k need not be tile
//     multiples;
//   * warpgroups 1 and 2 multiply 64 rows each: four wgmma m64nBNk16 a stage, committed as one group; a stage
//   goes
//     back to the producer (`empty`, one arrival a consumer warp) once the next stage's group is issued and
//     this one's is complete (wait<1>), so one group is always in flight;
//   * the epilogue runs from the accumulators (alpha, beta·y, bias, activation, rounding) and stores straight
//   to
//     global memory while the producer already fills the ring with the next tile's first stages (the tensor
//     cores wait meanwhile: both consumers store at once).
// It matches cuBLASLt only where the work is many large tiles (the MLP up projection + ReLU², the projector)
// and is slower at n = 5,120 / 1,280 (≤ 1.2 waves, no split-K) and on the fp32 residual epilogues
// (docs/BENCHMARKS.md), so the engine's tuner keeps cuBLASLt (GpuLimits::gemm_wgmma off). Registers: the
// launch gives each of the 384 threads 168; the producer drops to 24 and the consumers rise to 240 (BN = 256
// holds 128 fp32 accumulators a thread).
#include <cuda.h>

#include <algorithm>
#include <atomic>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wgmma.cuh"

namespace surf::kernels::cuda {

namespace {

constexpr int kBM = 128, kBK = 64, kThreads = 384;

enum : int { kActNone = 0, kActGeluTanh = 1, kActReluSquared = 2 };

template <int BN>
struct Tiles {
    static constexpr int kABytes = kBM * kBK * 2, kBBytes = BN * kBK * 2;
    static constexpr int kStageBytes =
        kABytes + kBBytes;                             // 48 KB (BN 256) / 32 KB (BN 128), multiples of 1,024
    static constexpr int kStages = BN == 256 ? 4 : 6;  // 192 KB of ring either way
    static constexpr size_t kSmemBytes =
        static_cast<size_t>(kStages) * kStageBytes + 1024 /* alignment */ + 2 * kStages * 8;
};

struct EpilogueArgs {
    void* y;
    const void* bias;
    int64_t ldy;
    float alpha, beta;
    int m, n;
    int y_f32;
    int act;
};

#if SURF_WGMMA_ENABLED  // used only by the sm_90a kernel body
// One output pair (columns col, col + 1 of a row): alpha, beta·y, bias and the activation in fp32, then y's
// rounding. ReLU² squares the value rounded to y's dtype (what the linear's output followed by the
// relu_squared pass gives).
__device__ __forceinline__ void store_pair(const EpilogueArgs& e, int row, int col, float v0, float v1) {
    v0 *= e.alpha, v1 *= e.alpha;
    if (e.y_f32) {
        float2* yp =
            reinterpret_cast<float2*>(static_cast<float*>(e.y) + static_cast<int64_t>(row) * e.ldy + col);
        if (e.beta != 0.0f) {
            const float2 old = *yp;
            v0 += e.beta * old.x, v1 += e.beta * old.y;
        }
        if (e.bias) {
            const float2 b = *reinterpret_cast<const float2*>(static_cast<const float*>(e.bias) + col);
            v0 += b.x, v1 += b.y;
        }
        if (e.act == kActGeluTanh)
            v0 = detail::gelu_tanh(v0), v1 = detail::gelu_tanh(v1);
        else if (e.act == kActReluSquared)
            v0 = fmaxf(v0, 0.0f) * fmaxf(v0, 0.0f), v1 = fmaxf(v1, 0.0f) * fmaxf(v1, 0.0f);
        *yp = make_float2(v0, v1);
    } else {
        __nv_bfloat162* yp = reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(e.y) +
                                                               static_cast<int64_t>(row) * e.ldy + col);
        if (e.beta != 0.0f) {
            const float2 old = __bfloat1622float2(*yp);
            v0 += e.beta * old.x, v1 += e.beta * old.y;
        }
        if (e.bias) {
            const float2 b = __bfloat1622float2(
                *reinterpret_cast<const __nv_bfloat162*>(static_cast<const bf16*>(e.bias) + col));
            v0 += b.x, v1 += b.y;
        }
        if (e.act == kActGeluTanh) {
            v0 = detail::gelu_tanh(v0), v1 = detail::gelu_tanh(v1);
        } else if (e.act == kActReluSquared) {
            const float2 r = __bfloat1622float2(__floats2bfloat162_rn(v0, v1));
            v0 = fmaxf(r.x, 0.0f) * fmaxf(r.x, 0.0f), v1 = fmaxf(r.y, 0.0f) * fmaxf(r.y, 0.0f);
        }
        *yp = __floats2bfloat162_rn(v0, v1);
    }
}

#endif

#if SURF_WGMMA_ENABLED
// ---- clusters of two blocks (the CL = 2 kernels) --------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of both blocks arrives; returns once all have (release / acquire: shared-memory state such as
// initialised barriers is visible to the other block after it).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
}
// Arrives on the mbarrier at the same shared-memory offset as `bar` in block `rank` of the cluster.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t* bar, uint32_t rank) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
                 : "=r"(remote)
                 : "r"(detail::smem_addr(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
// One TMA box into the same shared-memory offset of every block in `mask`, each completing bytes on its own
// mbarrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(void* smem, const void* tensor_map, int c0, int c1,
                                                      uint64_t* bar, uint16_t mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
        "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(detail::smem_addr(smem)),
        "l"(tensor_map), "r"(c0), "r"(c1), "r"(detail::smem_addr(bar)), "h"(mask)
        : "memory");
}
#endif

// CL = 2: blocks pair up in clusters along m. The pair computes tiles (2i, n) and (2i + 1, n), so both need
// the same BN × 64 slice of w a stage: each block loads half of it (BN / 2 rows) and multicasts it into both
// blocks' rings, halving the weights' L2 → SM traffic (without it that traffic is the kernel's limit at large
// m; docs/BENCHMARKS.md). A stage is refilled only once the consumers of both blocks have released it
// (`empty` counts 16 warps, half of them remote).
template <int BN, int CL>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_w,
                      EpilogueArgs e, int k_tiles, int m_tiles, int n_tiles) {
    detail::pdl_prologue();
#if SURF_WGMMA_ENABLED
    using T = Tiles<BN>;
    constexpr int kStages = T::kStages;
    extern __shared__ unsigned char smem_raw[];
    // The 128-byte swizzle repeats every 1,024 bytes: stages start on such a boundary (at the same offset in
    // both blocks of a cluster: the dynamic shared memory starts at the same address in every block).
    unsigned char* ring =
        reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
    uint64_t* full =
        reinterpret_cast<uint64_t*>(ring + kStages * T::kStageBytes);  // [kStages]: the producer + bytes
    uint64_t* empty = full + kStages;                                  // [kStages]: 8 consumer warps a block
    const int tid = threadIdx.x, lane = tid & 31;
    const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // provably warp-uniform
    const uint32_t rank = CL == 2 ? cluster_rank() : 0;
    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) {
            detail::mbarrier_init(full + s, 1);
            detail::mbarrier_init(empty + s, 8 * CL);
        }
    }
    if constexpr (CL == 2)
        cluster_sync();
    else
        __syncthreads();
    // Work items: column n, rows of CL consecutive m-tiles (the cluster's blocks take one each), m fastest.
    const int m_groups = (m_tiles + CL - 1) / CL, items = m_groups * n_tiles;
    const int first = blockIdx.x / CL, stride = gridDim.x / CL;

    if (wg == 0) {  // ---- producer: thread 0 alone
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (tid == 0) {
            int it = 0;
            for (int t = first; t < items; t += stride) {
                const int row0 = ((t % m_groups) * CL + static_cast<int>(rank)) * kBM,
                          col0 = (t / m_groups) * BN;
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % kStages;
                    if (it >= kStages)
                        detail::mbarrier_wait(empty + s, static_cast<uint32_t>((it / kStages - 1) & 1));
                    unsigned char* stage = ring + s * T::kStageBytes;
                    detail::mbarrier_arrive_expect_tx(
                        full + s, T::kStageBytes);  // x, and all of w's slice (half from the peer)
                    detail::tma_load_2d(stage, &map_x, kt * kBK, row0, full + s);
                    if constexpr (CL == 2) {
                        tma_load_2d_multicast(stage + T::kABytes + rank * (T::kBBytes / 2), &map_w, kt * kBK,
                                              col0 + static_cast<int>(rank) * (BN / 2), full + s, 0x3);
                    } else {
                        detail::tma_load_2d(stage + T::kABytes, &map_w, kt * kBK, col0, full + s);
                    }
                }
            }
        }
    } else {
        // ---- consumers: warpgroup 1 rows 0–63 of a tile, warpgroup 2 rows 64–127
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
        const int half = wg - 1, warp = (tid & 127) >> 5;
        // A stage's release: this block's barrier, and the peer's (whose producer multicasts into this ring
        // too).
        auto release = [&](int s) {
            if (lane != 0) return;
            if constexpr (CL == 2) {
                mbarrier_arrive_cluster(empty + s, 0);
                mbarrier_arrive_cluster(empty + s, 1);
            } else {
                detail::mbarrier_arrive(empty + s);
            }
        };
        float d[BN / 8][4];
        int it = 0;
        for (int t = first; t < items; t += stride) {
            const int tm = (t % m_groups) * CL + static_cast<int>(rank), tn = t / m_groups;
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % kStages;
                detail::mbarrier_wait(full + s, static_cast<uint32_t>((it / kStages) & 1));
                const unsigned char* stage = ring + s * T::kStageBytes;
                const uint64_t da =
                    wgmma::make_desc_sw128(stage + half * 64 * 128);  // this warpgroup's 64 rows of x
                const uint64_t db = wgmma::make_desc_sw128(stage + T::kABytes);
                wgmma::fence();
#pragma unroll
                for (int kk = 0; kk < kBK / 16; ++kk)
                    wgmma::wgmma_ss<BN>(d, da + 2 * kk, db + 2 * kk, (kt > 0 || kk > 0) ? 1 : 0);
                wgmma::commit();
                if (kt > 0) {
                    wgmma::wait<1>();  // the previous stage's products are done: hand it back
                    release((it - 1) % kStages);
                }
            }
            wgmma::wait<0>();
            release((it - 1) % kStages);
            wgmma::fence_operands(d);

            // Accumulator layout (wgmma.cuh): d[i][0..1] row lane/4, columns 8i + 2·(lane%4) + {0, 1};
            // d[i][2..3] row + 8.
            const int row = tm * kBM + half * 64 + warp * 16 + (lane >> 2);
            const int col = tn * BN + 2 * (lane & 3);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row + 8 * h;
                if (r >= e.m) continue;
#pragma unroll
                for (int i = 0; i < BN / 8; ++i) {
                    const int c = col + 8 * i;
                    if (c < e.n) store_pair(e, r, c, d[i][2 * h], d[i][2 * h + 1]);
                }
            }
        }
    }
    // A block must not leave while its peer may still arrive on its barriers (the last stages' releases).
    if constexpr (CL == 2) cluster_sync();
#else
    __trap();  // launched only on compute capability 9.0 (gemm_wgmma_supported), where the sm_90a code runs
#endif
}

bool aligned_to(const void* p, uintptr_t bytes) {
    return (reinterpret_cast<uintptr_t>(p) % bytes) == 0;
}

// The kernel with its shared-memory allowance on the current device (a per-device attribute, so set on every
// call: engines on several GPUs share this code).
template <int BN, int CL>
auto* prepared_kernel() {
    auto* kernel = gemm_wgmma_kernel<BN, CL>;
    SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(Tiles<BN>::kSmemBytes)));
    return kernel;
}

// A launch of `grid` blocks in clusters of CL along x; `attr` (the cluster shape) must outlive the config.
template <int BN, int CL>
cudaLaunchConfig_t cluster_launch(unsigned grid, cudaStream_t stream, cudaLaunchAttribute& attr) {
    attr = cudaLaunchAttribute{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = CL, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(grid), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = Tiles<BN>::kSmemBytes,
    cfg.stream = stream;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    return cfg;
}

// Blocks of the kernel that fit the device at once: one an SM, or (CL = 2) twice the clusters of two that fit
// (an H100's GPCs do not all hold an even count of SMs). Cached per device.
template <int BN, int CL>
int resident_blocks() {
    static std::atomic<int> known[64] = {};
    return detail::per_device(known, [](int) {
        if constexpr (CL == 1) {
            return detail::device_sm_count();
        } else {
            cudaLaunchAttribute attr;
            const cudaLaunchConfig_t cfg = cluster_launch<BN, CL>(
                static_cast<unsigned>(detail::device_sm_count() / CL * CL), nullptr, attr);
            int clusters = 0;
            SURF_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, prepared_kernel<BN, CL>(), &cfg));
            return std::max(clusters, 1) * CL;
        }
    });
}

template <int BN, int CL>
void launch(const GemmParams& p, int64_t ldx, int64_t ldw, int64_t ldy, int max_blocks, cudaStream_t stream) {
    const CUtensorMap map_x = detail::bf16_tensor_map_2d(p.x, p.k, p.m, ldx, kBK, kBM,
                                                         CU_TENSOR_MAP_SWIZZLE_128B, "gemm_wgmma (x)");
    const CUtensorMap map_w = detail::bf16_tensor_map_2d(p.w, p.k, p.n, ldw, kBK, BN / CL,
                                                         CU_TENSOR_MAP_SWIZZLE_128B, "gemm_wgmma (w)");
    const int act = p.activation == GemmActivation::kGeluTanh      ? kActGeluTanh
                    : p.activation == GemmActivation::kReluSquared ? kActReluSquared
                                                                   : kActNone;
    const EpilogueArgs e{p.y,
                         p.bias,
                         ldy,
                         p.alpha,
                         p.beta,
                         static_cast<int>(p.m),
                         static_cast<int>(p.n),
                         p.y_dtype == DType::kF32 ? 1 : 0,
                         act};
    const int m_tiles = static_cast<int>((p.m + kBM - 1) / kBM),
              n_tiles = static_cast<int>((p.n + BN - 1) / BN);
    const int k_tiles = static_cast<int>((p.k + kBK - 1) / kBK);
    auto* kernel = prepared_kernel<BN, CL>();
    const int items = (m_tiles + CL - 1) / CL * n_tiles;
    const int resident =
        max_blocks > 0 ? std::min(max_blocks, resident_blocks<BN, CL>()) : resident_blocks<BN, CL>();
    const int grid = std::min(items, std::max(resident / CL, 1)) * CL;
    if constexpr (CL == 1) {
        detail::launch_kernel(kernel, grid, kThreads, Tiles<BN>::kSmemBytes, stream, map_x, map_w, e, k_tiles,
                              m_tiles, n_tiles);
    } else {
        cudaLaunchAttribute
            attrs[2];  // the cluster shape, then programmatic serialization (as detail::launch_kernel's)
        cudaLaunchConfig_t cfg = cluster_launch<BN, CL>(static_cast<unsigned>(grid), stream, attrs[0]);
        attrs[1] = detail::programmatic_serialization();
        cfg.attrs = attrs, cfg.numAttrs = programmatic_launch() ? 2 : 1;
        SURF_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, map_x, map_w, e, k_tiles, m_tiles, n_tiles));
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gemm_wgmma_supported(const GemmParams& p) {
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k, ldy = p.ldy ? p.ldy : p.n;
    const uintptr_t y_pair = p.y_dtype == DType::kF32 ? 8 : 4;  // the epilogue's two-column accesses
    return p.x && p.w && p.y && p.m > 0 && p.n > 0 && p.k > 0 && p.m < (int64_t{1} << 31) &&
           p.n < (int64_t{1} << 31) && p.k % 8 == 0 && ldx % 8 == 0 && ldw % 8 == 0 && aligned_to(p.x, 16) &&
           aligned_to(p.w, 16) &&  // TMA: 16-byte rows
           p.n % 2 == 0 && ldy % 2 == 0 && aligned_to(p.y, y_pair) &&
           (!p.bias || aligned_to(p.bias, y_pair)) && detail::device_runs_sm90a();
}

void gemm_wgmma(const GemmParams& p, int tile_n, cudaStream_t stream, bool cluster_pairs, int max_blocks) {
    SURF_CHECK(gemm_wgmma_supported(p), "gemm_wgmma: unsupported shape or layout (m ", p.m, " n ", p.n, " k ",
               p.k,
               "; needs k and x/w row strides multiples of 8, 16-byte aligned x and w, even n and y stride, "
               "compute capability 9.0)");
    SURF_CHECK(tile_n == 256 || tile_n == 128, "gemm_wgmma: tile_n ", tile_n, " (128 or 256)");
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k, ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldx >= p.k && ldw >= p.k && ldy >= p.n, "gemm_wgmma: leading dims ", ldx, " ", ldw, " ", ldy);
    // Pairs of blocks share w's slices (CL = 2) wherever there are two row tiles to pair.
    const bool pairs = cluster_pairs && p.m > kBM;
    if (tile_n == 256)
        pairs ? launch<256, 2>(p, ldx, ldw, ldy, max_blocks, stream)
              : launch<256, 1>(p, ldx, ldw, ldy, max_blocks, stream);
    else
        pairs ? launch<128, 2>(p, ldx, ldw, ldy, max_blocks, stream)
              : launch<128, 1>(p, ldx, ldw, ldy, max_blocks, stream);
}

int gemm_wgmma_resident_blocks(int tile_n, bool cluster_pairs) {
    SURF_CHECK(tile_n == 256 || tile_n == 128, "gemm_wgmma: tile_n ", tile_n, " (128 or 256)");
    if (tile_n == 256) return cluster_pairs ? resident_blocks<256, 2>() : resident_blocks<256, 1>();
    return cluster_pairs ? resident_blocks<128, 2>() : resident_blocks<128, 1>();
}

}  // namespace surf::kernels::cuda
