#include "kernels/cuda/tensor_map.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace surf::kernels::cuda::detail {

namespace {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                   CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                   CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled() {
    static const EncodeTiledFn fn = [] {
        void* f = nullptr;
        cudaDriverEntryPointQueryResult found{};
        SURF_CUDA_CHECK(
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
        SURF_CHECK(found == cudaDriverEntryPointSuccess && f != nullptr,
                   "tensor map: the driver has no cuTensorMapEncodeTiled");
        return reinterpret_cast<EncodeTiledFn>(f);
    }();
    return fn;
}

}  // namespace

CUtensorMap bf16_tensor_map_2d(const bf16* base, int64_t cols, int64_t rows, int64_t stride, int box_cols,
                               int box_rows, CUtensorMapSwizzle swizzle, const char* who) {
    CUtensorMap map{};
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride) * 2};
    const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult r =
        encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, strides, box,
                       element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    SURF_CHECK(r == CUDA_SUCCESS, who, ": cuTensorMapEncodeTiled failed (error ", static_cast<int>(r),
               ") for ", rows, " × ", cols, " at stride ", stride, ", box ", box_rows, " × ", box_cols);
    return map;
}

}  // namespace surf::kernels::cuda::detail
