// Device-side E4M3 helpers shared by quantize_e4m3 (fp8.cu) and the producers that quantize their own
// output (norm.cu's norms, fp8.cu's fused epilogue), so that all of them give quantize_e4m3's codes and
// scales bit for bit. Included only by .cu files.
#pragma once

#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda::detail {

constexpr float kE4M3Max = 448.0f;

// A row's scale from its (already reduced) amax: the static scale, else amax / 448 by IEEE division as the
// CPU's, 1 for an all-zero row.
__device__ __forceinline__ float e4m3_row_scale(float static_scale, float amax) {
    if (static_scale > 0.0f) return static_scale;
    return amax > 0.0f ? __fdiv_rn(amax, kE4M3Max) : 1.0f;
}

// Two values divided by the scale (IEEE) to two codes in the low 16 bits (the first in the low byte), by the
// hardware conversion: round to nearest even, ±448 at saturation.
__device__ __forceinline__ uint32_t e4m3x2(float a, float b, float scale) {
    const float2 pair = make_float2(__fdiv_rn(a, scale), __fdiv_rn(b, scale));
    return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E4M3));
}

// Four values to four codes in one 32-bit word, the first in the low byte.
__device__ __forceinline__ uint32_t e4m3x4(const float* v, float scale) {
    return e4m3x2(v[0], v[1], scale) | (e4m3x2(v[2], v[3], scale) << 16);
}

// Eight values to eight codes (one 8-byte store).
__device__ __forceinline__ uint2 e4m3x8(const float (&v)[8], float scale) {
    return make_uint2(e4m3x4(v, scale), e4m3x4(v + 4, scale));
}

// v rounded to bf16 and back: the value a bf16 result holds, which quantize_e4m3 would read.
__device__ __forceinline__ float bf16_rounded(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

}  // namespace surf::kernels::cuda::detail
