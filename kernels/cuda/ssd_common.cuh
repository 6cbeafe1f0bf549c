// Pieces of the Mamba-2 SSD chunk computation shared by the scan kernels (ssd.cu: mma.sync, any shape;
// ssd_wgmma.cu: Hopper wgmma, the Holotron shape): the per-chunk decays, 2^x, paired loads and stores.
// Included only by those files.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ssm_state.cuh"

namespace surf::kernels::cuda::ssd_detail {

constexpr int kMaxChunk = 128;

template <typename T>
__device__ __forceinline__ void load2(const T* p, float& a, float& b);
template <>
__device__ __forceinline__ void load2<float>(const float* p, float& a, float& b) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    a = v.x;
    b = v.y;
}
template <>
__device__ __forceinline__ void load2<bf16>(const bf16* p, float& a, float& b) {
    const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
    a = v.x;
    b = v.y;
}
template <typename T>
__device__ __forceinline__ void store2(T* p, float a, float b);
template <>
__device__ __forceinline__ void store2<float>(float* p, float a, float b) {
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
template <>
__device__ __forceinline__ void store2<bf16>(bf16* p, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// A block's part of a slot's state (offsets in values from its first) in the slot's layout: plain fp32 or
// bf16, or the fp32 state's two 16-bit planes (SsdVarlenParams::state_split; low plane `plane` values after
// the high).
template <typename T>
struct PlainStateRef {
    T* at;
    __device__ float load1(int64_t o) const { return detail::to_float(at[o]); }
    __device__ void store1(int64_t o, float v) const { at[o] = detail::from_float<T>(v); }
    __device__ void load2(int64_t o, float& a, float& b) const { ssd_detail::load2(at + o, a, b); }
    __device__ void store2(int64_t o, float a, float b) const { ssd_detail::store2(at + o, a, b); }
};
struct SplitStateRef {
    uint16_t* high;
    int64_t plane;
    __device__ float load1(int64_t o) const { return split_state::join(high[o], high[o + plane]); }
    __device__ void store1(int64_t o, float v) const {
        high[o] = static_cast<uint16_t>(split_state::high_of(v));
        high[o + plane] = static_cast<uint16_t>(split_state::low_of(v));
    }
    __device__ void load2(int64_t o, float& a, float& b) const {
        split_state::load2(high + o, high + o + plane, a, b);
    }
    __device__ void store2(int64_t o, float a, float b) const {
        split_state::store2(high + o, high + o + plane, a, b);
    }
};
// Calls f with the state reference of the block whose values start `in_slot` values into slot `slot` (hpn =
// H·P·N values a slot).
template <typename F>
__device__ __forceinline__ void with_state_ref(const SsdVarlenParams& p, int64_t slot, int64_t in_slot,
                                               int64_t hpn, F&& f) {
    if (p.state_split)
        f(SplitStateRef{static_cast<uint16_t*>(p.state) + slot * 2 * hpn + in_slot, hpn});
    else if (p.state_dtype == DType::kF32)
        f(PlainStateRef<float>{static_cast<float*>(p.state) + slot * hpn + in_slot});
    else
        f(PlainStateRef<bf16>{static_cast<bf16*>(p.state) + slot * hpn + in_slot});
}

constexpr float kLog2e = 1.4426950408889634f;

// 2^x on the special-function unit, subnormal results flushed to zero (the mask's decays: ≤ 1, and a decay
// below 2^-126 is as good as zero next to the fp32 sums it is added to).
__device__ __forceinline__ float ex2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Λ = inclusive cumsum of dt·A over the chunk (warp 0 only, 4 per lane), e^{Λ_j}, the state weights
// e^{Λ_last − Λ_j}·dt_j and the chunk's decay e^{Λ_last}. dts must be complete (barrier before).
__device__ __forceinline__ void chunk_decays(float* dts, float* cum, float* expl, float* wgt, float* decay,
                                             float A) {
    const int lane = threadIdx.x & 31;
    float v[4], run = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        run += dts[lane * 4 + k] * A;
        v[k] = run;
    }
    float incl = run;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const float up = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += up;
    }
    const float excl = incl - run, total = __shfl_sync(0xffffffffu, incl, 31);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int j = lane * 4 + k;
        const float cj = v[k] + excl;
        cum[j] = cj * kLog2e;
        expl[j] = __expf(cj);
        wgt[j] = __expf(total - cj) * dts[j];
    }
    if (lane == 0) *decay = __expf(total);
}

// The wgmma kernel (ssd_wgmma.cu): whether it runs these params (`vec`: rows 16-byte aligned), and its
// launch.
bool wgmma_applies(const SsdVarlenParams& p, bool vec);
void launch_wgmma(const SsdVarlenParams& p, cudaStream_t stream);

}  // namespace surf::kernels::cuda::ssd_detail
