// fp8_cutlass.h's config 3: config 2's tiles with the work split along k where tiles do not fill the last
// wave (stream-K).
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c3 {
using Tile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using Cluster = cute::Shape<cute::_1, cute::_2, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c3

SURF_FP8_CUTLASS_CONFIG(3, c3::Tile, c3::Cluster,
                        cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                        cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler)
