// GQA prefill attention on Hopper warpgroup MMA (sm_90a; AttentionPrefillParams::wgmma_key_tile). Same
// contract, sources (paged cache or contiguous rows), causal mask, split-KV partial results and online
// softmax as the mma.sync kernel in attention.cu; what differs is who multiplies:
//   * block = 128 query rows of one head as two warpgroups of 64 rows; each warpgroup computes its
//     S = Q·Kᵀ (64 × NK) with wgmma from shared memory (Q and K both K-major) and O += P·V with P from
//     registers (the S accumulator repacked to bf16, as in WarpFlash) and V from shared memory, N-major;
//   * Q, K and V live in shared memory in wgmma.cuh's 32-byte-swizzled layout (slabs of 16 columns; copies
//     conflict-free and along whole global lines); K/V tiles of NK keys double-buffered through cp.async, key
//     source rows looked up once per tile (PrefillBlock::key_row);
//   * the softmax runs on the accumulators in registers with WarpFlash (each warp's 16 rows), so masking,
//     skipping and the −∞ conventions are the mma.sync kernel's.
// Each product waits for its result before the softmax touches it; the two warpgroups (and the copies of
// the next tile) overlap each other's waits.
#include <cuda.h>  // CUtensorMap and its encoder's signature (called through the runtime's driver entry point)

#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wgmma.cuh"

namespace surf::kernels::cuda {

namespace {

using namespace flash;

constexpr int kGroups = kWgmmaBlockRows / 64;  // warpgroups per block, 64 query rows each (the wgmma M)
constexpr int kThreads = 128 * kGroups;

template <int DP, int NK>
constexpr size_t wgmma_smem_bytes() {
    // Q [128][DP], K and V [2][NK][DP] bf16 (32-byte swizzled, no padding), key source rows [2][NK] int32.
    return static_cast<size_t>(kWgmmaBlockRows + 4 * NK) * DP * 2 + 2 * NK * 4;
}

using wgmma::sw32_chunk;

// Copies the block's 128-row Q tile into the 32-byte-swizzled Qs with cp.async (threads `first`, `first` +
// `stride`, …; zero rows past the sequence and zero columns past head_dim); the caller commits and waits.
template <int DP>
__device__ __forceinline__ void load_q_tile(bf16* Qs, const PrefillBlock& b, const AttentionPrefillParams& p,
                                            int64_t q_stride, int first, int stride) {
    for (int i = first; i < kWgmmaBlockRows * (DP / 8); i += stride) {
        int row, col;
        const int at = sw32_chunk<DP>(i, kWgmmaBlockRows, row, col);
        const bool ok = row < b.rows_here && col < b.D;
        const bf16* g =
            p.q + (ok ? static_cast<int64_t>(b.q0 + b.row0 + row) * q_stride + b.h * b.D + col : 0);
        cp_async16(reinterpret_cast<unsigned char*>(Qs) + at, g, ok);
    }
}

// Hides the keys of the tile at key kb that this thread's rows qi0 / qi1 (of a warpgroup whose first row is
// grow0) must not see: keys past len_k, and under the causal mask keys after each row's diagonal. Only tiles
// that need it are touched; negative limits hide every key.
template <int DP, int NK>
__device__ __forceinline__ void mask_tile(float (&sc)[NK / 8][4], const PrefillBlock& b, bool causal, int kb,
                                          int grow0, int qi0, int qi1) {
    if (kb + NK > b.len_k || (causal && kb + NK > b.past + grow0 + 1)) {
        int lim0 = b.len_k - kb, lim1 = lim0;
        if (causal) {
            lim0 = min(lim0, b.past + qi0 + 1 - kb);
            lim1 = min(lim1, b.past + qi1 + 1 - kb);
        }
        WarpFlash<DP>::template mask<NK>(sc, lim0, lim1);
    }
}

// One k-step (16 head-dim columns) of S = Q·Kᵀ over NK keys: one wgmma up to 128 keys; at 208 (the
// warp-specialized kernel with TMA copies, head dim 80) a 128-key product and an 80-key one, whose K rows
// start 128 rows (4,096 bytes, a whole number of swizzle periods) into each slab.
template <int NK>
__device__ __forceinline__ void scores_kstep(float (&sc)[NK / 8][4], uint64_t desc_q, uint64_t desc_k,
                                             int scale_d) {
    if constexpr (NK <= 128) {
        wgmma::wgmma_ss<NK>(sc, desc_q, desc_k, scale_d);
    } else {
        static_assert(NK == 208, "key tiles past 128: 208");
        wgmma::wgmma_ss<128>(*reinterpret_cast<float(*)[16][4]>(&sc[0]), desc_q, desc_k, scale_d);
        wgmma::wgmma_ss_n80<0, 0>(*reinterpret_cast<float(*)[10][4]>(&sc[16]), desc_q, desc_k + 128 * 32 / 16,
                                  scale_d);
    }
}

// Key tiles of 64: two blocks per SM (≤ 128 registers, ≤ 113 KB of shared memory each), so that one block's
// softmax runs beside the other's products; key tiles of 128: one block per SM.
template <int DP, int NK>
__global__ void __launch_bounds__(kThreads, NK == 64 ? 2 : 1)
    attention_prefill_wgmma_kernel(AttentionPrefillParams p, float scale_log2, int64_t q_stride,
                                   int64_t out_stride, int n_splits, float* ws_o, float* ws_lse) {
    detail::pdl_prologue();
#if SURF_WGMMA_ENABLED
    static_assert(kThreads >= 2 * NK, "the prologue fills two tiles' key rows, one per thread");
    constexpr int kChunks = DP / 8, kTileChunks = NK * kChunks,
                  kTilePasses = (kTileChunks + kThreads - 1) / kThreads;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [128][DP] 32-byte swizzled (wgmma.cuh)
    bf16* Kbuf = Qs + kWgmmaBlockRows * DP;        // [2][NK][DP] 32-byte swizzled
    bf16* Vbuf = Kbuf + 2 * NK * DP;               // [2][NK][DP] 32-byte swizzled
    // [2][NK]: the K/V row (units of row_stride) of each key of the tile in that buffer; −1 past len_k.
    int32_t* key_rows = reinterpret_cast<int32_t*>(Vbuf + 2 * NK * DP);
    const PrefillBlock b(p, kWgmmaBlockRows, NK, n_splits);
    if (b.empty()) return;
    const int tid = threadIdx.x, group = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;

    // Copies the K/V rows listed in key_rows[buf] into buffer `buf` (zeros past len_k and past head_dim).
    auto load_tile = [&](int buf) {
        const int32_t* rows = key_rows + buf * NK;
        unsigned char* Kd = reinterpret_cast<unsigned char*>(Kbuf + buf * NK * DP);
        unsigned char* Vd = reinterpret_cast<unsigned char*>(Vbuf + buf * NK * DP);
#pragma unroll
        for (int pass = 0; pass < kTilePasses; ++pass) {
            const int i = tid + pass * kThreads;
            if (kTileChunks % kThreads != 0 && i >= kTileChunks) break;
            int row, col;
            const int at = sw32_chunk<DP>(i, NK, row, col);
            const int32_t r = rows[row];
            const bool ok = r >= 0 && col < b.D;
            const int64_t off = ok ? static_cast<int64_t>(r) * b.row_stride + col : 0;
            cp_async16(Kd + at, b.k_src + off, ok);
            cp_async16(Vd + at, b.v_src + off, ok);
        }
    };

    load_q_tile<DP>(Qs, b, p, q_stride, tid, kThreads);               // joins the first K/V group
    if (tid < 2 * NK) key_rows[tid] = b.key_row(b.tile0 * NK + tid);  // tiles tile0 and tile0 + 1
    __syncthreads();
    if (b.tile0 < b.n_tiles) load_tile(0);
    detail::cp_async_commit();

    WarpFlash<DP> st;
    st.init();
    const int grow0 = b.row0 + group * 64;                           // this warpgroup's first row (seq-local)
    const int qi0 = grow0 + warp * 16 + (lane >> 2), qi1 = qi0 + 8;  // this thread's two rows
    // A warpgroup past the end of its sequence's rows copies tiles and meets the barriers, but skips the
    // math.
    const bool group_has_rows = group * 64 < b.rows_here;
    // Q: K-major A operand, this group's 64 rows of each slab (8 rows per 256 bytes); one slab (128 rows · 32
    // bytes) per k-step.
    const uint64_t desc_q =
        wgmma::make_desc_sw32(reinterpret_cast<unsigned char*>(Qs) + group * 64 * 32, 16, 256);
    for (int it = b.tile0; it < b.n_tiles; ++it) {
        const int buf = (it - b.tile0) & 1;
        if (it + 1 < b.n_tiles) {
            load_tile(buf ^ 1);
            detail::cp_async_commit();
            detail::cp_async_wait<1>();
        } else {
            detail::cp_async_wait<0>();
        }
        wgmma::fence_proxy_async_smem();  // this thread's copies, visible to every warpgroup's wgmma after
                                          // the barrier
        __syncthreads();
        // key_rows[buf] has been read by every thread (tile `it` was issued before this barrier): refill it
        // for tile it + 2. The block-table read is issued here and stored after the math hides its latency.
        const bool refill = tid < NK && it + 2 < b.n_tiles;
        const int32_t next_row = refill ? b.key_row((it + 2) * NK + tid) : 0;
        const int kb = it * NK;
        // Warpgroup-uniform: a tile wholly after the group's last row's diagonal changes nothing (skip it);
        // one wholly visible to its first row needs no mask.
        if (group_has_rows && (!p.causal || kb < b.past + grow0 + 64)) {
            const bf16* Ks = Kbuf + buf * NK * DP;
            const bf16* Vs = Vbuf + buf * NK * DP;
            float sc[NK / 8][4];
            // S = Q·Kᵀ: K is a K-major B operand (8 keys per 256 bytes); one slab (NK · 32 bytes) per k-step.
            const uint64_t desc_k = wgmma::make_desc_sw32(Ks, 16, 256);
            wgmma::fence();
#pragma unroll
            for (int ks = 0; ks < DP / 16; ++ks) {
                wgmma::wgmma_ss<NK>(sc, desc_q + ks * (kWgmmaBlockRows * 32 / 16),
                                    desc_k + ks * (NK * 32 / 16), ks > 0);
            }
            wgmma::commit();
            wgmma::wait<0>();
            wgmma::fence_operands(sc);
            mask_tile<DP, NK>(sc, b, p.causal, kb, grow0, qi0, qi1);
            st.template softmax_update<NK>(sc, scale_log2);
            uint32_t pa[NK / 16][4];
#pragma unroll
            for (int kk = 0; kk < NK / 16; ++kk) pack_weights<NK>(pa[kk], sc, kk);
            wgmma::issue_pv<DP, NK>(st.o, pa, Vs);  // O += P·V
            wgmma::wait<0>();
            wgmma::fence_operands(st.o);
        }
        if (refill) key_rows[buf * NK + tid] = next_row;
        __syncthreads();  // the next iteration's prefetch overwrites this buffer and reads key_rows
    }
    detail::cp_async_wait<0>();  // no copy may outlive the block (empty key range)
    st.reduce_l();
    if (qi0 < b.len_q) store_prefill_row<DP>(st, 0, qi0, b, p, out_stride, n_splits, ws_o, ws_lse);
    if (qi1 < b.len_q) store_prefill_row<DP>(st, 1, qi1, b, p, out_stride, n_splits, ws_o, ws_lse);
#else
    __trap();  // launched only on compute capability 9.0 (prefill_wgmma_available), where the sm_90a code
               // runs
#endif
}

// ---- warp-specialized schedule (AttentionPrefillParams::wgmma_warp_specialized) -------------------------
// Three warpgroups: warpgroup 0 only copies K/V tiles (cp.async) into a ring of stages (ws_stages), each
// stage's K and V completing on their own mbarrier (cp.async.mbarrier.arrive); warpgroups 1 and 2 only
// multiply, 64 query rows each, and hand a stage back on its `empty` mbarrier once both products that read it
// are done. No block barrier in the loop. A consumer's iteration j issues S_j = Q·K_jᵀ and then O +=
// P_{j−1}·V_{j−1} (P_{j−1} in registers), waits for S_j only, runs tile j's masking and softmax (new max,
// weights, denominator) while P·V still runs, then waits for it and rescales O (FlashAttention-3's
// intra-warpgroup overlap); the two consumers take turns issuing their products (FlashAttention-3's
// ping-pong). Each warpgroup multiplies every tile of the block (a wgmma under a branch the compiler cannot
// prove warpgroup-uniform is serialized): tiles past a group's rows' diagonal are masked whole. A block whose
// rows fit the first warpgroup (a sequence's last row block) runs it alone; the second leaves before the
// loop.
constexpr int kWsThreads = 384;

// Ring stages: four, or as many as fit in an SM's 227 KB beside Q, the key rows, the barriers and the pin
// (three at head_dim 128 / key tile 128 and at head_dim 80 / key tile 208). More than four (where they fit:
// the language model's key tile 64) gain nothing (docs/BENCHMARKS.md).
template <int DP, int NK>
constexpr int ws_stages() {
    constexpr int fit = static_cast<int>(
        (227 * 1024 - kWgmmaBlockRows * DP * 2 - 3 * NK * 4 - 3 * 4 * 8 - 16) / (2 * NK * DP * 2));
    return fit < 4 ? fit : 4;
}

template <int DP, int NK>
constexpr size_t ws_smem_bytes() {
    // Q [128][DP], K and V rings [stages][NK][DP] bf16 (32-byte swizzled), key source rows [3][NK] int32,
    // mbarriers full_k, full_v, empty [stages] each, a 16-byte pin slot (the consumers' softmax pin, below).
    return static_cast<size_t>(kWgmmaBlockRows + 2 * ws_stages<DP, NK>() * NK) * DP * 2 + 3 * NK * 4 +
           3 * ws_stages<DP, NK>() * 8 + 16;
}

#if SURF_WGMMA_ENABLED  // used only by the sm_90a kernel bodies
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Keeps a consumer's softmax ahead of its wait for P·V. Nothing but the weights' packing (after the wait: it
// overwrites the A fragments P·V is reading) consumes the softmax, so without this ptxas sinks all of it
// below the WARPGROUP.DEPBAR (the SASS then has the exponentials after the wait, and the intra-warpgroup
// overlap has nothing to overlap). A shared-memory store of the row sums (which need every exponential)
// followed by a barrier arrival (which orders the store; 128 arrivals complete it, nobody waits) cannot sink
// below the wait that follows it in program order.
__device__ __forceinline__ void pin_softmax(float* slot, float v, int group) {
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(detail::smem_addr(slot)), "f"(v) : "memory");
    named_barrier_arrive(5 + group, 128);
}
#endif

// TMA: a contiguous source's K/V tiles come by TMA instead (AttentionPrefillParams::kv_rows): thread 0 of the
// producer issues one box of 16 columns × NK rows a slab (tensor maps over the k and v rows, 32-byte swizzled
// like the slabs), each stage's K and V completing on their mbarrier by bytes.
template <int DP, int NK, bool TMA>
__global__ void __launch_bounds__(kWsThreads, 1)
    attention_prefill_wgmma_ws_kernel(AttentionPrefillParams p, float scale_log2, int64_t q_stride,
                                      int64_t out_stride, int n_splits, float* ws_o, float* ws_lse,
                                      const __grid_constant__ CUtensorMap tmap_k,
                                      const __grid_constant__ CUtensorMap tmap_v) {
    detail::pdl_prologue();
#if SURF_WGMMA_ENABLED
    static_assert(TMA || NK <= 128, "the cp.async producer fills a tile's key rows, one per thread");
    constexpr int kWsStages = ws_stages<DP, NK>();
    static_assert(kWsStages >= 2, "a ring of at least two stages");
    constexpr int kChunks = DP / 8, kTileChunks = NK * kChunks, kTilePasses = (kTileChunks + 127) / 128,
                  kTileElems = NK * DP;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [128][DP] 32-byte swizzled (wgmma.cuh)
    bf16* Kring = Qs + kWgmmaBlockRows * DP;  // [kWsStages][NK][DP]: tile t in stage (t − tile0) % kWsStages
    bf16* Vring = Kring + kWsStages * kTileElems;  // [kWsStages][NK][DP]
    int32_t* rows_buf =
        reinterpret_cast<int32_t*>(Vring + kWsStages * kTileElems);  // [3][NK], the producer's
    uint64_t* full_k = reinterpret_cast<uint64_t*>(
        rows_buf + 3 * NK);                 // [kWsStages]: 128 producer arrivals (TMA: 1 + bytes)
    uint64_t* full_v = full_k + kWsStages;  // [kWsStages]: the same
    uint64_t* empty = full_v + kWsStages;   // [kWsStages]: 8 consumer warps
    float* pin = reinterpret_cast<float*>(empty + kWsStages);  // written, never read (pin_softmax)
    const PrefillBlock b(p, kWgmmaBlockRows, NK, n_splits);
    if (b.empty()) return;
    const int tid = threadIdx.x, lane = tid & 31;
    const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // provably warp-uniform
    const int t0 = b.tile0, tn = b.n_tiles;
    // A block whose rows fit one warpgroup (a sequence's last row block: a ViT tile's 1,032 tokens leave 8)
    // runs one consumer: the second would multiply every tile for no rows (block-uniform).
    const bool solo = b.rows_here <= 64;
    if (tid == 0) {
        for (int s = 0; s < kWsStages; ++s) {
            detail::mbarrier_init(full_k + s, TMA ? 1 : 128);
            detail::mbarrier_init(full_v + s, TMA ? 1 : 128);
            detail::mbarrier_init(empty + s, solo ? 4 : 8);
        }
    }
    __syncthreads();
    // Registers move from the copying warpgroup to the multiplying ones (FlashAttention-3's setmaxnreg): the
    // launch gives each of the 384 threads 168; the producer keeps 24 (TMA: one thread issues) or 56
    // (cp.async address work; at 40 its copy loop spilled, hence also that loop's `unroll 8`), and each
    // consumer may rise by half of what its warpgroup released (an increase draws only on that): 240 / 224.
    // Needed by key tile 208 (≈ 210 live registers).
    constexpr int kProducerRegs = TMA ? 24 : 56, kConsumerRegs = 168 + (168 - kProducerRegs) / 2 / 8 * 8;
    if (wg == 0)
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));

    if (TMA && wg == 0) {  // ---- producer by TMA: thread 0 alone
        if (tid == 0) {
            const int col0 =
                (b.h / static_cast<int>(p.n_heads / p.n_kv_heads)) * b.D;  // the kv head's first column
            for (int t = t0; t < tn; ++t) {
                const int n = t - t0, stage = n % kWsStages, row = b.base_row + t * NK;
                if (n >= kWsStages)
                    detail::mbarrier_wait(empty + stage, static_cast<uint32_t>((n / kWsStages - 1) & 1));
                detail::mbarrier_arrive_expect_tx(full_k + stage, kTileElems * 2);
                for (int slab = 0; slab < DP / 16; ++slab) {
                    detail::tma_load_2d(Kring + stage * kTileElems + slab * NK * 16, &tmap_k,
                                        col0 + slab * 16, row, full_k + stage);
                }
                detail::mbarrier_arrive_expect_tx(full_v + stage, kTileElems * 2);
                for (int slab = 0; slab < DP / 16; ++slab) {
                    detail::tma_load_2d(Vring + stage * kTileElems + slab * NK * 16, &tmap_v,
                                        col0 + slab * 16, row, full_v + stage);
                }
            }
        }
        return;
    }
    if (wg == 0) {  // ---- producer by cp.async: tile t's K and V into stage (t − t0) % kWsStages
        // Key source rows of tile t sit in slot t % 3: tiles t0 and t0 + 1 here; tile t + 2's block-table
        // read is issued before tile t's copies and stored after them, into the slot tile t − 1 left (every
        // producer thread has passed iteration t's barrier, so it is done with tile t − 1).
        if (tid < NK) {
            rows_buf[(t0 % 3) * NK + tid] = b.key_row(t0 * NK + tid);
            rows_buf[((t0 + 1) % 3) * NK + tid] = b.key_row((t0 + 1) * NK + tid);
        }
        for (int t = t0; t < tn; ++t) {
            const int n = t - t0, stage = n % kWsStages;
            const bool refill = tid < NK && t + 2 < tn;
            const int32_t next_row = refill ? b.key_row((t + 2) * NK + tid) : 0;
            if (n >= kWsStages)
                detail::mbarrier_wait(empty + stage, static_cast<uint32_t>((n / kWsStages - 1) & 1));
            named_barrier_sync(1, 128);
            const int32_t* rows = rows_buf + (t % 3) * NK;
            for (int half = 0; half < 2; ++half) {
                const bf16* src = half == 0 ? b.k_src : b.v_src;
                unsigned char* d =
                    reinterpret_cast<unsigned char*>((half == 0 ? Kring : Vring) + stage * kTileElems);
#pragma unroll 8
                for (int pass = 0; pass < kTilePasses; ++pass) {
                    const int i = tid + pass * 128;
                    if (kTileChunks % 128 != 0 && i >= kTileChunks) break;
                    int row, col;
                    const int at = sw32_chunk<DP>(i, NK, row, col);
                    const int32_t r = rows[row];
                    const bool ok = r >= 0 && col < b.D;
                    cp_async16(d + at, src + (ok ? static_cast<int64_t>(r) * b.row_stride + col : 0), ok);
                }
                detail::cp_async_mbarrier_arrive(half == 0 ? full_k + stage : full_v + stage);
            }
            if (refill) rows_buf[((t + 2) % 3) * NK + tid] = next_row;
        }
        detail::cp_async_wait<0>();
        return;
    }

    // ---- consumers: warpgroups 1 and 2 (only 1 when solo), query rows 64·(wg − 1) …
    const int group = wg - 1, ctid = tid - 128, warp = (ctid >> 5) & 3;
    if (solo && group == 1) return;
    const int consumer_threads = solo ? 128 : 256;
    load_q_tile<DP>(Qs, b, p, q_stride, ctid, consumer_threads);
    detail::cp_async_commit();
    detail::cp_async_wait<0>();
    wgmma::fence_proxy_async_smem();
    named_barrier_sync(2, consumer_threads);

    WarpFlash<DP> st;
    st.init();
    const int grow0 = b.row0 + group * 64;                           // this warpgroup's first row (seq-local)
    const int qi0 = grow0 + warp * 16 + (lane >> 2), qi1 = qi0 + 8;  // this thread's two rows
    const uint64_t desc_q =
        wgmma::make_desc_sw32(reinterpret_cast<unsigned char*>(Qs) + group * 64 * 32, 16, 256);
    float sc[NK / 8][4];
    uint32_t pa[NK / 16][4];  // P_{j−1} as wgmma A fragments, read by the P·V product issued in iteration j
    auto stage_of = [&](int t) { return (t - t0) % kWsStages; };
    auto parity_of = [&](int t) { return static_cast<uint32_t>(((t - t0) / kWsStages) & 1); };
    // S_j = Q·K_jᵀ: K is a K-major B operand (8 keys per 256 bytes); one slab (NK · 32 bytes) per k-step.
    auto issue_scores = [&](int j) {
        detail::mbarrier_wait(full_k + stage_of(j), parity_of(j));
        // The cp.async producer's writes (generic proxy) must be fenced before wgmma's reads (async proxy);
        // TMA writes are already the async proxy's, complete once the mbarrier phase is (so the TMA path
        // skips the fence).
        if constexpr (!TMA) wgmma::fence_proxy_async_smem();
        const uint64_t desc_k = wgmma::make_desc_sw32(Kring + stage_of(j) * kTileElems, 16, 256);
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < DP / 16; ++ks) {
            scores_kstep<NK>(sc, desc_q + ks * (kWgmmaBlockRows * 32 / 16), desc_k + ks * (NK * 32 / 16),
                             ks > 0);
        }
        wgmma::commit();
    };
    // O += P_j·V_j once V_j has arrived.
    auto issue_pv = [&](int j) {
        detail::mbarrier_wait(full_v + stage_of(j), parity_of(j));
        if constexpr (!TMA) wgmma::fence_proxy_async_smem();
        wgmma::issue_pv<DP, NK>(st.o, pa, Vring + stage_of(j) * kTileElems);
    };
    // Tile j's masking and softmax on S_j (already waited for); O is left alone.
    auto softmax_weights = [&](int j, float(&alpha)[2]) -> bool {
        wgmma::fence_operands(sc);
        const int kb = j * NK;
        mask_tile<DP, NK>(sc, b, p.causal, kb, grow0, qi0, qi1);
        return st.template softmax_weights<NK>(sc, scale_log2, alpha);
    };
    auto finish_weights = [&](bool rescale, const float(&alpha)[2]) {
        if (rescale) st.rescale_o(alpha);
#pragma unroll
        for (int kk = 0; kk < NK / 16; ++kk) pack_weights<NK>(pa[kk], sc, kk);
    };
    // Both products that read tile j's stage are done (this warp's part): hand it back to the producer.
    auto release = [&](int j) {
        if (lane == 0) detail::mbarrier_arrive(empty + stage_of(j));
    };

    // Ping-pong: the two consumer warpgroups take turns issuing their products (named barriers 3 and 4), so
    // that one's softmax runs under the other's products. Warpgroup 1 lets warpgroup 0 go first and skips its
    // hand-over after its last turn (every arrival is matched). Faster on every prefill shape measured
    // (docs/BENCHMARKS.md). A solo consumer has no partner to take turns with.
    const bool turns = !solo;
    auto turn_begin = [&] {
        if (turns) named_barrier_sync(3 + group, 256);
    };
    auto turn_end = [&](bool last) {
        if (turns && !(group == 1 && last)) named_barrier_arrive(3 + (1 - group), 256);
    };
    if (turns && group == 1 && t0 < tn) named_barrier_arrive(3, 256);
    if (t0 < tn) {
        {  // j = t0: S only
            turn_begin();
            issue_scores(t0);
            turn_end(false);
            wgmma::wait<0>();
            float alpha[2];
            const bool rescale = softmax_weights(t0, alpha);
            finish_weights(rescale, alpha);
        }
        for (int j = t0 + 1; j < tn; ++j) {  // S_j beside P_{j−1}·V_{j−1}
            turn_begin();
            issue_scores(j);
            issue_pv(j - 1);
            turn_end(false);
            wgmma::wait<1>();  // S_j (committed first); P·V may still run
            float alpha[2];
            const bool rescale = softmax_weights(j, alpha);
            // Pins the softmax before the wait for P·V: its arithmetic (non-volatile, on registers only) may
            // otherwise be scheduled after the wait, which left the intra-warpgroup overlap with nothing to
            // overlap (SASS: the exponentials came after WARPGROUP.DEPBAR.LE gsb0, 0x0).
            pin_softmax(pin, st.l[0] + st.l[1], group);
            wgmma::wait<0>();
            wgmma::fence_operands(st.o);
            wgmma::fence_operands(pa);
            release(j - 1);
            finish_weights(rescale, alpha);
        }
        turn_begin();
        issue_pv(tn - 1);  // P·V only
        turn_end(true);
        wgmma::wait<0>();
        wgmma::fence_operands(st.o);
    }
    st.reduce_l();
    if (qi0 < b.len_q) store_prefill_row<DP>(st, 0, qi0, b, p, out_stride, n_splits, ws_o, ws_lse);
    if (qi1 < b.len_q) store_prefill_row<DP>(st, 1, qi1, b, p, out_stride, n_splits, ws_o, ws_lse);
#else
    __trap();  // launched only on compute capability 9.0 (prefill_wgmma_available), where the sm_90a code
               // runs
#endif
}

// ---- host side ----------------------------------------------------------------------------------------

// A 2D tensor map over `rows` rows of `cols` bf16 at a row stride of `stride` elements, read in boxes of 16
// columns × box_rows rows into 32-byte-swizzled slabs (wgmma.cuh's layout).
CUtensorMap slab_tensor_map(const bf16* base, int64_t cols, int64_t rows, int64_t stride, int box_rows) {
    return detail::bf16_tensor_map_2d(base, cols, rows, stride, 16, box_rows, CU_TENSOR_MAP_SWIZZLE_32B,
                                      "attention_prefill");
}

// Whether the warp-specialized kernel's K/V tiles come by TMA: a contiguous source whose rows are given and
// whose k, v and row stride are 16-byte aligned.
bool kv_by_tma(const AttentionPrefillParams& p) {
    return p.k_cache == nullptr && p.kv_rows > 0 && p.kv_rows < (int64_t{1} << 31) && aligned16(p.k) &&
           aligned16(p.v) && p.kv_stride % 8 == 0;
}

// Kernel kinds: 0 = two warpgroups that copy and multiply; 1 = warp-specialized, cp.async producer; 2 =
// warp-specialized, TMA producer. Each kernel gets its shared-memory allowance on the current device (a
// per-device attribute, so set on every call: engines on several GPUs share this code).
template <int DP, int NK, int KIND>
constexpr size_t smem_bytes() {
    return KIND ? ws_smem_bytes<DP, NK>() : wgmma_smem_bytes<DP, NK>();
}

template <int DP, int NK, int KIND>
auto* prepared_kernel() {
    auto* kernel = [] {
        if constexpr (KIND == 0)
            return attention_prefill_wgmma_kernel<DP, NK>;
        else
            return attention_prefill_wgmma_ws_kernel<DP, NK, KIND == 2>;
    }();
    SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_bytes<DP, NK, KIND>())));
    // The largest shared-memory carve-out, as the TMA decode kernel beside it asks (an SM's blocks share
    // one).
    SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         cudaSharedmemCarveoutMaxShared));
    return kernel;
}

template <int DP, int NK, int KIND>
int blocks_per_sm() {
    int n = 0;
    SURF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &n, prepared_kernel<DP, NK, KIND>(), KIND ? kWsThreads : kThreads, smem_bytes<DP, NK, KIND>()));
    return std::max(n, 1);
}

template <int DP, int NK>
void launch(const AttentionPrefillParams& p, int n_splits, float scale_log2, int64_t q_stride,
            int64_t out_stride, float* ws_o, float* ws_lse, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((p.max_seqlen_q + kWgmmaBlockRows - 1) / kWgmmaBlockRows),
                    static_cast<unsigned>(p.n_heads * n_splits), static_cast<unsigned>(p.n_seq));
    if (p.wgmma_warp_specialized && kv_by_tma(p)) {
        const int64_t cols = p.n_kv_heads * p.head_dim;
        const CUtensorMap mk = slab_tensor_map(p.k, cols, p.kv_rows, p.kv_stride, NK);
        const CUtensorMap mv = slab_tensor_map(p.v, cols, p.kv_rows, p.kv_stride, NK);
        detail::launch_kernel(prepared_kernel<DP, NK, 2>(), grid, kWsThreads, smem_bytes<DP, NK, 2>(), stream,
                              p, scale_log2, q_stride, out_stride, n_splits, ws_o, ws_lse, mk, mv);
    } else if constexpr (NK > 128) {  // built only for the TMA path (prefill_wgmma_key_tile)
        SURF_CHECK(false, "attention_prefill: a key tile of ", NK,
                   " needs the warp-specialized kernel's TMA path");
    } else if (p.wgmma_warp_specialized) {
        const CUtensorMap none{};
        detail::launch_kernel(prepared_kernel<DP, NK, 1>(), grid, kWsThreads, smem_bytes<DP, NK, 1>(), stream,
                              p, scale_log2, q_stride, out_stride, n_splits, ws_o, ws_lse, none, none);
    } else {
        detail::launch_kernel(prepared_kernel<DP, NK, 0>(), grid, kThreads, smem_bytes<DP, NK, 0>(), stream,
                              p, scale_log2, q_stride, out_stride, n_splits, ws_o, ws_lse);
    }
    SURF_CUDA_CHECK_LAUNCH();
}

template <int NK>
void launch_dp(const AttentionPrefillParams& p, int dp, int n_splits, float scale_log2, int64_t q_stride,
               int64_t out_stride, float* ws_o, float* ws_lse, cudaStream_t stream) {
    switch (dp) {
        case 16: launch<16, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        case 48: launch<48, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        case 80: launch<80, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        default: launch<128, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
    }
}

template <int NK, int KIND>
int blocks_per_sm_dp(int dp) {
    switch (dp) {
        case 16: return blocks_per_sm<16, NK, KIND>();
        case 48: return blocks_per_sm<48, NK, KIND>();
        case 80: return blocks_per_sm<80, NK, KIND>();
        default: return blocks_per_sm<128, NK, KIND>();
    }
}

}  // namespace

namespace flash {

bool prefill_wgmma_available() {
    return detail::device_runs_sm90a();
}

int prefill_wgmma_key_tile(const AttentionPrefillParams& p, int dp) {
    if (p.wgmma_key_tile <= 128) return static_cast<int>(p.wgmma_key_tile);
    return p.wgmma_warp_specialized && kv_by_tma(p) && dp == 80 ? static_cast<int>(p.wgmma_key_tile) : 128;
}

int prefill_wgmma_blocks_per_sm(int dp, int keys, bool warp_specialized) {
    if (keys == 208) return blocks_per_sm<80, 208, 2>();
    if (warp_specialized) return keys == 64 ? blocks_per_sm_dp<64, 1>(dp) : blocks_per_sm_dp<128, 1>(dp);
    return keys == 64 ? blocks_per_sm_dp<64, 0>(dp) : blocks_per_sm_dp<128, 0>(dp);
}

void launch_prefill_wgmma(const AttentionPrefillParams& p, int dp, int keys, int n_splits, float scale_log2,
                          int64_t q_stride, int64_t out_stride, float* ws_o, float* ws_lse,
                          cudaStream_t stream) {
    if (keys > 128)
        SURF_CHECK(dp == 80, "attention_prefill: a key tile of ", keys, " is built for head dim 80 only");
    if (keys == 64)
        launch_dp<64>(p, dp, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream);
    else if (keys == 208)
        launch<80, 208>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream);
    else
        launch_dp<128>(p, dp, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream);
}

}  // namespace flash

}  // namespace surf::kernels::cuda
