#include "model/checkpoint/dtype.h"

#include <cmath>

#include "base/check.h"
#include "kernels/cpu/fp8.h"

namespace surf::model {

bool parse_dtype(const std::string& name, DType* out) {
    struct Entry {
        const char* name;
        DType dtype;
    };
    static const Entry kEntries[] = {
        {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16}, {"F8_E4M3", DType::kF8E4M3},
        {"I64", DType::kI64}, {"I32", DType::kI32}, {"U8", DType::kU8},     {"BOOL", DType::kBool}};
    for (const auto& entry : kEntries) {
        if (name == entry.name) {
            *out = entry.dtype;
            return true;
        }
    }
    return false;
}

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DType::kF32: return "F32";
        case DType::kF16: return "F16";
        case DType::kBF16: return "BF16";
        case DType::kF8E4M3: return "F8_E4M3";
        case DType::kI64: return "I64";
        case DType::kI32: return "I32";
        case DType::kU8: return "U8";
        case DType::kBool: return "BOOL";
    }
    return "?";
}

size_t dtype_size(DType dtype) {
    switch (dtype) {
        case DType::kF32:
        case DType::kI32: return 4;
        case DType::kF16:
        case DType::kBF16: return 2;
        case DType::kI64: return 8;
        case DType::kF8E4M3:
        case DType::kU8:
        case DType::kBool: return 1;
    }
    return 0;
}

float f16_to_f32(uint16_t bits) {
    const uint32_t sign = (bits >> 15) & 1u;
    const uint32_t exponent = (bits >> 10) & 0x1fu;
    const uint32_t mantissa = bits & 0x3ffu;
    float magnitude;
    if (exponent == 0) {
        magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
    } else if (exponent == 31) {
        magnitude = mantissa ? NAN : INFINITY;
    } else {
        magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
    }
    return sign ? -magnitude : magnitude;
}

// OCP FP8 E4M3 ("fn" variant as in torch.float8_e4m3fn): the kernels' decoder, so that weights and the
// activations the FP8 GEMM quantizes share one definition.
float f8e4m3_to_f32(uint8_t bits) {
    return kernels::cpu::e4m3_to_f32(bits);
}

void convert_to_f32(DType dtype, const void* src, size_t n, float* dst) {
    const auto* bytes = static_cast<const uint8_t*>(src);
    switch (dtype) {
        case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
        case DType::kBF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t bits;
                std::memcpy(&bits, bytes + 2 * i, 2);
                dst[i] = bf16_to_f32(bits);
            }
            return;
        case DType::kF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t bits;
                std::memcpy(&bits, bytes + 2 * i, 2);
                dst[i] = f16_to_f32(bits);
            }
            return;
        case DType::kF8E4M3:
            for (size_t i = 0; i < n; ++i) dst[i] = f8e4m3_to_f32(bytes[i]);
            return;
        default: SURF_CHECK(false, "convert_to_f32: not a float dtype: ", dtype_name(dtype));
    }
}

}  // namespace surf::model
