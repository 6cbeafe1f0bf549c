// GQA attention on bf16 tensor cores (mma.sync m16n8k16, fp32 accumulation), FlashAttention-2 style:
// S = Q·Kᵀ and O += P·V per key tile with an online softmax kept in registers (the S accumulator layout of
// two n8 tiles is the A-operand layout of one k16 step, so P never leaves registers).
//   * prefill: block = 128 query rows of one head (8 warps × 16 rows; 64 rows / 4 warps when that leaves
//     too few blocks to fill the GPU), K/V tiles of 64 keys double-buffered through cp.async, from a paged
//     cache or from contiguous rows (ViT, non-causal). Each key's source row is computed once per tile into
//     shared memory (page lookups off the copy path); Q and K fragments come from ldmatrix; tiles that no
//     row of a warp masks skip the mask, tiles that mask all its rows are skipped.
//   * decode: block = all query heads of one kv head (≤ 16 rows) over one partition of the keys; each warp
//     streams its own 32-key tiles; warps merge in shared memory, partitions merge in a second kernel.
// Head dims are padded to DP ∈ {16, 48, 80, 128} with zeros (fixture head dims 16/40, ViT 80, LLM 128).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::cp_async16;
using detail::mma_bf16_16816;

constexpr float kLog2e = 1.4426950408889634f;

// Four 8×8 b16 matrices (not transposed): lane l supplies the row address of matrix l/8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(detail::smem_addr(smem_row)));
}

// 2^x in one MUFU op; arguments here are ≤ 0 and results below 2^-126 flush to zero, which softmax weights
// (later rounded to bf16) never miss.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Online-softmax state of one warp's 16 rows: rows g = lane/4 and g + 8 of the mma fragments.
template <int DP>
struct WarpFlash {
    float o[DP / 8][4];
    float m[2];  // running max in log2 units (score · scale · log2 e)
    float l[2];  // running denominator (this thread's partial; quad-reduced at the end)

    __device__ void init() {
#pragma unroll
        for (int i = 0; i < DP / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
    }

    // S = Q·Kᵀ for NK keys (Ks [NK][ld]), Q fragments in registers. K fragments of two n8 tiles per ldmatrix.
    template <int NK>
    __device__ void scores(float (&s)[NK / 8][4], const uint32_t (&qf)[DP / 16][4], const bf16* Ks, int ld) {
        const bf16* krow = k_frag_row(Ks, ld);
#pragma unroll
        for (int nt = 0; nt < NK / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < DP / 16; ++ks) {
#pragma unroll
            for (int np = 0; np < NK / 16; ++np) {
                uint32_t b[4];
                ldmatrix_x4(b, krow + np * 16 * ld + ks * 16);
                mma_bf16_16816(s[2 * np], qf[ks], b[0], b[1]);
                mma_bf16_16816(s[2 * np + 1], qf[ks], b[2], b[3]);
            }
        }
    }

    // Same with Q read from shared memory ([16][ld]) one k16 step at a time: frees 2·DP/8 registers, which
    // lets two 8-warp blocks share an SM at head_dim 128.
    template <int NK>
    __device__ void scores_smem(float (&s)[NK / 8][4], const bf16* Qs, const bf16* Ks, int ld) {
        const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
        // A fragment matrices: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, 8-15).
        const bf16* qrow = Qs + ((mi & 1) * 8 + mr) * ld + (mi >> 1) * 8;
        const bf16* krow = k_frag_row(Ks, ld);
#pragma unroll
        for (int nt = 0; nt < NK / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < DP / 16; ++ks) {
            uint32_t qa[4];
            ldmatrix_x4(qa, qrow + ks * 16);
#pragma unroll
            for (int np = 0; np < NK / 16; ++np) {
                uint32_t b[4];
                ldmatrix_x4(b, krow + np * 16 * ld + ks * 16);
                mma_bf16_16816(s[2 * np], qa, b[0], b[1]);
                mma_bf16_16816(s[2 * np + 1], qa, b[2], b[3]);
            }
        }
    }

    // Hides key k from row g unless k < lim0 and from row g + 8 unless k < lim1 (only tiles that need it).
    template <int NK>
    __device__ static void mask(float (&s)[NK / 8][4], int lim0, int lim1) {
        const int t = threadIdx.x & 3;
#pragma unroll
        for (int nt = 0; nt < NK / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = nt * 8 + 2 * t + (e & 1);
                if (key >= ((e >> 1) ? lim1 : lim0)) s[nt][e] = -INFINITY;
            }
        }
    }

    // Online-softmax update with one tile's raw scores s (masked keys at −∞), then O += P·V (Vs [NK][ld]).
    template <int NK>
    __device__ void softmax_pv(float (&s)[NK / 8][4], const bf16* Vs, int ld, float scale_log2) {
        const int lane = threadIdx.x & 31;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NK / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
        }
        float alpha[2], base[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float m_new = fmaxf(m[r], mx[r] * scale_log2);  // scale > 0, so max commutes with it
            base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a fully masked row so far stays at zero weight
            alpha[r] = fast_exp2(m[r] - base[r]);
            m[r] = m_new;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int nt = 0; nt < NK / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[nt][e] = fast_exp2(fmaf(s[nt][e], scale_log2, -base[e >> 1]));
                l[e >> 1] += s[nt][e];
            }
        }
        // Once the running max settles α is exactly 1 for the whole warp: skip the multiplies (same result).
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int dt = 0; dt < DP / 8; ++dt) {
                o[dt][0] *= alpha[0];
                o[dt][1] *= alpha[0];
                o[dt][2] *= alpha[1];
                o[dt][3] *= alpha[1];
            }
        }
        // O += P·V: P from registers, V fragments via ldmatrix.trans (two d-tiles per x4 load).
        const int mi = lane >> 3, mr = lane & 7;
#pragma unroll
        for (int kk = 0; kk < NK / 16; ++kk) {
            uint32_t pa[4];
            pa[0] = detail::pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
            pa[1] = detail::pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
            pa[2] = detail::pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[3] = detail::pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
            const bf16* vrow = Vs + (kk * 16 + (mi & 1) * 8 + mr) * ld + (mi >> 1) * 8;
#pragma unroll
            for (int dp = 0; dp < DP / 16; ++dp) {
                uint32_t b[4];
                detail::ldmatrix_x4_trans(b, vrow + dp * 16);
                mma_bf16_16816(o[2 * dp], pa, b[0], b[1]);
                mma_bf16_16816(o[2 * dp + 1], pa, b[2], b[3]);
            }
        }
    }

    // One tile of NK keys with Q fragments in registers (decode).
    template <int NK>
    __device__ void attend(const uint32_t (&qf)[DP / 16][4], const bf16* Ks, const bf16* Vs, int ld, int lim0,
                           int lim1, float scale_log2) {
        float s[NK / 8][4];
        scores<NK>(s, qf, Ks, ld);
        mask<NK>(s, lim0, lim1);
        softmax_pv<NK>(s, Vs, ld, scale_log2);
    }

    // Lane l's row address for ldmatrix.x4 over keys [16·np, 16·np + 16) at k16 step 0: matrices (keys 0-7,
    // d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15) = (b0, b1) of two n8 tiles.
    __device__ static const bf16* k_frag_row(const bf16* Ks, int ld) {
        const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
        return Ks + ((mi >> 1) * 8 + mr) * ld + (mi & 1) * 8;
    }

    // Quad-reduce l (every thread of a quad then holds the row total).
    __device__ void reduce_l() {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
    }
};

// A fragments of 16 query rows from shared memory [16][ld].
template <int DP>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[DP / 16][4], const bf16* Qs, int ld) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ks = 0; ks < DP / 16; ++ks) {
        const bf16* r0 = Qs + g * ld + ks * 16 + 2 * t;
        const bf16* r1 = r0 + 8 * ld;
        qf[ks][0] = *reinterpret_cast<const uint32_t*>(r0);
        qf[ks][1] = *reinterpret_cast<const uint32_t*>(r1);
        qf[ks][2] = *reinterpret_cast<const uint32_t*>(r0 + 8);
        qf[ks][3] = *reinterpret_cast<const uint32_t*>(r1 + 8);
    }
}

// Where key j of sequence s lives (row pointer at kv head kvh), for either source.
struct KvSource {
    const bf16* k;
    const bf16* v;
    const int32_t* block_table;  // null → contiguous
    int64_t page_size, max_pages, row_stride, head_offset, base_row;
    __device__ __forceinline__ int64_t offset(int64_t j) const {
        if (block_table) {
            const int64_t page = block_table[j / page_size];
            return (page * page_size + j % page_size) * row_stride + head_offset;
        }
        return (base_row + j) * row_stride + head_offset;
    }
};

// Copies rows [kb, kb + NROWS) of K and V (zeros past `end` and past head_dim) into [NROWS][ld] tiles;
// `tid`/`nthreads` split the 16-byte chunks.
template <int DP, int NROWS>
__device__ __forceinline__ void load_kv_tile(const KvSource& src, int64_t kb, int64_t end, int head_dim, bf16* Ks,
                                             bf16* Vs, int ld, int tid, int nthreads) {
    constexpr int kChunks = DP / 8;
    for (int c = tid; c < NROWS * kChunks; c += nthreads) {
        const int row = c / kChunks, col = (c % kChunks) * 8;
        const bool ok = kb + row < end && col < head_dim;
        const int64_t off = ok ? src.offset(kb + row) + col : 0;
        cp_async16(Ks + row * ld + col, src.k + off, ok);
        cp_async16(Vs + row * ld + col, src.v + off, ok);
    }
}

__device__ __forceinline__ int clamp_lim(int64_t v, int hi) {
    return v < 0 ? 0 : (v > hi ? hi : static_cast<int>(v));
}

// ---- prefill -----------------------------------------------------------------------------------------

constexpr int kPrefillKeys = 64;

template <int DP, int kWarps>
constexpr size_t prefill_smem_bytes() {
    // Q [16·kWarps][ld], K and V [2][64][ld] bf16, key source rows [2][64] int32.
    return static_cast<size_t>(16 * kWarps + 4 * kPrefillKeys) * (DP + 8) * 2 + 2 * kPrefillKeys * 4;
}

// Two blocks per SM: ≤ 128 registers per thread at 8 warps (hence Q fragments from shared memory), and
// shared memory ≤ 105 KB per block.
template <int DP, int kWarps>
__global__ void __launch_bounds__(32 * kWarps, 2)
attention_prefill_kernel(AttentionPrefillParams p, float scale_log2, int64_t q_stride, int64_t out_stride, int n_splits,
                         float* ws_o, float* ws_lse) {
    constexpr int kRows = 16 * kWarps, kThreads = 32 * kWarps, ld = DP + 8, kChunks = DP / 8;
    static_assert(kThreads >= 2 * kPrefillKeys, "the prologue fills two tiles' key rows, one per thread");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [kRows][ld]
    bf16* Kbuf = Qs + kRows * ld;                   // [2][64][ld]
    bf16* Vbuf = Kbuf + 2 * kPrefillKeys * ld;      // [2][64][ld]
    // [2][64]: the K/V row (units of row_stride) of each key of the tile in that buffer; −1 past len_k.
    int32_t* key_rows = reinterpret_cast<int32_t*>(Vbuf + 2 * kPrefillKeys * ld);
    // blockIdx.y = head · n_splits + split: the split's share of this block's key tiles.
    const int s = blockIdx.z, h = blockIdx.y / n_splits, split = blockIdx.y % n_splits;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // Token counts and cache slots are int32 throughout (cu_seqlens, seq_lens, slot_mapping): 32-bit math.
    const int q0 = p.cu_seqlens_q[s], len_q = p.cu_seqlens_q[s + 1] - q0;
    // Last row blocks first: under a causal mask they see the most keys, so the grid ends on short blocks.
    const int row0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kRows;
    if (row0 >= len_q) return;
    const int kvh = h / static_cast<int>(p.n_heads / p.n_kv_heads);
    const int D = static_cast<int>(p.head_dim);
    const bool paged = p.k_cache != nullptr;
    const bf16* k_src = (paged ? p.k_cache : p.k) + static_cast<int64_t>(kvh) * D;
    const bf16* v_src = (paged ? p.v_cache : p.v) + static_cast<int64_t>(kvh) * D;
    const int64_t row_stride = paged ? p.n_kv_heads * p.head_dim : p.kv_stride;
    const int32_t* block_table = paged ? p.block_table + s * p.max_pages_per_seq : nullptr;
    const int page_size = static_cast<int>(p.page_size);
    const int base_row = paged ? 0 : p.cu_seqlens_k[s];
    const int len_k = paged ? p.seq_lens_k[s] : p.cu_seqlens_k[s + 1] - base_row;
    auto key_row = [&](int j) -> int32_t {
        if (j >= len_k) return -1;
        if (paged) return __ldg(block_table + j / page_size) * page_size + j % page_size;
        return base_row + j;
    };
    const int past = len_k - len_q;
    const int rows_here = min(kRows, len_q - row0);
    const int key_end = p.causal ? min(len_k, past + row0 + rows_here) : len_k;
    const int all_tiles = static_cast<int>((key_end + kPrefillKeys - 1) / kPrefillKeys);
    const int per_split = (all_tiles + n_splits - 1) / n_splits;
    const int tile0 = min(all_tiles, split * per_split), n_tiles = min(all_tiles, tile0 + per_split);  // tiles [tile0, n_tiles)

    // Copies the K/V rows listed in key_rows[buf] into buffer `buf` (zeros past len_k and past head_dim).
    // Thread → (row, 16-byte column) with rows stepping by kRowStep, so every per-pass offset is a constant
    // and the copy path costs one shared-memory read and one multiply per chunk; 16 consecutive threads
    // cover one row's 256 bytes at head_dim 128.
    constexpr int kRowStep = kThreads / kChunks, kPasses = (kPrefillKeys + kRowStep - 1) / kRowStep;
    const int ld_row = tid / kChunks, ld_col = (tid % kChunks) * 8;
    const bool ld_active = ld_row < kRowStep;  // threads past kRowStep·kChunks idle
    const bool ld_in_head = ld_col < D;         // columns past head_dim are zero-filled
    const bf16* k_col = k_src + ld_col;
    const bf16* v_col = v_src + ld_col;
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
        const bf16* g = p.q + (ok ? static_cast<int64_t>(q0 + row0 + row) * q_stride + h * D + col : 0);
        cp_async16(Qs + row * ld + col, g, ok);
    }
    if (tid < 2 * kPrefillKeys) key_rows[tid] = key_row(tile0 * kPrefillKeys + tid);  // tiles tile0 and tile0 + 1
    __syncthreads();
    if (tile0 < n_tiles) load_tile(0);
    detail::cp_async_commit();

    WarpFlash<DP> st;
    st.init();
    const bf16* Qw = Qs + warp * 16 * ld;
    const int wrow0 = row0 + warp * 16;                  // this warp's first row (seq-local)
    const int qi0 = wrow0 + (lane >> 2), qi1 = qi0 + 8;  // this thread's two rows
    // A block past the end of its sequence's rows (a ViT tile's 1,032 tokens leave 8 in the last 128-row
    // block) has warps with no row at all: they still copy tiles and meet the barriers, but skip the math.
    const bool warp_has_rows = warp * 16 < rows_here;
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
        const int32_t next_row = refill ? key_row((it + 2) * kPrefillKeys + tid) : 0;
        const int kb = it * kPrefillKeys;
        // Warp-uniform: a tile wholly after this warp's last row's diagonal changes nothing (skip it), nor does
        // any tile for a warp without rows; one wholly visible to its first row needs no mask.
        if (warp_has_rows && (!p.causal || kb < past + wrow0 + 16)) {
            const bf16* Ks = Kbuf + buf * kPrefillKeys * ld;
            const bf16* Vs = Vbuf + buf * kPrefillKeys * ld;
            float sc[kPrefillKeys / 8][4];
            st.template scores_smem<kPrefillKeys>(sc, Qw, Ks, ld);
            if (kb + kPrefillKeys > len_k || (p.causal && kb + kPrefillKeys > past + wrow0 + 1)) {
                int lim0 = len_k - kb, lim1 = lim0;
                if (p.causal) {
                    lim0 = min(lim0, past + qi0 + 1 - kb);
                    lim1 = min(lim1, past + qi1 + 1 - kb);
                }
                // Negative limits hide every key; limits past 64 hide none.
                WarpFlash<DP>::template mask<kPrefillKeys>(sc, lim0, lim1);
            }
            st.template softmax_pv<kPrefillKeys>(sc, Vs, ld, scale_log2);
        }
        if (refill) key_rows[buf * kPrefillKeys + tid] = next_row;
        __syncthreads();  // the next iteration's prefetch overwrites this buffer and reads key_rows
    }
    detail::cp_async_wait<0>();  // no copy may outlive the block (empty key range)
    st.reduce_l();
    const int t = lane & 3;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int qi = r ? qi1 : qi0;
        if (qi >= len_q) continue;
        const float inv = st.l[r] > 0.0f ? 1.0f / st.l[r] : 0.0f;
        if (n_splits > 1) {
            // Partial result of this split: normalised o and its log2-sum-exp (−∞ when it saw no key).
            const int64_t idx = (static_cast<int64_t>(split) * p.n_tok_q + q0 + qi) * p.n_heads + h;
            float* o = ws_o + idx * D;
#pragma unroll
            for (int dt = 0; dt < DP / 8; ++dt) {
                const int col = dt * 8 + 2 * t;
                if (col < D) *reinterpret_cast<float2*>(o + col) = make_float2(st.o[dt][2 * r] * inv, st.o[dt][2 * r + 1] * inv);
            }
            if (t == 0) ws_lse[idx] = st.l[r] > 0.0f ? st.m[r] + log2f(st.l[r]) : -INFINITY;
            continue;
        }
        bf16* out = p.out + static_cast<int64_t>(q0 + qi) * out_stride + h * D;
#pragma unroll
        for (int dt = 0; dt < DP / 8; ++dt) {
            const int col = dt * 8 + 2 * t;
            if (col < D) {
                *reinterpret_cast<uint32_t*>(out + col) =
                    detail::pack_bf16x2(st.o[dt][2 * r] * inv, st.o[dt][2 * r + 1] * inv);
            }
        }
    }
}

// One block per query token, a warp per head (round robin): out = Σ_s 2^{lse_s − max} o_s / Σ_s 2^{lse_s − max}.
__global__ void attention_prefill_combine_kernel(AttentionPrefillParams p, int n_splits, int64_t out_stride, const float* ws_o,
                                                 const float* ws_lse) {
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
                    const float2 o = *reinterpret_cast<const float2*>(ws_o + (s * split_stride + idx) * D + col);
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

// ---- decode -------------------------------------------------------------------------------------------

constexpr int kDecodeKeys = 32, kDecodeWarps = 4, kDecodeThreads = 32 * kDecodeWarps;

template <int DP>
size_t decode_smem_bytes() {
    constexpr int ld = DP + 8;
    const size_t tiles = 16 * ld * 2 + kDecodeWarps * 2 * kDecodeKeys * ld * 2;
    const size_t merge = kDecodeWarps * (16 * DP + 32) * 4 + 16 * ld * 2;
    return std::max(tiles, merge);
}

template <int DP>
__global__ void __launch_bounds__(kDecodeThreads) attention_decode_kernel(AttentionDecodeParams p, float scale_log2,
                                                                          int64_t q_stride, int n_splits,
                                                                          int64_t part, float* ws_o, float* ws_lse) {
    constexpr int ld = DP + 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [16][ld]
    const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int group = static_cast<int>(p.n_heads / p.n_kv_heads), D = static_cast<int>(p.head_dim);
    const int64_t len = p.seq_lens[b];
    const int64_t start = split * part, end = min(len, start + part);
    constexpr int kChunks = DP / 8;
    for (int c = tid; c < 16 * kChunks; c += kDecodeThreads) {
        const int row = c / kChunks, col = (c % kChunks) * 8;
        const bool ok = row < group && col < D;
        const bf16* g = p.q + (ok ? b * q_stride + static_cast<int64_t>(kvh * group + row) * D + col : 0);
        cp_async16(Qs + row * ld + col, g, ok);
    }
    detail::cp_async_commit();
    const KvSource src{p.k_cache, p.v_cache, p.block_table + b * p.max_pages_per_seq, p.page_size,
                       p.max_pages_per_seq, p.n_kv_heads * p.head_dim, kvh * p.head_dim, 0};
    bf16* Ks = Qs + 16 * ld + warp * 2 * kDecodeKeys * ld;
    bf16* Vs = Ks + kDecodeKeys * ld;
    detail::cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[DP / 16][4];
    load_q_frags<DP>(qf, Qs, ld);
    WarpFlash<DP> st;
    st.init();
    for (int64_t kb = start + warp * kDecodeKeys; kb < end; kb += kDecodeWarps * kDecodeKeys) {
        load_kv_tile<DP, kDecodeKeys>(src, kb, end, D, Ks, Vs, ld, lane, 32);
        detail::cp_async_commit();
        detail::cp_async_wait<0>();
        __syncwarp();
        const int lim = clamp_lim(end - kb, kDecodeKeys);
        st.template attend<kDecodeKeys>(qf, Ks, Vs, ld, lim, lim, scale_log2);
        __syncwarp();
    }
    st.reduce_l();
    __syncthreads();  // tiles are dead; reuse shared memory for the warp merge
    float* mo = reinterpret_cast<float*>(smem_raw);     // [warps][16][DP]
    float* ml = mo + kDecodeWarps * 16 * DP;            // [warps][16] max, then [warps][16] sum
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
        const int col = dt * 8 + 2 * t;
        mo[(warp * 16 + g) * DP + col] = st.o[dt][0];
        mo[(warp * 16 + g) * DP + col + 1] = st.o[dt][1];
        mo[(warp * 16 + g + 8) * DP + col] = st.o[dt][2];
        mo[(warp * 16 + g + 8) * DP + col + 1] = st.o[dt][3];
    }
    if (t == 0) {
        ml[warp * 16 + g] = st.m[0];
        ml[warp * 16 + g + 8] = st.m[1];
        ml[kDecodeWarps * 16 + warp * 16 + g] = st.l[0];
        ml[kDecodeWarps * 16 + warp * 16 + g + 8] = st.l[1];
    }
    __syncthreads();
    for (int e = tid; e < group * D; e += kDecodeThreads) {
        const int row = e / D, col = e % D;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, ml[w * 16 + row]);
        float L = 0.0f, O = 0.0f;
        if (M != -INFINITY) {
#pragma unroll
            for (int w = 0; w < kDecodeWarps; ++w) {
                const float f = exp2f(ml[w * 16 + row] - M);
                L += f * ml[kDecodeWarps * 16 + w * 16 + row];
                O += f * mo[(w * 16 + row) * DP + col];
            }
        }
        const int h = kvh * group + row;
        if (n_splits == 1) {
            p.out[(b * p.n_heads + h) * D + col] = __float2bfloat16_rn(L > 0.0f ? O / L : 0.0f);
        } else {
            const int64_t idx = (b * p.n_heads + h) * n_splits + split;
            ws_o[idx * D + col] = L > 0.0f ? O / L : 0.0f;
            if (col == 0) ws_lse[idx] = L > 0.0f ? M + log2f(L) : -INFINITY;
        }
    }
}

// One block per (batch, head): out = Σ_s 2^{lse_s − max} o_s / Σ_s 2^{lse_s − max}.
__global__ void attention_decode_combine_kernel(AttentionDecodeParams p, int n_splits, const float* ws_o,
                                                const float* ws_lse) {
    const int64_t bh = blockIdx.x;
    const int D = static_cast<int>(p.head_dim);
    const float* lse = ws_lse + bh * n_splits;
    float M = -INFINITY;
    for (int s = 0; s < n_splits; ++s) M = fmaxf(M, lse[s]);
    for (int col = threadIdx.x; col < D; col += blockDim.x) {
        float num = 0.0f, den = 0.0f;
        if (M != -INFINITY) {
            for (int s = 0; s < n_splits; ++s) {
                const float w = exp2f(lse[s] - M);
                den += w;
                num += w * ws_o[(bh * n_splits + s) * D + col];
            }
        }
        p.out[bh * D + col] = __float2bfloat16_rn(den > 0.0f ? num / den : 0.0f);
    }
}

__global__ void kv_append_kernel(KvAppendParams p) {
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

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

int padded_head_dim(int64_t head_dim) {
    SURF_CHECK(head_dim > 0 && head_dim % 8 == 0 && head_dim <= 128, "attention: head_dim ", head_dim,
               " must be a multiple of 8 in [8, 128]");
    if (head_dim <= 16) return 16;
    if (head_dim <= 48) return 48;
    if (head_dim <= 80) return 80;
    return 128;
}

template <int DP, int kWarps>
void launch_prefill_warps(const AttentionPrefillParams& p, float scale_log2, int64_t q_stride, int64_t out_stride, int n_splits,
                          float* ws_o, float* ws_lse, cudaStream_t stream) {
    constexpr size_t smem = prefill_smem_bytes<DP, kWarps>();
    auto* kernel = attention_prefill_kernel<DP, kWarps>;
    SURF_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>((p.max_seqlen_q + 16 * kWarps - 1) / (16 * kWarps)),
                    static_cast<unsigned>(p.n_heads * n_splits), static_cast<unsigned>(p.n_seq));
    kernel<<<grid, 32 * kWarps, smem, stream>>>(p, scale_log2, q_stride, out_stride, n_splits, ws_o, ws_lse);
    SURF_CUDA_CHECK_LAUNCH();
}

struct PrefillPlan {
    int rows;    // query rows per block: 128 (8 warps) or 64 (4 warps)
    int splits;  // key-range splits (1 = none)
};

// 128-row blocks read each K/V tile once for twice the rows of 64-row blocks; they are used whenever they
// still fill every SM with two blocks (short prompts keep 64-row blocks for parallelism). Split-KV when
// the blocks make few waves of the 2·SMs block slots: the split count s ≤ 4 minimising the waves it takes,
// ⌈blocks·s / slots⌉ / s (plus 10% for the merge), with ≥ 4 key tiles per split and the partial results
// fitting the workspace.
PrefillPlan plan_prefill(const AttentionPrefillParams& p) {
    const int64_t sms = detail::device_sm_count(), slots = 2 * sms;
    const int64_t blocks128 = (p.max_seqlen_q + 127) / 128 * p.n_heads * p.n_seq;
    PrefillPlan plan{blocks128 >= slots ? 128 : 64, 1};
    const int64_t blocks = (p.max_seqlen_q + plan.rows - 1) / plan.rows * p.n_heads * p.n_seq;
    int64_t want = p.n_splits;
    if (want == 0) {
        if (!p.workspace || p.n_tok_q <= 0 || p.max_seqlen_k <= 0 || p.head_dim % 2 != 0 || blocks >= 4 * slots) return plan;
        double best = std::ceil(static_cast<double>(blocks) / slots);
        want = 1;
        for (int64_t s = 2; s <= 4; ++s) {
            if (p.max_seqlen_k < s * 4 * kPrefillKeys) break;
            if (attention_prefill_workspace_bytes(p.n_tok_q, p.n_heads, p.head_dim, s) > p.workspace_bytes) break;
            const double waves = std::ceil(static_cast<double>(blocks * s) / slots) / s * 1.1;
            if (waves < best) best = waves, want = s;
        }
    }
    plan.splits = static_cast<int>(std::max<int64_t>(want, 1));
    return plan;
}

template <int DP>
void launch_prefill(const AttentionPrefillParams& p, const PrefillPlan& plan, float scale_log2, int64_t q_stride, int64_t out_stride,
                    float* ws_o, float* ws_lse, cudaStream_t stream) {
    if (plan.rows == 128) launch_prefill_warps<DP, 8>(p, scale_log2, q_stride, out_stride, plan.splits, ws_o, ws_lse, stream);
    else launch_prefill_warps<DP, 4>(p, scale_log2, q_stride, out_stride, plan.splits, ws_o, ws_lse, stream);
}

struct DecodePlan {
    int splits;
    int64_t part;
};

DecodePlan plan_decode(const AttentionDecodeParams& p) {
    const int64_t max_len = std::max<int64_t>(p.max_seq_len, 1);
    int64_t splits = p.n_splits;
    if (splits <= 0) {
        const int64_t sms = detail::device_sm_count();
        // Enough blocks for several waves (wave-quantisation tail), but ≥ 128 keys (one tile per warp) each.
        const int64_t base = std::max<int64_t>(p.batch * p.n_kv_heads, 1);
        splits = std::clamp<int64_t>((8 * sms + base - 1) / base, 1, (max_len + 127) / 128);
    }
    int64_t part = (max_len + splits - 1) / splits;
    part = (part + kDecodeKeys - 1) / kDecodeKeys * kDecodeKeys;
    splits = (max_len + part - 1) / part;
    return {static_cast<int>(splits), part};
}

template <int DP>
void launch_decode(const AttentionDecodeParams& p, float scale_log2, int64_t q_stride, const DecodePlan& plan,
                   float* ws_o, float* ws_lse, cudaStream_t stream) {
    const size_t smem = decode_smem_bytes<DP>();
    SURF_CUDA_CHECK(cudaFuncSetAttribute(attention_decode_kernel<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(p.n_kv_heads),
                    static_cast<unsigned>(p.batch));
    attention_decode_kernel<DP><<<grid, kDecodeThreads, smem, stream>>>(p, scale_log2, q_stride, plan.splits,
                                                                        plan.part, ws_o, ws_lse);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void kv_cache_append(const KvAppendParams& p, cudaStream_t stream) {
    SURF_CHECK(p.k && p.v && p.k_cache && p.v_cache && p.slot_mapping, "kv_cache_append: null pointer");
    SURF_CHECK(p.head_dim % 8 == 0 && p.k_stride % 8 == 0 && p.v_stride % 8 == 0 && aligned16(p.k) && aligned16(p.v),
               "kv_cache_append: head_dim / strides must be multiples of 8 and rows 16-byte aligned");
    const int64_t n = p.n_tok * p.n_kv_heads * (p.head_dim / 8);
    if (n == 0) return;
    kv_append_kernel<<<detail::grid_1d(n, 256), 256, 0, stream>>>(p);
    SURF_CUDA_CHECK_LAUNCH();
}

void attention_prefill(const AttentionPrefillParams& p, cudaStream_t stream) {
    SURF_CHECK(p.q && p.out && p.cu_seqlens_q, "attention_prefill: null pointer");
    const bool paged = p.k_cache != nullptr;
    SURF_CHECK(paged ? (p.v_cache && p.block_table && p.seq_lens_k && p.page_size > 0)
                     : (p.k && p.v && p.cu_seqlens_k && p.kv_stride % 8 == 0 && aligned16(p.k) && aligned16(p.v)),
               "attention_prefill: incomplete KV source (paged ", paged, ")");
    SURF_CHECK(p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0, "attention_prefill: heads ", p.n_heads, "/", p.n_kv_heads);
    const int dp = padded_head_dim(p.head_dim);
    const int64_t q_stride = p.q_stride ? p.q_stride : p.n_heads * p.head_dim;
    const int64_t out_stride = p.out_stride ? p.out_stride : p.n_heads * p.head_dim;
    SURF_CHECK(q_stride % 8 == 0 && out_stride % 2 == 0 && aligned16(p.q), "attention_prefill: q must be 16-byte aligned rows");
    if (p.n_seq == 0 || p.max_seqlen_q == 0) return;
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const float scale_log2 = scale * kLog2e;
    const PrefillPlan plan = plan_prefill(p);
    float* ws_o = nullptr;
    float* ws_lse = nullptr;
    if (plan.splits > 1) {
        const size_t need = attention_prefill_workspace_bytes(p.n_tok_q, p.n_heads, p.head_dim, plan.splits);
        SURF_CHECK(p.workspace && need <= p.workspace_bytes && p.n_tok_q > 0 && p.head_dim % 2 == 0, "attention_prefill: ", plan.splits,
                   " splits need ", need, " workspace bytes (have ", p.workspace_bytes, ") and n_tok_q (", p.n_tok_q, ")");
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
        attention_prefill_combine_kernel<<<static_cast<unsigned>(p.n_tok_q), 256, 0, stream>>>(p, plan.splits, out_stride, ws_o, ws_lse);
        SURF_CUDA_CHECK_LAUNCH();
    }
}

int64_t attention_prefill_splits(const AttentionPrefillParams& p) { return plan_prefill(p).splits; }

size_t attention_prefill_workspace_bytes(int64_t n_tok_q, int64_t n_heads, int64_t head_dim, int64_t splits) {
    if (splits <= 1) return 0;
    return static_cast<size_t>(splits * n_tok_q * n_heads) * (head_dim + 1) * 4;
}

int32_t attention_decode_splits(const AttentionDecodeParams& p) { return plan_decode(p).splits; }

size_t attention_decode_workspace_bytes(const AttentionDecodeParams& p) {
    const DecodePlan plan = plan_decode(p);
    if (plan.splits == 1) return 0;
    return static_cast<size_t>(p.batch * p.n_heads * plan.splits) * (p.head_dim + 1) * 4;
}

void attention_decode(const AttentionDecodeParams& p, void* workspace, cudaStream_t stream) {
    SURF_CHECK(p.q && p.out && p.k_cache && p.v_cache && p.block_table && p.seq_lens && p.page_size > 0,
               "attention_decode: null pointer or page_size");
    SURF_CHECK(p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0 && p.n_heads / p.n_kv_heads <= 16,
               "attention_decode: heads ", p.n_heads, "/", p.n_kv_heads, " (GQA group ≤ 16)");
    const int dp = padded_head_dim(p.head_dim);
    const int64_t q_stride = p.q_stride ? p.q_stride : p.n_heads * p.head_dim;
    SURF_CHECK(q_stride % 8 == 0 && aligned16(p.q), "attention_decode: q must be 16-byte aligned rows");
    if (p.batch == 0) return;
    const DecodePlan plan = plan_decode(p);
    float* ws_o = nullptr;
    float* ws_lse = nullptr;
    if (plan.splits > 1) {
        SURF_CHECK(workspace != nullptr, "attention_decode: ", plan.splits, " splits need a workspace");
        ws_o = static_cast<float*>(workspace);
        ws_lse = ws_o + p.batch * p.n_heads * plan.splits * p.head_dim;
    }
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const float scale_log2 = scale * kLog2e;
    switch (dp) {
        case 16: launch_decode<16>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
        case 48: launch_decode<48>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
        case 80: launch_decode<80>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
        default: launch_decode<128>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
    }
    if (plan.splits > 1) {
        attention_decode_combine_kernel<<<static_cast<unsigned>(p.batch * p.n_heads), 128, 0, stream>>>(
            p, plan.splits, ws_o, ws_lse);
        SURF_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace surf::kernels::cuda
