// FP8 E4M3 conversion and the W8A8 linear layer (fp8.h).
#include "kernels/cpu/fp8.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/cpu_ops.h"

namespace surf::kernels::cpu {

namespace {

std::array<float, 256> e4m3_table() {
    std::array<float, 256> table{};
    for (uint32_t code = 0; code < 256; ++code) {
        const uint32_t exponent = (code >> 3) & 0xfu, mantissa = code & 0x7u;
        float magnitude;
        if (exponent == 15 && mantissa == 7) {
            magnitude = NAN;
        } else if (exponent == 0) {
            magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m · 2^-9
        } else {
            magnitude = std::ldexp(static_cast<float>(mantissa | 0x8u), static_cast<int>(exponent) - 10);
        }
        table[code] = (code & 0x80u) ? -magnitude : magnitude;
    }
    return table;
}

// x → E4M3 → fp32 for n values divided by `scale` (the quantized operand of a GEMM).
void quantize_scaled(const float* x, int64_t n, float scale, float* q) {
    for (int64_t i = 0; i < n; ++i) q[i] = round_to_e4m3(x[i] / scale);
}

}  // namespace

uint8_t f32_to_e4m3(float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
    const uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits > 0x7f800000u) return sign | 0x7fu;   // NaN
    if (abs_bits >= 0x43e00000u) return sign | 0x7eu;  // |x| ≥ 448, infinities included: clamped to 448
    if (abs_bits < 0x3c800000u) {                      // |x| < 2^-6: subnormal, a multiple of 2^-9
        float magnitude;
        std::memcpy(&magnitude, &abs_bits, sizeof(magnitude));
        // x · 2^9 is exact; nearbyint rounds half to even in the default rounding mode. 8 is 2^-6, the
        // smallest normal, whose code follows the subnormals' directly.
        return sign | static_cast<uint8_t>(std::nearbyint(magnitude * 512.0f));
    }
    // Normal: keep 3 of fp32's 23 mantissa bits, rounding the 20 dropped bits to nearest even (a carry moves
    // into the exponent), then rebias the exponent from 127 to 7.
    const uint32_t rounded = abs_bits + 0x7ffffu + ((abs_bits >> 20) & 1u);
    return sign | static_cast<uint8_t>((rounded >> 20) - ((127u - 7u) << 3));
}

float e4m3_to_f32(uint8_t code) {
    static const std::array<float, 256> kTable = e4m3_table();
    return kTable[code];
}

void quantize_rows_e4m3(const RowQuantParams& p) {
    SURF_CHECK(p.x && p.q && p.scale, "quantize_rows_e4m3: null pointer");
    parallel_for(
        p.rows,
        [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                const float* x = p.x + r * p.cols;
                float amax = 0.0f;
                for (int64_t i = 0; i < p.cols; ++i) amax = std::max(amax, std::fabs(x[i]));
                const float scale = amax > 0.0f ? amax / kE4M3Max : 1.0f;
                p.scale[r] = scale;
                quantize_scaled(x, p.cols, scale, p.q + r * p.cols);
            }
        },
        4);
}

namespace {

// xq [m, k] and sx [m]: the activations as the FP8 GEMM reads them.
void quantize_activations(const Fp8LinearParams& p, std::vector<float>& xq, std::vector<float>& sx) {
    xq.resize(static_cast<size_t>(p.m * p.k));
    sx.resize(static_cast<size_t>(p.m));
    if (p.input_scale > 0.0f) {
        quantize_scaled(p.x, p.m * p.k, p.input_scale, xq.data());
        std::fill(sx.begin(), sx.end(), p.input_scale);
    } else {
        quantize_rows_e4m3({p.x, xq.data(), sx.data(), p.m, p.k});
    }
}

}  // namespace

void fp8_linear(const Fp8LinearParams& p) {
    SURF_CHECK(p.x && p.w && p.w_scale && p.y, "fp8_linear: null pointer");
    SURF_CHECK(p.input_scale >= 0.0f, "fp8_linear: input_scale ", p.input_scale);
    std::vector<float> xq, sx;
    quantize_activations(p, xq, sx);
    linear({xq.data(), p.w, nullptr, p.y, p.m, p.n, p.k});
    for (int64_t i = 0; i < p.m; ++i) {
        float* y = p.y + i * p.n;
        for (int64_t j = 0; j < p.n; ++j) y[j] = y[j] * sx[i] * p.w_scale[j];
    }
}

void fp8_linear_reference(const Fp8LinearParams& p) {
    SURF_CHECK(p.x && p.w && p.w_scale && p.y, "fp8_linear: null pointer");
    std::vector<float> xq, sx;
    quantize_activations(p, xq, sx);
    for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
            float acc = 0.0f;
            for (int64_t t = 0; t < p.k; ++t) acc += xq[i * p.k + t] * p.w[j * p.k + t];
            p.y[i * p.n + j] = acc * sx[i] * p.w_scale[j];
        }
    }
}

}  // namespace surf::kernels::cpu
