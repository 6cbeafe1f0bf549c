// fp8_cutlass.h's config 1: tiles of 64 × 128 (twice the tiles of config 0 for the shapes of few tiles),
// clusters of two along m, ping-pong.
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c1 {
using Tile = cute::Shape<cute::_64, cute::_128, cute::_128>;
using Cluster = cute::Shape<cute::_2, cute::_1, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c1

SURF_FP8_CUTLASS_CONFIG(1, c1::Tile, c1::Cluster, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum,
                        cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler)
