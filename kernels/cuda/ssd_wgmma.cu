// Mamba-2 SSD chunked scan on Hopper warpgroup MMA (wgmma, sm_90a) for the Holotron shape (d_state N = 128,
// head_dim P = 80, chunks ≤ 128 tokens); ssd.cu's mma.sync kernel serves every other shape and device.
//
// Same schedule as that kernel: one block per (head, sequence) walks the sequence's chunks in order, the
// running state in fp32 accumulators. Two warpgroups; warpgroup g owns chunk rows i ∈ [64g, 64g + 64) of y
// and state rows n ∈ [64g, 64g + 64) of Sᵀ [N × P]. Per chunk, all from shared memory in the 32-byte-swizzled
// layouts of wgmma.cuh (tiles [rows][cols] of bf16 as slabs of 16 columns):
//   Y    = C·S_inᵀ               m64n80k16 × 8, A = C K-major, B = Sᵀ_in [n][p] MN-major; rows × e^{Λ_i}
//   CB   = C·Bᵀ                  m64n128k16 × 8, both K-major; masked in registers (j ≤ i, e^{Λ_i−Λ_j}·dt_j)
//   Y   += mask(CB)·X            m64n80k16 × 8, A = the masked CB from registers (bf16), B = X [j][p]
//   MN-major Sᵀ   = e^{Λ_last}·Sᵀ + Bᵀ·(w ⊙ X)   m64n80k16 × 8, A = Bᵀ (B [j][n] read MN-major), B = w ⊙ X
//   MN-major y    = Y + D·x
// Every product runs for both warpgroups over the whole chunk (warpgroup 0's C·Bᵀ columns past 64 are masked
// to zero): a wgmma under a branch the compiler cannot prove warpgroup-uniform would be serialized. Precision
// as ssd.cu's kernel, except that the state update's rounded operand is w ⊙ x (there w ⊙ B): bf16 operands,
// fp32 accumulation, the carried state fp32.
#include "kernels/cuda/ssd_common.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace surf::kernels::cuda {

namespace {

using ssd_detail::chunk_decays;
using ssd_detail::ex2_ftz;
using ssd_detail::kMaxChunk;
using ssd_detail::store2;
using ssd_detail::with_state_ref;

constexpr int kN = 128, kP = 80, kRows = 128, kThreads = 256;
// Shared memory, bytes: C and B [128][128], X and w ⊙ X [128][80], Sᵀ_in [128][80] (all 32-byte swizzled),
// then dts, cum (Λ·log2 e), expl, wgt [128] fp32 and the chunk's decay.
constexpr int kSlab = kRows * 32;  // one 16-column slab of a 128-row tile
constexpr int kOffC = 0, kOffB = kOffC + (kN / 16) * kSlab, kOffX = kOffB + (kN / 16) * kSlab;
constexpr int kOffXw = kOffX + (kP / 16) * kSlab, kOffSt = kOffXw + (kP / 16) * kSlab,
              kOffF = kOffSt + (kP / 16) * kSlab;
constexpr int kSmemBytes = kOffF + (4 * kMaxChunk + 4) * 4;

// Byte offset of element (row, col) of a 32-byte-swizzled 128-row tile.
[[maybe_unused]] __device__ __forceinline__ int at(int row, int col) {
    return wgmma::sw32_offset(row, col & ~7, kRows) + (col & 7) * 2;
}

// Copies rows [0, len) of a [len][C] bf16 slice (row stride `stride` elements) into a swizzled 128-row tile
// by 16-byte cp.async, rows past len as zeros.
template <int C>
__device__ __forceinline__ void stage_tile(unsigned char* tile, const bf16* g, int64_t stride, int len) {
    for (int i = threadIdx.x; i < kRows * (C / 8); i += kThreads) {
        int row, col;
        const int off = wgmma::sw32_chunk<C>(i, kRows, row, col);
        const bool ok = row < len;
        detail::cp_async16(tile + off, ok ? g + row * stride + col : g, ok);
    }
}

__global__ void __launch_bounds__(kThreads, 1) ssd_wgmma_kernel(SsdVarlenParams p) {
    detail::pdl_prologue();
#if SURF_WGMMA_ENABLED
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char* Cs = smem + kOffC;
    unsigned char* Bs = smem + kOffB;
    unsigned char* Xs = smem + kOffX;
    unsigned char* Xw = smem + kOffXw;
    unsigned char* St = smem + kOffSt;
    float* dts = reinterpret_cast<float*>(smem + kOffF);
    float* cum = dts + kMaxChunk;
    float* expl = cum + kMaxChunk;
    float* wgt = expl + kMaxChunk;
    float* decay = wgt + kMaxChunk;

    const int h = blockIdx.x, s = blockIdx.y, H = static_cast<int>(p.H), Q = static_cast<int>(p.chunk);
    const int tid = threadIdx.x, group = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, t = lane & 3;
    const int r0 = group * 64 + warp * 16 + (lane >> 2), r1 = r0 + 8;  // this thread's rows (y: i, state: n)
    const int g_idx = h / (H / static_cast<int>(p.G));
    const int64_t seq_start = p.cu_seqlens[s];
    const int seq_len = p.cu_seqlens[s + 1] - p.cu_seqlens[s];
    const bool init = p.has_initial_state == nullptr || p.has_initial_state[s] != 0;
    const int64_t hpn = static_cast<int64_t>(H) * kP * kN, in_slot = static_cast<int64_t>(h) * kP * kN;
    const bool y32 = p.y_dtype == DType::kF32;
    const float A = p.A[h], dt_bias = p.dt_bias[h], Dh = p.D ? p.D[h] : 0.0f;

    // Sᵀ rows r0, r1 (n), columns 8c + 2t + {0, 1} (p); the slot holds S [p][n]: accumulator sa[c][e] is
    // element slot_at(c, e) of the head's values in the slot.
    auto slot_at = [&](int c, int e) {
        return static_cast<int64_t>(8 * c + 2 * t + (e & 1)) * kN + (e < 2 ? r0 : r1);
    };
    float sa[kP / 8][4];
    with_state_ref(p, p.slots[s], in_slot, hpn, [&](const auto& ref) {
#pragma unroll
        for (int c = 0; c < kP / 8; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) sa[c][e] = init ? ref.load1(slot_at(c, e)) : 0.0f;
    });

    // Descriptors (16-byte units): K-major operands step one slab per k-step; MN-major ones 16 rows (512
    // bytes), with LBO = one slab (the next 16 columns of M or N) and SBO = 8 rows.
    const uint64_t desc_c =
        wgmma::make_desc_sw32(Cs + group * 64 * 32, 16, 256);    // A, K-major: this group's rows
    const uint64_t desc_b = wgmma::make_desc_sw32(Bs, 16, 256);  // B, K-major: all 128 rows j
    const uint64_t desc_bt =
        wgmma::make_desc_sw32(Bs + group * 4 * kSlab, kSlab, 256);  // A = Bᵀ, MN-major: n of this group
    const uint64_t desc_st = wgmma::make_desc_sw32(St, kSlab, 256);
    const uint64_t desc_x = wgmma::make_desc_sw32(Xs, kSlab, 256);
    const uint64_t desc_xw = wgmma::make_desc_sw32(Xw, kSlab, 256);
    constexpr int kSlabUnits = kSlab / 16, kRows16Units = 512 / 16;

    for (int c0 = 0; c0 < seq_len; c0 += Q) {
        const int len = min(Q, seq_len - c0);
        const int64_t tok0 = seq_start + c0;
        __syncthreads();  // the previous chunk's products are done with every tile
        stage_tile<kP>(Xs, p.x + tok0 * p.x_stride + static_cast<int64_t>(h) * kP, p.x_stride, len);
        stage_tile<kN>(Bs, p.B + tok0 * p.bc_stride + static_cast<int64_t>(g_idx) * kN, p.bc_stride, len);
        stage_tile<kN>(Cs, p.C + tok0 * p.bc_stride + static_cast<int64_t>(g_idx) * kN, p.bc_stride, len);
        detail::cp_async_commit();
        if (tid < kMaxChunk) {
            float dt = 0.0f;
            if (tid < len) {
                dt = detail::softplus(detail::to_float(p.dt_raw[(tok0 + tid) * p.dt_stride + h]) + dt_bias);
                dt = fminf(fmaxf(dt, p.dt_min), p.dt_max);
            }
            dts[tid] = dt;
        }
        // The entering state as bf16 Sᵀ [n][p]: the B operand of C·S_inᵀ.
#pragma unroll
        for (int c = 0; c < kP / 8; ++c) {
            const int pc = 8 * c + 2 * t;
            *reinterpret_cast<uint32_t*>(St + at(r0, pc)) = detail::pack_bf16x2(sa[c][0], sa[c][1]);
            *reinterpret_cast<uint32_t*>(St + at(r1, pc)) = detail::pack_bf16x2(sa[c][2], sa[c][3]);
        }
        detail::cp_async_wait_all();
        __syncthreads();
        if (warp == 0 && group == 0) chunk_decays(dts, cum, expl, wgt, decay, A);
        __syncthreads();
        // w ⊙ X (bf16): the B operand of the state update.
        for (int e = tid; e < kRows * kP / 2; e += kThreads) {
            const int j = e / (kP / 2), pc = (e % (kP / 2)) * 2;
            const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(Xs + at(j, pc)));
            *reinterpret_cast<uint32_t*>(Xw + at(j, pc)) = detail::pack_bf16x2(v.x * wgt[j], v.y * wgt[j]);
        }
        wgmma::fence_proxy_async_smem();  // this thread's generic-proxy writes (cp.async, Sᵀ, w ⊙ X) before
                                          // wgmma reads
        __syncthreads();

        // ---- Y = e^{Λ_i}·C·S_inᵀ ------------------------------------------------------------------------
        float ya[kP / 8][4];
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < kN / 16; ++ks) {
            wgmma::wgmma_ss_n80<0, 1>(ya, desc_c + ks * kSlabUnits, desc_st + ks * kRows16Units, ks > 0);
        }
        wgmma::commit();
        // ---- CB = C·Bᵀ, issued behind it
        // --------------------------------------------------------------------
        float cb[kRows / 8][4];
#pragma unroll
        for (int ks = 0; ks < kN / 16; ++ks) {
            wgmma::wgmma_ss<kRows>(cb, desc_c + ks * kSlabUnits, desc_b + ks * kSlabUnits, ks > 0);
        }
        wgmma::commit();
        wgmma::wait<1>();
        wgmma::fence_operands(ya);
        const float e0 = expl[r0], e1 = expl[r1];
#pragma unroll
        for (int c = 0; c < kP / 8; ++c) {
            ya[c][0] *= e0;
            ya[c][1] *= e0;
            ya[c][2] *= e1;
            ya[c][3] *= e1;
        }
        wgmma::wait<0>();
        wgmma::fence_operands(cb);
        // Causal decay mask (branch-free, as ssd.cu), then the bf16 A fragments of mask(CB)·X.
        const float cum0 = cum[r0], cum1 = cum[r1];
        uint32_t pa[kRows / 16][4];
#pragma unroll
        for (int c = 0; c < kRows / 8; ++c) {
            const int j = 8 * c + 2 * t;
            const float cj0 = cum[j], cj1 = cum[j + 1], d0 = dts[j], d1 = dts[j + 1];
            const float m00 = cb[c][0] * ex2_ftz(fminf(cum0 - cj0, 0.0f)) * d0;
            const float m01 = cb[c][1] * ex2_ftz(fminf(cum0 - cj1, 0.0f)) * d1;
            const float m10 = cb[c][2] * ex2_ftz(fminf(cum1 - cj0, 0.0f)) * d0;
            const float m11 = cb[c][3] * ex2_ftz(fminf(cum1 - cj1, 0.0f)) * d1;
            const uint32_t lo = detail::pack_bf16x2(j <= r0 ? m00 : 0.0f, j + 1 <= r0 ? m01 : 0.0f);
            const uint32_t hi = detail::pack_bf16x2(j <= r1 ? m10 : 0.0f, j + 1 <= r1 ? m11 : 0.0f);
            // The accumulator layout of two n8 tiles is the m16k16 A layout: tile 2kk → a[0], a[1]; 2kk+1 →
            // a[2], a[3].
            pa[c >> 1][(c & 1) * 2] = lo;
            pa[c >> 1][(c & 1) * 2 + 1] = hi;
        }
        // ---- Y += mask(CB)·X; Sᵀ = e^{Λ_last}·Sᵀ + Bᵀ·(w ⊙ X)
        // -----------------------------------------------
        const float dec = *decay;
#pragma unroll
        for (int c = 0; c < kP / 8; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) sa[c][e] *= dec;
        wgmma::fence_operands(ya);
        wgmma::fence_operands(sa);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kRows / 16; ++kk)
            wgmma::wgmma_rs_mn<kP>(ya, pa[kk], desc_x + kk * kRows16Units);
        wgmma::commit();
#pragma unroll
        for (int kk = 0; kk < kRows / 16; ++kk) {
            wgmma::wgmma_ss_n80<1, 1>(sa, desc_bt + kk * kRows16Units, desc_xw + kk * kRows16Units, 1);
        }
        wgmma::commit();
        wgmma::wait<0>();
        wgmma::fence_operands(ya);
        wgmma::fence_operands(sa);
        wgmma::fence_operands(pa);

        // ---- y = Y + D·x ---------------------------------------------------------------------------------
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int i = half ? r1 : r0;
            if (i >= len) continue;
            const int64_t row = ((tok0 + i) * H + h) * kP;
#pragma unroll
            for (int c = 0; c < kP / 8; ++c) {
                const int pc = 8 * c + 2 * t;
                const float2 xv =
                    __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(Xs + at(i, pc)));
                const float v0 = ya[c][2 * half] + Dh * xv.x, v1 = ya[c][2 * half + 1] + Dh * xv.y;
                if (y32)
                    store2(static_cast<float*>(p.y) + row + pc, v0, v1);
                else
                    store2(static_cast<bf16*>(p.y) + row + pc, v0, v1);
            }
        }
    }

    with_state_ref(p, p.slots[s], in_slot, hpn, [&](const auto& ref) {
#pragma unroll
        for (int c = 0; c < kP / 8; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) ref.store1(slot_at(c, e), sa[c][e]);
    });
#else
    __trap();  // launched only on compute capability 9.0 (wgmma_applies), where the sm_90a code runs
#endif
}

}  // namespace

namespace ssd_detail {

bool wgmma_applies(const SsdVarlenParams& p, bool vec) {
    return p.wgmma && vec && p.N == kN && p.P == kP && p.chunk <= kMaxChunk && detail::device_runs_sm90a() &&
           p.n_seq * p.H <= detail::device_sm_count();
}

void launch_wgmma(const SsdVarlenParams& p, cudaStream_t stream) {
    SURF_CUDA_CHECK(
        cudaFuncSetAttribute(ssd_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    const dim3 grid(static_cast<unsigned>(p.H), static_cast<unsigned>(p.n_seq));
    detail::launch_kernel(ssd_wgmma_kernel, grid, kThreads, kSmemBytes, stream, p);
}

}  // namespace ssd_detail

}  // namespace surf::kernels::cuda
