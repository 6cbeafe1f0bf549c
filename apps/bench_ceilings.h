// The ceilings the GPU benchmarks report against, measured on this card in the same run: device-to-device
// copy bandwidth (bytes read + written per second over a 1 GiB copy) and an 8192³ bf16 GEMM through the
// kernel library, on random operands (constant ones draw less power and let the clocks boost past what
// real GEMMs get). Each is the median of 10 timed repetitions after 3 warm-ups.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/random_fill.h"

namespace surf::bench {

// Median milliseconds of `fn` (work enqueued on the default stream).
inline double median_ms(const std::function<void()>& fn, int reps = 10, int warmup = 3) {
    for (int i = 0; i < warmup; ++i) fn();
    SURF_CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    SURF_CUDA_CHECK(cudaEventCreate(&a));
    SURF_CUDA_CHECK(cudaEventCreate(&b));
    std::vector<float> ms(static_cast<size_t>(reps));
    for (float& m : ms) {
        SURF_CUDA_CHECK(cudaEventRecord(a));
        fn();
        SURF_CUDA_CHECK(cudaEventRecord(b));
        SURF_CUDA_CHECK(cudaEventSynchronize(b));
        SURF_CUDA_CHECK(cudaEventElapsedTime(&m, a, b));
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Bytes read + written per second by a 1 GiB device-to-device copy.
inline double copy_bandwidth() {
    namespace kc = surf::kernels::cuda;
    const size_t bytes = size_t{1} << 30;
    void *a = nullptr, *b = nullptr;
    SURF_CUDA_CHECK(cudaMalloc(&a, bytes));
    SURF_CUDA_CHECK(cudaMalloc(&b, bytes));
    kc::uniform_fill({a, false, static_cast<int64_t>(bytes / 4), -1.0f, 1.0f, 1}, nullptr);
    const double ms = median_ms([&] { SURF_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
    SURF_CUDA_CHECK(cudaFree(a));
    SURF_CUDA_CHECK(cudaFree(b));
    return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
}

// FLOP/s of an 8192³ bf16 GEMM (fp32 accumulation, bf16 output) on random operands.
inline double gemm_ceiling() {
    namespace kc = surf::kernels::cuda;
    const int64_t n = 8192;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    for (void** p : {&a, &b, &c}) SURF_CUDA_CHECK(cudaMalloc(p, static_cast<size_t>(n * n) * 2));
    kc::uniform_fill({a, true, n * n, -1.0f, 1.0f, 2}, nullptr);
    kc::uniform_fill({b, true, n * n, -1.0f, 1.0f, 3}, nullptr);
    kc::GemmContext ctx;
    const kc::GemmParams p{static_cast<kc::bf16*>(a), static_cast<kc::bf16*>(b), nullptr, c, kc::DType::kBF16, n, n, n};
    const double ms = median_ms([&] { kc::gemm(ctx, p, nullptr); });
    for (void* q : {a, b, c}) SURF_CUDA_CHECK(cudaFree(q));
    return 2.0 * static_cast<double>(n) * n * n / (ms * 1e-3);
}

}  // namespace surf::bench
