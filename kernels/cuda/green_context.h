// Two green contexts over disjoint SMs of the current device (driver API, CUDA 12.4+): kernels issued on
// stream `a` run only on group a's SMs, those on stream `b` only on the rest. Work on other streams of the
// primary context may still use every SM. The driver functions are reached through the runtime's driver
// entry points, so nothing links libcuda. Used by the benchmarks (bench_overlap --branches-green,
// bench_attention --pair-green) to measure pairs of kernels on split SMs.
#pragma once

#include <cuda_runtime_api.h>

namespace surf::kernels::cuda {

class GreenPair {
public:
    // Group a holds at least `want_a` SMs (rounded up by the driver to its SM granularity), group b the rest;
    // each stream at its given priority (cudaDeviceGetStreamPriorityRange). Throws Error(kUnsupported) where
    // the driver has no green contexts or refuses the split.
    GreenPair(unsigned want_a, int priority_a, int priority_b);
    ~GreenPair();
    GreenPair(const GreenPair&) = delete;
    GreenPair& operator=(const GreenPair&) = delete;

    cudaStream_t a = nullptr, b = nullptr;
    unsigned sms_a = 0, sms_b = 0;

private:
    void create(unsigned want_a, int priority_a, int priority_b);
    void release();
    void* ctx_a_ = nullptr;  // CUgreenCtx
    void* ctx_b_ = nullptr;
};

}  // namespace surf::kernels::cuda
