// 2D TMA tensor maps over bf16 matrices (host side), shared by the kernels that load tiles with
// cp.async.bulk.tensor (attention_wgmma.cu, gemm_wgmma.cu). The driver's encoder is reached through the
// runtime's driver entry point, so nothing links libcuda.
#pragma once

#include <cuda.h>  // CUtensorMap, CUtensorMapSwizzle

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace surf::kernels::cuda::detail {

// A map over `rows` rows of `cols` bf16 at a row stride of `stride` elements (a multiple of 8, base 16-byte
// aligned), read in boxes of box_cols × box_rows with the given swizzle; out-of-range elements read as zeros.
// `who` names the caller in the error raised when the encoder refuses the shape.
CUtensorMap bf16_tensor_map_2d(const bf16* base, int64_t cols, int64_t rows, int64_t stride, int box_cols,
                               int box_rows, CUtensorMapSwizzle swizzle, const char* who);

}  // namespace surf::kernels::cuda::detail
