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
#include "kernels/cuda/attention_flash.cuh"
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

// 16-byte chunk i of a [rows][DP] tile: its row and column, and its byte offset in the 32-byte-swizzled layout
// (wgmma.cuh). Eight consecutive chunks are four rows' 32 bytes of one slab (128 contiguous bytes of shared
// memory: conflict-free copies), a warp's 32 chunks four rows × four slabs (whole 128-byte lines of global
// memory at head_dim ≥ 64).
template <int DP>
__device__ __forceinline__ int sw32_chunk(int i, int rows, int& row, int& col) {
    constexpr int kSlabs = DP / 16;
    const int j = i >> 3, slab = j % kSlabs;
    row = (j / kSlabs) * 4 + ((i >> 1) & 3);
    col = slab * 16 + (i & 1) * 8;
    return wgmma::sw32_offset(row, col, rows);
}

// Key tiles of 64: two blocks per SM (≤ 128 registers, ≤ 113 KB of shared memory each), so that one block's
// softmax runs beside the other's products; key tiles of 128: one block per SM.
template <int DP, int NK>
__global__ void __launch_bounds__(kThreads, NK == 64 ? 2 : 1)
attention_prefill_wgmma_kernel(AttentionPrefillParams p, float scale_log2, int64_t q_stride, int64_t out_stride, int n_splits,
                               float* ws_o, float* ws_lse) {
#if SURF_WGMMA_ENABLED
    static_assert(kThreads >= 2 * NK, "the prologue fills two tiles' key rows, one per thread");
    constexpr int kChunks = DP / 8, kTileChunks = NK * kChunks, kTilePasses = (kTileChunks + kThreads - 1) / kThreads;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [128][DP] 32-byte swizzled (wgmma.cuh)
    bf16* Kbuf = Qs + kWgmmaBlockRows * DP;         // [2][NK][DP] 32-byte swizzled
    bf16* Vbuf = Kbuf + 2 * NK * DP;                // [2][NK][DP] 32-byte swizzled
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

    // Q tile (zero rows past the sequence, zero columns past head_dim) joins the first K/V group.
    for (int i = tid; i < kWgmmaBlockRows * kChunks; i += kThreads) {
        int row, col;
        const int at = sw32_chunk<DP>(i, kWgmmaBlockRows, row, col);
        const bool ok = row < b.rows_here && col < b.D;
        const bf16* g = p.q + (ok ? static_cast<int64_t>(b.q0 + b.row0 + row) * q_stride + b.h * b.D + col : 0);
        cp_async16(reinterpret_cast<unsigned char*>(Qs) + at, g, ok);
    }
    if (tid < 2 * NK) key_rows[tid] = b.key_row(b.tile0 * NK + tid);  // tiles tile0 and tile0 + 1
    __syncthreads();
    if (b.tile0 < b.n_tiles) load_tile(0);
    detail::cp_async_commit();

    WarpFlash<DP> st;
    st.init();
    const int grow0 = b.row0 + group * 64;                          // this warpgroup's first row (seq-local)
    const int qi0 = grow0 + warp * 16 + (lane >> 2), qi1 = qi0 + 8;  // this thread's two rows
    // A warpgroup past the end of its sequence's rows copies tiles and meets the barriers, but skips the math.
    const bool group_has_rows = group * 64 < b.rows_here;
    // Q: K-major A operand, this group's 64 rows of each slab (8 rows per 256 bytes); one slab (128 rows · 32
    // bytes) per k-step.
    const uint64_t desc_q = wgmma::make_desc_sw32(reinterpret_cast<unsigned char*>(Qs) + group * 64 * 32, 16, 256);
    for (int it = b.tile0; it < b.n_tiles; ++it) {
        const int buf = (it - b.tile0) & 1;
        if (it + 1 < b.n_tiles) {
            load_tile(buf ^ 1);
            detail::cp_async_commit();
            detail::cp_async_wait<1>();
        } else {
            detail::cp_async_wait<0>();
        }
        wgmma::fence_proxy_async_smem();  // this thread's copies, visible to every warpgroup's wgmma after the barrier
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
                wgmma::wgmma_ss<NK>(sc, desc_q + ks * (kWgmmaBlockRows * 32 / 16), desc_k + ks * (NK * 32 / 16), ks > 0);
            }
            wgmma::commit();
            wgmma::wait<0>();
            wgmma::fence_operands(sc);
            if (kb + NK > b.len_k || (p.causal && kb + NK > b.past + grow0 + 1)) {
                int lim0 = b.len_k - kb, lim1 = lim0;
                if (p.causal) {
                    lim0 = min(lim0, b.past + qi0 + 1 - kb);
                    lim1 = min(lim1, b.past + qi1 + 1 - kb);
                }
                WarpFlash<DP>::template mask<NK>(sc, lim0, lim1);  // negative limits hide every key
            }
            st.template softmax_update<NK>(sc, scale_log2);
            uint32_t pa[NK / 16][4];
#pragma unroll
            for (int kk = 0; kk < NK / 16; ++kk) pack_weights<NK>(pa[kk], sc, kk);
            // O += P·V: V is an N-major B operand, 16 head-dim columns per slab (NK · 32 bytes apart), 8 keys per
            // 256 bytes; 16 keys (512 bytes) per k-step.
            const uint64_t desc_v = wgmma::make_desc_sw32(Vs, NK * 32, 256);
            wgmma::fence_operands(st.o);
            wgmma::fence();
#pragma unroll
            for (int kk = 0; kk < NK / 16; ++kk) wgmma::wgmma_rs_mn<DP>(st.o, pa[kk], desc_v + kk * (512 / 16));
            wgmma::commit();
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
    __trap();  // launched only on compute capability 9.0 (prefill_wgmma_available), where the sm_90a code runs
#endif
}

// The kernel with its shared-memory allowance set on the current device (a per-device attribute, so set on
// every call: engines on several GPUs share this code).
template <int DP, int NK>
auto* prepared_kernel() {
    auto* kernel = attention_prefill_wgmma_kernel<DP, NK>;
    SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(wgmma_smem_bytes<DP, NK>())));
    return kernel;
}

template <int DP, int NK>
int blocks_per_sm() {
    int n = 0;
    SURF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, prepared_kernel<DP, NK>(), kThreads, wgmma_smem_bytes<DP, NK>()));
    return std::max(n, 1);
}

template <int DP, int NK>
void launch(const AttentionPrefillParams& p, int n_splits, float scale_log2, int64_t q_stride, int64_t out_stride, float* ws_o,
            float* ws_lse, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((p.max_seqlen_q + kWgmmaBlockRows - 1) / kWgmmaBlockRows),
                    static_cast<unsigned>(p.n_heads * n_splits), static_cast<unsigned>(p.n_seq));
    auto* kernel = prepared_kernel<DP, NK>();
    kernel<<<grid, kThreads, wgmma_smem_bytes<DP, NK>(), stream>>>(p, scale_log2, q_stride, out_stride, n_splits, ws_o, ws_lse);
    SURF_CUDA_CHECK_LAUNCH();
}

template <int NK>
void launch_dp(const AttentionPrefillParams& p, int dp, int n_splits, float scale_log2, int64_t q_stride, int64_t out_stride,
               float* ws_o, float* ws_lse, cudaStream_t stream) {
    switch (dp) {
        case 16: launch<16, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        case 48: launch<48, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        case 80: launch<80, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
        default: launch<128, NK>(p, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream); break;
    }
}

template <int NK>
int blocks_per_sm_dp(int dp) {
    switch (dp) {
        case 16: return blocks_per_sm<16, NK>();
        case 48: return blocks_per_sm<48, NK>();
        case 80: return blocks_per_sm<80, NK>();
        default: return blocks_per_sm<128, NK>();
    }
}

}  // namespace

namespace flash {

bool prefill_wgmma_available() {
    int device = 0, major = 0, minor = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
}

int prefill_wgmma_blocks_per_sm(int dp, int keys) {
    return keys == 64 ? blocks_per_sm_dp<64>(dp) : blocks_per_sm_dp<128>(dp);
}

void launch_prefill_wgmma(const AttentionPrefillParams& p, int dp, int keys, int n_splits, float scale_log2, int64_t q_stride,
                          int64_t out_stride, float* ws_o, float* ws_lse, cudaStream_t stream) {
    if (keys == 64) launch_dp<64>(p, dp, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream);
    else launch_dp<128>(p, dp, n_splits, scale_log2, q_stride, out_stride, ws_o, ws_lse, stream);
}

}  // namespace flash

}  // namespace surf::kernels::cuda
