// Selective state update (Mamba-2 decode step, spec §2.1) on slot-indexed states:
//   dt = softplus(dt_raw + dt_bias); S ← exp(dt·A)·S + dt·x⊗B; y = S·C + D·x.
// Memory-bound: each (sequence, head) reads and writes its P×N state once. One block per (sequence,
// head, slice of P / row_split state rows). The block's state rows (contiguous; a whole head is 40 KB fp32 /
// 20 KB bf16 at P = 80, N = 128) are first copied into shared memory with 16-byte cp.async, issued before the dependent dt/B/C loads: the bytes
// in flight per SM are then bounded by shared memory (5 fp32 blocks ≈ 200 KB) instead of by registers. With
// SsuParams::bulk_stage the copy is one bulk copy on the copy engine (TMA), issued by one thread and completing
// on an mbarrier: the same bytes without 1,280 copy instructions a block (H100, 100 rows: 4–9% faster).
// Then a state row of N values is spread over N / (16 / sizeof(state)) lanes, each lane updating 16
// bytes (4 fp32 or 8 bf16 values) and storing them straight back to global memory.
//
// Replay (SsuParams::replay_window K > 0; ReplaySSM, spec/serving.md §1.6): the stored state lags by up to
// K − 1 pending tokens whose inputs (x, B, dt_raw) sit in a per-slot ring of K entries. A step reads the state,
// applies the pending tokens and its own on the fly for y, and writes the state back only on every K-th token
// (the fold); other steps store their inputs (≈ 22 KB a row and layer at the Holotron shapes) instead of the
// 5.2 MB state. Same blocks and staging as above.
#include <algorithm>
#include <string>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::to_float;

constexpr int kSsuThreads = 128;

template <typename TS> struct Vec;
template <> struct Vec<float> {
    static constexpr int kN = 4;
    using Raw = float4;
    __device__ static void unpack(const Raw& r, float (&v)[kN]) { v[0] = r.x; v[1] = r.y; v[2] = r.z; v[3] = r.w; }
    __device__ static Raw pack(const float (&v)[kN]) { return make_float4(v[0], v[1], v[2], v[3]); }
};
template <> struct Vec<bf16> {
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

// How a block's warps walk the state: a row of N values over N / kVec lanes, each lane kVec values (16 bytes).
template <typename TS, int N>
struct RowLayout {
    static constexpr int kVec = Vec<TS>::kN;
    static constexpr int kLanesPerRow = N / kVec;
    static_assert(kLanesPerRow >= 1 && kLanesPerRow <= 32, "row must fit a warp");
    static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
    static constexpr int kRowsPerStep = kRowsPerWarp * (kSsuThreads / 32);
};

// The block's `bytes` of contiguous state into shared memory: 16-byte cp.async by every thread (one commit
// group), or (SsuParams::bulk_stage) one bulk copy on the copy engine issued by thread 0, completing on `bar`.
// Call with the whole block; wait_staged_state then makes the bytes visible to every thread.
__device__ __forceinline__ void stage_state(unsigned char* smem, const void* state, int bytes, bool bulk, uint64_t* bar) {
    if (bulk) {
#if SURF_BULK_COPY_ENABLED
        if (threadIdx.x == 0) {
            detail::mbarrier_init(bar, 1);
            detail::bulk_copy_to_smem(smem, state, static_cast<uint32_t>(bytes), bar);
        }
#else
        __trap();  // the host allows bulk staging on compute capability ≥ 9.0 only
#endif
        return;
    }
    for (int i = threadIdx.x; i < bytes / 16; i += kSsuThreads) {
        detail::cp_async16(smem + i * 16, static_cast<const unsigned char*>(state) + i * 16, true);
    }
    detail::cp_async_commit();
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
    using V = Vec<TS>;
    using RL = RowLayout<TS, N>;
    constexpr int kVec = RL::kVec, kLanesPerRow = RL::kLanesPerRow, kRowsPerWarp = RL::kRowsPerWarp, kRowsPerStep = RL::kRowsPerStep;
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
    stage_state(ssu_smem, S, P * N * static_cast<int>(sizeof(TS)), p.bulk_stage, &stage_bar);

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
            *reinterpret_cast<typename V::Raw*>(S + static_cast<int64_t>(row) * N + n0) = V::pack(s);
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
// (as stored), then as fp32 C [N], xⱼ [rows], fⱼ = dtⱼ·(decay after j), qⱼ = fⱼ·(Bⱼ·C), the raw dt inputs, and
// per state row the tokens' part of y. Bⱼ and C are read 4 values at a time (their offsets are multiples of 16
// bytes: the state slice and K·N·2 are); the rest one value at a time. ≈ 24.6 KB at fp32, 40 rows, K = 8: nine
// blocks an SM.
struct ReplaySmem {
    int64_t state_bytes, K, rows, N;
    __host__ __device__ int64_t b_off() const { return state_bytes; }
    __host__ __device__ int64_t c_off() const { return b_off() + K * N * 2; }
    __host__ __device__ int64_t x_off() const { return c_off() + N * 4; }
    __host__ __device__ int64_t f_off() const { return x_off() + K * rows * 4; }
    __host__ __device__ int64_t y_off() const { return f_off() + 3 * K * 4; }
    __host__ __device__ int64_t bytes() const { return y_off() + rows * 4; }
};

// kHasToken: a decode step (this row's token on top of its pending ones); else a fold of the pending tokens.
// A block's small inputs (its tokens' B, x and dt, and C: ≈ 1.5 k values at K = 8) are loaded in one round of
// independent loads issued before the state's copy: with the memory system saturated by the state copies, each
// further dependent round trip would cost the block several µs.
template <typename TS, typename TY, int N, bool kHasToken>
__global__ void __launch_bounds__(kSsuThreads, 9) ssu_replay_kernel(SsuParams p, int row_split) {
    using V = Vec<TS>;
    using RL = RowLayout<TS, N>;
    constexpr int kVec = RL::kVec, kLanesPerRow = RL::kLanesPerRow, kRowsPerWarp = RL::kRowsPerWarp, kRowsPerStep = RL::kRowsPerStep;
    constexpr int kPerThread = 16;  // values each thread loads per round
    extern __shared__ __align__(16) unsigned char ssu_smem[];
    __shared__ float decay_all_s;
    __shared__ uint64_t stage_bar;
    const int64_t bh = blockIdx.x / row_split, b = bh / p.H, h = bh % p.H;
    const int64_t heads_per_group = p.H / p.G, g = h / heads_per_group;
    const int K = static_cast<int>(p.replay_window), count = p.replay_count[b];
    // A count outside [0, K) is the caller's bug: such a row writes nothing. A fold with nothing pending is a no-op.
    if (count < 0 || count >= K || (!kHasToken && count == 0)) return;
    const int n_tok = count + (kHasToken ? 1 : 0);  // tokens 0 … count − 1 pending, token `count` this row's
    const bool fold = !kHasToken || count == K - 1;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int sub = lane % kLanesPerRow, row_in_warp = lane / kLanesPerRow;
    const int n0 = sub * kVec;
    const int P = static_cast<int>(p.P) / row_split, slice = static_cast<int>(blockIdx.x % row_split), row0 = slice * P;
    const int64_t slot = p.slots[b], E = p.H * p.P + p.G * N + p.H;  // ssm_replay_entry_elems
    TS* S = static_cast<TS*>(p.state) + ((slot * p.H + h) * p.P + row0) * N;
    bf16* entries = static_cast<bf16*>(p.replay) + slot * K * E;  // entry j: x [H·P] | B [G·N] | dt_raw [H]
    const int64_t b_at = p.H * p.P + g * N, x_at = h * p.P + row0, dt_at = p.H * p.P + p.G * N + h;
    const bf16* x_row = kHasToken ? p.x + b * p.x_stride + x_at : nullptr;
    const bf16* B_row = kHasToken ? p.B + b * p.bc_stride + g * N : nullptr;

    const ReplaySmem lay{P * N * static_cast<int64_t>(sizeof(TS)), K, P, N};
    bf16* Bs = reinterpret_cast<bf16*>(ssu_smem + lay.b_off());    // [K][N]
    float* Cs = reinterpret_cast<float*>(ssu_smem + lay.c_off());  // [N]
    float* xs = reinterpret_cast<float*>(ssu_smem + lay.x_off());  // [K][P]
    float* fj = reinterpret_cast<float*>(ssu_smem + lay.f_off());  // [K]
    float* qj = fj + K;                                             // [K]
    float* raw_dt = qj + K;                                         // [K]
    float* y_tok = reinterpret_cast<float*>(ssu_smem + lay.y_off());  // [P]
    // The staged values as one index space: Bⱼ (n_tok · N), xⱼ (n_tok · P), dt_rawⱼ (n_tok), then C (N).
    const int seg_b = n_tok * N, seg_x = seg_b + n_tok * P, seg_dt = seg_x + n_tok, total = seg_dt + (kHasToken ? N : 0);
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
            if (i < seg_b) Bs[i] = staged[k];
            else if (i < total) *target(i) = to_float(staged[k]);
        }
    };
    const float bias = p.dt_bias[h], A = p.A[h], Dh = p.D ? p.D[h] : 0.0f;
    load_round(0);
    stage_state(ssu_smem, S, P * N * static_cast<int>(sizeof(TS)), p.bulk_stage, &stage_bar);
    store_round(0);
    for (int base = kPerThread * kSsuThreads; base < total; base += kPerThread * kSsuThreads) {  // long windows only
        load_round(base);
        store_round(base);
    }
    __syncthreads();
    if (warp == 0) {  // lane j: dtⱼ, and the decay after token j = exp(A·Σ_{i>j} dtᵢ) from a suffix sum over the lanes
        const float dt = lane < n_tok ? fminf(fmaxf(detail::softplus(raw_dt[lane] + bias), p.dt_min), p.dt_max) : 0.0f;
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
    __syncthreads();
    if (kHasToken) {
        for (int j = warp; j < n_tok; j += kSsuThreads / 32) {
            float acc = 0.0f;
            for (int n = lane; n < N; n += 32) acc += to_float(Bs[j * N + n]) * Cs[n];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (lane == 0) qj[j] = fj[j] * acc;
        }
        __syncthreads();
    }
    // Per state row r, one thread: the tokens' part of y, Σⱼ qⱼ·xⱼ[r] + D·x[r]; and for the fold xⱼ[r] ← fⱼ·xⱼ[r].
    for (int r = tid; r < P; r += kSsuThreads) {
        float acc = kHasToken ? Dh * xs[count * P + r] : 0.0f;
        for (int j = 0; j < n_tok; ++j) {
            const float xv = xs[j * P + r];
            if (kHasToken) acc += qj[j] * xv;
            if (fold) xs[j * P + r] = fj[j] * xv;
        }
        y_tok[r] = acc;
    }
    wait_staged_state(p.bulk_stage, &stage_bar);

    const float decay = decay_all_s;
    float Cv[kVec];
    if (kHasToken) load_f32<kVec>(Cs + n0, Cv);
    TY* y = kHasToken ? static_cast<TY*>(p.y) + (b * p.H + h) * p.P + row0 : nullptr;
    const TS* Ss = reinterpret_cast<const TS*>(ssu_smem);
#pragma unroll 2
    for (int r0 = 0; r0 < P; r0 += kRowsPerStep) {
        const int row = r0 + warp * kRowsPerWarp + row_in_warp;
        float acc = 0.0f;
        if (row < P) {
            float s[kVec];
            V::unpack(*reinterpret_cast<const typename V::Raw*>(Ss + row * N + n0), s);
            if (kHasToken) {
#pragma unroll
                for (int v = 0; v < kVec; ++v) acc += s[v] * Cv[v];
            }
            if (fold) {
#pragma unroll
                for (int v = 0; v < kVec; ++v) s[v] *= decay;
#pragma unroll 4
                for (int j = 0; j < n_tok; ++j) {
                    const float c = xs[j * P + row];  // fⱼ·xⱼ[row]
                    float bj[kVec];
                    load_bf16<kVec>(Bs + j * N + n0, bj);
#pragma unroll
                    for (int v = 0; v < kVec; ++v) s[v] += c * bj[v];
                }
                *reinterpret_cast<typename V::Raw*>(S + static_cast<int64_t>(row) * N + n0) = V::pack(s);
            }
        }
        if (kHasToken) {
#pragma unroll
            for (int o = kLanesPerRow / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (row < P && sub == 0) y[row] = detail::from_float<TY>(decay * acc + y_tok[row]);
        }
    }
}

// ---- The persistent replay step (SsuParams::persistent_blocks) ---------------------------------------------
// Items are (row b, head h, row slice) in that order; block k takes a contiguous range of them, and its groups of
// four warps take the range's items in turn (group c: items c, c + groups, …). Each group has its own ring of
// `depth` shared-memory stages and copies its own items `depth` ahead: for an item it reads the row's count and
// slot (once per row), then one thread arms the stage's barrier with the state rows' bytes and issues their bulk
// copy, and the group's threads copy the small inputs by 16-byte cp.async (C; per token j ≤ count its x slice
// and Bⱼ, and for pending tokens the 16-byte dt_raw chunk holding head h; this row's token from the step's
// inputs, the pending ones from the replay entries), each arriving on the barrier once its copies land. This
// row's own dt_raw, whose rows need not be 16-byte aligned, the group loads itself. Once an item is done the
// group refills its stage with the item `depth` ahead. The math per item is ssu_replay_kernel's, in the same
// order. (A first version with one producer warp for the whole block took ≈ 2.4 µs an item on an SM whatever
// the consumers: the single warp's address arithmetic and copy issue was the bottleneck.)
constexpr int kPersistMaxGroups = 4;
constexpr int kPersistMaxStages = 16;

__host__ __device__ constexpr int64_t align16(int64_t v) { return (v + 15) & ~int64_t{15}; }

// One stage: the copied inputs (state rows; Bⱼ [K][N], C [N], xⱼ [K][rows], dt_raw chunks [K][8], bf16), then
// the group's scratch for the item (C [N], xⱼ [K][rows] as fp32; fⱼ, qⱼ [K]; the tokens' part of y [rows]) and
// the note of the item (count, or −1 to skip it; slot; the decay).
struct PersistStage {
    int64_t K, rows, N, state_bytes;
    __host__ __device__ int64_t b_off() const { return state_bytes; }
    __host__ __device__ int64_t c_off() const { return b_off() + K * N * 2; }
    __host__ __device__ int64_t x_off() const { return c_off() + N * 2; }
    __host__ __device__ int64_t dt_off() const { return x_off() + align16(K * rows * 2); }
    __host__ __device__ int64_t cf_off() const { return dt_off() + K * 16; }
    __host__ __device__ int64_t xf_off() const { return cf_off() + N * 4; }
    __host__ __device__ int64_t f_off() const { return xf_off() + align16(K * rows * 4); }
    __host__ __device__ int64_t y_off() const { return f_off() + align16(2 * K * 4); }
    __host__ __device__ int64_t meta_off() const { return y_off() + align16(rows * 4); }
    __host__ __device__ int64_t bytes() const { return (meta_off() + 16 + 127) & ~int64_t{127}; }
};

__device__ __forceinline__ void group_barrier(int group) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(1 + group), "n"(kSsuThreads) : "memory");
}

template <typename TS, typename TY, int N>
__global__ void __launch_bounds__(kPersistMaxGroups * kSsuThreads) ssu_replay_persistent_kernel(SsuParams p, int row_split, int depth, int groups) {
    using V = Vec<TS>;
    using RL = RowLayout<TS, N>;
    constexpr int kVec = RL::kVec, kLanesPerRow = RL::kLanesPerRow, kRowsPerWarp = RL::kRowsPerWarp, kRowsPerStep = RL::kRowsPerStep;
    constexpr int kNb = N * 2 / 16;  // 16-byte chunks of B and of C
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ uint64_t full[kPersistMaxStages];
    const int K = static_cast<int>(p.replay_window), P = static_cast<int>(p.P) / row_split, nx = P * 2 / 16;
    const PersistStage lay{K, P, N, P * N * static_cast<int64_t>(sizeof(TS))};
    const int64_t stage_bytes = lay.bytes();
    const int64_t total = p.batch * p.H * row_split, per = (total + gridDim.x - 1) / gridDim.x;
    const int64_t first = blockIdx.x * per, last = min(total, first + per);
    const int64_t E = p.H * p.P + p.G * N + p.H, heads_per_group = p.H / p.G;  // ssm_replay_entry_elems
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = warp / (kSsuThreads / 32), gtid = threadIdx.x - group * kSsuThreads, gwarp = gtid >> 5;
    if (threadIdx.x < groups * depth) detail::mbarrier_init(&full[threadIdx.x], 1 + kSsuThreads);  // thread 0's arm + every thread's cp.async
    __syncthreads();

    int64_t row_b = -1, slot = 0;
    int count = 0;
    // Fills stage `st_i` with item i (of this group).
    auto fill = [&](int64_t i, int st_i) {
        const int64_t bh = i / row_split, b = bh / p.H, h = bh % p.H, g = h / heads_per_group;
        const int row0 = static_cast<int>(i % row_split) * P;
        if (b != row_b) row_b = b, count = p.replay_count[b], slot = p.slots[b];
        unsigned char* st = ring + st_i * stage_bytes;
        uint64_t* bar = &full[st_i];
        const bool ok = count >= 0 && count < K;  // else the caller's bug: the row is skipped, as by the one-item kernel
        if (gtid == 0) {
            int* meta = reinterpret_cast<int*>(st + lay.meta_off());
            meta[0] = ok ? count : -1;
            meta[1] = static_cast<int>(slot);
            if (ok) {
                detail::mbarrier_arrive_expect_tx(bar, static_cast<uint32_t>(lay.state_bytes));
                const TS* S = static_cast<const TS*>(p.state) + ((slot * p.H + h) * p.P + row0) * N;
                detail::bulk_copy_to_smem_armed(st, S, static_cast<uint32_t>(lay.state_bytes), bar);
            } else {
                detail::mbarrier_arrive(bar);  // releases the note
            }
        }
        if (ok) {
            const bf16* entries = static_cast<const bf16*>(p.replay) + slot * K * E;
            if (gtid < kNb) detail::cp_async16(st + lay.c_off() + gtid * 16, p.C + b * p.bc_stride + g * N + gtid * 8, true);
            // Token j's chunks are t = 32·j + u: u < nx its x slice, then Bⱼ, then (pending tokens) the dt_raw chunk.
            for (int t = gtid; t < (count + 1) * 32; t += kSsuThreads) {
                const int j = t >> 5, u = t & 31;
                const bool mine = j == count;
                const bf16* entry = entries + j * E;
                if (u < nx) {
                    const bf16* src = (mine ? p.x + b * p.x_stride : entry) + h * p.P + row0 + u * 8;
                    detail::cp_async16(st + lay.x_off() + j * P * 2 + u * 16, src, true);
                } else if (u < nx + kNb) {
                    const bf16* src = (mine ? p.B + b * p.bc_stride : entry + p.H * p.P) + g * N + (u - nx) * 8;
                    detail::cp_async16(st + lay.b_off() + j * N * 2 + (u - nx) * 16, src, true);
                } else if (u == nx + kNb && !mine) {
                    detail::cp_async16(st + lay.dt_off() + j * 16, entry + p.H * p.P + p.G * N + (h & ~int64_t{7}), true);
                }
            }
        }
        detail::cp_async_mbarrier_arrive(bar);
    };

    const int sub = lane % kLanesPerRow, row_in_warp = lane / kLanesPerRow, n0 = sub * kVec;
    const int64_t mine0 = first + group;
    for (int k = 0; k < depth && mine0 + k * groups < last; ++k) fill(mine0 + k * groups, group * depth + k);
    for (int k = 0; mine0 + static_cast<int64_t>(k) * groups < last; ++k) {
        const int64_t i = mine0 + static_cast<int64_t>(k) * groups, bh = i / row_split, b = bh / p.H, h = bh % p.H;
        const int st_i = group * depth + k % depth, slice = static_cast<int>(i % row_split), row0 = slice * P;
        const int64_t g = h / heads_per_group;
        const float bias = p.dt_bias[h], A = p.A[h], Dh = p.D ? p.D[h] : 0.0f;
        const bf16 dt_mine = p.dt_raw[b * p.dt_stride + h];  // issued before the wait: its latency hides behind it
        detail::mbarrier_wait(&full[st_i], static_cast<uint32_t>(k / depth) & 1);
        unsigned char* st = ring + st_i * stage_bytes;
        const int* meta = reinterpret_cast<const int*>(st + lay.meta_off());
        const int cnt = meta[0];
        const int64_t sl = meta[1];
        if (cnt >= 0) {
            const int n_tok = cnt + 1;
            const bool fold = cnt == K - 1;
            const bf16* Bs = reinterpret_cast<const bf16*>(st + lay.b_off());
            const bf16* Craw = reinterpret_cast<const bf16*>(st + lay.c_off());
            const bf16* xraw = reinterpret_cast<const bf16*>(st + lay.x_off());
            const bf16* dtraw = reinterpret_cast<const bf16*>(st + lay.dt_off());
            float* Cs = reinterpret_cast<float*>(st + lay.cf_off());
            float* xs = reinterpret_cast<float*>(st + lay.xf_off());
            float* fj = reinterpret_cast<float*>(st + lay.f_off());
            float* qj = fj + K;
            float* y_tok = reinterpret_cast<float*>(st + lay.y_off());
            float* decay_s = reinterpret_cast<float*>(st + lay.meta_off()) + 2;
            if (gwarp == 0) {  // lane j: dtⱼ and the decay after token j, as in ssu_replay_kernel
                const float raw = lane < cnt ? to_float(dtraw[lane * 8 + (h & 7)]) : lane == cnt ? to_float(dt_mine) : 0.0f;
                const float dt = lane < n_tok ? fminf(fmaxf(detail::softplus(raw + bias), p.dt_min), p.dt_max) : 0.0f;
                float suffix = dt;
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const float v = __shfl_down_sync(0xffffffffu, suffix, o);
                    if (lane + o < 32) suffix += v;
                }
                if (lane < n_tok) fj[lane] = __expf(A * (suffix - dt)) * dt;
                if (lane == 0) *decay_s = __expf(A * suffix);
            }
            for (int n = gtid; n < N; n += kSsuThreads) Cs[n] = to_float(Craw[n]);
            for (int e = gtid; e < n_tok * P; e += kSsuThreads) xs[e] = to_float(xraw[e]);
            if (!fold) {  // this token's inputs become entry `cnt`
                bf16* dst = static_cast<bf16*>(p.replay) + (sl * K + cnt) * E;
                for (int r = gtid; r < P; r += kSsuThreads) dst[h * p.P + row0 + r] = xraw[cnt * P + r];
                if (h % heads_per_group == 0 && slice == 0) {
                    for (int n = gtid; n < N; n += kSsuThreads) dst[p.H * p.P + g * N + n] = Bs[cnt * N + n];
                }
                if (slice == 0 && gtid == 0) dst[p.H * p.P + p.G * N + h] = dt_mine;
            }
            group_barrier(group);
            for (int j = gwarp; j < n_tok; j += kSsuThreads / 32) {
                float acc = 0.0f;
                for (int n = lane; n < N; n += 32) acc += to_float(Bs[j * N + n]) * Cs[n];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
                if (lane == 0) qj[j] = fj[j] * acc;
            }
            group_barrier(group);
            for (int r = gtid; r < P; r += kSsuThreads) {
                float acc = Dh * xs[cnt * P + r];
                for (int j = 0; j < n_tok; ++j) {
                    const float xv = xs[j * P + r];
                    acc += qj[j] * xv;
                    if (fold) xs[j * P + r] = fj[j] * xv;
                }
                y_tok[r] = acc;
            }
            group_barrier(group);

            const float decay = *decay_s;
            float Cv[kVec];
            load_f32<kVec>(Cs + n0, Cv);
            TY* y = static_cast<TY*>(p.y) + (b * p.H + h) * p.P + row0;
            TS* S = static_cast<TS*>(p.state) + ((sl * p.H + h) * p.P + row0) * N;
            const TS* Ss = reinterpret_cast<const TS*>(st);
#pragma unroll 2
            for (int r0 = 0; r0 < P; r0 += kRowsPerStep) {
                const int row = r0 + gwarp * kRowsPerWarp + row_in_warp;
                float acc = 0.0f;
                if (row < P) {
                    float sv[kVec];
                    V::unpack(*reinterpret_cast<const typename V::Raw*>(Ss + row * N + n0), sv);
#pragma unroll
                    for (int v = 0; v < kVec; ++v) acc += sv[v] * Cv[v];
                    if (fold) {
#pragma unroll
                        for (int v = 0; v < kVec; ++v) sv[v] *= decay;
#pragma unroll 4
                        for (int j = 0; j < n_tok; ++j) {
                            const float c = xs[j * P + row];
                            float bj[kVec];
                            load_bf16<kVec>(Bs + j * N + n0, bj);
#pragma unroll
                            for (int v = 0; v < kVec; ++v) sv[v] += c * bj[v];
                        }
                        *reinterpret_cast<typename V::Raw*>(S + static_cast<int64_t>(row) * N + n0) = V::pack(sv);
                    }
                }
#pragma unroll
                for (int o = kLanesPerRow / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
                if (row < P && sub == 0) y[row] = detail::from_float<TY>(decay * acc + y_tok[row]);
            }
        }
        group_barrier(group);  // the stage is free
        const int64_t next = i + static_cast<int64_t>(depth) * groups;
        if (next < last) fill(next, st_i);
    }
}

// kFold: ssm_replay_fold (no new token).
template <typename TS, typename TY, int N, bool kFold = false>
void launch_ssu_n(const SsuParams& p, cudaStream_t stream) {
    const int64_t head_bytes = p.P * N * static_cast<int64_t>(sizeof(TS));
    const int64_t split = p.row_split > 0 ? p.row_split : (head_bytes > 24 * 1024 && p.P % 2 == 0 ? 2 : 1);
    SURF_CHECK(p.P % split == 0, "selective_state_update: row_split ", split, " does not divide head_dim ", p.P);
    SURF_CHECK(!p.bulk_stage || ssu_bulk_stage_available(), "selective_state_update: bulk_stage needs compute capability 9.0 or later");
    const bool replay = p.replay_window > 0;
    const size_t smem = static_cast<size_t>(replay ? ReplaySmem{head_bytes / split, p.replay_window, p.P / split, N}.bytes() : head_bytes / split);
    auto kernel = kFold ? ssu_replay_kernel<TS, TY, N, false> : replay ? ssu_replay_kernel<TS, TY, N, true> : ssu_kernel<TS, TY, N>;
    if (smem > 48 * 1024) {  // e.g. P·N·4 > 48 KB (P > 96 at N = 128, fp32, unsplit)
        SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    }
    kernel<<<static_cast<unsigned>(p.batch * p.H * split), kSsuThreads, smem, stream>>>(p, static_cast<int>(split));
}

int64_t ssu_slices(const SsuParams& p, int64_t state_elem_bytes) {
    const int64_t head_bytes = p.P * p.N * state_elem_bytes;
    return p.row_split > 0 ? p.row_split : (head_bytes > 24 * 1024 && p.P % 2 == 0 ? 2 : 1);
}

template <typename TS, typename TY, int N>
void launch_ssu_persistent(const SsuParams& p, cudaStream_t stream) {
    const int64_t split = ssu_slices(p, sizeof(TS)), rows = p.P / split;
    const int64_t stage_bytes = PersistStage{p.replay_window, rows, N, rows * N * static_cast<int64_t>(sizeof(TS))}.bytes();
    const int64_t smem = p.persistent_stages * stage_bytes, items = p.batch * p.H * split;
    const int depth = p.persistent_stages / p.persistent_groups;
    int device = 0, max_smem = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    SURF_CHECK(smem <= max_smem, "selective_state_update: ", p.persistent_stages, " persistent stages of ", stage_bytes, " bytes exceed ", max_smem,
               " bytes of shared memory");
    auto kernel = ssu_replay_persistent_kernel<TS, TY, N>;
    SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const int64_t blocks = std::min<int64_t>(p.persistent_blocks, items);
    const int threads = p.persistent_groups * kSsuThreads;
    kernel<<<static_cast<unsigned>(blocks), threads, static_cast<size_t>(smem), stream>>>(p, static_cast<int>(split), depth, p.persistent_groups);
}

template <typename TS, typename TY, bool kFold = false>
void launch_ssu(const SsuParams& p, cudaStream_t stream) {
    switch (p.N) {
        case 16: launch_ssu_n<TS, TY, 16, kFold>(p, stream); break;
        case 32: launch_ssu_n<TS, TY, 32, kFold>(p, stream); break;
        case 64: launch_ssu_n<TS, TY, 64, kFold>(p, stream); break;
        case 128: launch_ssu_n<TS, TY, 128, kFold>(p, stream); break;
        default: SURF_CHECK(false, "selective_state_update: d_state ", p.N, " not instantiated (16/32/64/128)");
    }
    SURF_CUDA_CHECK_LAUNCH();
}

template <typename TS, typename TY>
void launch_persistent(const SsuParams& p, cudaStream_t stream) {
    switch (p.N) {
        case 16: launch_ssu_persistent<TS, TY, 16>(p, stream); break;
        case 32: launch_ssu_persistent<TS, TY, 32>(p, stream); break;
        case 64: launch_ssu_persistent<TS, TY, 64>(p, stream); break;
        case 128: launch_ssu_persistent<TS, TY, 128>(p, stream); break;
        default: SURF_CHECK(false, "selective_state_update: d_state ", p.N, " not instantiated (16/32/64/128)");
    }
    SURF_CUDA_CHECK_LAUNCH();
}

// Replay entries hold one token per slot and window position; the smem holds K tokens' B and x.
constexpr int64_t kMaxReplayWindow = 32;

void check_replay(const SsuParams& p, const char* op) {
    SURF_CHECK(p.replay && p.replay_count && p.replay_window >= 2 && p.replay_window <= kMaxReplayWindow, op,
               ": replay needs entries, counts and a window of 2..", kMaxReplayWindow, " (got ", p.replay_window, ")");
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.replay) % 2 == 0, op, ": replay entries not 2-byte aligned");
}

}  // namespace

bool ssu_bulk_stage_available() {
    int device = 0, major = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
}

std::string ssu_persistent_unsupported(const SsuParams& p) {
    auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
    if (p.replay_window <= 0 || !p.replay) return "needs replay (replay_window > 0)";
    if (!ssu_bulk_stage_available()) return "needs compute capability 9.0 or later (bulk copies)";
    if (p.persistent_groups < 1 || p.persistent_groups > kPersistMaxGroups) return "persistent_groups must be 1..4";
    if (p.persistent_stages < p.persistent_groups || p.persistent_stages > kPersistMaxStages || p.persistent_stages % p.persistent_groups != 0) {
        return "persistent_stages must be a multiple of persistent_groups, at most 16";
    }
    const int64_t elem = p.state_dtype == DType::kF32 ? 4 : 2, split = ssu_slices(p, elem);
    if (p.P % split != 0 || p.H % 8 != 0 || (p.P / split) % 8 != 0 || p.N % 8 != 0) return "H, the state rows of a slice and N must be multiples of 8";
    if ((p.P / split) * 2 / 16 + p.N * 2 / 16 + 1 > 32) return "a slice's x chunks, B's and one dt chunk must fit 32 (16-byte chunks)";
    if (p.x_stride % 8 != 0 || p.bc_stride % 8 != 0) return "the x and B/C row strides must be multiples of 8 elements";
    if (!aligned(p.x) || !aligned(p.B) || !aligned(p.C) || !aligned(p.state) || !aligned(p.replay)) {
        return "x, B, C, the state and the replay entries must be 16-byte aligned";
    }
    return {};
}

void selective_state_update(const SsuParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.B && p.C && p.dt_raw && p.dt_bias && p.A && p.state && p.slots && p.y,
               "selective_state_update: null pointer");
    SURF_CHECK(p.H > 0 && p.G > 0 && p.H % p.G == 0 && p.P > 0, "selective_state_update: H ", p.H, " G ", p.G, " P ", p.P);
    SURF_CHECK(p.x_stride >= p.H * p.P && p.bc_stride >= p.G * p.N && p.dt_stride >= p.H,
               "selective_state_update: strides x ", p.x_stride, " bc ", p.bc_stride, " dt ", p.dt_stride);
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.state) % 16 == 0, "selective_state_update: state not 16-byte aligned");
    SURF_CHECK(p.P <= 128, "selective_state_update: head_dim ", p.P, " must be ≤ 128 (state staged in shared memory)");
    if (p.replay_window > 0) check_replay(p, "selective_state_update");
    if (p.persistent_blocks > 0) {
        const std::string why = ssu_persistent_unsupported(p);
        SURF_CHECK(why.empty(), "selective_state_update: persistent_blocks ", p.persistent_blocks, ": ", why);
    }
    if (p.batch == 0) return;
    const bool s32 = p.state_dtype == DType::kF32, y32 = p.y_dtype == DType::kF32;
    if (p.persistent_blocks > 0) {
        if (s32 && y32) launch_persistent<float, float>(p, stream);
        else if (s32) launch_persistent<float, bf16>(p, stream);
        else if (y32) launch_persistent<bf16, float>(p, stream);
        else launch_persistent<bf16, bf16>(p, stream);
        return;
    }
    if (s32 && y32) launch_ssu<float, float>(p, stream);
    else if (s32) launch_ssu<float, bf16>(p, stream);
    else if (y32) launch_ssu<bf16, float>(p, stream);
    else launch_ssu<bf16, bf16>(p, stream);
}

void ssm_replay_fold(const SsuParams& p, cudaStream_t stream) {
    SURF_CHECK(p.dt_bias && p.A && p.state && p.slots, "ssm_replay_fold: null pointer");
    SURF_CHECK(p.H > 0 && p.G > 0 && p.H % p.G == 0 && p.P > 0 && p.P <= 128, "ssm_replay_fold: H ", p.H, " G ", p.G, " P ", p.P);
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.state) % 16 == 0, "ssm_replay_fold: state not 16-byte aligned");
    check_replay(p, "ssm_replay_fold");
    if (p.batch == 0) return;
    if (p.state_dtype == DType::kF32) launch_ssu<float, float, true>(p, stream);
    else launch_ssu<bf16, float, true>(p, stream);
}

}  // namespace surf::kernels::cuda
