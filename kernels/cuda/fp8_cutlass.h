// CUTLASS's Hopper FP8 GEMM with fp8_gemm()'s scale vectors, bias, GELU and residual in its own epilogue
// (fp8_cutlass*.cu), one of the ways fp8_gemm() runs a shape with fast accumulation (fp8.cu times it beside
// cuBLASLt's matmul + epilogue pass). Built where CUTLASS's headers are found (SURF_HAVE_CUTLASS;
// scripts/fetch_gpu_deps.sh puts them in .deps/cutlass); without them available() is false and fp8_gemm()
// keeps cuBLASLt. Host code only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/ops.h"

namespace surf::kernels::cuda::fp8_cutlass {

// Tile and schedule variants (config_name); each is built for every output kind (Out).
constexpr int kConfigs = 4;
const char* config_name(int config);

bool available();

// The output kinds, each a kernel of every config: a bf16 y, the same through GELU, an fp32 residual y (beta
// 1).
enum class Out { kBf16, kBf16Gelu, kResidual };
inline Out out_of(const Fp8GemmParams& p) {
    if (p.y_dtype == DType::kF32) return Out::kResidual;
    return p.activation == GemmActivation::kGeluTanh ? Out::kBf16Gelu : Out::kBf16;
}

// y[m, n] = act((Σ_k xq·wq) · w_scale[n] · x_scale[m] + bias[n] (+ y where beta is 1)) in one kernel: TMA
// loads into a stage ring, warp-specialized wgmma with fast accumulation, the scales, bias, GELU and residual
// applied to the accumulators before the store. Takes a bf16 y with beta 0 (no activation, or GELU), or an
// fp32 y with beta 1 (a residual stream added in place, no activation); no ReLU² and no FP8 output; y 16-byte
// aligned and its row stride a 16-byte multiple; a bias 16-byte aligned with n a multiple of 8.
bool supports(const Fp8GemmParams& p, int64_t ldy);

// Workspace the config needs for p (its tile scheduler's).
size_t workspace_bytes(int config, const Fp8GemmParams& p, int64_t ldy);

// Launches config on p; false where CUTLASS refuses the problem (can_implement) or the workspace is short.
bool run(int config, const Fp8GemmParams& p, int64_t ldy, void* workspace, size_t workspace_size,
         cudaStream_t stream);

namespace detail {
// One config's kernels (fp8_cutlass_c<N>.cu), chosen by out_of(p).
size_t workspace_bytes_c0(const Fp8GemmParams& p, int64_t ldy);
size_t workspace_bytes_c1(const Fp8GemmParams& p, int64_t ldy);
size_t workspace_bytes_c2(const Fp8GemmParams& p, int64_t ldy);
size_t workspace_bytes_c3(const Fp8GemmParams& p, int64_t ldy);
bool run_c0(const Fp8GemmParams& p, int64_t ldy, void* ws, cudaStream_t stream);
bool run_c1(const Fp8GemmParams& p, int64_t ldy, void* ws, cudaStream_t stream);
bool run_c2(const Fp8GemmParams& p, int64_t ldy, void* ws, cudaStream_t stream);
bool run_c3(const Fp8GemmParams& p, int64_t ldy, void* ws, cudaStream_t stream);
}  // namespace detail

}  // namespace surf::kernels::cuda::fp8_cutlass
