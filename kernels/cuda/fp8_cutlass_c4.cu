// fp8_cutlass.h's config 4, for decode steps: the operands swapped (the weights' n along the tile's 128-wide
// M, the rows of x in one 64-wide N tile), cooperative, the work split along k where tiles do not fill the
// last wave (stream-K).
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c4 {
using Tile = cute::Shape<cute::_128, cute::_64, cute::_128>;
using Cluster = cute::Shape<cute::_1, cute::_1, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c4

SURF_FP8_CUTLASS_CONFIG(4, c4::Tile, c4::Cluster,
                        cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                        cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler,
                        true)
