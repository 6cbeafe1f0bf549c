// A mixed step's attention in one launch (sm_90a, head dim 128): the prompt chunks' causal prefill rows and
// the decode rows, so that every SM multiplies prefill tiles (compute-bound, K/V from the L2) while it
// streams decode tiles (DRAM-bound) — which two kernels side by side do not achieve: a decode block small
// enough to sit beside a full-rate prefill block is too slow on mma.sync (docs/BENCHMARKS.md).
//   * persistent: one block an SM, three warpgroups. Warpgroup 0 copies (two warps a ring, cp.async through
//   the page
//     table), warpgroups 1 and 2 multiply, each from its own 3-stage ring of 64-key K/V tiles
//     (32-byte-swizzled slabs, wgmma.cuh's layout);
//   * work items come from two global queues taken with atomics: prefill items (sequence, 64 query rows,
//   head; last
//     rows first) and decode items (sequence, key split, kv head). Ring 0 prefers prefill items, ring 1
//     decode items; each takes the other kind once its own queue is empty, so the SM's two consumers end
//     together;
//   * a prefill item is one warpgroup's 64 query rows: S = Q·Kᵀ on wgmma with Q in registers, the online
//   softmax of
//     attention_flash.cuh on the accumulators, O += P·V on wgmma (P from registers);
//   * a decode item packs the kv head's query heads (the GQA group, ≤ 16) as the first rows of warp 0's 16:
//   the same
//     two products at 64 rows (warps 1–3 multiply zeros and skip the softmax). The tensor cores do ≈ 13× the
//     useful work, which is still far under the tile's DRAM time; the split results are merged by a small
//     combine kernel (splits past a sequence's length are never made);
//   * no L2 cache hint on the copies (AttentionDecodeParams::l2_evict_first is not used): with the hint's
//   policy chosen per
//     item, ptxas 13.0 emits the copies with a cache-policy operand in uniform registers it never sets (an
//     illegal instruction at run time);
//   * the producer hands each stage over with its item (StageMeta) on the stage's `full` mbarrier; a consumer
//   hands
//     it back on `empty`; an end marker closes the ring.
// The queues' counters (three ints, zero before the first launch) are reset by the last ring to finish.
// Correct against the CPU reference but slower than the two-kernel pair, in the layer and in serving, so the
// engine keeps it off (GpuLimits::attention_mixed; numbers in docs/BENCHMARKS.md). Each side alone in this
// launch is slower than its own kernel, and the two sides hide little of each other. Deferring the prefill
// consumer's P·V to the next tile's S does not help, so its limit is not the product chain; the suspect is
// that each consumer copies its own K/V (64-row items: twice the L2 → shared-memory bytes and copy
// instructions of the 128-row warp-specialized kernel, whose two consumers share a tile). Next: an Nsight
// Compute profile of this kernel (docs/KERNELS.md "Known gaps").
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace surf::kernels::cuda {

namespace {

using namespace flash;

constexpr int kD = 128;                       // head dim (the only one built)
constexpr int kKeys = 64;                     // keys a tile
constexpr int kRows = 64;                     // query rows of a prefill item (one warpgroup)
constexpr int kStages = 3;                    // ring stages a consumer
constexpr int kRings = 2;                     // consumers (warpgroups 1 and 2)
constexpr int kThreads = 128 * (1 + kRings);  // 384
constexpr int kProducerThreads = 64;          // a ring's producer: two warps of warpgroup 0
constexpr int kTileBytes = kKeys * kD * 2;    // K (or V) of a tile
constexpr int kStageBytes = 2 * kTileBytes;   // K then V
constexpr int kTileChunks = kKeys * kD / 8;   // 16-byte chunks of a K (or V) tile
constexpr int kMaxGroup = 16;                 // decode: query heads a kv head (rows g and g + 8 of warp 0)
constexpr int kQSlotStride =
    kD * 2 + 16;  // a decode item's query rows in its first stage: bytes a row (padded: no conflicts)
constexpr int kQSlotBytes = kMaxGroup * kQSlotStride;

enum : int { kPrefill = 0, kDecode = 1, kEnd = 2 };
constexpr int kFirst = 1, kLast = 2;

// The item a stage's tile belongs to. Prefill: seq = sequence, head = query head, pos = first query row
// (sequence- local). Decode: seq = batch row, head = kv head, pos = split. kb = the tile's first key.
struct StageMeta {
    int kind, seq, head, pos, kb, flags;
};

struct MixedArgs {
    float scale_log2;
    int64_t q_stride_pre, out_stride_pre, q_stride_dec;
    int dec_splits, dec_part;
    float* ws_o;        // [batch · n_heads · dec_splits][kD]: each split's normalised partial result
    float* ws_lse;      // [batch · n_heads · dec_splits]: its log2-sum-exp
    int32_t* counters;  // [3]: prefill items taken, decode items taken, rings finished
};

// Shared memory: the rings [kRings][kStages][K | V], the decode query slots [kRings][kStages], then full /
// empty mbarriers [kRings][kStages] each, the stage metadata [kRings][kStages], the producers' key rows
// [kRings][kStages][kKeys], their item mailboxes [kRings][2], and the two queues' prefix sums over sequences
// (prefill [n_seq + 1], decode [batch + 1]).
constexpr size_t kRingBytes = static_cast<size_t>(kRings) * kStages * kStageBytes;
constexpr size_t kQSlotsBytes = static_cast<size_t>(kRings) * kStages * kQSlotBytes;
constexpr size_t kFixedSmem = kRingBytes + kQSlotsBytes + 2 * kRings * kStages * 8 +
                              kRings * kStages * sizeof(StageMeta) + kRings * kStages * kKeys * 4 +
                              kRings * 2 * 4;

size_t smem_bytes(int64_t n_seq, int64_t batch) {
    return kFixedSmem + static_cast<size_t>(n_seq + 1 + batch + 1) * 4;
}

#if SURF_WGMMA_ENABLED
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
#endif

// out[0] = 0, out[i + 1] = count(0) + … + count(i), by one warp.
template <typename Count>
__device__ void warp_prefix(int32_t* out, int n, int lane, Count count) {
    if (lane == 0) out[0] = 0;
    int carry = 0;
    for (int base = 0; base < n; base += 32) {
        const int i = base + lane;
        int c = i < n ? count(i) : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, c, o);
            if (lane >= o) c += y;
        }
        if (i < n) out[i + 1] = carry + c;
        carry += __shfl_sync(0xffffffffu, c, 31);
    }
}

// The sequence whose items hold item i: the last s in [0, n) with prefix[s] ≤ i.
__device__ __forceinline__ int find_seq(const int32_t* prefix, int n, int i) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (prefix[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Copies a 64-key K/V tile into a stage (32-byte-swizzled slabs) from the cache rows `rows` lists (−1:
// zeros), one ring's 64 producer threads together. kEvictFirst: under the L2 evict-first policy, made here
// for the branch that uses it — chosen per item through one register, ptxas 13.0 compiles the policy to
// copies whose policy operand is never set (an illegal instruction at run time).
template <bool kEvictFirst>
__device__ __forceinline__ void copy_kv_tile(unsigned char* Kd, unsigned char* Vd, const int32_t* rows,
                                             const bf16* k_src, const bf16* v_src, int64_t row_stride,
                                             int64_t col0, int ptid) {
    uint64_t pol = 0;
    if constexpr (kEvictFirst) pol = detail::l2_policy(true);
#pragma unroll 4
    for (int i = ptid; i < kTileChunks; i += kProducerThreads) {
        int rr, col;
        const int at = wgmma::sw32_chunk<kD>(i, kKeys, rr, col);
        const int32_t src = rows[rr];
        const int64_t off = src >= 0 ? src * row_stride + col0 + col : 0;
        if constexpr (kEvictFirst) {
            detail::cp_async16(Kd + at, k_src + off, src >= 0, pol);
            detail::cp_async16(Vd + at, v_src + off, src >= 0, pol);
        } else {
            detail::cp_async16(Kd + at, k_src + off, src >= 0);
            detail::cp_async16(Vd + at, v_src + off, src >= 0);
        }
    }
}

__global__ void __launch_bounds__(kThreads, 1)
    attention_mixed_kernel(AttentionPrefillParams P, AttentionDecodeParams Dp, MixedArgs a) {
    detail::pdl_prologue();
#if SURF_WGMMA_ENABLED
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* rings = smem_raw;
    unsigned char* qslots = smem_raw + kRingBytes;                                       // [kRings][kStages]
    uint64_t* full = reinterpret_cast<uint64_t*>(smem_raw + kRingBytes + kQSlotsBytes);  // [kRings][kStages]
    uint64_t* empty = full + kRings * kStages;                                           // [kRings][kStages]
    StageMeta* meta = reinterpret_cast<StageMeta*>(empty + kRings * kStages);
    int32_t* key_rows = reinterpret_cast<int32_t*>(meta + kRings * kStages);  // [kRings][kStages][kKeys]
    int32_t* mailbox = key_rows + kRings * kStages * kKeys;                   // [kRings][2]
    int32_t* pre_prefix = mailbox + kRings * 2;                               // [n_seq + 1]
    int32_t* dec_prefix = pre_prefix + P.n_seq + 1;                           // [batch + 1]
    const int tid = threadIdx.x, lane = tid & 31;
    const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // provably warp-uniform
    const int n_heads = static_cast<int>(P.n_heads), n_kv = static_cast<int>(P.n_kv_heads),
              group = n_heads / n_kv;
    const int n_pre_seq = static_cast<int>(P.n_seq), batch = static_cast<int>(Dp.batch);

    if (tid == 0) {
        for (int i = 0; i < kRings * kStages; ++i) {
            detail::mbarrier_init(full + i,
                                  kProducerThreads + 1);  // each producer thread's copies + the metadata
            detail::mbarrier_init(empty + i, 4);          // the consumer's four warps
        }
    }
    if (tid < 32) {
        warp_prefix(pre_prefix, n_pre_seq, lane, [&](int s) {
            const int len_q = P.cu_seqlens_q[s + 1] - P.cu_seqlens_q[s];
            return (len_q + kRows - 1) / kRows * n_heads;
        });
    } else if (tid < 64) {
        warp_prefix(dec_prefix, batch, lane,
                    [&](int b) { return (Dp.seq_lens[b] + a.dec_part - 1) / a.dec_part * n_kv; });
    }
    __syncthreads();
    const int total_pre = pre_prefix[n_pre_seq], total_dec = dec_prefix[batch];

    // Registers move from the copying warpgroup to the multiplying ones (as in attention_wgmma.cu's
    // warp-specialized kernel): ptxas allocates each role's code within its count. Without it the consumers'
    // S, P·V and softmax state do not fit 168 and ptxas serializes their wgmma (C7512).
    constexpr int kProducerRegs = 72, kConsumerRegs = 216;
    if (wg == 0)
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));

    if (wg == 0) {  // ---- producers: warps 0–1 fill ring 0, warps 2–3 ring 1
        const int r = tid / kProducerThreads, ptid = tid % kProducerThreads, bar = 1 + r;
        unsigned char* ring = rings + static_cast<size_t>(r) * kStages * kStageBytes;
        uint64_t* full_r = full + r * kStages;
        uint64_t* empty_r = empty + r * kStages;
        StageMeta* meta_r = meta + r * kStages;
        int32_t* rows_r = key_rows + r * kStages * kKeys;
        bool exhausted_pre = false, exhausted_dec = false;  // thread ptid 0's view
        const int prefer = r;                               // ring 0: prefill first; ring 1: decode first
        uint32_t n = 0;                                     // tiles handed over
        // Thread ptid 0 asks for the next item while the current one's tiles go out (the atomic's latency
        // hides behind them): ask_q is the queue asked (−1: none left), ask_i its answer, checked only when
        // the item is needed.
        int ask_q = -1, ask_i = 0;
        auto ask = [&] {
            ask_q = -1;
            for (int k = 0; k < 2; ++k) {
                const int q = k == 0 ? prefer : 1 - prefer;
                if (q == kPrefill ? exhausted_pre : exhausted_dec) continue;
                ask_q = q, ask_i = atomicAdd(a.counters + q, 1);
                return;
            }
        };
        if (ptid == 0) ask();
        auto take_stage = [&]() -> int {
            const int stage = static_cast<int>(n % kStages);
            if (n >= kStages) detail::mbarrier_wait(empty_r + stage, ((n / kStages) - 1) & 1);
            return stage;
        };
        for (;;) {
            named_barrier_sync(bar, kProducerThreads);  // every thread has read the mailbox
            if (ptid == 0) {
                int kind = kEnd, idx = 0;
                while (ask_q >= 0) {
                    if (ask_i < (ask_q == kPrefill ? total_pre : total_dec)) {
                        kind = ask_q, idx = ask_i;
                        break;
                    }
                    if (ask_q == kPrefill)
                        exhausted_pre = true;
                    else
                        exhausted_dec = true;
                    ask();
                }
                mailbox[2 * r] = kind, mailbox[2 * r + 1] = idx;
                if (kind != kEnd) ask();
            }
            named_barrier_sync(bar, kProducerThreads);
            // Read once by lane 0 and broadcast, so that the compiler knows them warp-uniform.
            const int kind = __shfl_sync(0xffffffffu, lane == 0 ? mailbox[2 * r] : 0, 0);
            const int idx = __shfl_sync(0xffffffffu, lane == 0 ? mailbox[2 * r + 1] : 0, 0);
            if (kind == kEnd) break;
            // The item's keys [0 or start, k_end) from its sequence's pages.
            int seq, head, pos, k0, k_end, kvh;
            const int32_t* table;
            const bf16 *k_src, *v_src;
            if (kind == kPrefill) {
                seq = find_seq(pre_prefix, n_pre_seq, idx);
                const int j = idx - pre_prefix[seq];
                const int len_q = P.cu_seqlens_q[seq + 1] - P.cu_seqlens_q[seq], len_k = P.seq_lens_k[seq];
                const int blocks = (len_q + kRows - 1) / kRows;
                head = j % n_heads, pos = (blocks - 1 - j / n_heads) * kRows, kvh = head / group;
                k0 = 0, k_end = min(len_k, len_k - len_q + pos +
                                               min(kRows, len_q - pos));  // causal: the last row's diagonal
                table = P.block_table + static_cast<int64_t>(seq) * P.max_pages_per_seq;
                k_src = P.k_cache, v_src = P.v_cache;
            } else {
                seq = find_seq(dec_prefix, batch, idx);
                const int j = idx - dec_prefix[seq];
                head = kvh = j % n_kv, pos = j / n_kv;
                k0 = pos * a.dec_part, k_end = min(Dp.seq_lens[seq], k0 + a.dec_part);
                table = Dp.block_table + static_cast<int64_t>(seq) * Dp.max_pages_per_seq;
                k_src = Dp.k_cache, v_src = Dp.v_cache;
            }
            const int page_size = static_cast<int>(kind == kPrefill ? P.page_size : Dp.page_size);
            const int64_t row_stride = static_cast<int64_t>(n_kv) * kD, col0 = static_cast<int64_t>(kvh) * kD;
            auto row_of = [&](int kb) -> int32_t {
                const int key = kb + ptid;
                return key < k_end ? __ldg(table + key / page_size) * page_size + key % page_size : -1;
            };
            int32_t row = row_of(k0);
            for (int kb = k0; kb < k_end; kb += kKeys) {
                const int stage = take_stage();
                rows_r[stage * kKeys + ptid] = row;
                const int32_t next =
                    kb + kKeys < k_end ? row_of(kb + kKeys) : -1;  // its latency hides behind the copies
                named_barrier_sync(bar, kProducerThreads);
                const int32_t* rows = rows_r + stage * kKeys;
                unsigned char* Kd = ring + static_cast<size_t>(stage) * kStageBytes;
                unsigned char* Vd = Kd + kTileBytes;
                // The decode rows' K/V marked evict-first in the L2 (AttentionDecodeParams::l2_evict_first).
                if (kind == kDecode && Dp.l2_evict_first)
                    copy_kv_tile<true>(Kd, Vd, rows, k_src, v_src, row_stride, col0, ptid);
                else
                    copy_kv_tile<false>(Kd, Vd, rows, k_src, v_src, row_stride, col0, ptid);
                if (kind == kDecode && kb == k0) {  // the item's query rows, for its consumer's first tile
                    unsigned char* qs = qslots + static_cast<size_t>(r * kStages + stage) * kQSlotBytes;
                    const bf16* qsrc = Dp.q + seq * a.q_stride_dec + static_cast<int64_t>(kvh) * group * kD;
                    for (int c = ptid; c < group * (kD / 8); c += kProducerThreads) {
                        const int qr = c / (kD / 8), ch = c % (kD / 8);
                        detail::cp_async16(qs + qr * kQSlotStride + ch * 16, qsrc + qr * kD + ch * 8, true);
                    }
                }
                if (ptid == 0) {
                    const int flags = (kb == k0 ? kFirst : 0) | (kb + kKeys >= k_end ? kLast : 0);
                    meta_r[stage] = StageMeta{kind, seq, head, pos, kb, flags};
                }
                detail::cp_async_mbarrier_arrive(full_r + stage);
                if (ptid == 0) detail::mbarrier_arrive(full_r + stage);
                ++n;
                row = next;
            }
        }
        const int stage = take_stage();  // the end marker
        if (ptid == 0) meta_r[stage] = StageMeta{kEnd, 0, 0, 0, 0, 0};
        detail::cp_async_mbarrier_arrive(full_r + stage);
        if (ptid == 0) detail::mbarrier_arrive(full_r + stage);
        detail::cp_async_wait<0>();
        if (ptid == 0) {  // the last ring to finish re-arms the queues for the next launch (every fetch is
                          // done by then)
            __threadfence();
            if (atomicAdd(a.counters + 2, 1) == kRings * static_cast<int>(gridDim.x) - 1) {
                atomicExch(a.counters + 0, 0);
                atomicExch(a.counters + 1, 0);
                atomicExch(a.counters + 2, 0);
            }
        }
    } else {  // ---- consumers: warpgroup 1 takes ring 0, warpgroup 2 ring 1
        const int r = wg - 1, ctid = tid - 128 * wg, warp = ctid >> 5, g = lane >> 2, t = lane & 3;
        const unsigned char* ring = rings + static_cast<size_t>(r) * kStages * kStageBytes;
        uint64_t* full_r = full + r * kStages;
        uint64_t* empty_r = empty + r * kStages;
        const StageMeta* meta_r = meta + r * kStages;
        WarpFlash<kD> st;
        uint32_t qf[kD / 16][4];

        // The current item: kind, and per kind what masking and the output need.
        int kind = kPrefill, seq = 0, head = 0, pos = 0, q0 = 0, len_q = 0, len_k = 0, past = 0, k_end = 0;
        int qi0 = 0, qi1 = 0;
        for (uint32_t n = 0;; ++n) {
            const int stage = static_cast<int>(n % kStages);
            detail::mbarrier_wait(full_r + stage, (n / kStages) & 1);
            const StageMeta m = meta_r[stage];
            if (m.kind == kEnd) break;
            if (m.flags &
                kFirst) {  // a new item: its bounds and its Q fragments (rows past the item's, zero)
                kind = m.kind, seq = m.seq, head = m.head, pos = m.pos;
                const bf16* q_row0 = nullptr;
                const bf16* q_row1 = nullptr;
                if (kind == kPrefill) {
                    q0 = P.cu_seqlens_q[seq], len_q = P.cu_seqlens_q[seq + 1] - q0, len_k = P.seq_lens_k[seq],
                    past = len_k - len_q;
                    qi0 = pos + warp * 16 + g, qi1 = qi0 + 8;
                    const bf16* qh = P.q + static_cast<int64_t>(head) * kD;
                    if (qi0 < len_q) q_row0 = qh + (q0 + qi0) * a.q_stride_pre;
                    if (qi1 < len_q) q_row1 = qh + (q0 + qi1) * a.q_stride_pre;
                } else {  // from the stage's query slot (the producer copied the group's rows with the tile)
                    k_end = min(Dp.seq_lens[seq], (pos + 1) * a.dec_part);
                    const unsigned char* qs = qslots + static_cast<size_t>(r * kStages + stage) * kQSlotBytes;
                    if (warp == 0 && g < group) q_row0 = reinterpret_cast<const bf16*>(qs + g * kQSlotStride);
                    if (warp == 0 && g + 8 < group)
                        q_row1 = reinterpret_cast<const bf16*>(qs + (g + 8) * kQSlotStride);
                }
#pragma unroll
                for (int ks = 0; ks < kD / 16; ++ks) {
                    const int c = ks * 16 + 2 * t;
                    qf[ks][0] = q_row0 ? *reinterpret_cast<const uint32_t*>(q_row0 + c) : 0u;
                    qf[ks][1] = q_row1 ? *reinterpret_cast<const uint32_t*>(q_row1 + c) : 0u;
                    qf[ks][2] = q_row0 ? *reinterpret_cast<const uint32_t*>(q_row0 + c + 8) : 0u;
                    qf[ks][3] = q_row1 ? *reinterpret_cast<const uint32_t*>(q_row1 + c + 8) : 0u;
                }
                st.init();
            }
            const unsigned char* Kt = ring + static_cast<size_t>(stage) * kStageBytes;
            // S = Q·Kᵀ: K is a K-major B operand (8 keys per 256 bytes); one slab (64 keys · 32 bytes) per
            // k-step.
            float sc[kKeys / 8][4];
            const uint64_t desc_k = wgmma::make_desc_sw32(Kt, 16, 256);
            wgmma::fence();
#pragma unroll
            for (int ks = 0; ks < kD / 16; ++ks)
                wgmma::wgmma_rs_k64(sc, qf[ks], desc_k + ks * (kKeys * 32 / 16), ks > 0);
            wgmma::commit();
            wgmma::wait<0>();
            wgmma::fence_operands(sc);
            uint32_t pa[kKeys / 16][4];
            if (kind == kPrefill || warp == 0) {  // warp-uniform: a decode item's rows are warp 0's
                int lim0, lim1;
                if (kind == kPrefill) {
                    const int lim = len_k - m.kb;
                    lim0 = min(lim, past + qi0 + 1 - m.kb), lim1 = min(lim, past + qi1 + 1 - m.kb);
                } else {
                    const int lim = k_end - m.kb;
                    lim0 = g < group ? lim : 0, lim1 = g + 8 < group ? lim : 0;
                }
                if (lim0 < kKeys || lim1 < kKeys) WarpFlash<kD>::mask<kKeys>(sc, lim0, lim1);
                float alpha[2];
                if (st.softmax_weights<kKeys>(sc, a.scale_log2, alpha)) st.rescale_o(alpha);
#pragma unroll
                for (int kk = 0; kk < kKeys / 16; ++kk) pack_weights<kKeys>(pa[kk], sc, kk);
            } else {
#pragma unroll
                for (int kk = 0; kk < kKeys / 16; ++kk) pa[kk][0] = pa[kk][1] = pa[kk][2] = pa[kk][3] = 0u;
            }
            // O += P·V, complete before the next tile (deferring it to the next tile's S, FlashAttention-3's
            // intra-warpgroup overlap, is slower here; docs/BENCHMARKS.md).
            wgmma::issue_pv<kD, kKeys>(st.o, pa, Kt + kTileBytes);
            wgmma::wait<0>();
            wgmma::fence_operands(st.o);
            wgmma::fence_operands(pa);
            __syncwarp();
            if (lane == 0) detail::mbarrier_arrive(empty_r + stage);  // this warp is done with the stage
            if (!(m.flags & kLast)) continue;
            // The item's last tile: write its rows.
            st.reduce_l();
            if (kind == kPrefill) {
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const int qi = rr ? qi1 : qi0;
                    if (qi >= len_q) continue;
                    const float inv = st.l[rr] > 0.0f ? 1.0f / st.l[rr] : 0.0f;
                    bf16* out = P.out + static_cast<int64_t>(q0 + qi) * a.out_stride_pre +
                                static_cast<int64_t>(head) * kD;
#pragma unroll
                    for (int dt = 0; dt < kD / 8; ++dt) {
                        const int col = dt * 8 + 2 * t;
                        *reinterpret_cast<uint32_t*>(out + col) =
                            detail::pack_bf16x2(st.o[dt][2 * rr] * inv, st.o[dt][2 * rr + 1] * inv);
                    }
                }
            } else if (warp == 0) {
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const int row = g + 8 * rr;
                    if (row >= group) continue;
                    const float inv = st.l[rr] > 0.0f ? 1.0f / st.l[rr] : 0.0f;
                    const int64_t idx =
                        (static_cast<int64_t>(seq) * n_heads + head * group + row) * a.dec_splits + pos;
                    float* o = a.ws_o + idx * kD;
#pragma unroll
                    for (int dt = 0; dt < kD / 8; ++dt) {
                        const int col = dt * 8 + 2 * t;
                        *reinterpret_cast<float2*>(o + col) =
                            make_float2(st.o[dt][2 * rr] * inv, st.o[dt][2 * rr + 1] * inv);
                    }
                    if (t == 0) a.ws_lse[idx] = st.l[rr] > 0.0f ? st.m[rr] + log2f(st.l[rr]) : -INFINITY;
                }
            }
        }
    }
#else
    __trap();  // launched only where attention_mixed_usable holds (compute capability 9.0)
#endif
}

// Merges each (row, head)'s splits: only splits that hold keys (split · part < the row's length) were
// written.
__global__ void attention_mixed_combine_kernel(AttentionDecodeParams p, int splits, int part,
                                               const float* ws_o, const float* ws_lse) {
    detail::pdl_prologue();
    const int64_t bh = blockIdx.x;
    const int b = static_cast<int>(bh / p.n_heads);
    const int used = min(splits, (p.seq_lens[b] + part - 1) / part);
    const float* lse = ws_lse + bh * splits;
    float M = -INFINITY;
    for (int s = 0; s < used; ++s) M = fmaxf(M, lse[s]);
    for (int col = threadIdx.x; col < kD; col += blockDim.x) {
        float num = 0.0f, den = 0.0f;
        if (M != -INFINITY) {
            for (int s = 0; s < used; ++s) {
                const float w = exp2f(lse[s] - M);
                den += w;
                num += w * ws_o[(bh * splits + s) * kD + col];
            }
        }
        p.out[bh * kD + col] = __float2bfloat16_rn(den > 0.0f ? num / den : 0.0f);
    }
}

struct MixedPlan {
    int splits, part;
};

// Decode items of about equal keys, ≈ 12 a consumer over the GPU (the queues even out the rest; each item
// costs its producer a page-table and an item lookup), ≥ 512 keys each.
MixedPlan plan_mixed(const AttentionDecodeParams& d) {
    const int64_t max_len = std::max<int64_t>(d.max_seq_len, 1);
    const int64_t base = std::max<int64_t>(d.batch * d.n_kv_heads, 1);
    int64_t splits = d.n_splits;
    if (splits <= 0)
        splits =
            std::clamp<int64_t>((24 * detail::device_sm_count() + base - 1) / base, 1, (max_len + 511) / 512);
    int64_t part = (max_len + splits - 1) / splits;
    part = (part + kKeys - 1) / kKeys * kKeys;
    splits = (max_len + part - 1) / part;
    return {static_cast<int>(splits), static_cast<int>(part)};
}

}  // namespace

bool attention_mixed_usable(const AttentionPrefillParams& p, const AttentionDecodeParams& d) {
    return p.n_seq > 0 && d.batch > 0 && p.k_cache && p.v_cache && p.causal && p.head_dim == kD &&
           d.head_dim == kD && p.n_heads == d.n_heads && p.n_kv_heads == d.n_kv_heads && d.n_kv_heads > 0 &&
           d.n_heads % d.n_kv_heads == 0 && d.n_heads / d.n_kv_heads <= kMaxGroup &&
           d.max_seq_len < (int64_t{1} << 30) && smem_bytes(p.n_seq, d.batch) <= 227 * 1024 &&
           flash::aligned16(p.k_cache) && flash::aligned16(p.v_cache) && flash::aligned16(d.k_cache) &&
           flash::aligned16(d.v_cache) && flash::aligned16(d.q) && d.q_stride % 8 == 0 &&
           detail::device_runs_sm90a();
}

size_t attention_mixed_workspace_bytes(const AttentionDecodeParams& d) {
    const MixedPlan plan = plan_mixed(d);
    return std::max(static_cast<size_t>(d.batch * d.n_heads * plan.splits) * (kD + 1) * 4,
                    attention_decode_workspace_bytes(d));
}

void attention_mixed(const AttentionPrefillParams& p, const AttentionDecodeParams& d, void* workspace,
                     int32_t* counters, cudaStream_t stream) {
    if (!attention_mixed_usable(p, d)) {  // two kernels, one after the other
        if (p.n_seq > 0) attention_prefill(p, stream);
        if (d.batch > 0) attention_decode(d, workspace, stream);
        return;
    }
    SURF_CHECK(p.q && p.out && p.cu_seqlens_q && p.block_table && p.seq_lens_k && p.page_size > 0,
               "attention_mixed: prefill null pointer or page_size");
    SURF_CHECK(d.q && d.out && d.k_cache && d.v_cache && d.block_table && d.seq_lens && d.page_size > 0,
               "attention_mixed: decode null pointer or page_size");
    SURF_CHECK(workspace && counters, "attention_mixed: workspace and counters are required");
    const MixedPlan plan = plan_mixed(d);
    MixedArgs a;
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(kD));
    a.scale_log2 = scale * flash::kLog2e;
    a.q_stride_pre = p.q_stride ? p.q_stride : p.n_heads * kD;
    a.out_stride_pre = p.out_stride ? p.out_stride : p.n_heads * kD;
    a.q_stride_dec = d.q_stride ? d.q_stride : d.n_heads * kD;
    a.dec_splits = plan.splits, a.dec_part = plan.part;
    a.ws_o = static_cast<float*>(workspace);
    a.ws_lse = a.ws_o + d.batch * d.n_heads * plan.splits * kD;
    a.counters = counters;
    const size_t smem = smem_bytes(p.n_seq, d.batch);
    SURF_CUDA_CHECK(cudaFuncSetAttribute(attention_mixed_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    detail::launch_kernel(attention_mixed_kernel, static_cast<unsigned>(detail::device_sm_count()), kThreads,
                          smem, stream, p, d, a);
    SURF_CUDA_CHECK_LAUNCH();
    detail::launch_kernel(attention_mixed_combine_kernel, static_cast<unsigned>(d.batch * d.n_heads), 128, 0,
                          stream, d, plan.splits, plan.part, a.ws_o, a.ws_lse);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
