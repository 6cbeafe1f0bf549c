// A benchmark's Nsight Compute range: work issued between cudaProfilerStart / Stop, device synchronised
// around it, so that range replay (scripts/ncu_ranges.sh, `--replay-mode app-range`) measures kernels that
// run together (on several streams) as one result. Ranges carry profiler overhead that swamps short kernels:
// read their byte totals, not their durations.
#pragma once

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <functional>

#include "kernels/cuda/cuda_check.h"

namespace surf::bench {

inline void profiler_range(const std::function<void()>& issue) {
    SURF_CUDA_CHECK(cudaDeviceSynchronize());
    SURF_CUDA_CHECK(cudaProfilerStart());
    issue();
    SURF_CUDA_CHECK(cudaDeviceSynchronize());
    SURF_CUDA_CHECK(cudaProfilerStop());
}

}  // namespace surf::bench
