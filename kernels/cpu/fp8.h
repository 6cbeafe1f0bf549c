// FP8 E4M3 (the OCP "fn" variant, torch.float8_e4m3fn): 1 sign bit, 4 exponent bits with bias 7, 3 mantissa
// bits; no infinities, S.1111.111 is NaN, the largest finite value is 448 and the smallest subnormal 2^-9.
// The conversion rounds like PyTorch's `.clamp(-448, 448).to(torch.float8_e4m3fn)` (round to nearest, ties to
// even), and the FP8 linear layer runs the W8A8 scheme of the language model's GEMMs on the CPU: both
// operands quantized to E4M3 with fp32 scales, products accumulated in fp32, then rescaled. E4M3 values are
// held in fp32 (exactly: every E4M3 value is an fp32 value), so the GEMM is the fp32 GEMM of gemm.cpp.
#pragma once

#include <cstdint>

namespace surf::kernels::cpu {

constexpr float kE4M3Max = 448.0f;

// The E4M3 code of x after clamping to ±448: round to nearest even, subnormals included; NaN → 0x7F/0xFF.
uint8_t f32_to_e4m3(float x);
// The value of an E4M3 code (exact); 0x7F and 0xFF are NaN.
float e4m3_to_f32(uint8_t code);
// x rounded to the nearest E4M3 value after clamping to ±448 (e4m3_to_f32(f32_to_e4m3(x))).
inline float round_to_e4m3(float x) {
    return e4m3_to_f32(f32_to_e4m3(x));
}

// Per-row symmetric quantization (weights per output channel, activations per token):
//   scale[r] = max_i |x[r, i]| / 448 (1 for an all-zero row),  q[r, i] = round_to_e4m3(x[r, i] / scale[r]).
// q may alias x.
struct RowQuantParams {
    const float* x = nullptr;  // [rows, cols]
    float* q = nullptr;        // [rows, cols] E4M3 values
    float* scale = nullptr;    // [rows]
    int64_t rows = 0, cols = 0;
};
void quantize_rows_e4m3(const RowQuantParams& p);

// y[m, n] = (Σ_k xq[m, k] · w[n, k]) · sx[m] · w_scale[n], accumulated in fp32, where xq and sx come from x:
// per token (quantize_rows_e4m3) when input_scale is 0, else the static per-tensor scale:
// xq = round_to_e4m3(x / input_scale) (saturating at ±448), sx = input_scale.
struct Fp8LinearParams {
    const float* x = nullptr;        // [m, k] fp32 activations
    const float* w = nullptr;        // [n, k] E4M3 values
    const float* w_scale = nullptr;  // [n] per-output-channel weight scales
    float input_scale = 0.0f;        // > 0: static per-tensor activation scale; 0: dynamic per token
    float* y = nullptr;              // [m, n]
    int64_t m = 0, n = 0, k = 0;
};
void fp8_linear(const Fp8LinearParams& p);            // quantizes x into scratch, then gemm
void fp8_linear_reference(const Fp8LinearParams& p);  // the same math as plain loops

}  // namespace surf::kernels::cpu
