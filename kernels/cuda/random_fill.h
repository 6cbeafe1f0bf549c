// Deterministic random fills on the GPU (benchmark weights drawn from a config instead of a 26 GB file).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surf::kernels::cuda {

// x[i] = lo + (hi − lo) · u(seed, i), u uniform in [0, 1) from a counter-based hash.
struct UniformFillParams {
    void* x = nullptr;
    bool bf16 = true;  // else fp32
    int64_t n = 0;
    float lo = -1.0f, hi = 1.0f;
    uint64_t seed = 0;
};
void uniform_fill(const UniformFillParams& p, cudaStream_t stream);

}  // namespace surf::kernels::cuda
