// The FlashAttention-2 building blocks of the attention kernels (attention.cu: prefill and the KV append;
// attention_decode.cu: decode), on bf16 tensor cores (mma.sync m16n8k16, fp32 accumulation): S = Q·Kᵀ and
// O += P·V per key tile with an online softmax kept in registers (the S accumulator layout of two n8 tiles is
// the A-operand layout of one k16 step, so P never leaves registers). Head dims are padded to
// DP ∈ {16, 48, 80, 128} with zeros (fixture head dims 16/40, ViT 80, LLM 128).
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda::flash {

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

// The A fragment (m16k16, bf16) of the weights of keys [16·kk, 16·kk + 16) from the fp32 S/P accumulators of
// two n8 tiles: the accumulator layout of two n8 tiles is the A layout of one k16 step.
template <int NK>
__device__ __forceinline__ void pack_weights(uint32_t (&pa)[4], const float (&s)[NK / 8][4], int kk) {
    pa[0] = detail::pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
    pa[1] = detail::pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
    pa[2] = detail::pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[3] = detail::pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
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

    // Online-softmax update with one tile's raw scores s (masked keys at −∞): s becomes the tile's weights P,
    // the running max, denominator and O move to the new max.
    template <int NK>
    __device__ void softmax_update(float (&s)[NK / 8][4], float scale_log2) {
        float alpha[2];
        if (softmax_weights<NK>(s, scale_log2, alpha)) rescale_o(alpha);
    }

    // The part of softmax_update that leaves O alone (the warp-specialized wgmma kernel runs it while a
    // product still accumulates into O): s becomes the tile's weights, the running max and denominator move
    // to the new max, and alpha is O's factor. False when alpha is exactly 1 for the whole warp (once the
    // running max settles), so that rescale_o can be skipped with the same result. The row max and sum run as
    // four interleaved partial chains each (not one chain through every score), so that their latency
    // overlaps; the partial sums add up in a fixed order.
    template <int NK>
    __device__ bool softmax_weights(float (&s)[NK / 8][4], float scale_log2, float (&alpha)[2]) {
        constexpr int kChains = NK / 8 < 4 ? NK / 8 : 4;
        float mxp[2][kChains];
#pragma unroll
        for (int c = 0; c < kChains; ++c) mxp[0][c] = mxp[1][c] = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NK / 8; ++nt) {
            mxp[0][nt % kChains] = fmaxf(mxp[0][nt % kChains], fmaxf(s[nt][0], s[nt][1]));
            mxp[1][nt % kChains] = fmaxf(mxp[1][nt % kChains], fmaxf(s[nt][2], s[nt][3]));
        }
        float mx[2] = {mxp[0][0], mxp[1][0]};
#pragma unroll
        for (int c = 1; c < kChains; ++c) mx[0] = fmaxf(mx[0], mxp[0][c]), mx[1] = fmaxf(mx[1], mxp[1][c]);
        float base[2];
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
        float lp[2][kChains] = {};
#pragma unroll
        for (int nt = 0; nt < NK / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[nt][e] = fast_exp2(fmaf(s[nt][e], scale_log2, -base[e >> 1]));
                lp[e >> 1][nt % kChains] += s[nt][e];
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = lp[r][0];
#pragma unroll
            for (int c = 1; c < kChains; ++c) sum += lp[r][c];
            l[r] += sum;
        }
        return __any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f);
    }

    // O *= alpha, row by row (rows lane/4 and lane/4 + 8).
    __device__ void rescale_o(const float (&alpha)[2]) {
#pragma unroll
        for (int dt = 0; dt < DP / 8; ++dt) {
            o[dt][0] *= alpha[0];
            o[dt][1] *= alpha[0];
            o[dt][2] *= alpha[1];
            o[dt][3] *= alpha[1];
        }
    }

    // O += P·V (Vs [NK][ld]) with the tile's weights P = s after softmax_update.
    template <int NK>
    __device__ void accumulate_pv(const float (&s)[NK / 8][4], const bf16* Vs, int ld) {
        const int lane = threadIdx.x & 31;
        // P from registers, V fragments via ldmatrix.trans (two d-tiles per x4 load).
        const int mi = lane >> 3, mr = lane & 7;
#pragma unroll
        for (int kk = 0; kk < NK / 16; ++kk) {
            uint32_t pa[4];
            pack_weights<NK>(pa, s, kk);
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

    // Online-softmax update with one tile's raw scores s (masked keys at −∞), then O += P·V (Vs [NK][ld]).
    template <int NK>
    __device__ void softmax_pv(float (&s)[NK / 8][4], const bf16* Vs, int ld, float scale_log2) {
        softmax_update<NK>(s, scale_log2);
        accumulate_pv<NK>(s, Vs, ld);
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

// One warp over 32 query rows as two 16-row m-tiles (a: rows 0-15, b: rows 16-31): every K and V fragment
// read from shared memory feeds the mma of both, so a 32-row warp moves half the shared-memory bytes per mma
// of two 16-row warps (prefill attention's rows_per_warp = 32).
// S of both m-tiles for NK keys (Ks [NK][ld]); Q [32][ld] from shared memory one k16 step at a time.
template <int DP, int NK>
__device__ void scores_smem_pair(float (&s0)[NK / 8][4], float (&s1)[NK / 8][4], const bf16* Qs,
                                 const bf16* Ks, int ld) {
    const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
    const bf16* qrow = Qs + ((mi & 1) * 8 + mr) * ld + (mi >> 1) * 8;
    const bf16* krow = WarpFlash<DP>::k_frag_row(Ks, ld);
#pragma unroll
    for (int nt = 0; nt < NK / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s0[nt][e] = s1[nt][e] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < DP / 16; ++ks) {
        uint32_t qa[4], qb[4];
        ldmatrix_x4(qa, qrow + ks * 16);
        ldmatrix_x4(qb, qrow + 16 * ld + ks * 16);
#pragma unroll
        for (int np = 0; np < NK / 16; ++np) {
            uint32_t b[4];
            ldmatrix_x4(b, krow + np * 16 * ld + ks * 16);
            mma_bf16_16816(s0[2 * np], qa, b[0], b[1]);
            mma_bf16_16816(s0[2 * np + 1], qa, b[2], b[3]);
            mma_bf16_16816(s1[2 * np], qb, b[0], b[1]);
            mma_bf16_16816(s1[2 * np + 1], qb, b[2], b[3]);
        }
    }
}

// O_a += P_a·V and O_b += P_b·V (Vs [NK][ld]) with the weights after softmax_update, V fragments shared.
template <int DP, int NK>
__device__ void accumulate_pv_pair(WarpFlash<DP>& a, WarpFlash<DP>& b, const float (&s0)[NK / 8][4],
                                   const float (&s1)[NK / 8][4], const bf16* Vs, int ld) {
    const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
#pragma unroll
    for (int kk = 0; kk < NK / 16; ++kk) {
        uint32_t pa[4], pb[4];
        pack_weights<NK>(pa, s0, kk);
        pack_weights<NK>(pb, s1, kk);
        const bf16* vrow = Vs + (kk * 16 + (mi & 1) * 8 + mr) * ld + (mi >> 1) * 8;
#pragma unroll
        for (int dp = 0; dp < DP / 16; ++dp) {
            uint32_t v[4];
            detail::ldmatrix_x4_trans(v, vrow + dp * 16);
            mma_bf16_16816(a.o[2 * dp], pa, v[0], v[1]);
            mma_bf16_16816(a.o[2 * dp + 1], pa, v[2], v[3]);
            mma_bf16_16816(b.o[2 * dp], pb, v[0], v[1]);
            mma_bf16_16816(b.o[2 * dp + 1], pb, v[2], v[3]);
        }
    }
}

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

// Copies rows [kb, kb + NROWS) of K and V (zeros past `end` and past head_dim) into [NROWS][ld] tiles under
// the L2 cache policy `l2` (detail::l2_policy); `tid`/`nthreads` split the 16-byte chunks.
template <int DP, int NROWS>
__device__ __forceinline__ void load_kv_tile(const KvSource& src, int64_t kb, int64_t end, int head_dim,
                                             bf16* Ks, bf16* Vs, int ld, int tid, int nthreads, uint64_t l2) {
    constexpr int kChunks = DP / 8;
    for (int c = tid; c < NROWS * kChunks; c += nthreads) {
        const int row = c / kChunks, col = (c % kChunks) * 8;
        const bool ok = kb + row < end && col < head_dim;
        const int64_t off = ok ? src.offset(kb + row) + col : 0;
        cp_async16(Ks + row * ld + col, src.k + off, ok, l2);
        cp_async16(Vs + row * ld + col, src.v + off, ok, l2);
    }
}

// What one prefill block works on (grid: x = row block, last first; y = head · n_splits + split; z =
// sequence): its sequence's query rows and keys, its `rows` query rows from row0, and its split's share
// [tile0, n_tiles) of the key tiles of `keys` keys that any of its rows sees. Token counts and cache slots
// are int32 throughout (cu_seqlens, seq_lens, slot_mapping): 32-bit math.
struct PrefillBlock {
    int s, h, split, q0, len_q, row0, rows_here, D, page_size, base_row, len_k, past, tile0, n_tiles;
    bool paged;
    const bf16* k_src;  // head kvh's first column of K / V row 0
    const bf16* v_src;
    int64_t row_stride;
    const int32_t* block_table;  // this sequence's pages (paged source)

    __device__ PrefillBlock(const AttentionPrefillParams& p, int rows, int keys, int n_splits) {
        s = blockIdx.z, h = blockIdx.y / n_splits, split = blockIdx.y % n_splits;
        q0 = p.cu_seqlens_q[s], len_q = p.cu_seqlens_q[s + 1] - q0;
        // Last row blocks first: under a causal mask they see the most keys, so the grid ends on short
        // blocks.
        row0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * rows;
        rows_here = min(rows, len_q - row0);
        const int kvh = h / static_cast<int>(p.n_heads / p.n_kv_heads);
        D = static_cast<int>(p.head_dim);
        paged = p.k_cache != nullptr;
        k_src = (paged ? p.k_cache : p.k) + static_cast<int64_t>(kvh) * D;
        v_src = (paged ? p.v_cache : p.v) + static_cast<int64_t>(kvh) * D;
        row_stride = paged ? p.n_kv_heads * p.head_dim : p.kv_stride;
        block_table = paged ? p.block_table + s * p.max_pages_per_seq : nullptr;
        page_size = static_cast<int>(p.page_size);
        base_row = paged ? 0 : p.cu_seqlens_k[s];
        len_k = paged ? p.seq_lens_k[s] : p.cu_seqlens_k[s + 1] - base_row;
        past = len_k - len_q;
        const int key_end = p.causal ? min(len_k, past + row0 + rows_here) : len_k;
        const int all_tiles = (key_end + keys - 1) / keys;
        const int per_split = (all_tiles + n_splits - 1) / n_splits;
        tile0 = min(all_tiles, split * per_split), n_tiles = min(all_tiles, tile0 + per_split);
    }
    __device__ bool empty() const { return row0 >= len_q; }
    // Row of key j in the K/V source (units of row_stride); −1 past len_k.
    __device__ int32_t key_row(int j) const {
        if (j >= len_k) return -1;
        if (paged) return __ldg(block_table + j / page_size) * page_size + j % page_size;
        return base_row + j;
    }
};

// Writes row r (0: lane/4, 1: lane/4 + 8) of a warp's finished state (l quad-reduced) for query qi of block
// b: the normalised output, or with n_splits > 1 this split's normalised partial result and its
// log2-sum-exp (−∞ when it saw no key) for the combine kernel.
template <int DP>
__device__ __forceinline__ void store_prefill_row(const WarpFlash<DP>& sm, int r, int qi,
                                                  const PrefillBlock& b, const AttentionPrefillParams& p,
                                                  int64_t out_stride, int n_splits, float* ws_o,
                                                  float* ws_lse) {
    const int t = threadIdx.x & 3, D = b.D;
    const float inv = sm.l[r] > 0.0f ? 1.0f / sm.l[r] : 0.0f;
    if (n_splits > 1) {
        const int64_t idx = (static_cast<int64_t>(b.split) * p.n_tok_q + b.q0 + qi) * p.n_heads + b.h;
        float* o = ws_o + idx * D;
#pragma unroll
        for (int dt = 0; dt < DP / 8; ++dt) {
            const int col = dt * 8 + 2 * t;
            if (col < D)
                *reinterpret_cast<float2*>(o + col) =
                    make_float2(sm.o[dt][2 * r] * inv, sm.o[dt][2 * r + 1] * inv);
        }
        if (t == 0) ws_lse[idx] = sm.l[r] > 0.0f ? sm.m[r] + log2f(sm.l[r]) : -INFINITY;
        return;
    }
    bf16* out = p.out + static_cast<int64_t>(b.q0 + qi) * out_stride + b.h * D;
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
        const int col = dt * 8 + 2 * t;
        if (col < D)
            *reinterpret_cast<uint32_t*>(out + col) =
                detail::pack_bf16x2(sm.o[dt][2 * r] * inv, sm.o[dt][2 * r + 1] * inv);
    }
}

__device__ __forceinline__ int clamp_lim(int64_t v, int hi) {
    return v < 0 ? 0 : (v > hi ? hi : static_cast<int>(v));
}

// ---- the wgmma prefill kernel (attention_wgmma.cu), host side -----------------------------------------

// Whether the current device runs the sm_90a wgmma kernel (compute capability 9.0).
bool prefill_wgmma_available();
// The key tile the wgmma kernel runs for p at padded head dim dp: p.wgmma_key_tile, except that tiles past
// 128 (208) are built only for the warp-specialized kernel with TMA copies at head dim 80 (the ViT) and run
// as 128 elsewhere.
int prefill_wgmma_key_tile(const AttentionPrefillParams& p, int dp);
// Resident blocks per SM of the wgmma kernel at padded head dim dp and key tile keys (from
// prefill_wgmma_key_tile), plain or warp-specialized (AttentionPrefillParams::wgmma_warp_specialized).
int prefill_wgmma_blocks_per_sm(int dp, int keys, bool warp_specialized);
// Launches the wgmma kernel: 128 query rows per block, grid (row blocks, heads · n_splits, sequences).
void launch_prefill_wgmma(const AttentionPrefillParams& p, int dp, int keys, int n_splits, float scale_log2,
                          int64_t q_stride, int64_t out_stride, float* ws_o, float* ws_lse,
                          cudaStream_t stream);
constexpr int kWgmmaBlockRows = 128;

inline bool aligned16(const void* ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

inline int padded_head_dim(int64_t head_dim) {
    SURF_CHECK(head_dim > 0 && head_dim % 8 == 0 && head_dim <= 128, "attention: head_dim ", head_dim,
               " must be a multiple of 8 in [8, 128]");
    if (head_dim <= 16) return 16;
    if (head_dim <= 48) return 48;
    if (head_dim <= 80) return 80;
    return 128;
}

}  // namespace surf::kernels::cuda::flash
