// GQA decode attention over the paged KV cache (building blocks in attention_flash.cuh): block = all query
// heads of one kv head (≤ 16 rows) over one partition of the keys; each warp streams its own 32-key tiles;
// warps merge in shared memory, partitions merge in a second kernel. A persistent variant
// (AttentionDecodeParams::persistent_blocks) runs on a few SMs beside a mixed step's prefill attention: each warp
// takes (row, kv head, part) units from a counter and streams each part through its own three-deep tile ring.
#include "kernels/cuda/attention_flash.cuh"

namespace surf::kernels::cuda {

namespace {

using namespace flash;

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

// ---- persistent decode ------------------------------------------------------------------------------------
// Each warp owns a slice of shared memory: its 16 query rows and a ring of kPwStages tiles of kPwKeys keys (K then
// V). A unit is (row b, kv head, key part); its tiles are copied kPwStages − 1 ahead of the one being attended, so
// a warp keeps two tiles (≈ 34 KB at head_dim 128) in flight while it computes, and four warps ≈ 139 KB an SM: the
// block fills the SM's shared memory (one block an SM, nothing else placed there). Parts of kPwPart keys bound the
// tail when units are taken from the counter in order.
constexpr int kPwWarps = 4, kPwKeys = 32, kPwStages = 3;
constexpr int64_t kPwPart = 1024, kPwUnits = 4096;  // part length; most units a launch splits into (bounds the workspace)

template <int DP>
constexpr size_t persistent_warp_elems() {
    return static_cast<size_t>(16 + kPwStages * 2 * kPwKeys) * (DP + 8);
}
template <int DP>
size_t persistent_smem_bytes() {
    return kPwWarps * persistent_warp_elems<DP>() * sizeof(bf16);
}

template <int DP>
__global__ void __launch_bounds__(32 * kPwWarps, 1) attention_decode_persistent_kernel(AttentionDecodeParams p, float scale_log2,
                                                                                        int64_t q_stride, int n_splits, int64_t part,
                                                                                        float* ws_o, float* ws_lse, int* next_unit) {
    constexpr int ld = DP + 8, kChunks = DP / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw) + warp * persistent_warp_elems<DP>();  // [16][ld]
    bf16* ring = Qs + 16 * ld;                                                            // stage s: K, then V [kPwKeys][ld]
    const int group = static_cast<int>(p.n_heads / p.n_kv_heads), D = static_cast<int>(p.head_dim);
    const int64_t units = p.batch * p.n_kv_heads * n_splits;
    for (;;) {
        int u = 0;
        if (lane == 0) u = atomicAdd(next_unit, 1);
        u = __shfl_sync(0xffffffffu, u, 0);
        if (u >= units) break;
        const int split = static_cast<int>(u % n_splits), kvh = static_cast<int>((u / n_splits) % p.n_kv_heads);
        const int64_t b = u / (static_cast<int64_t>(n_splits) * p.n_kv_heads);
        const int64_t len = p.seq_lens[b], start = split * part, end = min(len, start + part);
        const int n_tiles = end > start ? static_cast<int>((end - start + kPwKeys - 1) / kPwKeys) : 0;
        for (int c = lane; c < 16 * kChunks; c += 32) {
            const int row = c / kChunks, col = (c % kChunks) * 8;
            const bool ok = row < group && col < D;
            const bf16* q = p.q + (ok ? b * q_stride + static_cast<int64_t>(kvh * group + row) * D + col : 0);
            cp_async16(Qs + row * ld + col, q, ok);
        }
        detail::cp_async_commit();
        const KvSource src{p.k_cache, p.v_cache, p.block_table + b * p.max_pages_per_seq, p.page_size,
                           p.max_pages_per_seq, p.n_kv_heads * p.head_dim, kvh * p.head_dim, 0};
        auto stage_k = [&](int t) { return ring + (t % kPwStages) * 2 * kPwKeys * ld; };
        // One commit group per tile, empty past the last, so that "all but the newest kPwStages − 1 groups"
        // always means "tile t has landed".
#pragma unroll
        for (int t = 0; t < kPwStages - 1; ++t) {
            if (t < n_tiles) load_kv_tile<DP, kPwKeys>(src, start + t * kPwKeys, end, D, stage_k(t), stage_k(t) + kPwKeys * ld, ld, lane, 32);
            detail::cp_async_commit();
        }
        detail::cp_async_wait<kPwStages - 1>();  // the query rows
        __syncwarp();
        uint32_t qf[DP / 16][4];
        load_q_frags<DP>(qf, Qs, ld);
        WarpFlash<DP> st;
        st.init();
        for (int t = 0; t < n_tiles; ++t) {
            const int tn = t + kPwStages - 1;  // into the stage tile t − 1 used (every lane is past it: __syncwarp below)
            if (tn < n_tiles) load_kv_tile<DP, kPwKeys>(src, start + tn * kPwKeys, end, D, stage_k(tn), stage_k(tn) + kPwKeys * ld, ld, lane, 32);
            detail::cp_async_commit();
            detail::cp_async_wait<kPwStages - 1>();
            __syncwarp();
            const int lim = clamp_lim(end - (start + t * kPwKeys), kPwKeys);
            st.template attend<kPwKeys>(qf, stage_k(t), stage_k(t) + kPwKeys * ld, ld, lim, lim, scale_log2);
            __syncwarp();
        }
        st.reduce_l();
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = g + 8 * r;
            if (row >= group) continue;
            const int64_t h = kvh * group + row;
            const float L = st.l[r], inv = L > 0.0f ? 1.0f / L : 0.0f;
            const int64_t idx = (b * p.n_heads + h) * n_splits + split;
#pragma unroll
            for (int dt = 0; dt < DP / 8; ++dt) {
                const int col = dt * 8 + 2 * t4;
                if (col >= D) continue;
                const float v0 = st.o[dt][2 * r] * inv, v1 = st.o[dt][2 * r + 1] * inv;
                if (n_splits == 1) {
                    p.out[(b * p.n_heads + h) * D + col] = __float2bfloat16_rn(v0);
                    if (col + 1 < D) p.out[(b * p.n_heads + h) * D + col + 1] = __float2bfloat16_rn(v1);
                } else {
                    ws_o[idx * D + col] = v0;
                    if (col + 1 < D) ws_o[idx * D + col + 1] = v1;
                }
            }
            if (n_splits > 1 && t4 == 0) ws_lse[idx] = L > 0.0f ? st.m[r] + log2f(L) : -INFINITY;
        }
        detail::cp_async_wait<0>();  // (only empty groups are left) before the next unit reuses the slice
        __syncwarp();
    }
}

struct DecodePlan {
    int splits;
    int64_t part;
};

DecodePlan plan_decode(const AttentionDecodeParams& p) {
    const int64_t max_len = std::max<int64_t>(p.max_seq_len, 1);
    if (p.persistent_blocks > 0) {  // parts of ≤ kPwPart keys, ≤ kPwUnits units in all (a forced n_splits as in the other kernel)
        const int64_t rows = std::max<int64_t>(p.batch * p.n_kv_heads, 1);
        const int64_t splits = p.n_splits > 0 ? p.n_splits : std::clamp<int64_t>((max_len + kPwPart - 1) / kPwPart, 1, (kPwUnits + rows - 1) / rows);
        int64_t part = (max_len + splits - 1) / splits;
        part = (part + kPwKeys - 1) / kPwKeys * kPwKeys;
        return {static_cast<int>((max_len + part - 1) / part), part};
    }
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

template <int DP>
void launch_decode_persistent(const AttentionDecodeParams& p, float scale_log2, int64_t q_stride, const DecodePlan& plan,
                              float* ws_o, float* ws_lse, int* next_unit, cudaStream_t stream) {
    const size_t smem = persistent_smem_bytes<DP>();
    SURF_CUDA_CHECK(cudaFuncSetAttribute(attention_decode_persistent_kernel<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    SURF_CUDA_CHECK(cudaMemsetAsync(next_unit, 0, sizeof(int), stream));
    attention_decode_persistent_kernel<DP><<<static_cast<unsigned>(p.persistent_blocks), 32 * kPwWarps, smem, stream>>>(
        p, scale_log2, q_stride, plan.splits, plan.part, ws_o, ws_lse, next_unit);
    SURF_CUDA_CHECK_LAUNCH();
}

// Workspace: split partials (fp32 O rows, then their log-sum-exps), then the persistent kernel's unit counter.
size_t partials_bytes(const AttentionDecodeParams& p, const DecodePlan& plan) {
    if (plan.splits == 1) return 0;
    return static_cast<size_t>(p.batch * p.n_heads * plan.splits) * (p.head_dim + 1) * 4;
}

}  // namespace

int32_t attention_decode_splits(const AttentionDecodeParams& p) { return plan_decode(p).splits; }

size_t attention_decode_workspace_bytes(const AttentionDecodeParams& p) {
    const DecodePlan plan = plan_decode(p);
    const size_t partials = partials_bytes(p, plan);
    return p.persistent_blocks > 0 ? (partials + 15) / 16 * 16 + 16 : partials;
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
    if (plan.splits > 1 || p.persistent_blocks > 0) {
        SURF_CHECK(workspace != nullptr, "attention_decode: ", plan.splits, " splits", p.persistent_blocks > 0 ? " (persistent)" : "",
                   " need a workspace");
        ws_o = static_cast<float*>(workspace);
        ws_lse = ws_o + p.batch * p.n_heads * plan.splits * p.head_dim;
    }
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const float scale_log2 = scale * kLog2e;
    if (p.persistent_blocks > 0) {
        SURF_CHECK(p.persistent_blocks <= 65535, "attention_decode: persistent_blocks ", p.persistent_blocks, " too large");
        int* next_unit = reinterpret_cast<int*>(static_cast<unsigned char*>(workspace) + (partials_bytes(p, plan) + 15) / 16 * 16);
        switch (dp) {
            case 16: launch_decode_persistent<16>(p, scale_log2, q_stride, plan, ws_o, ws_lse, next_unit, stream); break;
            case 48: launch_decode_persistent<48>(p, scale_log2, q_stride, plan, ws_o, ws_lse, next_unit, stream); break;
            case 80: launch_decode_persistent<80>(p, scale_log2, q_stride, plan, ws_o, ws_lse, next_unit, stream); break;
            default: launch_decode_persistent<128>(p, scale_log2, q_stride, plan, ws_o, ws_lse, next_unit, stream); break;
        }
    } else {
        switch (dp) {
            case 16: launch_decode<16>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
            case 48: launch_decode<48>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
            case 80: launch_decode<80>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
            default: launch_decode<128>(p, scale_log2, q_stride, plan, ws_o, ws_lse, stream); break;
        }
    }
    if (plan.splits > 1) {
        attention_decode_combine_kernel<<<static_cast<unsigned>(p.batch * p.n_heads), 128, 0, stream>>>(
            p, plan.splits, ws_o, ws_lse);
        SURF_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace surf::kernels::cuda
