// fp8_cutlass.h's config 0: tiles of 128 × 128, clusters of two along n, two consumer warpgroups sharing each tile (cooperative), the work split along k where tiles do not fill the last wave (stream-K).
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c0 {
using Tile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using Cluster = cute::Shape<cute::_1, cute::_2, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c0

SURF_FP8_CUTLASS_CONFIG(0, c0::Tile, c0::Cluster, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                        cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler)
