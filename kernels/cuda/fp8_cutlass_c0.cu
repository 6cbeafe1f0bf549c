// fp8_cutlass.h's config 0: tiles of 128 × 128, clusters of two along m, two consumer warpgroups taking turns
// on alternate tiles (ping-pong).
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c0 {
using Tile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using Cluster = cute::Shape<cute::_2, cute::_1, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c0

SURF_FP8_CUTLASS_CONFIG(0, c0::Tile, c0::Cluster, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum,
                        cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler)
