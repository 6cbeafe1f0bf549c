// fp8_cutlass.h's config 2: tiles of 128 × 128, clusters of two along n, two consumer warpgroups sharing each
// tile (cooperative).
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c2 {
using Tile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using Cluster = cute::Shape<cute::_1, cute::_2, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c2

SURF_FP8_CUTLASS_CONFIG(2, c2::Tile, c2::Cluster,
                        cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                        cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler)
