// The fp32 SSM state as two 16-bit planes (SsuParams::state_split, SsdVarlenParams::state_split): per slot
// [2][H][P][N] uint16, first each value rounded to bf16 (to nearest; an exact tie toward zero), then the low
// 16 bits of the value's fp32 bit pattern. The low half tells whether the rounding went up (it is then over
// 0x8000), so the two rejoin into the exact fp32 value: the state a session carries is fp32 to the last bit.
// A decode step that reads the state only for y = S·C (no fold) reads the high plane, half the bytes, as
// plain bf16 (error ≤ 2⁻⁸ relative, as the reference, which computes this product from the state rounded to
// bf16). Included only by the Mamba kernel files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace surf::kernels::cuda::split_state {

// The encoding on bit patterns (host and device): the high half of fp32 pattern b (its bf16 rounding), and
// the pattern back from both halves (the high half less its rounding carry, then the low bits).
__host__ __device__ constexpr uint32_t high_bits(uint32_t b) {
    return (b >> 16) + ((b & 0xffffu) > 0x8000u ? 1u : 0u);
}
__host__ __device__ constexpr uint32_t join_bits(uint32_t high, uint32_t low) {
    return ((high - (low > 0x8000u ? 1u : 0u)) << 16) | low;
}

// The exact value from its two halves.
__device__ __forceinline__ float join(uint32_t high, uint32_t low) {
    return __uint_as_float(join_bits(high, low));
}
// The value's bf16 rounding (the high half) and its low bits (v's bit pattern's low 16 bits).
__device__ __forceinline__ uint32_t high_of(float v) {
    return high_bits(__float_as_uint(v));
}
__device__ __forceinline__ uint32_t low_of(float v) {
    return __float_as_uint(v) & 0xffffu;
}

// Eight exact values from 16 bytes of high halves and 16 bytes of low halves (the high halves alone are plain
// bf16: the replay kernel reads them as such). Element 2j is the low 16 bits of word j.
__device__ __forceinline__ void unpack8(const uint4& high, const uint4& low, float (&v)[8]) {
    const uint32_t h[4] = {high.x, high.y, high.z, high.w}, l[4] = {low.x, low.y, low.z, low.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        v[2 * j] = join(h[j] & 0xffffu, l[j] & 0xffffu);
        v[2 * j + 1] = join(h[j] >> 16, l[j] >> 16);
    }
}
// Eight values into 16 bytes of high halves and 16 of low halves.
__device__ __forceinline__ void pack8(const float (&v)[8], uint4& high, uint4& low) {
    uint32_t h[4], l[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        h[j] = high_of(v[2 * j]) | (high_of(v[2 * j + 1]) << 16);
        l[j] = low_of(v[2 * j]) | (low_of(v[2 * j + 1]) << 16);
    }
    high = make_uint4(h[0], h[1], h[2], h[3]);
    low = make_uint4(l[0], l[1], l[2], l[3]);
}
// Two adjacent values (n, n + 1; n even) from / to their halves at high[0..1] and low[0..1].
__device__ __forceinline__ void load2(const uint16_t* high, const uint16_t* low, float& a, float& b) {
    const uint32_t h = *reinterpret_cast<const uint32_t*>(high), l = *reinterpret_cast<const uint32_t*>(low);
    a = join(h & 0xffffu, l & 0xffffu);
    b = join(h >> 16, l >> 16);
}
__device__ __forceinline__ void store2(uint16_t* high, uint16_t* low, float a, float b) {
    *reinterpret_cast<uint32_t*>(high) = high_of(a) | (high_of(b) << 16);
    *reinterpret_cast<uint32_t*>(low) = low_of(a) | (low_of(b) << 16);
}

}  // namespace surf::kernels::cuda::split_state
