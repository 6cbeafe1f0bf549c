// Mamba-2 SSD chunked scan over packed variable-length sequences (spec §2.2, serving.md §3), fused into
// one kernel on bf16 tensor cores (mma.sync m16n8k16, fp32 accumulation).
//
// One block per (head, sequence) walks its sequence chunk by chunk (chunks start at the sequence's own
// offsets 0, Q, 2Q, …); when that gives too few blocks to fill the GPU (one long prompt: 128 blocks), each
// head runs as two blocks over halves of its head dim (the columns of x, y and rows of S are independent).
// The running state S [P×N] stays in fp32 registers as mma accumulators for the whole sequence, so chunk
// states never go through device memory and no workspace is needed. Per chunk:
//   dt_j = clamp(softplus(dt_raw + dt_bias)),  Λ = cumsum(dt·A)            (fp32, warp 0)
//   Y    = e^{Λ_i} · C·S_inᵀ                                               (C bf16, S_in rounded to bf16)
//        + ((C·Bᵀ) ⊙ e^{Λ_i−Λ_j} dt_j ⊙ [j ≤ i]) · X                      (C·Bᵀ fp32, the product rounded to
//        bf16)
//        + D·x
//   S    = e^{Λ_last}·S + Xᵀ · (e^{Λ_last−Λ_j} dt_j B_j)                  (B_j·weight rounded to bf16)
// Warp w computes output rows 16w..16w+15 of the chunk (C·Bᵀ only up to the diagonal) and a fixed slice
// of the state tiles. The grid puts the heads of one sequence next to each other, so x/B/C rows of a
// chunk come from HBM once and from L2 for the other heads of the group.
// Precision: dt, Λ, the decays and S are fp32; the mma operands are bf16 (x, B, C exact; decay-weighted
// operands and the state copy used for the output rounded to bf16, relative error ≤ 2^-9 each).
// (A chunk-parallel variant, one block per (chunk, head) with the state handed on through the slot, is slower
// in every case measured: docs/BENCHMARKS.md.)
#include "kernels/cuda/ssd_common.cuh"

#include <algorithm>

namespace surf::kernels::cuda {

namespace {

using namespace ssd_detail;
using detail::cp_async16;
using detail::pack_bf16x2;
using detail::smem_addr;
using detail::to_float;

constexpr int kThreads = 256, kWarps = kThreads / 32;

// Plain (not volatile) so the compiler may schedule the mma chain; it only reads registers.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// ldmatrix reads shared memory: volatile + memory clobber keeps it behind the barriers.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p))
                 : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p))
                 : "memory");
}
__device__ __forceinline__ void ldsm_x2_t(uint32_t (&r)[2], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(p))
                 : "memory");
}
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t v, float s0, float s1) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
    return pack_bf16x2(f.x * s0, f.y * s1);
}

// Shared-memory layout for d_state N and head_dim padded to PT (a multiple of 16).
//  X  [Q][PT+8]   bf16: the pad makes the 8 row addresses of an ldmatrix hit distinct 16-byte bank groups
//  B, C [Q][N]    bf16, Sb [PT][N] bf16 (the entering state): rows of ≥ 8 16-byte units are XOR-swizzled
//                 by (row & 7), shorter rows padded by one unit, for the same reason
//  dts, cum (Λ·log2 e), expl, wgt [Q] fp32, decay
template <int N, int PT>
struct Layout {
    static constexpr int kXs = PT + 8;
    static constexpr bool kSwizzle = N >= 64;
    static constexpr int kBs = kSwizzle ? N : N + 8;
    static constexpr size_t kX = 0;
    static constexpr size_t kB = kX + size_t{kMaxChunk} * kXs * 2;
    static constexpr size_t kC = kB + size_t{kMaxChunk} * kBs * 2;
    static constexpr size_t kS = kC + size_t{kMaxChunk} * kBs * 2;
    static constexpr size_t kF = kS + size_t{PT} * kBs * 2;
    static constexpr size_t kBytes = kF + (4 * kMaxChunk + 4) * 4;
    __device__ static int bc(int row, int col) {
        int unit = col >> 3;
        if (kSwizzle) unit ^= row & 7;
        return row * kBs + unit * 8 + (col & 7);
    }
};

// The tile split of one block: the state [PT×N] in m16 × n8 tiles, WN warps across n, WM across p; the
// output rows of a warp in PT/8 n8 tiles.
template <int N, int PT>
struct Tiles {
    static constexpr int MT = PT / 16, NT = N / 8;
    static constexpr int WN = NT < kWarps ? NT : kWarps;
    static constexpr int WM = kWarps / WN;
    static constexpr int NTW = NT / WN, MTW = (MT + WM - 1) / WM;
    static constexpr int PN8 = PT / 8;
};

// The block's views of its shared memory (offsets from one base, so they fold into the addressing).
template <int N, int PT>
struct ChunkSmem {
    using L = Layout<N, PT>;
    unsigned char* base;
    __device__ explicit ChunkSmem(unsigned char* b) : base(b) {}
    __device__ bf16* X() const { return reinterpret_cast<bf16*>(base + L::kX); }
    __device__ bf16* B() const { return reinterpret_cast<bf16*>(base + L::kB); }
    __device__ bf16* C() const { return reinterpret_cast<bf16*>(base + L::kC); }
    __device__ bf16* Sb() const { return reinterpret_cast<bf16*>(base + L::kS); }
    __device__ float* dts() const { return reinterpret_cast<float*>(base + L::kF); }
    __device__ float* cum() const { return dts() + kMaxChunk; }
    __device__ float* expl() const { return dts() + 2 * kMaxChunk; }
    __device__ float* wgt() const { return dts() + 3 * kMaxChunk; }
    __device__ float* decay() const { return dts() + 4 * kMaxChunk; }
};

// Which head-dim columns of which head a block computes, and where its chunk sits.
struct ChunkRef {
    int64_t tok0 = 0;  // first token of the chunk (packed index)
    int len = 0;       // tokens in the chunk (≤ Q)
    int h = 0, g_idx = 0;
    int p0 = 0, P = 0, P_all = 0;  // columns [p0, p0 + P) of the head's P_all
};

// Calls f(b, a, half, row, n) for every accumulator pair (row, n), (row, n + 1) of the state tiles this
// thread holds (s[b][a][2·half], s[b][a][2·half + 1]) whose tile lies inside PT; rows may be ≥ P (padding).
template <int N, int PT, typename F>
__device__ __forceinline__ void for_state_pairs(F&& f) {
    using T = Tiles<N, PT>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wn = warp % T::WN, wm = warp / T::WN;
#pragma unroll
    for (int b = 0; b < T::MTW; ++b) {
        const int mt = wm + T::WM * b;
        if (mt >= T::MT) continue;
#pragma unroll
        for (int a = 0; a < T::NTW; ++a) {
            const int n = (wn + T::WN * a) * 8 + 2 * t;
#pragma unroll
            for (int half = 0; half < 2; ++half) f(b, a, half, mt * 16 + g + 8 * half, n);
        }
    }
}

// Stages x (columns [p0, p0 + P) of head h), B and C of group g_idx for the chunk's tokens into shared memory
// (rows ≥ len and columns ≥ P as zeros) and dt_j into dts (0 past len). With `vec` the tiles go by 16-byte
// cp.async and the caller waits for them (cp_async_wait_all); dts are plain stores.
template <int N, int PT>
__device__ void stage_chunk(const SsdVarlenParams& p, const ChunkSmem<N, PT>& sm, const ChunkRef& ck,
                            float dt_bias, bool vec) {
    using L = Layout<N, PT>;
    const int tid = threadIdx.x, Q = static_cast<int>(p.chunk), len = ck.len, P = ck.P;
    const bf16* xg = p.x + ck.tok0 * p.x_stride + static_cast<int64_t>(ck.h) * ck.P_all + ck.p0;
    const bf16* bg = p.B + ck.tok0 * p.bc_stride + static_cast<int64_t>(ck.g_idx) * N;
    const bf16* cg = p.C + ck.tok0 * p.bc_stride + static_cast<int64_t>(ck.g_idx) * N;
    if (vec) {
        for (int e = tid; e < Q * (PT / 8); e += kThreads) {
            const int j = e / (PT / 8), u = e % (PT / 8);
            const bool ok = j < len && u * 8 < P;
            cp_async16(sm.X() + j * L::kXs + u * 8, ok ? xg + j * p.x_stride + u * 8 : xg, ok);
        }
        for (int e = tid; e < Q * (N / 8); e += kThreads) {
            const int j = e / (N / 8), u = e % (N / 8);
            const bool ok = j < len;
            cp_async16(sm.B() + L::bc(j, u * 8), ok ? bg + j * p.bc_stride + u * 8 : bg, ok);
            cp_async16(sm.C() + L::bc(j, u * 8), ok ? cg + j * p.bc_stride + u * 8 : cg, ok);
        }
        detail::cp_async_commit();
    } else {
        const bf16 zero = __float2bfloat16_rn(0.0f);
        for (int e = tid; e < Q * PT; e += kThreads) {
            const int j = e / PT, pp = e % PT;
            sm.X()[j * L::kXs + pp] = j < len && pp < P ? xg[j * p.x_stride + pp] : zero;
        }
        for (int e = tid; e < Q * N; e += kThreads) {
            const int j = e / N, n = e % N;
            sm.B()[L::bc(j, n)] = j < len ? bg[j * p.bc_stride + n] : zero;
            sm.C()[L::bc(j, n)] = j < len ? cg[j * p.bc_stride + n] : zero;
        }
    }
    if (tid < kMaxChunk) {
        float dt = 0.0f;
        if (tid < len) {
            dt = detail::softplus(to_float(p.dt_raw[(ck.tok0 + tid) * p.dt_stride + ck.h]) + dt_bias);
            dt = fminf(fmaxf(dt, p.dt_min), p.dt_max);
        }
        sm.dts()[tid] = dt;
    }
}

// st += Xᵀ·(w ⊙ B) over the chunk's len tokens: this thread's state tiles (weights wgt from chunk_decays).
template <int N, int PT>
__device__ __forceinline__ void accumulate_state(float (&st)[Tiles<N, PT>::MTW][Tiles<N, PT>::NTW][4],
                                                 const ChunkSmem<N, PT>& sm, int len) {
    using L = Layout<N, PT>;
    using T = Tiles<N, PT>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3, lr = lane & 7, lm = lane >> 3;
    const int wn = warp % T::WN, wm = warp / T::WN;
    for (int j0 = 0; j0 < len; j0 += 16) {
        const float w0 = sm.wgt()[j0 + 2 * t], w1 = sm.wgt()[j0 + 2 * t + 1];
        const float w8 = sm.wgt()[j0 + 8 + 2 * t], w9 = sm.wgt()[j0 + 9 + 2 * t];
        uint32_t bw[T::NTW][2];
#pragma unroll
        for (int a = 0; a < T::NTW; ++a) {
            const int n0 = (wn + T::WN * a) * 8;
            ldsm_x2_t(bw[a], sm.B() + L::bc(j0 + (lm & 1) * 8 + lr, n0));
            bw[a][0] = scale_bf16x2(bw[a][0], w0, w1);
            bw[a][1] = scale_bf16x2(bw[a][1], w8, w9);
        }
#pragma unroll
        for (int b = 0; b < T::MTW; ++b) {
            const int mt = wm + T::WM * b;
            if (mt >= T::MT) continue;
            uint32_t xa[4];
            ldsm_x4_t(xa, sm.X() + (j0 + (lm >> 1) * 8 + lr) * L::kXs + mt * 16 + (lm & 1) * 8);
#pragma unroll
            for (int a = 0; a < T::NTW; ++a) mma16816(st[b][a], xa, bw[a][0], bw[a][1]);
        }
    }
}

// yacc += ((C·Bᵀ) ⊙ e^{Λ_i−Λ_j}·dt_j ⊙ [j ≤ i]) · X for this warp's rows i0 = 16·warp … (caller: i0 < len).
template <int N, int PT>
__device__ __forceinline__ void add_intra_chunk(float (&yacc)[PT / 8][4], const ChunkSmem<N, PT>& sm) {
    using L = Layout<N, PT>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, lr = lane & 7,
              lm = lane >> 3;
    const int i0 = warp * 16, r0 = i0 + g, r1 = r0 + 8;
    const float cum0 = sm.cum()[r0], cum1 = sm.cum()[r1];
    // The warp's C rows (the A operand of every C·Bᵀ tile) kept in registers across the row where they fit
    // (head-dim slices ≤ 48: the state and y accumulators leave room), else re-read per tile.
    constexpr bool kHoistC = PT <= 48;
    uint32_t cf[kHoistC ? N / 16 : 1][4];
    if constexpr (kHoistC) {
#pragma unroll
        for (int ks = 0; ks < N / 16; ++ks)
            ldsm_x4(cf[ks], sm.C() + L::bc(i0 + (lm & 1) * 8 + lr, ks * 16 + (lm >> 1) * 8));
    }
    for (int jt = 0; jt <= warp; ++jt) {
        const int j0 = jt * 16;
        float cb[2][4] = {};
#pragma unroll
        for (int ks = 0; ks < N / 16; ++ks) {
            uint32_t b[4];
            ldsm_x4(b, sm.B() + L::bc(j0 + (lm >> 1) * 8 + lr, ks * 16 + (lm & 1) * 8));
            if constexpr (kHoistC) {
                mma16816(cb[0], cf[ks], b[0], b[1]);
                mma16816(cb[1], cf[ks], b[2], b[3]);
            } else {
                uint32_t a[4];
                ldsm_x4(a, sm.C() + L::bc(i0 + (lm & 1) * 8 + lr, ks * 16 + (lm >> 1) * 8));
                mma16816(cb[0], a, b[0], b[1]);
                mma16816(cb[1], a, b[2], b[3]);
            }
        }
        // Decay mask: element (i, j) × e^{Λ_i − Λ_j}·dt_j = 2^{(Λ_i − Λ_j)·log2 e}·dt_j for j ≤ i, else 0.
        // Branch-free: the exponent is clamped to ≤ 0 (Λ falls along the chunk, so only the masked entries
        // change) and the product selected.
#pragma unroll
        for (int nb = 0; nb < 2; ++nb) {
            const int j = j0 + nb * 8 + 2 * t;
            const float cj0 = sm.cum()[j], cj1 = sm.cum()[j + 1], d0 = sm.dts()[j], d1 = sm.dts()[j + 1];
            const float m00 = cb[nb][0] * ex2_ftz(fminf(cum0 - cj0, 0.0f)) * d0;
            const float m01 = cb[nb][1] * ex2_ftz(fminf(cum0 - cj1, 0.0f)) * d1;
            const float m10 = cb[nb][2] * ex2_ftz(fminf(cum1 - cj0, 0.0f)) * d0;
            const float m11 = cb[nb][3] * ex2_ftz(fminf(cum1 - cj1, 0.0f)) * d1;
            cb[nb][0] = j <= r0 ? m00 : 0.0f;
            cb[nb][1] = j + 1 <= r0 ? m01 : 0.0f;
            cb[nb][2] = j <= r1 ? m10 : 0.0f;
            cb[nb][3] = j + 1 <= r1 ? m11 : 0.0f;
        }
        // The m16n8 accumulator layout of two n8 tiles is the m16k16 A layout.
        const uint32_t pa[4] = {pack_bf16x2(cb[0][0], cb[0][1]), pack_bf16x2(cb[0][2], cb[0][3]),
                                pack_bf16x2(cb[1][0], cb[1][1]), pack_bf16x2(cb[1][2], cb[1][3])};
#pragma unroll
        for (int pp = 0; pp < PT / 16; ++pp) {
            uint32_t b[4];
            ldsm_x4_t(b, sm.X() + (j0 + (lm & 1) * 8 + lr) * L::kXs + pp * 16 + (lm >> 1) * 8);
            mma16816(yacc[2 * pp], pa, b[0], b[1]);
            mma16816(yacc[2 * pp + 1], pa, b[2], b[3]);
        }
    }
}

// y = yacc + D·x for this warp's rows of the chunk (rows ≥ len and columns ≥ P skipped), y of type TY; kPair:
// P even, so every column pair (pc, pc + 1) is inside P and 8-byte aligned (one store each).
template <typename TY, bool kPair, int N, int PT>
__device__ __forceinline__ void store_rows_as(TY* y, int64_t H, const float (&yacc)[PT / 8][4],
                                              const ChunkSmem<N, PT>& sm, const ChunkRef& ck, float Dh) {
    using L = Layout<N, PT>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int i = warp * 16 + g + 8 * half;
        if (i >= ck.len) continue;
        TY* row = y + ((ck.tok0 + i) * H + ck.h) * ck.P_all + ck.p0;
        const bf16* xs = sm.X() + i * L::kXs;
#pragma unroll
        for (int n = 0; n < PT / 8; ++n) {
            const int pc = n * 8 + 2 * t;
            if (pc >= ck.P) continue;
            const float2 xv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(xs + pc));
            const float v0 = yacc[n][2 * half] + Dh * xv.x, v1 = yacc[n][2 * half + 1] + Dh * xv.y;
            if constexpr (kPair) {
                store2(row + pc, v0, v1);
            } else {
                row[pc] = detail::from_float<TY>(v0);
                if (pc + 1 < ck.P) row[pc + 1] = detail::from_float<TY>(v1);
            }
        }
    }
}

template <int N, int PT>
__device__ __forceinline__ void store_rows(const SsdVarlenParams& p, const float (&yacc)[PT / 8][4],
                                           const ChunkSmem<N, PT>& sm, const ChunkRef& ck, float Dh) {
    const bool pair = (ck.P & 1) == 0;
    if (p.y_dtype == DType::kF32) {
        if (pair)
            store_rows_as<float, true>(static_cast<float*>(p.y), p.H, yacc, sm, ck, Dh);
        else
            store_rows_as<float, false>(static_cast<float*>(p.y), p.H, yacc, sm, ck, Dh);
    } else {
        if (pair)
            store_rows_as<bf16, true>(static_cast<bf16*>(p.y), p.H, yacc, sm, ck, Dh);
        else
            store_rows_as<bf16, false>(static_cast<bf16*>(p.y), p.H, yacc, sm, ck, Dh);
    }
}

// Slot state ↔ the state accumulators. Element (p, n) pairs (n, n+1) are adjacent in memory (N even).
template <int MTW, int NTW, int WM, int WN, int MT, typename Ref>
__device__ void state_io(const Ref& st, float (&s)[MTW][NTW][4], int P, int N, int wm, int wn, int g, int t,
                         bool load) {
#pragma unroll
    for (int b = 0; b < MTW; ++b) {
        const int mt = wm + WM * b;
#pragma unroll
        for (int a = 0; a < NTW; ++a) {
            const int n = (wn + WN * a) * 8 + 2 * t;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int row = mt * 16 + g + 8 * half;
                if (mt >= MT || row >= P) continue;
                if (load)
                    st.load2(static_cast<int64_t>(row) * N + n, s[b][a][2 * half], s[b][a][2 * half + 1]);
                else
                    st.store2(static_cast<int64_t>(row) * N + n, s[b][a][2 * half], s[b][a][2 * half + 1]);
            }
        }
    }
}

template <int N, int PT>
__global__ void __launch_bounds__(kThreads, PT <= 80 ? 2 : 1)
    ssd_fused_kernel(SsdVarlenParams p, bool vec, int split) {
    detail::pdl_prologue();
    using L = Layout<N, PT>;
    using T = Tiles<N, PT>;
    extern __shared__ __align__(128) unsigned char smem[];
    const ChunkSmem<N, PT> sm(smem);

    // Block (h·split + ps, s): head h's head-dim columns [p0, p0 + P) of sequence s (split > 1 runs a head as
    // independent column slices: more blocks when few sequences leave SMs idle; C·Bᵀ is computed per slice).
    const int h = blockIdx.x / split, ps = blockIdx.x % split, s = blockIdx.y;
    const int P_all = static_cast<int>(p.P), P = P_all / split, p0 = ps * P;
    const int Q = static_cast<int>(p.chunk), H = static_cast<int>(p.H);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int lr = lane & 7, lm = lane >> 3;  // ldmatrix: row within an 8×8 matrix, matrix index
    const int wn = warp % T::WN, wm = warp / T::WN;
    ChunkRef ck;
    ck.h = h, ck.g_idx = h / (H / static_cast<int>(p.G)), ck.p0 = p0, ck.P = P, ck.P_all = P_all;

    const int64_t seq_start = p.cu_seqlens[s];
    const int seq_len = p.cu_seqlens[s + 1] - p.cu_seqlens[s];
    const bool init = p.has_initial_state == nullptr || p.has_initial_state[s] != 0;
    const int64_t hpn = static_cast<int64_t>(H) * P_all * N,
                  in_slot = (static_cast<int64_t>(h) * P_all + p0) * N;
    auto state_io_all = [&](float(&acc)[T::MTW][T::NTW][4], bool load) {
        with_state_ref(p, p.slots[s], in_slot, hpn, [&](const auto& ref) {
            state_io<T::MTW, T::NTW, T::WM, T::WN, T::MT>(ref, acc, P, N, wm, wn, g, t, load);
        });
    };

    float st[T::MTW][T::NTW][4];
#pragma unroll
    for (int b = 0; b < T::MTW; ++b)
#pragma unroll
        for (int a = 0; a < T::NTW; ++a)
#pragma unroll
            for (int e = 0; e < 4; ++e) st[b][a][e] = 0.0f;
    if (init) state_io_all(st, true);

    const float A = p.A[h], dt_bias = p.dt_bias[h], Dh = p.D ? p.D[h] : 0.0f;

    for (int c0 = 0; c0 < seq_len; c0 += Q) {
        ck.len = min(Q, seq_len - c0);
        ck.tok0 = seq_start + c0;
        const bool s_zero = c0 == 0 && !init;
        __syncthreads();  // the previous chunk is done with every shared buffer
        stage_chunk(p, sm, ck, dt_bias, vec);
        // The entering state, bf16, [p][n]: the B operand of C·Sᵀ.
        for_state_pairs<N, PT>([&](int b, int a, int half, int row, int n) {
            *reinterpret_cast<uint32_t*>(sm.Sb() + L::bc(row, n)) =
                pack_bf16x2(st[b][a][2 * half], st[b][a][2 * half + 1]);
        });
        if (vec) detail::cp_async_wait_all();
        __syncthreads();
        if (warp == 0) chunk_decays(sm.dts(), sm.cum(), sm.expl(), sm.wgt(), sm.decay(), A);
        __syncthreads();

        // ---- outputs: warp w owns rows i0 = 16w .. i0 + 15 --------------------------------------------
        const int i0 = warp * 16;
        if (i0 < ck.len) {
            float yacc[T::PN8][4];
#pragma unroll
            for (int n = 0; n < T::PN8; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) yacc[n][e] = 0.0f;
            if (!s_zero) {  // e^{Λ_i}·C·S_inᵀ first, while yacc holds nothing else to scale
#pragma unroll 2
                for (int ks = 0; ks < N / 16; ++ks) {
                    uint32_t a[4];
                    ldsm_x4(a, sm.C() + L::bc(i0 + (lm & 1) * 8 + lr, ks * 16 + (lm >> 1) * 8));
#pragma unroll
                    for (int pp = 0; pp < PT / 16; ++pp) {
                        uint32_t b[4];
                        ldsm_x4(b, sm.Sb() + L::bc(pp * 16 + (lm >> 1) * 8 + lr, ks * 16 + (lm & 1) * 8));
                        mma16816(yacc[2 * pp], a, b[0], b[1]);
                        mma16816(yacc[2 * pp + 1], a, b[2], b[3]);
                    }
                }
                const float e0 = sm.expl()[i0 + g], e1 = sm.expl()[i0 + g + 8];
#pragma unroll
                for (int n = 0; n < T::PN8; ++n) {
                    yacc[n][0] *= e0;
                    yacc[n][1] *= e0;
                    yacc[n][2] *= e1;
                    yacc[n][3] *= e1;
                }
            }
            add_intra_chunk(yacc, sm);
            store_rows(p, yacc, sm, ck, Dh);
        }

        // ---- state: S ← e^{Λ_last}·S + Xᵀ·(w ⊙ B) ----------------------------------------------------
        const float dec = *sm.decay();
#pragma unroll
        for (int b = 0; b < T::MTW; ++b)
#pragma unroll
            for (int a = 0; a < T::NTW; ++a)
#pragma unroll
                for (int e = 0; e < 4; ++e) st[b][a][e] *= dec;
        accumulate_state(st, sm, ck.len);
    }

    state_io_all(st, false);
}

template <int N, int PT>
void launch_fused(const SsdVarlenParams& p, bool vec, int split, cudaStream_t stream) {
    constexpr size_t smem = Layout<N, PT>::kBytes;
    SURF_CUDA_CHECK(cudaFuncSetAttribute(ssd_fused_kernel<N, PT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>(p.H * split), static_cast<unsigned>(p.n_seq));
    detail::launch_kernel(ssd_fused_kernel<N, PT>, grid, kThreads, smem, stream, p, vec, split);
}

// The block's head-dim slice (P / split columns) padded to a multiple of 16.
template <int N>
void launch_for_p(const SsdVarlenParams& p, bool vec, int split, cudaStream_t stream) {
    const int64_t w = p.P / split;
    if (w <= 16)
        launch_fused<N, 16>(p, vec, split, stream);
    else if (w <= 32)
        launch_fused<N, 32>(p, vec, split, stream);
    else if (w <= 48)
        launch_fused<N, 48>(p, vec, split, stream);
    else if (w <= 64)
        launch_fused<N, 64>(p, vec, split, stream);
    else if (w <= 80)
        launch_fused<N, 80>(p, vec, split, stream);
    else
        launch_fused<N, 128>(p, vec, split, stream);
}

// Head-dim slices per head: 2 when (sequence, head) blocks would not give every SM two (a single long
// prompt runs 128 blocks on 132 SMs, each walking its chunks in series) and the halves stay even.
int choose_split(const SsdVarlenParams& p) {
    if (p.p_split > 0) return static_cast<int>(p.p_split);
    return p.n_seq * p.H < 2 * static_cast<int64_t>(detail::device_sm_count()) && p.P >= 32 && p.P % 4 == 0
               ? 2
               : 1;
}

bool aligned16(const void* ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

}  // namespace

// Fused: the running state lives in registers, nothing is staged in device memory.
size_t ssd_workspace_bytes(const SsdVarlenParams&) {
    return 0;
}

void ssd_varlen(const SsdVarlenParams& p, void*, cudaStream_t stream) {
    SURF_CHECK(p.x && p.B && p.C && p.dt_raw && p.dt_bias && p.A && p.state && p.cu_seqlens && p.slots && p.y,
               "ssd_varlen: null pointer");
    SURF_CHECK(p.n_seq > 0 && p.H > 0 && p.G > 0 && p.H % p.G == 0, "ssd_varlen: n_seq ", p.n_seq, " H ", p.H,
               " G ", p.G);
    SURF_CHECK(p.n_seq <= 65535, "ssd_varlen: n_seq ", p.n_seq, " exceeds the grid's y dimension");
    SURF_CHECK(p.chunk >= 16 && p.chunk <= kMaxChunk && p.chunk % 16 == 0, "ssd_varlen: chunk ", p.chunk,
               " must be a multiple of 16 in [16, 128]");
    SURF_CHECK(p.P > 0 && p.P <= 128, "ssd_varlen: head_dim ", p.P, " must be in [1, 128]");
    SURF_CHECK(p.x_stride >= p.H * p.P && p.bc_stride >= p.G * p.N && p.dt_stride >= p.H,
               "ssd_varlen: strides x ", p.x_stride, " bc ", p.bc_stride, " dt ", p.dt_stride);
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.state) % 8 == 0 && reinterpret_cast<uintptr_t>(p.y) % 8 == 0,
               "ssd_varlen: state and y must be 8-byte aligned");
    SURF_CHECK(!p.state_split || p.state_dtype == DType::kF32, "ssd_varlen: a split state must be fp32");
    // 16-byte cp.async staging when every row start is 16-byte aligned (bases, strides, and a block's column
    // offset h·P or its slice's); element loads otherwise (the mma.sync kernel only).
    const bool rows16 =
        aligned16(p.x) && aligned16(p.B) && aligned16(p.C) && p.x_stride % 8 == 0 && p.bc_stride % 8 == 0;
    if (ssd_detail::wgmma_applies(p, rows16 && p.P % 8 == 0)) {
        ssd_detail::launch_wgmma(p, stream);
        SURF_CUDA_CHECK_LAUNCH();
        return;
    }
    const int split = choose_split(p);
    SURF_CHECK(split >= 1 && p.P % split == 0 && (split == 1 || (p.P / split) % 2 == 0),
               "ssd_varlen: head_dim ", p.P, " cannot be split in ", split, " even slices");
    const bool vec = rows16 && (p.P / split) % 8 == 0;
    switch (p.N) {
        case 16: launch_for_p<16>(p, vec, split, stream); break;
        case 32: launch_for_p<32>(p, vec, split, stream); break;
        case 64: launch_for_p<64>(p, vec, split, stream); break;
        case 128: launch_for_p<128>(p, vec, split, stream); break;
        default: SURF_CHECK(false, "ssd_varlen: d_state ", p.N, " not instantiated (16/32/64/128)");
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
