#include <cuda_bf16.h>
#include <algorithm>

#include "kernels/counter_random.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/random_fill.h"

namespace surf::kernels::cuda {

namespace {

__global__ void uniform_fill_kernel(UniformFillParams p) {
    const float span = p.hi - p.lo;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float v = p.lo + span * surf::kernels::counter_uniform(p.seed, static_cast<uint64_t>(i));
        if (p.bf16)
            static_cast<__nv_bfloat16*>(p.x)[i] = __float2bfloat16_rn(v);
        else
            static_cast<float*>(p.x)[i] = v;
    }
}

}  // namespace

void uniform_fill(const UniformFillParams& p, cudaStream_t stream) {
    SURF_CHECK(p.n >= 0 && (p.n == 0 || p.x), "uniform_fill: n ", p.n);
    if (p.n == 0) return;
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((p.n + threads - 1) / threads, 132 * 16);
    uniform_fill_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(p);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
