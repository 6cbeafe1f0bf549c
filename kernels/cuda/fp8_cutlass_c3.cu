// fp8_cutlass.h's config 3: tiles of 128 × 128, clusters of two along n (each activation tile multicast to both), cooperative, persistent.
#include "kernels/cuda/fp8_cutlass.cuh"

namespace surf::kernels::cuda::fp8_cutlass::detail::c3 {
using Tile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using Cluster = cute::Shape<cute::_1, cute::_2, cute::_1>;
}  // namespace surf::kernels::cuda::fp8_cutlass::detail::c3

SURF_FP8_CUTLASS_CONFIG(3, c3::Tile, c3::Cluster, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                        cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler)
