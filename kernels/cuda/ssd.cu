// Mamba-2 SSD chunked scan over packed variable-length sequences (spec §2.2), fp32 math.
// Chunks are aligned to each sequence: sequence s owns chunk slots off(s) = s + cu_seqlens[s] / Q onwards
// (off is strictly increasing and leaves room for ⌈len/Q⌉ chunks, so a block finds its sequence by a
// binary search and no planning kernel is needed; a few slots stay unused).
// Four kernels, in stream order:
//   1. chunk_state  (slot, head):  dt, Λ = cumsum(dt·A) and the chunk's own state Σ_j e^{Λ_last−Λ_j} dt_j x_j⊗B_j
//   2. chunk_cb     (slot, group): C·Bᵀ of the chunk, shared by the group's heads
//   3. state_pass   (seq, head, elements): S ← e^{Λ_last}·S + chunk state, sequentially over the chunks;
//                   each chunk's entering state replaces its own state in the workspace; final → slot
//   4. chunk_output (slot, head): y_i = e^{Λ_i} C_i·S_in + Σ_{j≤i} (C_i·B_j) e^{Λ_i−Λ_j} dt_j x_j + D x_i
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::to_float;

constexpr int kThreads = 256;
constexpr int kMaxChunk = 128;

struct Workspace {
    float* dt;      // [slots, H, Q]
    float* cum;     // [slots, H, Q]
    float* states;  // [slots, H, P, N]
    float* cb;      // [slots, G, Q, Q]
};

int64_t chunk_slots(const SsdVarlenParams& p) { return p.n_seq + p.n_tok / p.chunk; }
size_t align256(size_t v) { return (v + 255) & ~size_t{255}; }

Workspace carve(const SsdVarlenParams& p, void* base) {
    const size_t slots = static_cast<size_t>(chunk_slots(p));
    char* ptr = static_cast<char*>(base);
    Workspace w;
    w.dt = reinterpret_cast<float*>(ptr);
    ptr += align256(slots * p.H * p.chunk * 4);
    w.cum = reinterpret_cast<float*>(ptr);
    ptr += align256(slots * p.H * p.chunk * 4);
    w.states = reinterpret_cast<float*>(ptr);
    ptr += align256(slots * p.H * p.P * p.N * 4);
    w.cb = reinterpret_cast<float*>(ptr);
    return w;
}

// The chunk a block works on: sequence, first packed token, length (≤ 0: unused slot).
struct ChunkInfo {
    int seq;
    int64_t start, len;
};
__device__ __forceinline__ ChunkInfo locate_chunk(const SsdVarlenParams& p, int64_t slot) {
    int lo = 0, hi = static_cast<int>(p.n_seq) - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (mid + p.cu_seqlens[mid] / p.chunk <= slot) lo = mid;
        else hi = mid - 1;
    }
    const int64_t local = slot - (lo + p.cu_seqlens[lo] / p.chunk);
    const int64_t start = p.cu_seqlens[lo] + local * p.chunk;
    const int64_t end = min(static_cast<int64_t>(p.cu_seqlens[lo + 1]), start + p.chunk);
    return {lo, start, end - start};
}

// ---- 1. dt, cumsum, chunk-local state ----------------------------------------------------------------
// Thread t owns state columns n = 4·(t % (N/4)) .. +3 and rows p = t / (N/4) + r · (256 / (N/4)).
template <int N>
__global__ void __launch_bounds__(kThreads) chunk_state_kernel(SsdVarlenParams p, Workspace ws) {
    constexpr int kCols = N / 4, kRowGroups = kThreads / kCols, kMaxRows = 16;
    extern __shared__ float smem[];
    const int64_t slot = blockIdx.x, h = blockIdx.y, Q = p.chunk, P = p.P;
    const ChunkInfo ci = locate_chunk(p, slot);
    if (ci.len <= 0) return;
    const int64_t g = h / (p.H / p.G);
    float* cum = smem;                         // [Q]
    float* wgt = cum + kMaxChunk;              // [Q]
    float* xw = wgt + kMaxChunk;               // [Q, P]
    bf16* Bs = reinterpret_cast<bf16*>(xw + Q * P);  // [Q, N]
    const int tid = threadIdx.x;

    // dt and a = dt·A, then an inclusive scan (Hillis–Steele; Q ≤ 128 threads take part).
    float dt = 0.0f;
    if (tid < ci.len) {
        dt = detail::softplus(to_float(p.dt_raw[(ci.start + tid) * p.dt_stride + h]) + p.dt_bias[h]);
        dt = fminf(fmaxf(dt, p.dt_min), p.dt_max);
    }
    if (tid < Q) cum[tid] = dt * p.A[h];
    __syncthreads();
    for (int off = 1; off < Q; off <<= 1) {
        float v = 0.0f;
        if (tid < Q && tid >= off) v = cum[tid - off];
        __syncthreads();
        if (tid < Q) cum[tid] += v;
        __syncthreads();
    }
    const float last = cum[ci.len - 1];
    if (tid < Q) {
        ws.dt[(slot * p.H + h) * Q + tid] = dt;
        ws.cum[(slot * p.H + h) * Q + tid] = cum[tid];
        wgt[tid] = tid < ci.len ? __expf(last - cum[tid]) * dt : 0.0f;
    }
    __syncthreads();
    for (int64_t e = tid; e < Q * P; e += kThreads) {
        const int64_t j = e / P, pp = e % P;
        xw[e] = j < ci.len ? wgt[j] * to_float(p.x[(ci.start + j) * p.x_stride + h * P + pp]) : 0.0f;
    }
    for (int64_t e = tid; e < Q * N; e += kThreads) {
        const int64_t j = e / N, n = e % N;
        Bs[e] = j < ci.len ? p.B[(ci.start + j) * p.bc_stride + g * N + n] : __float2bfloat16_rn(0.0f);
    }
    __syncthreads();

    const int c4 = (tid % kCols) * 4, rg = tid / kCols;
    const int n_rows = static_cast<int>((P - rg + kRowGroups - 1) / kRowGroups);
    float acc[kMaxRows][4] = {};
    for (int64_t j = 0; j < ci.len; ++j) {
        const uint2 raw = *reinterpret_cast<const uint2*>(Bs + j * N + c4);
        const float2 b01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 b23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        const float* xr = xw + j * P + rg;
#pragma unroll
        for (int r = 0; r < kMaxRows; ++r) {
            if (r < n_rows) {
                const float xv = xr[r * kRowGroups];
                acc[r][0] += xv * b01.x;
                acc[r][1] += xv * b01.y;
                acc[r][2] += xv * b23.x;
                acc[r][3] += xv * b23.y;
            }
        }
    }
    float* out = ws.states + (slot * p.H + h) * P * N;
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r) {
        if (r < n_rows) {
            const int64_t row = rg + static_cast<int64_t>(r) * kRowGroups;
            *reinterpret_cast<float4*>(out + row * N + c4) = make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        }
    }
}

// ---- 2. C·Bᵀ per (chunk, group) ----------------------------------------------------------------------
// Thread (ti, tj) = (t / 16, t % 16) owns G[ti + 16r][tj + 16c]. C and B are staged transposed
// ([N][Q + 2]) so that the inner loop over n reads rows of consecutive i / j.
__global__ void __launch_bounds__(kThreads) chunk_cb_kernel(SsdVarlenParams p, Workspace ws) {
    extern __shared__ float smem[];
    const int64_t slot = blockIdx.x, g = blockIdx.y, Q = p.chunk, N = p.N, ld = Q + 2;
    const ChunkInfo ci = locate_chunk(p, slot);
    if (ci.len <= 0) return;
    bf16* Ct = reinterpret_cast<bf16*>(smem);
    bf16* Bt = Ct + N * ld;
    for (int64_t e = threadIdx.x; e < Q * N; e += kThreads) {
        const int64_t i = e / N, n = e % N;
        const bool valid = i < ci.len;
        const int64_t src = (ci.start + i) * p.bc_stride + g * N + n;
        Ct[n * ld + i] = valid ? p.C[src] : __float2bfloat16_rn(0.0f);
        Bt[n * ld + i] = valid ? p.B[src] : __float2bfloat16_rn(0.0f);
    }
    __syncthreads();
    const int ti = threadIdx.x / 16, tj = threadIdx.x % 16, q16 = static_cast<int>(Q / 16);
    float acc[8][8] = {};
    for (int64_t n = 0; n < N; ++n) {
        float cv[8], bv[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            cv[r] = r < q16 ? __bfloat162float(Ct[n * ld + ti + 16 * r]) : 0.0f;
            bv[r] = r < q16 ? __bfloat162float(Bt[n * ld + tj + 16 * r]) : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < 8; ++r) {
#pragma unroll
            for (int c = 0; c < 8; ++c) acc[r][c] += cv[r] * bv[c];
        }
    }
    float* out = ws.cb + (slot * p.G + g) * Q * Q;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            if (r < q16 && c < q16) out[(ti + 16 * r) * Q + tj + 16 * c] = acc[r][c];
        }
    }
}

// ---- 3. state passing ---------------------------------------------------------------------------------
template <typename TS>
__global__ void state_pass_kernel(SsdVarlenParams p, Workspace ws) {
    const int s = blockIdx.x;
    const int64_t h = blockIdx.y, PN = p.P * p.N;
    const int64_t e = static_cast<int64_t>(blockIdx.z) * blockDim.x + threadIdx.x;
    if (e >= PN) return;
    const int64_t start = p.cu_seqlens[s], len = p.cu_seqlens[s + 1] - start;
    const bool init = p.has_initial_state == nullptr || p.has_initial_state[s] != 0;
    TS* slot_state = static_cast<TS*>(p.state) + (static_cast<int64_t>(p.slots[s]) * p.H + h) * PN + e;
    float S = init ? to_float(*slot_state) : 0.0f;
    const int64_t first = s + start / p.chunk, n_chunks = (len + p.chunk - 1) / p.chunk;
    for (int64_t c = 0; c < n_chunks; ++c) {
        const int64_t slot = first + c;
        const int64_t clen = min(p.chunk, len - c * p.chunk);
        const float decay = __expf(ws.cum[(slot * p.H + h) * p.chunk + clen - 1]);
        float* cs = ws.states + (slot * p.H + h) * PN + e;
        const float own = *cs;
        *cs = S;
        S = decay * S + own;
    }
    *slot_state = detail::from_float<TS>(S);
}

// ---- 4. outputs -----------------------------------------------------------------------------------------
// Thread (ig, pg) = (t / 16, t % 16) owns y[ig + 16r][pg + 16q]. Phase A stages Cᵀ and the entering
// state; phase B reuses the same shared memory for the decayed C·Bᵀ (row pitch Q+1) and x.
template <typename TY>
__global__ void __launch_bounds__(kThreads) chunk_output_kernel(SsdVarlenParams p, Workspace ws) {
    extern __shared__ float smem[];
    const int64_t slot = blockIdx.x, h = blockIdx.y, Q = p.chunk, N = p.N, P = p.P;
    const ChunkInfo ci = locate_chunk(p, slot);
    if (ci.len <= 0) return;
    const int64_t g = h / (p.H / p.G);
    float* cum = smem;              // [Q]
    float* dts = cum + kMaxChunk;   // [Q]
    float* area = dts + kMaxChunk;  // phase-dependent
    const int tid = threadIdx.x;
    if (tid < Q) {
        cum[tid] = ws.cum[(slot * p.H + h) * Q + tid];
        dts[tid] = ws.dt[(slot * p.H + h) * Q + tid];
    }
    // Phase A: Cᵀ [N][Q+2] bf16, Sᵀ [N][P+1] fp32.
    const int64_t ldc = Q + 2, lds = P + 1;
    bf16* Ct = reinterpret_cast<bf16*>(area);
    float* St = area + (N * ldc + 1) / 2;
    for (int64_t e = tid; e < Q * N; e += kThreads) {
        const int64_t i = e / N, n = e % N;
        Ct[n * ldc + i] = i < ci.len ? p.C[(ci.start + i) * p.bc_stride + g * N + n] : __float2bfloat16_rn(0.0f);
    }
    const float* S_in = ws.states + (slot * p.H + h) * P * N;
    for (int64_t e = tid; e < P * N; e += kThreads) St[(e % N) * lds + e / N] = S_in[e];
    __syncthreads();
    const int ig = tid / 16, pg = tid % 16, q16 = static_cast<int>(Q / 16);
    const int n_pcols = static_cast<int>((P - pg + 15) / 16);
    float acc[8][8] = {};
    for (int64_t n = 0; n < N; ++n) {
        float cv[8], sv[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) cv[r] = r < q16 ? __bfloat162float(Ct[n * ldc + ig + 16 * r]) : 0.0f;
#pragma unroll
        for (int q = 0; q < 8; ++q) sv[q] = q < n_pcols ? St[n * lds + pg + 16 * q] : 0.0f;
#pragma unroll
        for (int r = 0; r < 8; ++r) {
#pragma unroll
            for (int q = 0; q < 8; ++q) acc[r][q] += cv[r] * sv[q];
        }
    }
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const float decay = r < q16 ? __expf(cum[ig + 16 * r]) : 0.0f;
#pragma unroll
        for (int q = 0; q < 8; ++q) acc[r][q] *= decay;
    }
    __syncthreads();
    // Phase B: M [Q][Q+1] fp32 (decayed, masked C·Bᵀ ⊙ dt_j), X [Q][P] bf16.
    const int64_t ldm = Q + 1;
    float* M = area;
    bf16* X = reinterpret_cast<bf16*>(M + Q * ldm);
    const float* G = ws.cb + (slot * p.G + g) * Q * Q;
    for (int64_t e = tid; e < Q * Q; e += kThreads) {
        const int64_t i = e / Q, j = e % Q;
        M[i * ldm + j] = (j <= i && i < ci.len) ? G[e] * __expf(cum[i] - cum[j]) * dts[j] : 0.0f;
    }
    for (int64_t e = tid; e < Q * P; e += kThreads) {
        const int64_t j = e / P, pp = e % P;
        X[e] = j < ci.len ? p.x[(ci.start + j) * p.x_stride + h * P + pp] : __float2bfloat16_rn(0.0f);
    }
    __syncthreads();
    // Rows ig + 16r only need j ≤ their index; the last row bounds the loop.
    for (int64_t j = 0; j < ci.len; ++j) {
        float mv[8], xv[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) mv[r] = r < q16 ? M[(ig + 16 * r) * ldm + j] : 0.0f;
#pragma unroll
        for (int q = 0; q < 8; ++q) xv[q] = q < n_pcols ? __bfloat162float(X[j * P + pg + 16 * q]) : 0.0f;
#pragma unroll
        for (int r = 0; r < 8; ++r) {
#pragma unroll
            for (int q = 0; q < 8; ++q) acc[r][q] += mv[r] * xv[q];
        }
    }
    const float Dh = p.D ? p.D[h] : 0.0f;
    TY* y = static_cast<TY*>(p.y);
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int64_t i = ig + 16 * r;
        if (r >= q16 || i >= ci.len) continue;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            if (q < n_pcols) {
                const int64_t pp = pg + 16 * q;
                const float xv = __bfloat162float(X[i * P + pp]);
                y[((ci.start + i) * p.H + h) * P + pp] = detail::from_float<TY>(acc[r][q] + Dh * xv);
            }
        }
    }
}

size_t chunk_state_smem(const SsdVarlenParams& p) {
    return (2 * kMaxChunk + p.chunk * p.P) * 4 + p.chunk * p.N * 2;
}
size_t chunk_cb_smem(const SsdVarlenParams& p) { return 2 * p.N * (p.chunk + 2) * 2; }
size_t chunk_output_smem(const SsdVarlenParams& p) {
    const size_t phase_a = (p.N * (p.chunk + 2) + 1) / 2 * 4 + p.N * (p.P + 1) * 4;
    const size_t phase_b = p.chunk * (p.chunk + 1) * 4 + p.chunk * p.P * 2;
    return 2 * kMaxChunk * 4 + std::max(phase_a, phase_b);
}

template <typename K>
void allow_smem(K kernel, size_t bytes) {
    SURF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <int N>
void launch_chunk_state(const SsdVarlenParams& p, const Workspace& ws, dim3 grid, cudaStream_t stream) {
    const size_t smem = chunk_state_smem(p);
    allow_smem(chunk_state_kernel<N>, smem);
    chunk_state_kernel<N><<<grid, kThreads, smem, stream>>>(p, ws);
}

}  // namespace

size_t ssd_workspace_bytes(const SsdVarlenParams& p) {
    const size_t slots = static_cast<size_t>(chunk_slots(p));
    return 2 * align256(slots * p.H * p.chunk * 4) + align256(slots * p.H * p.P * p.N * 4) +
           align256(slots * p.G * p.chunk * p.chunk * 4);
}

void ssd_varlen(const SsdVarlenParams& p, void* workspace, cudaStream_t stream) {
    SURF_CHECK(p.x && p.B && p.C && p.dt_raw && p.dt_bias && p.A && p.state && p.cu_seqlens && p.slots && p.y && workspace,
               "ssd_varlen: null pointer");
    SURF_CHECK(p.n_seq > 0 && p.H > 0 && p.G > 0 && p.H % p.G == 0, "ssd_varlen: n_seq ", p.n_seq, " H ", p.H, " G ", p.G);
    SURF_CHECK(p.chunk >= 16 && p.chunk <= kMaxChunk && p.chunk % 16 == 0, "ssd_varlen: chunk ", p.chunk,
               " must be a multiple of 16 in [16, 128]");
    SURF_CHECK(p.P > 0 && p.P <= 128, "ssd_varlen: head_dim ", p.P, " must be in [1, 128]");
    SURF_CHECK(p.x_stride >= p.H * p.P && p.bc_stride >= p.G * p.N && p.dt_stride >= p.H,
               "ssd_varlen: strides x ", p.x_stride, " bc ", p.bc_stride, " dt ", p.dt_stride);
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.B) % 8 == 0 && p.bc_stride % 4 == 0, "ssd_varlen: B must be 8-byte aligned");
    SURF_CHECK(p.N >= 16 && (p.P + (kThreads / (p.N / 4)) - 1) / (kThreads / (p.N / 4)) <= 16, "ssd_varlen: P ", p.P,
               " too large for N ", p.N);
    const Workspace ws = carve(p, workspace);
    const dim3 grid_h(static_cast<unsigned>(chunk_slots(p)), static_cast<unsigned>(p.H));
    switch (p.N) {
        case 16: launch_chunk_state<16>(p, ws, grid_h, stream); break;
        case 32: launch_chunk_state<32>(p, ws, grid_h, stream); break;
        case 64: launch_chunk_state<64>(p, ws, grid_h, stream); break;
        case 128: launch_chunk_state<128>(p, ws, grid_h, stream); break;
        default: SURF_CHECK(false, "ssd_varlen: d_state ", p.N, " not instantiated (16/32/64/128)");
    }
    SURF_CUDA_CHECK_LAUNCH();

    const size_t cb_smem = chunk_cb_smem(p);
    allow_smem(chunk_cb_kernel, cb_smem);
    chunk_cb_kernel<<<dim3(grid_h.x, static_cast<unsigned>(p.G)), kThreads, cb_smem, stream>>>(p, ws);
    SURF_CUDA_CHECK_LAUNCH();

    const dim3 grid_pass(static_cast<unsigned>(p.n_seq), static_cast<unsigned>(p.H), detail::grid_1d(p.P * p.N, 256));
    if (p.state_dtype == DType::kF32) state_pass_kernel<float><<<grid_pass, 256, 0, stream>>>(p, ws);
    else state_pass_kernel<bf16><<<grid_pass, 256, 0, stream>>>(p, ws);
    SURF_CUDA_CHECK_LAUNCH();

    const size_t out_smem = chunk_output_smem(p);
    if (p.y_dtype == DType::kF32) {
        allow_smem(chunk_output_kernel<float>, out_smem);
        chunk_output_kernel<float><<<grid_h, kThreads, out_smem, stream>>>(p, ws);
    } else {
        allow_smem(chunk_output_kernel<bf16>, out_smem);
        chunk_output_kernel<bf16><<<grid_h, kThreads, out_smem, stream>>>(p, ws);
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
