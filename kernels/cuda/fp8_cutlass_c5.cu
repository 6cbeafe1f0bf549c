// fp8_cutlass.h's config 5: config 4 with an N tile of 32 rows of x and k tiles of 256 (fewer, longer weight
// loads a stage for the smallest decode steps).
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c5 {
using Tile = cute::Shape<cute::_128, cute::_32, cute::_256>;
using Cluster = cute::Shape<cute::_1, cute::_1, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c5

SURF_FP8_CUTLASS_CONFIG(5, c5::Tile, c5::Cluster,
                        cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                        cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler,
                        true)
