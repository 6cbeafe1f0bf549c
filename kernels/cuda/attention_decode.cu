// GQA decode attention over the paged KV cache (building blocks in attention_flash.cuh): block = all query
// heads of one kv head (≤ 16 rows) over one partition of the keys; each warp streams its own key tiles
// (pipelined: 16-key tiles with the next one in flight; plain: one 32-key tile at a time); warps merge in
// shared memory, partitions merge in a second kernel.
#include "kernels/cuda/attention_decode_tma.h"
#include "kernels/cuda/attention_flash.cuh"

namespace surf::kernels::cuda {

namespace {

using namespace flash;

// ---- decode -------------------------------------------------------------------------------------------

// Keys a partition is cut in multiples of (the plain kernel's tile); the pipelined kernel's tiles are half
// that, two buffers a warp.
constexpr int kDecodeKeys = 32, kDecodeWarps = 4, kDecodeThreads = 32 * kDecodeWarps;
template <bool PIPE>
constexpr int decode_tile_keys() {
    return PIPE ? kDecodeKeys / 2 : kDecodeKeys;
}

template <int DP>
size_t decode_smem_bytes() {
    constexpr int ld = DP + 8;
    const size_t tiles =
        16 * ld * 2 + kDecodeWarps * 2 * kDecodeKeys * ld * 2;  // either kernel: K and V, 32 keys a warp
    const size_t merge = kDecodeWarps * (16 * DP + 32) * 4 + 16 * ld * 2;
    return std::max(tiles, merge);
}

// PIPE: tiles of 16 keys, two buffers a warp, the next tile's copies issued before the current tile's math.
template <int DP, bool PIPE>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_kernel(AttentionDecodeParams p, float scale_log2, int64_t q_stride, int n_splits,
                            int64_t part, float* ws_o, float* ws_lse) {
    detail::pdl_prologue();
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
    const KvSource src{p.k_cache,
                       p.v_cache,
                       p.block_table + b * p.max_pages_per_seq,
                       p.page_size,
                       p.max_pages_per_seq,
                       p.n_kv_heads * p.head_dim,
                       kvh * p.head_dim,
                       0};
    constexpr int kKeys = decode_tile_keys<PIPE>(), kStride = kDecodeWarps * kKeys;
    // This warp's buffers: [2][kKeys][ld] K then [2][kKeys][ld] V (PIPE), or one [32][ld] K and V.
    bf16* Kw = Qs + 16 * ld + warp * 2 * kDecodeKeys * ld;
    bf16* Vw = Kw + kDecodeKeys * ld;
    const uint64_t l2 = detail::l2_policy(p.l2_evict_first);
    detail::cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[DP / 16][4];
    load_q_frags<DP>(qf, Qs, ld);
    WarpFlash<DP> st;
    st.init();
    int64_t kb = start + warp * kKeys;
    if constexpr (PIPE) {
        if (kb < end) load_kv_tile<DP, kKeys>(src, kb, end, D, Kw, Vw, ld, lane, 32, l2);
        detail::cp_async_commit();
    }
    for (int buf = 0; kb < end; kb += kStride, buf ^= PIPE ? 1 : 0) {  // one buffer without PIPE
        bf16* Ks = Kw + buf * kKeys * ld;
        bf16* Vs = Vw + buf * kKeys * ld;
        if constexpr (PIPE) {
            if (kb + kStride <
                end) {  // the next tile into the other buffer: its last reader, the previous iteration's
                        // math, finished before that iteration's closing __syncwarp
                load_kv_tile<DP, kKeys>(src, kb + kStride, end, D, Kw + (buf ^ 1) * kKeys * ld,
                                        Vw + (buf ^ 1) * kKeys * ld, ld, lane, 32, l2);
                detail::cp_async_commit();
                detail::cp_async_wait<1>();
            } else {
                detail::cp_async_wait<0>();
            }
        } else {
            load_kv_tile<DP, kKeys>(src, kb, end, D, Ks, Vs, ld, lane, 32, l2);
            detail::cp_async_commit();
            detail::cp_async_wait<0>();
        }
        __syncwarp();
        const int lim = clamp_lim(end - kb, kKeys);
        st.template attend<kKeys>(qf, Ks, Vs, ld, lim, lim, scale_log2);
        __syncwarp();
    }
    if constexpr (PIPE) detail::cp_async_wait<0>();
    st.reduce_l();
    __syncthreads();                                 // tiles are dead; reuse shared memory for the warp merge
    float* mo = reinterpret_cast<float*>(smem_raw);  // [warps][16][DP]
    float* ml = mo + kDecodeWarps * 16 * DP;         // [warps][16] max, then [warps][16] sum
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
    detail::pdl_prologue();
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

struct DecodePlan {
    int splits;
    int64_t part;
};

DecodePlan plan_decode(const AttentionDecodeParams& p) {
    const int64_t max_len = std::max<int64_t>(p.max_seq_len, 1);
    int64_t splits = p.n_splits;
    if (splits <= 0) {
        const int64_t sms = p.sm_count > 0 ? p.sm_count : detail::device_sm_count();
        // Enough blocks for several waves (wave-quantisation tail), but ≥ 128 keys (one tile per warp) each.
        const int64_t base = std::max<int64_t>(p.batch * p.n_kv_heads, 1);
        splits = std::clamp<int64_t>((8 * sms + base - 1) / base, 1, (max_len + 127) / 128);
    }
    int64_t part = (max_len + splits - 1) / splits;
    part = (part + kDecodeKeys - 1) / kDecodeKeys * kDecodeKeys;
    splits = (max_len + part - 1) / part;
    return {static_cast<int>(splits), part};
}

template <int DP, bool PIPE>
void launch_decode(const AttentionDecodeParams& p, float scale_log2, int64_t q_stride, const DecodePlan& plan,
                   float* ws_o, float* ws_lse, cudaStream_t stream) {
    const size_t smem = decode_smem_bytes<DP>();
    SURF_CUDA_CHECK(cudaFuncSetAttribute(attention_decode_kernel<DP, PIPE>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(p.n_kv_heads),
                    static_cast<unsigned>(p.batch));
    detail::launch_kernel(attention_decode_kernel<DP, PIPE>, grid, kDecodeThreads, smem, stream, p,
                          scale_log2, q_stride, plan.splits, plan.part, ws_o, ws_lse);
    SURF_CUDA_CHECK_LAUNCH();
}

template <int DP>
void launch_decode_dp(const AttentionDecodeParams& p, float scale_log2, int64_t q_stride,
                      const DecodePlan& plan, float* ws_o, float* ws_lse, cudaStream_t stream) {
    if (p.pipelined)
        launch_decode<DP, true>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream);
    else
        launch_decode<DP, false>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream);
}

}  // namespace

bool attention_decode_tma_usable(const AttentionDecodeParams& p) {
    return flash::decode_tma_usable(p);
}

int32_t attention_decode_splits(const AttentionDecodeParams& p) {
    return flash::decode_tma_usable(p) ? flash::plan_decode_tma(p).splits : plan_decode(p).splits;
}

size_t attention_decode_workspace_bytes(const AttentionDecodeParams& p) {
    const int64_t splits = attention_decode_splits(p);
    if (splits == 1) return 0;
    return static_cast<size_t>(p.batch * p.n_heads * splits) * (p.head_dim + 1) * 4;
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
    // One plan per launch: the TMA kernel's where it runs, else the cp.async kernels' (as
    // attention_decode_splits).
    const bool tma = flash::decode_tma_usable(p);
    const flash::DecodeTmaPlan tma_plan = tma ? flash::plan_decode_tma(p) : flash::DecodeTmaPlan{};
    const DecodePlan plan = tma ? DecodePlan{tma_plan.splits, tma_plan.part} : plan_decode(p);
    const int splits = plan.splits;
    float* ws_o = nullptr;
    float* ws_lse = nullptr;
    if (splits > 1) {
        SURF_CHECK(workspace != nullptr, "attention_decode: ", splits, " splits need a workspace");
        ws_o = static_cast<float*>(workspace);
        ws_lse = ws_o + p.batch * p.n_heads * splits * p.head_dim;
    }
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const float scale_log2 = scale * kLog2e;
    if (tma) {
        flash::launch_decode_tma(p, scale_log2, q_stride, tma_plan, ws_o, ws_lse, stream);
    } else {
        switch (dp) {
            case 16: launch_decode_dp<16>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
            case 48: launch_decode_dp<48>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
            case 80: launch_decode_dp<80>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
            default: launch_decode_dp<128>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
        }
    }
    if (splits > 1) {
        detail::launch_kernel(attention_decode_combine_kernel, static_cast<unsigned>(p.batch * p.n_heads),
                              128, 0, stream, p, splits, ws_o, ws_lse);
        SURF_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace surf::kernels::cuda
