// Element types of checkpoint tensors and their conversion to fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace surf::model {

enum class DType { kF32, kF16, kBF16, kF8E4M3, kI64, kI32, kU8, kBool };

// Safetensors dtype string ("BF16", "F32", ...) → DType; returns false when unknown.
bool parse_dtype(const std::string& name, DType* out);
const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

inline float bf16_to_f32(uint16_t bits) {
    uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof(value));
    return value;
}

// Round to nearest even, as torch does when casting fp32 → bf16. NaN stays NaN.
inline uint16_t f32_to_bf16(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof(word));
    if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((word >> 16) & 1u);
    return static_cast<uint16_t>((word + rounding) >> 16);
}

float f16_to_f32(uint16_t bits);
float f8e4m3_to_f32(uint8_t bits);

// Converts n elements of `dtype` at `src` to fp32 (src may be unaligned).
void convert_to_f32(DType dtype, const void* src, size_t n, float* dst);

}  // namespace surf::model
