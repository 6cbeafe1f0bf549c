// Selective state update (Mamba-2 decode step, spec §2.1) on slot-indexed states:
//   dt = softplus(dt_raw + dt_bias); S ← exp(dt·A)·S + dt·x⊗B; y = S·C + D·x.
// Memory-bound: each (sequence, head) reads and writes its P×N state once. One block per (sequence,
// head, slice of P / row_split state rows). The block's state rows (contiguous; a whole head is 40 KB fp32 /
// 20 KB bf16 at P = 80, N = 128) are first copied into shared memory with 16-byte cp.async, issued before the
// dependent dt/B/C loads: the bytes in flight per SM are then bounded by shared memory (5 fp32 blocks ≈ 200
// KB) instead of by registers. With SsuParams::bulk_stage the copy is one bulk copy on the copy engine (TMA),
// issued by one thread and completing on an mbarrier: the same bytes without 1,280 copy instructions a block
// (faster: docs/BENCHMARKS.md). Then a state row of N values is spread over N / (16 / sizeof(state)) lanes,
// each lane updating 16 bytes (4 fp32 or 8 bf16 values) and storing them straight back to global memory.
//
// Replay (SsuParams::replay_window K > 0; ReplaySSM, spec/serving.md §1.6): the stored state lags by up to
// K − 1 pending tokens whose inputs (x, B, dt_raw) sit in a per-slot ring of K entries. A step reads the
// state, applies the pending tokens and its own on the fly for y, and writes the state back only on every
// K-th token (the fold); other steps store their inputs (≈ 22 KB a row and layer at the Holotron shapes)
// instead of the 5.2 MB state. Same blocks and staging as above; the rows are walked with fewer lanes a row
// (ReplayRowLayout). A split fp32 state (SsuParams::state_split, ssm_state.cuh) stages its bf16 plane only;
// folding rows read their low halves from global memory.
#include <cstring>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ssm_state.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::to_float;

constexpr int kSsuThreads = 128;

template <typename TS>
struct Vec;
template <>
struct Vec<float> {
    static constexpr int kN = 4;
    using Raw = float4;
    __device__ static void unpack(const Raw& r, float (&v)[kN]) {
        v[0] = r.x;
        v[1] = r.y;
        v[2] = r.z;
        v[3] = r.w;
    }
    __device__ static Raw pack(const float (&v)[kN]) { return make_float4(v[0], v[1], v[2], v[3]); }
};
template <>
struct Vec<bf16> {
    static constexpr int kN = 8;
    using Raw = uint4;
    __device__ static void unpack(const Raw& r, float (&v)[kN]) {
        const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
            v[2 * i] = f.x;
            v[2 * i + 1] = f.y;
        }
    }
    __device__ static Raw pack(const float (&v)[kN]) {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
            w[i] = *reinterpret_cast<const uint32_t*>(&h);
        }
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
};

// The fp32 state as two 16-bit planes (SsuParams::state_split, ssm_state.cuh): a lane's chunk is 8 values, 16
// bytes of each plane. Only the replay kernel takes it.
struct SplitF32 {};
template <>
struct Vec<SplitF32> {
    static constexpr int kN = 8;
};
template <typename TS>
constexpr bool kIsSplit = std::is_same_v<TS, SplitF32>;
// Bytes a value stages in shared memory: a split state stages its bf16 plane only (a folding row, one in K,
// reads its low halves from global memory as it goes), so its blocks are the bf16 state's: whole heads of 20
// KB at the Holotron shape (not two 10 KB halves: twice the blocks, each loading the same small inputs, would
// run far more instructions than the bf16 update on the same bytes).
template <typename TS>
constexpr int64_t kStagedBytes = kIsSplit<TS> ? 2 : static_cast<int64_t>(sizeof(TS));

// How a block's warps walk the state: a row of N values over N / kVec lanes, each lane kVec values (16
// bytes).
template <typename TS, int N>
struct RowLayout {
    static constexpr int kVec = Vec<TS>::kN;
    static constexpr int kLanesPerRow = N / kVec;
    static_assert(kLanesPerRow >= 1 && kLanesPerRow <= 32, "row must fit a warp");
    static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
    static constexpr int kRowsPerStep = kRowsPerWarp * (kSsuThreads / 32);
};

// The replay kernel's walk: a row over L = min(8, N / kVec) lanes, each lane kChunks 16-byte chunks, a warp
// 32 / L rows at a time. Fewer lanes a row than RowLayout: one reduction (log₂ L shuffles) serves 32 / L
// rows, and the row's tokens spread over its lanes (fewer instructions in a warp's row loop).
template <typename TS, int N>
struct ReplayRowLayout {
    static constexpr int kVec = Vec<TS>::kN;
    static constexpr int kLanesPerRow = N / kVec < 8 ? N / kVec : 8;
    static_assert(kLanesPerRow >= 1 && N % (kVec * kLanesPerRow) == 0, "row must split into whole chunks");
    static constexpr int kChunks = N / (kVec * kLanesPerRow);
    static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
    static constexpr int kRowsPerStep = kRowsPerWarp * (kSsuThreads / 32);
};

// The block's `bytes` of contiguous state into shared memory: 16-byte cp.async by every thread (one commit
// group), or (SsuParams::bulk_stage) one bulk copy on the copy engine issued by thread 0, completing on
// `bar`. Call with the whole block; wait_staged_state then makes the bytes visible to every thread. `l2`: the
// source lines' L2 cache policy (detail::l2_policy).
__device__ __forceinline__ void stage_state(unsigned char* smem, const void* state, int bytes, bool bulk,
                                            uint64_t* bar, uint64_t l2) {
    if (bulk) {
#if SURF_BULK_COPY_ENABLED
        if (threadIdx.x == 0) {
            detail::mbarrier_init(bar, 1);
            detail::bulk_copy_to_smem(smem, state, static_cast<uint32_t>(bytes), bar, l2);
        }
#else
        __trap();  // the host allows bulk staging on compute capability ≥ 9.0 only
#endif
        return;
    }
    for (int i = threadIdx.x; i < bytes / 16; i += kSsuThreads) {
        detail::cp_async16(smem + i * 16, static_cast<const unsigned char*>(state) + i * 16, true, l2);
    }
    detail::cp_async_commit();
}
// Stores one 16-byte chunk of state (a Vec<TS>::Raw) under the L2 cache policy `l2`.
template <typename Raw>
__device__ __forceinline__ void store_state(void* dst, const Raw& v, uint64_t l2) {
    static_assert(sizeof(Raw) == 16, "state chunks are 16 bytes");
    detail::st_global16(dst, *reinterpret_cast<const uint4*>(&v), l2);
}
// Waits for stage_state's copy, and is a block barrier (shared-memory writes before it are visible after it).
__device__ __forceinline__ void wait_staged_state(bool bulk, uint64_t* bar) {
    if (bulk) {
        __syncthreads();  // the barrier's initialisation, visible to every thread before it waits
        detail::mbarrier_wait(bar, 0);
    } else {
        detail::cp_async_wait_all();
        __syncthreads();
    }
}

template <typename TS, typename TY, int N>
__global__ void __launch_bounds__(kSsuThreads) ssu_kernel(SsuParams p, int row_split) {
    detail::pdl_prologue();
    using V = Vec<TS>;
    using RL = RowLayout<TS, N>;
    constexpr int kVec = RL::kVec, kLanesPerRow = RL::kLanesPerRow, kRowsPerWarp = RL::kRowsPerWarp,
                  kRowsPerStep = RL::kRowsPerStep;
    extern __shared__ __align__(16) unsigned char ssu_smem[];
    // Block = (sequence b, head h, rows [row0, row0 + P) of the head's p.P state rows).
    const int64_t bh = blockIdx.x / row_split, b = bh / p.H, h = bh % p.H;
    const int64_t g = h / (p.H / p.G);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int sub = lane % kLanesPerRow, row_in_warp = lane / kLanesPerRow;
    const int n0 = sub * kVec;
    const int P = static_cast<int>(p.P) / row_split, row0 = static_cast<int>(blockIdx.x % row_split) * P;
    TS* S = static_cast<TS*>(p.state) + ((static_cast<int64_t>(p.slots[b]) * p.H + h) * p.P + row0) * N;

    // The state first: nothing it depends on is computed here.
    __shared__ uint64_t stage_bar;
    const uint64_t l2 = detail::l2_policy(p.l2_evict_first);
    stage_state(ssu_smem, S, P * N * static_cast<int>(sizeof(TS)), p.bulk_stage, &stage_bar, l2);

    float dt = detail::softplus(to_float(p.dt_raw[b * p.dt_stride + h]) + p.dt_bias[h]);
    dt = fminf(fmaxf(dt, p.dt_min), p.dt_max);
    const float dA = __expf(dt * p.A[h]);
    const float Dh = p.D ? p.D[h] : 0.0f;
    float Bv[kVec], Cv[kVec];
    const bf16* Bp = p.B + b * p.bc_stride + g * N + n0;
    const bf16* Cp = p.C + b * p.bc_stride + g * N + n0;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
        Bv[j] = to_float(Bp[j]) * dt;  // dt·B folded once
        Cv[j] = to_float(Cp[j]);
    }
    const bf16* x = p.x + b * p.x_stride + h * p.P + row0;
    TY* y = static_cast<TY*>(p.y) + (b * p.H + h) * p.P + row0;
    wait_staged_state(p.bulk_stage, &stage_bar);

    const TS* Ss = reinterpret_cast<const TS*>(ssu_smem);
#pragma unroll 4
    for (int r0 = 0; r0 < P; r0 += kRowsPerStep) {
        const int row = r0 + warp * kRowsPerWarp + row_in_warp;
        float acc = 0.0f, xv = 0.0f;
        if (row < P) {
            xv = to_float(x[row]);
            float s[kVec];
            V::unpack(*reinterpret_cast<const typename V::Raw*>(Ss + row * N + n0), s);
#pragma unroll
            for (int j = 0; j < kVec; ++j) {
                s[j] = dA * s[j] + xv * Bv[j];
                acc += s[j] * Cv[j];
            }
            store_state(S + static_cast<int64_t>(row) * N + n0, V::pack(s), l2);
        }
        // Reduce over the row's lanes (all lanes take part: shuffles need the full warp).
#pragma unroll
        for (int o = kLanesPerRow / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (row < P && sub == 0) y[row] = detail::from_float<TY>(acc + Dh * xv);
    }
}

// Loads kVec consecutive fp32 values from 16-byte-aligned shared memory.
template <int kVec>
__device__ __forceinline__ void load_f32(const float* src, float (&v)[kVec]) {
#pragma unroll
    for (int i = 0; i < kVec; i += 4) {
        const float4 f = *reinterpret_cast<const float4*>(src + i);
        v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
    }
}
// Loads kVec consecutive bf16 values (8-byte-aligned shared memory) as fp32.
template <int kVec>
__device__ __forceinline__ void load_bf16(const bf16* src, float (&v)[kVec]) {
#pragma unroll
    for (int i = 0; i < kVec; i += 4) {
        const uint2 raw = *reinterpret_cast<const uint2*>(src + i);
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        v[i] = a.x, v[i + 1] = a.y, v[i + 2] = b.x, v[i + 3] = b.y;
    }
}

// Shared memory of a replay block: its state rows, per token j (pending ones, then this row's) Bⱼ [N] as bf16
// (as stored), then as fp32 C [N], xⱼ [rows], fⱼ = dtⱼ·(decay after j), qⱼ = fⱼ·(Bⱼ·C) and the raw dt inputs.
// Bⱼ and C are read 4 values at a time (their offsets are multiples of 16 bytes: the state slice and K·N·2
// are); the rest one value at a time. ≈ 24.4 KB at fp32, 40 rows, K = 8: nine blocks an SM.
struct ReplaySmem {
    int64_t state_bytes, K, rows, N;
    __host__ __device__ int64_t b_off() const { return state_bytes; }
    __host__ __device__ int64_t c_off() const { return b_off() + K * N * 2; }
    __host__ __device__ int64_t x_off() const { return c_off() + N * 4; }
    __host__ __device__ int64_t f_off() const { return x_off() + K * rows * 4; }
    __host__ __device__ int64_t bytes() const { return f_off() + 3 * K * 4; }
};

// kHasToken: a decode step (this row's token on top of its pending ones); else a fold of the pending tokens.
// A block's small inputs (its tokens' B, x and dt, and C: ≈ 1.5 k values at K = 8) are loaded in one round of
// independent loads issued before the state's copy: with the memory system saturated by the state copies,
// each further dependent round trip would cost the block several µs. kVecInputs (the host's check: the
// slice's P, x, B, C, their strides and the replay entries all allow 16-byte accesses): the small inputs come
// in 16-byte chunks of 8 values (B and x rows, C) instead of one value a load, with the chunk → source
// mapping done once per chunk: one value a load makes the block's once-per-warp code a large share of its
// instructions, which matters wherever the kernel is issue-bound rather than waiting on DRAM.
template <typename TS, typename TY, int N, bool kHasToken, bool kVecInputs>
__global__ void __launch_bounds__(kSsuThreads, 9) ssu_replay_kernel(SsuParams p, int row_split) {
    detail::pdl_prologue();
    using V = Vec<TS>;
    using RL = ReplayRowLayout<TS, N>;
    constexpr bool kSplit = kIsSplit<TS>;
    constexpr int kVec = RL::kVec, kChunks = RL::kChunks, kLanesPerRow = RL::kLanesPerRow,
                  kRowsPerWarp = RL::kRowsPerWarp;
    constexpr int kRowsPerStep = RL::kRowsPerStep;
    constexpr int kPerThread = 16;  // values each thread loads per round
    extern __shared__ __align__(16) unsigned char ssu_smem[];
    __shared__ float decay_all_s;
    __shared__ uint64_t stage_bar;
    const int64_t bh = blockIdx.x / row_split, b = bh / p.H, h = bh % p.H;
    const int64_t heads_per_group = p.H / p.G, g = h / heads_per_group;
    const int K = static_cast<int>(p.replay_window), count = p.replay_count[b];
    // A count outside [0, K) is the caller's bug: such a row writes nothing. A fold with nothing pending is a
    // no-op.
    if (count < 0 || count >= K || (!kHasToken && count == 0)) return;
    const int n_tok = count + (kHasToken ? 1 : 0);  // tokens 0 … count − 1 pending, token `count` this row's
    const bool fold = !kHasToken || count == K - 1;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int sub = lane % kLanesPerRow, row_in_warp = lane / kLanesPerRow;
    const int P = static_cast<int>(p.P) / row_split, slice = static_cast<int>(blockIdx.x % row_split),
              row0 = slice * P;
    const int64_t slot = p.slots[b], E = p.H * p.P + p.G * N + p.H;  // ssm_replay_entry_elems
    // The block's first state row: plain, or (split) in the slot's high plane, its low plane hpn values on.
    const int64_t hpn = p.H * p.P * N, in_slot = (h * p.P + row0) * N;
    void* S = nullptr;
    uint16_t* S_low = nullptr;
    if constexpr (kSplit) {
        S = static_cast<uint16_t*>(p.state) + slot * 2 * hpn + in_slot;
        S_low = static_cast<uint16_t*>(S) + hpn;
    } else {
        S = static_cast<TS*>(p.state) + slot * hpn + in_slot;
    }
    bf16* entries = static_cast<bf16*>(p.replay) + slot * K * E;  // entry j: x [H·P] | B [G·N] | dt_raw [H]
    const int64_t b_at = p.H * p.P + g * N, x_at = h * p.P + row0, dt_at = p.H * p.P + p.G * N + h;
    const bf16* x_row = kHasToken ? p.x + b * p.x_stride + x_at : nullptr;
    const bf16* B_row = kHasToken ? p.B + b * p.bc_stride + g * N : nullptr;

    const ReplaySmem lay{P * N * kStagedBytes<TS>, K, P, N};
    bf16* Bs = reinterpret_cast<bf16*>(ssu_smem + lay.b_off());    // [K][N]
    float* Cs = reinterpret_cast<float*>(ssu_smem + lay.c_off());  // [N]
    float* xs = reinterpret_cast<float*>(ssu_smem + lay.x_off());  // [K][P]
    float* fj = reinterpret_cast<float*>(ssu_smem + lay.f_off());  // [K]
    float* qj = fj + K;                                            // [K]
    float* raw_dt = qj + K;                                        // [K]
    // The staged values as one index space: Bⱼ (n_tok · N), xⱼ (n_tok · P), dt_rawⱼ (n_tok), then C (N).
    const int seg_b = n_tok * N, seg_x = seg_b + n_tok * P, seg_dt = seg_x + n_tok,
              total = seg_dt + (kHasToken ? N : 0);
    auto source = [&](int i) -> const bf16* {
        if (i < seg_b) {
            const int j = i / N, n = i % N;
            return j < count ? entries + j * E + b_at + n : B_row + n;
        }
        if (i < seg_x) {
            const int j = (i - seg_b) / P, r = (i - seg_b) % P;
            return j < count ? entries + j * E + x_at + r : x_row + r;
        }
        if (i < seg_dt) {
            const int j = i - seg_x;
            return j < count ? entries + j * E + dt_at : p.dt_raw + b * p.dt_stride + h;
        }
        return p.C + b * p.bc_stride + g * N + (i - seg_dt);
    };
    auto target = [&](int i) -> float* {  // (i ≥ seg_b: the B values go to Bs as they are)
        return i < seg_x ? xs + (i - seg_b) : i < seg_dt ? raw_dt + (i - seg_x) : Cs + (i - seg_dt);
    };
    bf16 staged[kPerThread];
    auto load_round = [&](int base) {
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
            const int i = base + k * kSsuThreads + tid;
            if (i < total) staged[k] = *source(i);
        }
    };
    auto store_round = [&](int base) {
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
            const int i = base + k * kSsuThreads + tid;
            if (i < seg_b)
                Bs[i] = staged[k];
            else if (i < total)
                *target(i) = to_float(staged[k]);
        }
    };
    // The same values in 16-byte chunks: Bⱼ (n_tok · N/8), xⱼ (n_tok · P/8), then C (N/8); dt_rawⱼ one a
    // thread.
    constexpr int kPerChunk = 8, kChunksPerThread = 4, nb = N / kPerChunk;
    const int nx = P / kPerChunk, vseg_b = n_tok * nb, vseg_x = vseg_b + n_tok * nx,
              vtotal = vseg_x + (kHasToken ? nb : 0);
    auto vsource = [&](int c) -> const uint4* {
        if (c < vseg_b) {
            const int j = c / nb, q = c % nb;
            return reinterpret_cast<const uint4*>((j < count ? entries + j * E + b_at : B_row) +
                                                  q * kPerChunk);
        }
        if (c < vseg_x) {
            const int j = (c - vseg_b) / nx, q = (c - vseg_b) % nx;
            return reinterpret_cast<const uint4*>((j < count ? entries + j * E + x_at : x_row) +
                                                  q * kPerChunk);
        }
        return reinterpret_cast<const uint4*>(p.C + b * p.bc_stride + g * N + (c - vseg_x) * kPerChunk);
    };
    uint4 chunk[kChunksPerThread];
    bf16 dt_staged{};
    auto vload_round = [&](int base) {
#pragma unroll
        for (int k = 0; k < kChunksPerThread; ++k) {
            const int c = base + k * kSsuThreads + tid;
            if (c < vtotal) chunk[k] = *vsource(c);
        }
        if (base == 0 && tid < n_tok)
            dt_staged = tid < count ? entries[tid * E + dt_at] : p.dt_raw[b * p.dt_stride + h];
    };
    auto vstore_round = [&](int base) {
#pragma unroll
        for (int k = 0; k < kChunksPerThread; ++k) {
            const int c = base + k * kSsuThreads + tid;
            if (c >= vtotal) continue;
            if (c < vseg_b) {
                *reinterpret_cast<uint4*>(Bs + (c / nb) * N + (c % nb) * kPerChunk) = chunk[k];
                continue;
            }
            float v[kPerChunk];
            detail::unpack_bf16x8(chunk[k], v);
            float* dst = c < vseg_x ? xs + ((c - vseg_b) / nx) * P + ((c - vseg_b) % nx) * kPerChunk
                                    : Cs + (c - vseg_x) * kPerChunk;
            reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
            reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
        }
        if (base == 0 && tid < n_tok) raw_dt[tid] = to_float(dt_staged);
    };
    const float bias = p.dt_bias[h], A = p.A[h], Dh = p.D ? p.D[h] : 0.0f;
    // The first round's loads are issued before the state's copy, the rest (long windows only) after it.
    const uint64_t l2 = detail::l2_policy(p.l2_evict_first);
    auto stage_inputs = [&](auto&& load, auto&& store, int items, int per_round) {
        load(0);
        stage_state(ssu_smem, S, P * N * static_cast<int>(kStagedBytes<TS>), p.bulk_stage, &stage_bar, l2);
        store(0);
        for (int base = per_round; base < items; base += per_round) {
            load(base);
            store(base);
        }
    };
    if constexpr (kVecInputs)
        stage_inputs(vload_round, vstore_round, vtotal, kChunksPerThread * kSsuThreads);
    else
        stage_inputs(load_round, store_round, total, kPerThread * kSsuThreads);
    __syncthreads();
    if (warp == 0) {  // lane j: dtⱼ, and the decay after token j = exp(A·Σ_{i>j} dtᵢ) from a suffix sum over
                      // the lanes
        const float dt =
            lane < n_tok ? fminf(fmaxf(detail::softplus(raw_dt[lane] + bias), p.dt_min), p.dt_max) : 0.0f;
        float suffix = dt;  // Σ_{i≥j} dtᵢ
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float v = __shfl_down_sync(0xffffffffu, suffix, o);
            if (lane + o < 32) suffix += v;
        }
        if (lane < n_tok) fj[lane] = __expf(A * (suffix - dt)) * dt;
        if (lane == 0) decay_all_s = __expf(A * suffix);
    }
    if (kHasToken && !fold) {  // this token's inputs become entry `count` (bf16 → fp32 → bf16 is exact)
        bf16* dst = entries + static_cast<int64_t>(count) * E;
        for (int r = tid; r < P; r += kSsuThreads) dst[x_at + r] = __float2bfloat16_rn(xs[count * P + r]);
        if (h % heads_per_group == 0 && slice == 0) {
            for (int n = tid; n < N; n += kSsuThreads) dst[b_at + n] = Bs[count * N + n];
        }
        if (slice == 0 && tid == 0) dst[dt_at] = __float2bfloat16_rn(raw_dt[count]);
    }
    if (kHasToken) {  // qⱼ (fⱼ from warp 0 above; wait_staged_state's barrier then publishes qⱼ)
        __syncthreads();
        for (int j = warp; j < n_tok; j += kSsuThreads / 32) {
            float acc = 0.0f;
            for (int n = lane; n < N; n += 32) acc += to_float(Bs[j * N + n]) * Cs[n];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (lane == 0) qj[j] = fj[j] * acc;
        }
    }
    wait_staged_state(p.bulk_stage, &stage_bar);

    // The rows: lanes `sub` of a row hold its columns (k·L + sub)·kVec … + kVec − 1 (L = kLanesPerRow, k <
    // kChunks), and also take its tokens j ≡ sub (mod L) for y's token part Σⱼ qⱼ·xⱼ[row] (+ D·x[row] on lane
    // 0), so one reduction over the row's L lanes sums both. A fold adds Σⱼ fⱼ·xⱼ[row]·Bⱼ to the decayed
    // state.
    const float decay = decay_all_s;
    auto col = [&](int k) { return (k * kLanesPerRow + sub) * kVec; };  // first column of this lane's chunk k
    float Cv[kChunks][kVec];
    if (kHasToken) {
#pragma unroll
        for (int k = 0; k < kChunks; ++k) load_f32<kVec>(Cs + col(k), Cv[k]);
    }
    TY* y = kHasToken ? static_cast<TY*>(p.y) + (b * p.H + h) * p.P + row0 : nullptr;
    const auto* Ss = reinterpret_cast<const std::conditional_t<kSplit, uint16_t, TS>*>(ssu_smem);
    for (int r0 = warp * kRowsPerWarp; r0 < P;
         r0 += kRowsPerStep) {  // warp-uniform bounds: the shuffles need every lane
        const int row = r0 + row_in_warp;
        float acc = 0.0f;
        if (row < P) {
            float s[kChunks][kVec];
            if constexpr (kSplit) {  // exact where this block folds (the low halves from global memory), else
                                     // the bf16 plane alone
                if (fold) {
#pragma unroll
                    for (int k = 0; k < kChunks; ++k) {
                        const uint4 lv =
                            *reinterpret_cast<const uint4*>(S_low + static_cast<int64_t>(row) * N + col(k));
                        split_state::unpack8(*reinterpret_cast<const uint4*>(Ss + row * N + col(k)), lv,
                                             s[k]);
                    }
                } else {
#pragma unroll
                    for (int k = 0; k < kChunks; ++k)
                        Vec<bf16>::unpack(*reinterpret_cast<const uint4*>(Ss + row * N + col(k)), s[k]);
                }
            } else {
#pragma unroll
                for (int k = 0; k < kChunks; ++k)
                    V::unpack(*reinterpret_cast<const typename V::Raw*>(Ss + row * N + col(k)), s[k]);
            }
            if (kHasToken) {
#pragma unroll
                for (int k = 0; k < kChunks; ++k) {
#pragma unroll
                    for (int v = 0; v < kVec; ++v) acc += s[k][v] * Cv[k][v];
                }
                acc *= decay;
                for (int j = sub; j < n_tok; j += kLanesPerRow) acc += qj[j] * xs[j * P + row];
                if (sub == 0) acc += Dh * xs[count * P + row];
            }
            if (fold) {
#pragma unroll
                for (int k = 0; k < kChunks; ++k) {
#pragma unroll
                    for (int v = 0; v < kVec; ++v) s[k][v] *= decay;
                }
#pragma unroll 2
                for (int j = 0; j < n_tok; ++j) {
                    const float c = fj[j] * xs[j * P + row];
#pragma unroll
                    for (int k = 0; k < kChunks; ++k) {
                        float bj[kVec];
                        load_bf16<kVec>(Bs + j * N + col(k), bj);
#pragma unroll
                        for (int v = 0; v < kVec; ++v) s[k][v] += c * bj[v];
                    }
                }
#pragma unroll
                for (int k = 0; k < kChunks; ++k) {
                    const int64_t at = static_cast<int64_t>(row) * N + col(k);
                    if constexpr (kSplit) {
                        uint4 hv, lv;
                        split_state::pack8(s[k], hv, lv);
                        store_state(static_cast<uint16_t*>(S) + at, hv, l2);
                        store_state(S_low + at, lv, l2);
                    } else {
                        store_state(static_cast<TS*>(S) + at, V::pack(s[k]), l2);
                    }
                }
            }
        }
        if (kHasToken) {
#pragma unroll
            for (int o = kLanesPerRow / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (row < P && sub == 0) y[row] = detail::from_float<TY>(acc);
        }
    }
}

// Whether the replay kernel may load its small inputs in 16-byte chunks (ssu_replay_kernel's kVecInputs):
// every B, x and C row it reads (this step's and the replay entries') starts 16-byte aligned and a block's x
// slice is whole chunks.
bool replay_vec_inputs(const SsuParams& p, int64_t split) {
    auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    const int64_t E = ssm_replay_entry_elems(p.H, p.P, p.G, p.N);
    const bool token_rows =
        !p.x || (a16(p.x) && a16(p.B) && a16(p.C) && p.x_stride % 8 == 0 && p.bc_stride % 8 == 0);
    return token_rows && a16(p.replay) && E % 8 == 0 && (p.H * p.P) % 8 == 0 && (p.P / split) % 8 == 0 &&
           p.N % 8 == 0;
}

// kFold: ssm_replay_fold (no new token).
template <typename TS, typename TY, int N, bool kFold = false>
void launch_ssu_n(const SsuParams& p, cudaStream_t stream) {
    const int64_t head_bytes = p.P * N * kStagedBytes<TS>;  // what a whole-head block stages
    const int64_t split = p.row_split > 0 ? p.row_split : (head_bytes > 24 * 1024 && p.P % 2 == 0 ? 2 : 1);
    SURF_CHECK(p.P % split == 0, "selective_state_update: row_split ", split, " does not divide head_dim ",
               p.P);
    SURF_CHECK(!p.bulk_stage || ssu_bulk_stage_available(),
               "selective_state_update: bulk_stage needs compute capability 9.0 or later");
    const bool replay = p.replay_window > 0;
    const size_t smem =
        static_cast<size_t>(replay ? ReplaySmem{head_bytes / split, p.replay_window, p.P / split, N}.bytes()
                                   : head_bytes / split);
    if (smem > 48 * 1024) {  // e.g. P·N·4 > 48 KB (P > 96 at N = 128, fp32, unsplit)
        for (const void* kernel :
             {reinterpret_cast<const void*>(ssu_replay_kernel<TS, TY, N, !kFold, false>),
              reinterpret_cast<const void*>(ssu_replay_kernel<TS, TY, N, !kFold, true>)}) {
            SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem)));
        }
        if constexpr (!kIsSplit<TS>) {
            SURF_CUDA_CHECK(cudaFuncSetAttribute(
                ssu_kernel<TS, TY, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        }
    }
    const unsigned grid = static_cast<unsigned>(p.batch * p.H * split);
    if (replay) {
        constexpr bool kHasToken = !kFold;
        const bool vec = replay_vec_inputs(p, split);
        auto kernel = vec ? ssu_replay_kernel<TS, TY, N, kHasToken, true>
                          : ssu_replay_kernel<TS, TY, N, kHasToken, false>;
        detail::launch_kernel(kernel, grid, kSsuThreads, smem, stream, p, static_cast<int>(split));
    } else if constexpr (kIsSplit<TS>) {
        SURF_CHECK(false,
                   "selective_state_update: a split state needs replay");  // checked before; not reached
    } else {
        detail::launch_kernel(ssu_kernel<TS, TY, N>, grid, kSsuThreads, smem, stream, p,
                              static_cast<int>(split));
    }
}

template <typename TS, typename TY, bool kFold = false>
void launch_ssu(const SsuParams& p, cudaStream_t stream) {
    switch (p.N) {
        case 16: launch_ssu_n<TS, TY, 16, kFold>(p, stream); break;
        case 32: launch_ssu_n<TS, TY, 32, kFold>(p, stream); break;
        case 64: launch_ssu_n<TS, TY, 64, kFold>(p, stream); break;
        case 128: launch_ssu_n<TS, TY, 128, kFold>(p, stream); break;
        default:
            SURF_CHECK(false, "selective_state_update: d_state ", p.N, " not instantiated (16/32/64/128)");
    }
    SURF_CUDA_CHECK_LAUNCH();
}

// Replay entries hold one token per slot and window position; the smem holds K tokens' B and x.
constexpr int64_t kMaxReplayWindow = 32;

void check_replay(const SsuParams& p, const char* op) {
    SURF_CHECK(p.replay && p.replay_count && p.replay_window >= 2 && p.replay_window <= kMaxReplayWindow, op,
               ": replay needs entries, counts and a window of 2..", kMaxReplayWindow, " (got ",
               p.replay_window, ")");
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.replay) % 2 == 0, op, ": replay entries not 2-byte aligned");
}

}  // namespace

void ssm_state_split(const float* plain, uint16_t* split, int64_t slots, int64_t hpn) {
    for (int64_t s = 0; s < slots; ++s) {
        for (int64_t i = 0; i < hpn; ++i) {
            uint32_t bits;
            std::memcpy(&bits, plain + s * hpn + i, 4);
            split[s * 2 * hpn + i] = static_cast<uint16_t>(split_state::high_bits(bits));
            split[s * 2 * hpn + hpn + i] = static_cast<uint16_t>(bits & 0xffffu);
        }
    }
}

void ssm_state_join(const uint16_t* split, float* plain, int64_t slots, int64_t hpn) {
    for (int64_t s = 0; s < slots; ++s) {
        for (int64_t i = 0; i < hpn; ++i) {
            const uint32_t bits =
                split_state::join_bits(split[s * 2 * hpn + i], split[s * 2 * hpn + hpn + i]);
            std::memcpy(plain + s * hpn + i, &bits, 4);
        }
    }
}

bool ssu_bulk_stage_available() {
    int device = 0, major = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
}

void selective_state_update(const SsuParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.B && p.C && p.dt_raw && p.dt_bias && p.A && p.state && p.slots && p.y,
               "selective_state_update: null pointer");
    SURF_CHECK(p.H > 0 && p.G > 0 && p.H % p.G == 0 && p.P > 0, "selective_state_update: H ", p.H, " G ", p.G,
               " P ", p.P);
    SURF_CHECK(p.x_stride >= p.H * p.P && p.bc_stride >= p.G * p.N && p.dt_stride >= p.H,
               "selective_state_update: strides x ", p.x_stride, " bc ", p.bc_stride, " dt ", p.dt_stride);
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.state) % 16 == 0,
               "selective_state_update: state not 16-byte aligned");
    SURF_CHECK(p.P <= 128, "selective_state_update: head_dim ", p.P,
               " must be ≤ 128 (state staged in shared memory)");
    if (p.replay_window > 0) check_replay(p, "selective_state_update");
    SURF_CHECK(!p.state_split || (p.state_dtype == DType::kF32 && p.replay_window > 0),
               "selective_state_update: a split state must be fp32 and needs replay (replay_window > 0)");
    if (p.batch == 0) return;
    const bool s32 = p.state_dtype == DType::kF32, y32 = p.y_dtype == DType::kF32;
    if (p.state_split && y32)
        launch_ssu<SplitF32, float>(p, stream);
    else if (p.state_split)
        launch_ssu<SplitF32, bf16>(p, stream);
    else if (s32 && y32)
        launch_ssu<float, float>(p, stream);
    else if (s32)
        launch_ssu<float, bf16>(p, stream);
    else if (y32)
        launch_ssu<bf16, float>(p, stream);
    else
        launch_ssu<bf16, bf16>(p, stream);
}

void ssm_replay_fold(const SsuParams& p, cudaStream_t stream) {
    SURF_CHECK(p.dt_bias && p.A && p.state && p.slots, "ssm_replay_fold: null pointer");
    SURF_CHECK(p.H > 0 && p.G > 0 && p.H % p.G == 0 && p.P > 0 && p.P <= 128, "ssm_replay_fold: H ", p.H,
               " G ", p.G, " P ", p.P);
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.state) % 16 == 0, "ssm_replay_fold: state not 16-byte aligned");
    check_replay(p, "ssm_replay_fold");
    SURF_CHECK(!p.state_split || p.state_dtype == DType::kF32, "ssm_replay_fold: a split state must be fp32");
    if (p.batch == 0) return;
    if (p.state_split)
        launch_ssu<SplitF32, float, true>(p, stream);
    else if (p.state_dtype == DType::kF32)
        launch_ssu<float, float, true>(p, stream);
    else
        launch_ssu<bf16, float, true>(p, stream);
}

}  // namespace surf::kernels::cuda
