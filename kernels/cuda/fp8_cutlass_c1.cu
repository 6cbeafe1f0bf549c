// fp8_cutlass.h's config 1: tiles of 64 × 128 for few rows, clusters of two along n, two consumer warpgroups alternating tiles (ping-pong); a 64-row tile's accumulators fit one warpgroup's registers beside the fp32 promotion.
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c1 {
using Tile = cute::Shape<cute::_64, cute::_128, cute::_128>;
using Cluster = cute::Shape<cute::_1, cute::_2, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c1

SURF_FP8_CUTLASS_CONFIG(1, c1::Tile, c1::Cluster, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                        cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler)
