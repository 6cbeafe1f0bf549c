// Selective state update (Mamba-2 decode step, spec §2.1) on slot-indexed states:
//   dt = softplus(dt_raw + dt_bias); S ← exp(dt·A)·S + dt·x⊗B; y = S·C + D·x.
// Memory-bound: each (sequence, head) reads and writes its P×N state once. One block per (sequence,
// head); a state row of N values is spread over N/4 lanes (4 values = one 16-byte fp32 or 8-byte bf16
// access per lane), several rows are loaded before any is used so enough bytes are in flight.
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::to_float;

constexpr int kSsuThreads = 128;
constexpr int kUnroll = 4;

template <typename TS> struct Vec4;
template <> struct Vec4<float> {
    using Raw = float4;
    __device__ static void unpack(const Raw& r, float (&v)[4]) { v[0] = r.x; v[1] = r.y; v[2] = r.z; v[3] = r.w; }
    __device__ static Raw pack(const float (&v)[4]) { return make_float4(v[0], v[1], v[2], v[3]); }
};
template <> struct Vec4<bf16> {
    using Raw = uint2;
    __device__ static void unpack(const Raw& r, float (&v)[4]) {
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.x));
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.y));
        v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
    }
    __device__ static Raw pack(const float (&v)[4]) {
        const __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]), b = __floats2bfloat162_rn(v[2], v[3]);
        Raw r;
        r.x = *reinterpret_cast<const uint32_t*>(&a);
        r.y = *reinterpret_cast<const uint32_t*>(&b);
        return r;
    }
};

template <typename TS, typename TY, int N>
__global__ void __launch_bounds__(kSsuThreads) ssu_kernel(SsuParams p) {
    constexpr int kLanesPerRow = N / 4;
    constexpr int kRowsPerWarp = 32 / kLanesPerRow;
    constexpr int kRowsPerStep = kRowsPerWarp * (kSsuThreads / 32);
    using V = Vec4<TS>;
    const int64_t b = blockIdx.x / p.H, h = blockIdx.x % p.H;
    const int64_t g = h / (p.H / p.G);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int sub = lane % kLanesPerRow, row_in_warp = lane / kLanesPerRow;
    const int n0 = sub * 4;

    float dt = detail::softplus(to_float(p.dt_raw[b * p.dt_stride + h]) + p.dt_bias[h]);
    dt = fminf(fmaxf(dt, p.dt_min), p.dt_max);
    const float dA = __expf(dt * p.A[h]);
    const float Dh = p.D ? p.D[h] : 0.0f;
    float Bv[4], Cv[4];
    const bf16* Bp = p.B + b * p.bc_stride + g * N + n0;
    const bf16* Cp = p.C + b * p.bc_stride + g * N + n0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        Bv[j] = to_float(Bp[j]) * dt;  // dt·B folded once
        Cv[j] = to_float(Cp[j]);
    }
    const bf16* x = p.x + b * p.x_stride + h * p.P;
    TS* S = static_cast<TS*>(p.state) + (static_cast<int64_t>(p.slots[b]) * p.H + h) * p.P * N;
    TY* y = static_cast<TY*>(p.y) + (b * p.H + h) * p.P;

    for (int r0 = 0; r0 < p.P; r0 += kRowsPerStep * kUnroll) {
        typename V::Raw raw[kUnroll];
        float xv[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int row = r0 + u * kRowsPerStep + warp * kRowsPerWarp + row_in_warp;
            if (row < p.P) {
                raw[u] = *reinterpret_cast<const typename V::Raw*>(S + static_cast<int64_t>(row) * N + n0);
                xv[u] = to_float(x[row]);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int row = r0 + u * kRowsPerStep + warp * kRowsPerWarp + row_in_warp;
            float s[4];
            float acc = 0.0f;
            if (row < p.P) {
                V::unpack(raw[u], s);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    s[j] = dA * s[j] + xv[u] * Bv[j];
                    acc += s[j] * Cv[j];
                }
                *reinterpret_cast<typename V::Raw*>(S + static_cast<int64_t>(row) * N + n0) = V::pack(s);
            }
            // Reduce over the row's lanes (all lanes take part: shuffles need the full warp).
#pragma unroll
            for (int o = kLanesPerRow / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (row < p.P && sub == 0) y[row] = detail::from_float<TY>(acc + Dh * xv[u]);
        }
    }
}

template <typename TS, typename TY>
void launch_ssu(const SsuParams& p, cudaStream_t stream) {
    const unsigned grid = static_cast<unsigned>(p.batch * p.H);
    switch (p.N) {
        case 16: ssu_kernel<TS, TY, 16><<<grid, kSsuThreads, 0, stream>>>(p); break;
        case 32: ssu_kernel<TS, TY, 32><<<grid, kSsuThreads, 0, stream>>>(p); break;
        case 64: ssu_kernel<TS, TY, 64><<<grid, kSsuThreads, 0, stream>>>(p); break;
        case 128: ssu_kernel<TS, TY, 128><<<grid, kSsuThreads, 0, stream>>>(p); break;
        default: SURF_CHECK(false, "selective_state_update: d_state ", p.N, " not instantiated (16/32/64/128)");
    }
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace

void selective_state_update(const SsuParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.B && p.C && p.dt_raw && p.dt_bias && p.A && p.state && p.slots && p.y,
               "selective_state_update: null pointer");
    SURF_CHECK(p.H > 0 && p.G > 0 && p.H % p.G == 0 && p.P > 0, "selective_state_update: H ", p.H, " G ", p.G, " P ", p.P);
    SURF_CHECK(p.x_stride >= p.H * p.P && p.bc_stride >= p.G * p.N && p.dt_stride >= p.H,
               "selective_state_update: strides x ", p.x_stride, " bc ", p.bc_stride, " dt ", p.dt_stride);
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.state) % 16 == 0, "selective_state_update: state not 16-byte aligned");
    if (p.batch == 0) return;
    const bool s32 = p.state_dtype == DType::kF32, y32 = p.y_dtype == DType::kF32;
    if (s32 && y32) launch_ssu<float, float>(p, stream);
    else if (s32) launch_ssu<float, bf16>(p, stream);
    else if (y32) launch_ssu<bf16, float>(p, stream);
    else launch_ssu<bf16, bf16>(p, stream);
}

}  // namespace surf::kernels::cuda
