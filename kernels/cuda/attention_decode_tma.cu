// GQA decode attention with K/V tiles streamed by TMA (AttentionDecodeParams::tma). Same contract and results
// as the cp.async kernels in attention_decode.cu (one query token per sequence, paged cache, split-KV partial
// results merged by attention_decode_combine_kernel); what differs is how the bytes arrive:
//   * persistent blocks (persistent_blocks_per_sm an SM) of four warps walk the work items (sequence, kv
//   head,
//     split) round-robin; each warp takes every fourth 16-key tile of an item;
//   * each warp owns a 3-stage ring of 16-key K and V tiles (8 KB a stage) that its lane 0 fills by TMA
//     (two 64-column boxes per tile, 128-byte swizzle), running ahead across item boundaries, so two tiles a
//     warp stay in flight while it multiplies the third, with no copy instructions on the other lanes;
//   * the multiply is the mma.sync flash step of attention_flash.cuh (WarpFlash) on swizzled tiles; the four
//     warps' states merge in shared memory at the end of each item.
// Why: beside a mixed step's prefill attention the cp.async kernel gets one block an SM and cannot keep
// enough bytes in flight; a block here keeps ≈ 64 KB in flight with the issue slots of one thread. On SMs
// shared with the prefill it gains nothing in serving, so the engine keeps it off there
// (GpuLimits::decode_attention_tma). At two blocks an SM it pulls more bytes an SM than the cp.async kernel,
// so a mixed step runs it on a green context of its own SMs beside the prefill on the rest
// (GpuLimits::attention_green_decode_sms; the warm-up measures the SM count; sm_count plans for them).
// Numbers: docs/BENCHMARKS.md.
#include <cuda.h>  // CUtensorMap

#include "kernels/cuda/attention_decode_tma.h"
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/tensor_map.h"

namespace surf::kernels::cuda {

namespace {

using namespace flash;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kKeys = 16;                    // keys a tile
constexpr int kStages = 3;                   // ring stages a warp
constexpr int kD = 128;                      // head dim (the only one built)
constexpr int kHalfBytes = kKeys * 128;      // one box: 16 rows × 64 columns × 2 bytes
constexpr int kTileBytes = 2 * kHalfBytes;   // K (or V) of a tile: two 64-column halves
constexpr int kStageBytes = 2 * kTileBytes;  // K then V
constexpr int kRoundKeys =
    kWarps * kKeys;                 // keys the block's warps take per round; splits are multiples of it
constexpr int kItemsPerBlock = 36;  // split target: ≈ this many items a block (tail ≤ 1 item in 36)
constexpr size_t kExclusiveSmem =
    116 * 1024;  // one block an SM: two of these do not fit, one prefill block beside does

constexpr size_t kRingBytes = static_cast<size_t>(kWarps) * kStages * kStageBytes;

// Shared memory: 1 KB of alignment slack, the rings [warps][stages][K | V] (1,024-byte aligned: the swizzle
// pattern repeats every 1,024 bytes), the mbarriers [warps][stages], then the merge area: per warp its rows'
// O [group][kD] and max / sum [group] each.
size_t smem_bytes(int group, int blocks_per_sm) {
    const size_t need =
        1024 + kRingBytes + kWarps * kStages * 8 + static_cast<size_t>(kWarps) * group * (kD + 2) * 4;
    return blocks_per_sm == 1 ? std::max(need, kExclusiveSmem) : need;
}

// Byte offset of (row r, column d) in a tile of two 64-column halves, 128-byte swizzled as TMA writes it:
// the 16-byte chunk c of 128-byte line r lands at chunk c ^ (r mod 8). d is a multiple of 8.
__device__ __forceinline__ uint32_t sw128(int r, int d) {
    return static_cast<uint32_t>((d >> 6) * kHalfBytes + r * 128 + ((((d & 63) >> 3) ^ (r & 7)) << 4));
}

// One work item: sequence b, kv head kvh, keys [start, end) of split `split`.
struct Item {
    int b, kvh, split;
    int64_t start, end;
};

__device__ __forceinline__ Item item_at(const AttentionDecodeParams& p, int it, int n_splits, int64_t part) {
    Item x;
    x.split = it % n_splits;
    const int rest = it / n_splits;
    x.kvh = rest % static_cast<int>(p.n_kv_heads);
    x.b = rest / static_cast<int>(p.n_kv_heads);
    const int64_t len = p.seq_lens[x.b];
    x.start = x.split * part;
    x.end = min(len, x.start + part);
    return x;
}

// A warp's walk over its tiles: items blockIdx.x, blockIdx.x + gridDim.x, …; in each, keys start + 16·warp,
// + 64, … below end. The producer (lane 0) runs one of these kStages tiles ahead of the consumer's loop,
// which enumerates the same sequence.
struct TileWalk {
    int it;
    Item item;
    int64_t kb;
    __device__ bool valid(int n_items) const { return it < n_items; }
    // Moves to the first tile at or after (it, kb) that exists.
    __device__ void settle(const AttentionDecodeParams& p, int n_items, int n_splits, int64_t part,
                           int warp) {
        while (it < n_items && kb >= item.end) {
            it += gridDim.x;
            if (it < n_items) {
                item = item_at(p, it, n_splits, part);
                kb = item.start + warp * kKeys;
            }
        }
    }
};

__global__ void __launch_bounds__(kThreads)
    attention_decode_tma_kernel(AttentionDecodeParams p, float scale_log2, int64_t q_stride, int n_splits,
                                int64_t part, int n_items, float* ws_o, float* ws_lse,
                                const __grid_constant__ CUtensorMap tmap_k,
                                const __grid_constant__ CUtensorMap tmap_v) {
    detail::pdl_prologue();
#if SURF_BULK_COPY_ENABLED
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* base = smem_raw + ((1024 - (detail::smem_addr(smem_raw) & 1023)) & 1023);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = static_cast<int>(p.n_heads / p.n_kv_heads);
    unsigned char* ring = base + static_cast<size_t>(warp) * kStages * kStageBytes;  // this warp's stages
    uint64_t* full = reinterpret_cast<uint64_t*>(base + kRingBytes) + warp * kStages;
    float* mo = reinterpret_cast<float*>(reinterpret_cast<uint64_t*>(base + kRingBytes) +
                                         kWarps * kStages);  // [warps][group][kD]
    float* mm = mo + kWarps * group * kD;                    // [warps][group]
    float* ml = mm + kWarps * group;                         // [warps][group]
    if (lane == 0) {
        for (int s = 0; s < kStages; ++s) detail::mbarrier_init(full + s, 1);
    }
    __syncwarp();
    const uint64_t l2 = detail::l2_policy(p.l2_evict_first);
    const int page_size = static_cast<int>(p.page_size);

    // Producer state (lane 0): the next tile to load and how many were loaded.
    TileWalk ahead{static_cast<int>(blockIdx.x), {}, 0};
    if (ahead.it < n_items) {
        ahead.item = item_at(p, ahead.it, n_splits, part);
        ahead.kb = ahead.item.start + warp * kKeys;
        ahead.settle(p, n_items, n_splits, part, warp);
    }
    uint32_t loaded = 0;
    // The next tile's page, read one load ahead (its latency then hides behind a tile's multiply, not in
    // front of the copy).
    auto page_of = [&](const TileWalk& w) {
        return w.valid(n_items) ? __ldg(p.block_table + static_cast<int64_t>(w.item.b) * p.max_pages_per_seq +
                                        w.kb / page_size)
                                : 0;
    };
    int32_t ahead_page = lane == 0 ? page_of(ahead) : 0;
    auto load_next = [&] {  // lane 0: the walk's next tile into stage loaded % kStages
        if (!ahead.valid(n_items)) return;
        const int s = static_cast<int>(loaded % kStages);
        const int row = ahead_page * page_size + static_cast<int>(ahead.kb % page_size);
        const int col = ahead.item.kvh * kD;
        unsigned char* st = ring + s * kStageBytes;
        detail::mbarrier_arrive_expect_tx(full + s, kStageBytes);
        detail::tma_load_2d(st, &tmap_k, col, row, full + s, l2);
        detail::tma_load_2d(st + kHalfBytes, &tmap_k, col + 64, row, full + s, l2);
        detail::tma_load_2d(st + kTileBytes, &tmap_v, col, row, full + s, l2);
        detail::tma_load_2d(st + kTileBytes + kHalfBytes, &tmap_v, col + 64, row, full + s, l2);
        ++loaded;
        ahead.kb += kRoundKeys;
        ahead.settle(p, n_items, n_splits, part, warp);
        ahead_page = page_of(ahead);
    };
    if (lane == 0) {
        for (int s = 0; s < kStages; ++s) load_next();
    }

    const int g = lane >> 2, t = lane & 3, mi = lane >> 3, mr = lane & 7;
    uint32_t used = 0;                                          // tiles consumed
    for (int it = blockIdx.x; it < n_items; it += gridDim.x) {  // block-uniform
        const Item item = item_at(p, it, n_splits, part);
        // Q fragments (rows = the group's heads, zero past the group) straight from global memory.
        uint32_t qf[kD / 16][4];
        {
            const bf16* q0 = p.q + item.b * q_stride + static_cast<int64_t>(item.kvh * group) * kD;
#pragma unroll
            for (int ks = 0; ks < kD / 16; ++ks) {
                const int c = ks * 16 + 2 * t;
                qf[ks][0] = g < group ? *reinterpret_cast<const uint32_t*>(q0 + g * kD + c) : 0u;
                qf[ks][1] = g + 8 < group ? *reinterpret_cast<const uint32_t*>(q0 + (g + 8) * kD + c) : 0u;
                qf[ks][2] = g < group ? *reinterpret_cast<const uint32_t*>(q0 + g * kD + c + 8) : 0u;
                qf[ks][3] =
                    g + 8 < group ? *reinterpret_cast<const uint32_t*>(q0 + (g + 8) * kD + c + 8) : 0u;
            }
        }
        WarpFlash<kD> st;
        st.init();
        for (int64_t kb = item.start + warp * kKeys; kb < item.end; kb += kRoundKeys) {
            const int s = static_cast<int>(used % kStages);
            detail::mbarrier_wait(full + s, (used / kStages) & 1);
            const unsigned char* Kt = ring + s * kStageBytes;
            unsigned char* Vt = ring + s * kStageBytes + kTileBytes;
            const int lim = static_cast<int>(min(item.end - kb, static_cast<int64_t>(kKeys)));
            if (lim < kKeys) {
                // Rows past the sequence hold whatever the page held (possibly not finite): zero V's (K's are
                // masked), then order these writes before the TMA that later refills the stage (async proxy).
                for (int c = lane; c < (kKeys - lim) * 16;
                     c += 32) {  // 16 chunks a row: 8 in each half (whole lines)
                    const int r = lim + c / 16, chunk = c % 16;
                    *reinterpret_cast<uint4*>(Vt + (chunk >> 3) * kHalfBytes + r * 128 + (chunk & 7) * 16) =
                        make_uint4(0, 0, 0, 0);
                }
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                __syncwarp();
            }
            // S = Q·Kᵀ for the tile's 16 keys (two n8 tiles), K fragments by ldmatrix from the swizzled tile.
            float sc[2][4] = {};
            {
                const int key = (mi >> 1) * 8 + mr;
#pragma unroll
                for (int ks = 0; ks < kD / 16; ++ks) {
                    uint32_t b[4];
                    ldmatrix_x4(b, Kt + sw128(key, ks * 16 + (mi & 1) * 8));
                    detail::mma_bf16_16816(sc[0], qf[ks], b[0], b[1]);
                    detail::mma_bf16_16816(sc[1], qf[ks], b[2], b[3]);
                }
            }
            if (lim < kKeys) WarpFlash<kD>::mask<kKeys>(sc, lim, lim);
            st.softmax_update<kKeys>(sc, scale_log2);
            // O += P·V, V fragments by ldmatrix.trans (two d-tiles a load).
            {
                uint32_t pa[4];
                pack_weights<kKeys>(pa, sc, 0);
                const int key = (mi & 1) * 8 + mr;
#pragma unroll
                for (int dp = 0; dp < kD / 16; ++dp) {
                    uint32_t v[4];
                    detail::ldmatrix_x4_trans(v, Vt + sw128(key, dp * 16 + (mi >> 1) * 8));
                    detail::mma_bf16_16816(st.o[2 * dp], pa, v[0], v[1]);
                    detail::mma_bf16_16816(st.o[2 * dp + 1], pa, v[2], v[3]);
                }
            }
            ++used;
            __syncwarp();  // every lane's reads of stage s are done: refill it
            if (lane == 0) load_next();
        }
        st.reduce_l();
        // Merge the four warps' states for the group's rows.
#pragma unroll
        for (int dt = 0; dt < kD / 8; ++dt) {
            const int col = dt * 8 + 2 * t;
            if (g < group) {
                mo[(warp * group + g) * kD + col] = st.o[dt][0];
                mo[(warp * group + g) * kD + col + 1] = st.o[dt][1];
            }
            if (g + 8 < group) {
                mo[(warp * group + g + 8) * kD + col] = st.o[dt][2];
                mo[(warp * group + g + 8) * kD + col + 1] = st.o[dt][3];
            }
        }
        if (t == 0) {
            if (g < group) mm[warp * group + g] = st.m[0], ml[warp * group + g] = st.l[0];
            if (g + 8 < group) mm[warp * group + g + 8] = st.m[1], ml[warp * group + g + 8] = st.l[1];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < group * kD; e += kThreads) {
            const int row = e / kD, col = e % kD;
            float M = -INFINITY;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) M = fmaxf(M, mm[w * group + row]);
            float L = 0.0f, O = 0.0f;
            if (M != -INFINITY) {
#pragma unroll
                for (int w = 0; w < kWarps; ++w) {
                    const float f = exp2f(mm[w * group + row] - M);
                    L += f * ml[w * group + row];
                    O += f * mo[(w * group + row) * kD + col];
                }
            }
            const int h = item.kvh * group + row;
            if (n_splits == 1) {
                p.out[(item.b * p.n_heads + h) * kD + col] = __float2bfloat16_rn(L > 0.0f ? O / L : 0.0f);
            } else {
                const int64_t idx = (item.b * p.n_heads + h) * n_splits + item.split;
                ws_o[idx * kD + col] = L > 0.0f ? O / L : 0.0f;
                if (col == 0) ws_lse[idx] = L > 0.0f ? M + log2f(L) : -INFINITY;
            }
        }
        __syncthreads();  // the merge area is free for the next item
    }
#else
    __trap();  // launched only where decode_tma_usable holds (compute capability 9.0)
#endif
}

}  // namespace

namespace flash {

bool decode_tma_usable(const AttentionDecodeParams& p) {
    return p.tma && p.head_dim == kD && p.page_size % kKeys == 0 && p.cache_pages > 0 &&
           p.n_heads / p.n_kv_heads <= 16 && p.cache_pages * p.page_size < (int64_t{1} << 31) &&
           aligned16(p.k_cache) && aligned16(p.v_cache) && detail::device_runs_sm90a();
}

DecodeTmaPlan plan_decode_tma(const AttentionDecodeParams& p) {
    const int64_t max_len = std::max<int64_t>(p.max_seq_len, 1);
    const int64_t sms = p.sm_count > 0 ? p.sm_count : detail::device_sm_count();
    const int64_t blocks = sms * std::max<int32_t>(p.persistent_blocks_per_sm, 1);
    const int64_t base = std::max<int64_t>(p.batch * p.n_kv_heads, 1);
    int64_t splits = p.n_splits;
    if (splits <= 0)
        splits = std::clamp<int64_t>((kItemsPerBlock * blocks + base - 1) / base, 1, (max_len + 255) / 256);
    int64_t part = (max_len + splits - 1) / splits;
    part = (part + kRoundKeys - 1) / kRoundKeys * kRoundKeys;
    splits = (max_len + part - 1) / part;
    const int64_t items = base * splits;
    return {static_cast<int>(splits), part, static_cast<int>(items),
            static_cast<int>(std::min(items, blocks))};
}

void launch_decode_tma(const AttentionDecodeParams& p, float scale_log2, int64_t q_stride,
                       const DecodeTmaPlan& plan, float* ws_o, float* ws_lse, cudaStream_t stream) {
    const int group = static_cast<int>(p.n_heads / p.n_kv_heads);
    const size_t smem = smem_bytes(group, p.persistent_blocks_per_sm);
    SURF_CUDA_CHECK(cudaFuncSetAttribute(
        attention_decode_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    // An SM's shared-memory carve-out is one for all its blocks: left to the driver, 116 KB picks a smaller
    // one than the prefill kernels' and a prefill block cannot join the decode block on its SM
    // (bench_attention --pair: the pair ran serially). The largest carve-out for both.
    SURF_CUDA_CHECK(cudaFuncSetAttribute(attention_decode_tma_kernel,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         cudaSharedmemCarveoutMaxShared));
    const int64_t cols = p.n_kv_heads * p.head_dim, rows = p.cache_pages * p.page_size;
    const CUtensorMap mk = detail::bf16_tensor_map_2d(p.k_cache, cols, rows, cols, 64, kKeys,
                                                      CU_TENSOR_MAP_SWIZZLE_128B, "attention_decode");
    const CUtensorMap mv = detail::bf16_tensor_map_2d(p.v_cache, cols, rows, cols, 64, kKeys,
                                                      CU_TENSOR_MAP_SWIZZLE_128B, "attention_decode");
    detail::launch_kernel(attention_decode_tma_kernel, static_cast<unsigned>(plan.grid), kThreads, smem,
                          stream, p, scale_log2, q_stride, plan.splits, plan.part, plan.items, ws_o, ws_lse,
                          mk, mv);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace flash

}  // namespace surf::kernels::cuda
