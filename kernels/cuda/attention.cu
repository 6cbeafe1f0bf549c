// GQA prefill attention (FlashAttention-2 style, building blocks in attention_flash.cuh) and the paged KV
// cache append.
//   * block = 128 query rows of one head (8 warps × 16 rows; 64 rows / 4 warps when that leaves too few
//     blocks to fill the GPU), K/V tiles of 64 keys double-buffered through cp.async, from a paged cache or
//     from contiguous rows (ViT, non-causal). Each key's source row is computed once per tile into shared
//     memory (page lookups off the copy path); Q and K fragments come from ldmatrix; tiles that no row of a
//     warp masks skip the mask, tiles that mask all its rows are skipped.
//   * split-KV: with few blocks for the GPU each block takes a share of the key tiles and a second kernel
//     merges the partial results (log-sum-exp weights).
#include "kernels/cuda/attention_flash.cuh"

namespace surf::kernels::cuda {

namespace {

using namespace flash;

// ---- prefill -----------------------------------------------------------------------------------------

constexpr int kPrefillKeys = 64;

template <int DP, int kWarps, int MT>
constexpr size_t prefill_smem_bytes() {
    // Q [16·MT·kWarps][ld], K and V [2][64][ld] bf16, key source rows [2][64] int32.
    return static_cast<size_t>(16 * MT * kWarps + 4 * kPrefillKeys) * (DP + 8) * 2 + 2 * kPrefillKeys * 4;
}

// Each warp takes MT 16-row m-tiles (MT = 2: K and V fragments shared by both, attention_flash.cuh). Two
// blocks per SM: ≤ 128 registers per thread at 8 warps × 16 rows (hence Q fragments from shared memory),
// ≤ 255 at 4 warps × 32 rows; shared memory ≤ 105 KB per block.
template <int DP, int kWarps, int MT>
__global__ void __launch_bounds__(32 * kWarps, 2)
    attention_prefill_kernel(AttentionPrefillParams p, float scale_log2, int64_t q_stride, int64_t out_stride,
                             int n_splits, float* ws_o, float* ws_lse) {
    detail::pdl_prologue();
    static_assert(MT == 1 || MT == 2, "one or two m-tiles per warp");
    constexpr int kWarpRows = 16 * MT, kRows = kWarpRows * kWarps, kThreads = 32 * kWarps, ld = DP + 8,
                  kChunks = DP / 8;
    static_assert(kThreads >= 2 * kPrefillKeys, "the prologue fills two tiles' key rows, one per thread");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [kRows][ld]
    bf16* Kbuf = Qs + kRows * ld;                  // [2][64][ld]
    bf16* Vbuf = Kbuf + 2 * kPrefillKeys * ld;     // [2][64][ld]
    // [2][64]: the K/V row (units of row_stride) of each key of the tile in that buffer; −1 past len_k.
    int32_t* key_rows = reinterpret_cast<int32_t*>(Vbuf + 2 * kPrefillKeys * ld);
    const PrefillBlock b(p, kRows, kPrefillKeys, n_splits);
    if (b.empty()) return;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int D = b.D, len_q = b.len_q, len_k = b.len_k, past = b.past, row0 = b.row0,
              rows_here = b.rows_here;
    const int tile0 = b.tile0, n_tiles = b.n_tiles;
    const int64_t row_stride = b.row_stride;

    // Copies the K/V rows listed in key_rows[buf] into buffer `buf` (zeros past len_k and past head_dim).
    // Thread → (row, 16-byte column) with rows stepping by kRowStep, so every per-pass offset is a constant
    // and the copy path costs one shared-memory read and one multiply per chunk; 16 consecutive threads
    // cover one row's 256 bytes at head_dim 128.
    constexpr int kRowStep = kThreads / kChunks, kPasses = (kPrefillKeys + kRowStep - 1) / kRowStep;
    const int ld_row = tid / kChunks, ld_col = (tid % kChunks) * 8;
    const bool ld_active = ld_row < kRowStep;  // threads past kRowStep·kChunks idle
    const bool ld_in_head = ld_col < D;        // columns past head_dim are zero-filled
    const bf16* k_col = b.k_src + ld_col;
    const bf16* v_col = b.v_src + ld_col;
    auto load_tile = [&](int buf) {
        const int32_t* rows = key_rows + buf * kPrefillKeys + ld_row;
        bf16* Kd = Kbuf + (buf * kPrefillKeys + ld_row) * ld + ld_col;
        bf16* Vd = Vbuf + (buf * kPrefillKeys + ld_row) * ld + ld_col;
#pragma unroll
        for (int i = 0; i < kPasses; ++i) {
            if (!ld_active || (kPrefillKeys % kRowStep != 0 && ld_row + i * kRowStep >= kPrefillKeys)) break;
            const int32_t r = rows[i * kRowStep];
            const bool ok = r >= 0 && ld_in_head;
            const int64_t off = ok ? static_cast<int64_t>(r) * row_stride : 0;
            cp_async16(Kd + i * kRowStep * ld, k_col + off, ok);
            cp_async16(Vd + i * kRowStep * ld, v_col + off, ok);
        }
    };

    // Q tile (zero rows past the sequence, zero columns past head_dim) joins the first K/V group.
    for (int c = tid; c < kRows * kChunks; c += kThreads) {
        const int row = c / kChunks, col = (c % kChunks) * 8;
        const bool ok = row < rows_here && col < D;
        const bf16* g = p.q + (ok ? static_cast<int64_t>(b.q0 + row0 + row) * q_stride + b.h * D + col : 0);
        cp_async16(Qs + row * ld + col, g, ok);
    }
    if (tid < 2 * kPrefillKeys)
        key_rows[tid] = b.key_row(tile0 * kPrefillKeys + tid);  // tiles tile0 and tile0 + 1
    __syncthreads();
    if (tile0 < n_tiles) load_tile(0);
    detail::cp_async_commit();

    WarpFlash<DP> st[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) st[mt].init();
    const bf16* Qw = Qs + warp * kWarpRows * ld;
    const int wrow0 = row0 + warp * kWarpRows;  // this warp's first row (seq-local)
    const int qi0 = wrow0 + (lane >> 2),
              qi1 = qi0 + 8;  // this thread's two rows of m-tile 0 (+16 per m-tile)
    // A block past the end of its sequence's rows (a ViT tile's 1,032 tokens leave 8 in the last 128-row
    // block) has warps with no row at all: they still copy tiles and meet the barriers, but skip the math.
    const bool warp_has_rows = warp * kWarpRows < rows_here;
    for (int it = tile0; it < n_tiles; ++it) {
        const int buf = (it - tile0) & 1;
        if (it + 1 < n_tiles) {
            load_tile(buf ^ 1);
            detail::cp_async_commit();
            detail::cp_async_wait<1>();
        } else {
            detail::cp_async_wait<0>();
        }
        __syncthreads();
        // key_rows[buf] has been read by every thread (tile `it` was issued before this barrier): refill it
        // for tile it + 2. The block-table read is issued here and stored after the math hides its latency.
        const bool refill = tid < kPrefillKeys && it + 2 < n_tiles;
        const int32_t next_row = refill ? b.key_row((it + 2) * kPrefillKeys + tid) : 0;
        const int kb = it * kPrefillKeys;
        // Warp-uniform: a tile wholly after this warp's last row's diagonal changes nothing (skip it), nor
        // does any tile for a warp without rows; one wholly visible to its first row needs no mask.
        if (warp_has_rows && (!p.causal || kb < past + wrow0 + kWarpRows)) {
            const bf16* Ks = Kbuf + buf * kPrefillKeys * ld;
            const bf16* Vs = Vbuf + buf * kPrefillKeys * ld;
            float sc[MT][kPrefillKeys / 8][4];
            if constexpr (MT == 1)
                st[0].template scores_smem<kPrefillKeys>(sc[0], Qw, Ks, ld);
            else
                scores_smem_pair<DP, kPrefillKeys>(sc[0], sc[1], Qw, Ks, ld);
            if (kb + kPrefillKeys > len_k || (p.causal && kb + kPrefillKeys > past + wrow0 + 1)) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    int lim0 = len_k - kb, lim1 = lim0;
                    if (p.causal) {
                        lim0 = min(lim0, past + qi0 + 16 * mt + 1 - kb);
                        lim1 = min(lim1, past + qi1 + 16 * mt + 1 - kb);
                    }
                    // Negative limits hide every key; limits past 64 hide none.
                    WarpFlash<DP>::template mask<kPrefillKeys>(sc[mt], lim0, lim1);
                }
            }
            if constexpr (MT == 1) {
                st[0].template softmax_pv<kPrefillKeys>(sc[0], Vs, ld, scale_log2);
            } else {
                st[0].template softmax_update<kPrefillKeys>(sc[0], scale_log2);
                st[1].template softmax_update<kPrefillKeys>(sc[1], scale_log2);
                accumulate_pv_pair<DP, kPrefillKeys>(st[0], st[1], sc[0], sc[1], Vs, ld);
            }
        }
        if (refill) key_rows[buf * kPrefillKeys + tid] = next_row;
        __syncthreads();  // the next iteration's prefetch overwrites this buffer and reads key_rows
    }
    detail::cp_async_wait<0>();  // no copy may outlive the block (empty key range)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) st[mt].reduce_l();
#pragma unroll
    for (int q = 0; q < 2 * MT; ++q) {  // (m-tile q / 2, row g or g + 8 of it)
        const int r = q & 1, qi = (r ? qi1 : qi0) + 16 * (q >> 1);
        if (qi < len_q) store_prefill_row<DP>(st[q >> 1], r, qi, b, p, out_stride, n_splits, ws_o, ws_lse);
    }
}

// One block per query token, a warp per head (round robin): out = Σ_s 2^{lse_s − max} o_s / Σ_s 2^{lse_s −
// max}.
__global__ void attention_prefill_combine_kernel(AttentionPrefillParams p, int n_splits, int64_t out_stride,
                                                 const float* ws_o, const float* ws_lse) {
    detail::pdl_prologue();
    const int64_t tok = blockIdx.x;
    const int D = static_cast<int>(p.head_dim), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t split_stride = p.n_tok_q * p.n_heads;
    for (int h = warp; h < static_cast<int>(p.n_heads); h += blockDim.x / 32) {
        const int64_t idx = tok * p.n_heads + h;
        float M = -INFINITY;
        for (int s = 0; s < n_splits; ++s) M = fmaxf(M, ws_lse[s * split_stride + idx]);
        bf16* out = p.out + tok * out_stride + static_cast<int64_t>(h) * D;
        for (int col = 2 * lane; col < D; col += 64) {
            float num0 = 0.0f, num1 = 0.0f, den = 0.0f;
            if (M != -INFINITY) {
                for (int s = 0; s < n_splits; ++s) {
                    const float w = exp2f(ws_lse[s * split_stride + idx] - M);
                    const float2 o =
                        *reinterpret_cast<const float2*>(ws_o + (s * split_stride + idx) * D + col);
                    den += w;
                    num0 += w * o.x;
                    num1 += w * o.y;
                }
            }
            const float inv = den > 0.0f ? 1.0f / den : 0.0f;
            *reinterpret_cast<uint32_t*>(out + col) = detail::pack_bf16x2(num0 * inv, num1 * inv);
        }
    }
}

__global__ void kv_append_kernel(KvAppendParams p) {
    detail::pdl_prologue();
    const int64_t chunks = p.head_dim / 8;
    const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (idx >= p.n_tok * p.n_kv_heads * chunks) return;
    const int64_t tok = idx / (p.n_kv_heads * chunks), rest = idx % (p.n_kv_heads * chunks);
    const int64_t slot = p.slot_mapping[tok];
    if (slot < 0) return;
    const int64_t kvh = rest / chunks, col = (rest % chunks) * 8;
    const int64_t dst = (slot * p.n_kv_heads + kvh) * p.head_dim + col;
    *reinterpret_cast<uint4*>(p.k_cache + dst) =
        *reinterpret_cast<const uint4*>(p.k + tok * p.k_stride + kvh * p.head_dim + col);
    *reinterpret_cast<uint4*>(p.v_cache + dst) =
        *reinterpret_cast<const uint4*>(p.v + tok * p.v_stride + kvh * p.head_dim + col);
}

template <int DP, int kWarps, int MT>
void launch_prefill_warps(const AttentionPrefillParams& p, float scale_log2, int64_t q_stride,
                          int64_t out_stride, int n_splits, float* ws_o, float* ws_lse, cudaStream_t stream) {
    constexpr size_t smem = prefill_smem_bytes<DP, kWarps, MT>();
    auto* kernel = attention_prefill_kernel<DP, kWarps, MT>;
    SURF_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    constexpr int kRows = 16 * MT * kWarps;
    const dim3 grid(static_cast<unsigned>((p.max_seqlen_q + kRows - 1) / kRows),
                    static_cast<unsigned>(p.n_heads * n_splits), static_cast<unsigned>(p.n_seq));
    detail::launch_kernel(kernel, grid, 32 * kWarps, smem, stream, p, scale_log2, q_stride, out_stride,
                          n_splits, ws_o, ws_lse);
    SURF_CUDA_CHECK_LAUNCH();
}

struct PrefillPlan {
    int rows;  // query rows per block: 128 (8 warps × 16 rows, 4 × 32, or two warpgroups) or 64 (4 warps ×
               // 16)
    int splits;         // key-range splits (1 = none)
    int rows_per_warp;  // 16, or 32 (128-row blocks of 4 warps) when p.rows_per_warp asks for it
    int wgmma_keys;     // 0, or the key tile of the wgmma kernel (attention_wgmma.cu)
};

// 128-row blocks read each K/V tile once for twice the rows of 64-row blocks; they are used whenever they
// still fill every SM with two blocks (short prompts keep 64-row blocks for parallelism). Split-KV when
// the blocks make few waves of the block slots (2 per SM; the wgmma kernel's own occupancy): the split count
// s ≤ 4 minimising the waves it takes, ⌈blocks·s / slots⌉ / s (plus 10% for the merge), with ≥ 4 key tiles
// per split and the partial results fitting the workspace.
PrefillPlan plan_prefill(const AttentionPrefillParams& p) {
    const int64_t sms = detail::device_sm_count();
    int64_t slots = 2 * sms, key_tile = kPrefillKeys;
    const int64_t blocks128 = (p.max_seqlen_q + 127) / 128 * p.n_heads * p.n_seq;
    PrefillPlan plan{blocks128 >= slots ? 128 : 64, 1, 16, 0};
    if (p.wgmma_key_tile != 0 && prefill_wgmma_available()) {
        plan.rows = kWgmmaBlockRows, plan.wgmma_keys = prefill_wgmma_key_tile(p, padded_head_dim(p.head_dim));
        key_tile = plan.wgmma_keys;
        slots = sms * prefill_wgmma_blocks_per_sm(padded_head_dim(p.head_dim), plan.wgmma_keys,
                                                  p.wgmma_warp_specialized);
    } else if (p.rows_per_warp == 32) {
        plan.rows = 128, plan.rows_per_warp = 32;  // asked for: 128-row blocks of 4 warps
    }
    const int64_t blocks = (p.max_seqlen_q + plan.rows - 1) / plan.rows * p.n_heads * p.n_seq;
    int64_t want = p.n_splits;
    if (want == 0) {
        if (!p.workspace || p.n_tok_q <= 0 || p.max_seqlen_k <= 0 || p.head_dim % 2 != 0 ||
            blocks >= 4 * slots)
            return plan;
        double best = std::ceil(static_cast<double>(blocks) / slots);
        want = 1;
        for (int64_t s = 2; s <= 4; ++s) {
            if (p.max_seqlen_k < s * 4 * key_tile) break;
            if (attention_prefill_workspace_bytes(p.n_tok_q, p.n_heads, p.head_dim, s) > p.workspace_bytes)
                break;
            const double waves = std::ceil(static_cast<double>(blocks * s) / slots) / s * 1.1;
            if (waves < best) best = waves, want = s;
        }
    }
    plan.splits = static_cast<int>(std::max<int64_t>(want, 1));
    return plan;
}

template <int DP>
void launch_prefill(const AttentionPrefillParams& p, const PrefillPlan& plan, float scale_log2,
                    int64_t q_stride, int64_t out_stride, float* ws_o, float* ws_lse, cudaStream_t stream) {
    if (plan.wgmma_keys)
        launch_prefill_wgmma(p, DP, plan.wgmma_keys, plan.splits, scale_log2, q_stride, out_stride, ws_o,
                             ws_lse, stream);
    else if (plan.rows == 128 && plan.rows_per_warp == 32)
        launch_prefill_warps<DP, 4, 2>(p, scale_log2, q_stride, out_stride, plan.splits, ws_o, ws_lse,
                                       stream);
    else if (plan.rows == 128)
        launch_prefill_warps<DP, 8, 1>(p, scale_log2, q_stride, out_stride, plan.splits, ws_o, ws_lse,
                                       stream);
    else
        launch_prefill_warps<DP, 4, 1>(p, scale_log2, q_stride, out_stride, plan.splits, ws_o, ws_lse,
                                       stream);
}

}  // namespace

void kv_cache_append(const KvAppendParams& p, cudaStream_t stream) {
    SURF_CHECK(p.k && p.v && p.k_cache && p.v_cache && p.slot_mapping, "kv_cache_append: null pointer");
    SURF_CHECK(
        p.head_dim % 8 == 0 && p.k_stride % 8 == 0 && p.v_stride % 8 == 0 && aligned16(p.k) && aligned16(p.v),
        "kv_cache_append: head_dim / strides must be multiples of 8 and rows 16-byte aligned");
    const int64_t n = p.n_tok * p.n_kv_heads * (p.head_dim / 8);
    if (n == 0) return;
    detail::launch_kernel(kv_append_kernel, detail::grid_1d(n, 256), 256, 0, stream, p);
    SURF_CUDA_CHECK_LAUNCH();
}

void attention_prefill(const AttentionPrefillParams& p, cudaStream_t stream) {
    SURF_CHECK(p.q && p.out && p.cu_seqlens_q, "attention_prefill: null pointer");
    const bool paged = p.k_cache != nullptr;
    SURF_CHECK(
        paged ? (p.v_cache && p.block_table && p.seq_lens_k && p.page_size > 0)
              : (p.k && p.v && p.cu_seqlens_k && p.kv_stride % 8 == 0 && aligned16(p.k) && aligned16(p.v)),
        "attention_prefill: incomplete KV source (paged ", paged, ")");
    SURF_CHECK(p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0, "attention_prefill: heads ", p.n_heads, "/",
               p.n_kv_heads);
    const int dp = padded_head_dim(p.head_dim);
    const int64_t q_stride = p.q_stride ? p.q_stride : p.n_heads * p.head_dim;
    const int64_t out_stride = p.out_stride ? p.out_stride : p.n_heads * p.head_dim;
    SURF_CHECK(q_stride % 8 == 0 && out_stride % 2 == 0 && aligned16(p.q),
               "attention_prefill: q must be 16-byte aligned rows");
    SURF_CHECK(p.rows_per_warp == 0 || p.rows_per_warp == 16 || p.rows_per_warp == 32,
               "attention_prefill: rows_per_warp ", p.rows_per_warp, " (0, 16 or 32)");
    SURF_CHECK(valid_wgmma_key_tile(p.wgmma_key_tile), "attention_prefill: wgmma_key_tile ", p.wgmma_key_tile,
               " (0, 64, 128 or 208)");
    if (p.n_seq == 0 || p.max_seqlen_q == 0) return;
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const float scale_log2 = scale * kLog2e;
    const PrefillPlan plan = plan_prefill(p);
    float* ws_o = nullptr;
    float* ws_lse = nullptr;
    if (plan.splits > 1) {
        const size_t need = attention_prefill_workspace_bytes(p.n_tok_q, p.n_heads, p.head_dim, plan.splits);
        SURF_CHECK(p.workspace && need <= p.workspace_bytes && p.n_tok_q > 0 && p.head_dim % 2 == 0,
                   "attention_prefill: ", plan.splits, " splits need ", need, " workspace bytes (have ",
                   p.workspace_bytes, ") and n_tok_q (", p.n_tok_q, ")");
        ws_o = static_cast<float*>(p.workspace);
        ws_lse = ws_o + plan.splits * p.n_tok_q * p.n_heads * p.head_dim;
    }
    switch (dp) {
        case 16: launch_prefill<16>(p, plan, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        case 48: launch_prefill<48>(p, plan, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        case 80: launch_prefill<80>(p, plan, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        default: launch_prefill<128>(p, plan, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
    }
    if (plan.splits > 1) {
        detail::launch_kernel(attention_prefill_combine_kernel, static_cast<unsigned>(p.n_tok_q), 256, 0,
                              stream, p, plan.splits, out_stride, ws_o, ws_lse);
        SURF_CUDA_CHECK_LAUNCH();
    }
}

int64_t attention_prefill_splits(const AttentionPrefillParams& p) {
    return plan_prefill(p).splits;
}

size_t attention_prefill_workspace_bytes(int64_t n_tok_q, int64_t n_heads, int64_t head_dim, int64_t splits) {
    if (splits <= 1) return 0;
    return static_cast<size_t>(splits * n_tok_q * n_heads) * (head_dim + 1) * 4;
}

}  // namespace surf::kernels::cuda
