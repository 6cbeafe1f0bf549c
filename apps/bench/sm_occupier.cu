// See sm_occupier.h. One 32-thread block per held SM: its dynamic shared memory is the per-block maximum
// (227 KB on H100), which with the 1 KB every block reserves fills the SM's 228 KB, so no other block that
// asks for shared memory fits.
#include "apps/bench/sm_occupier.h"

#include <algorithm>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

__device__ __forceinline__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ int32_t sm_id() {
    uint32_t id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return static_cast<int32_t>(id);
}

__global__ void occupy_kernel(int64_t nanoseconds, int* started) {
    extern __shared__ unsigned char held[];
    if (threadIdx.x == 0) {
        if (started) {  // a plain store (no system-scope atomics over PCIe), pushed out to the host
            *reinterpret_cast<volatile int*>(started + blockIdx.x) = 1;
            __threadfence_system();
        }
        const uint64_t t0 = global_ns();
        while (global_ns() - t0 < static_cast<uint64_t>(nanoseconds)) {
        }
        held[0] = 1;  // touch the allocation
    }
}

// Launched with kProbeSharedBytes of dynamic shared memory, which is allocated whether or not the code
// touches it (a static __shared__ int that only thread 0 uses could be kept in a register by the compiler).
constexpr size_t kProbeSharedBytes = 2048;

__global__ void probe_kernel(int32_t* out) {
    extern __shared__ int32_t scratch[];
    if (threadIdx.x == 0) scratch[0] = sm_id();
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = scratch[0];
}

constexpr int kProbeConsumerWarps = 4;
constexpr int kMaxProbeStages = 16;

// Warps 0..3 consume, warp 4 lane 0 produces. full[s]: the copy of stage s landed; empty[s]: the four
// consumer warps are done with it (one arrival each).
__global__ void bulk_read_probe_kernel(BulkReadProbeParams p) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ uint64_t full[kMaxProbeStages], empty[kMaxProbeStages];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < p.stages; ++s) {
            detail::mbarrier_init(&full[s], 1);
            detail::mbarrier_init(&empty[s], kProbeConsumerWarps);
        }
    }
    __syncthreads();
    const int64_t n_mine = p.items > blockIdx.x ? (p.items - blockIdx.x + p.blocks - 1) / p.blocks : 0;
    if (warp == kProbeConsumerWarps) {
        if (lane == 0) {
            for (int64_t i = 0; i < n_mine; ++i) {
                const int s = static_cast<int>(i % p.stages);
                const uint32_t round = static_cast<uint32_t>(i / p.stages);
                if (round > 0) detail::mbarrier_wait(&empty[s], (round - 1) & 1);
                const int64_t item = blockIdx.x + i * p.blocks;
                detail::bulk_copy_to_smem(
                    ring + static_cast<size_t>(s) * p.stage_bytes,
                    reinterpret_cast<const unsigned char*>(p.src) + item * p.stage_bytes,
                    static_cast<uint32_t>(p.stage_bytes), &full[s]);
            }
        }
        return;
    }
    float acc = 0.0f;
    const int n4 = p.stage_bytes / 16;
    for (int64_t i = 0; i < n_mine; ++i) {
        const int s = static_cast<int>(i % p.stages);
        detail::mbarrier_wait(&full[s], static_cast<uint32_t>(i / p.stages) & 1);
        const float4* v = reinterpret_cast<const float4*>(ring + static_cast<size_t>(s) * p.stage_bytes);
        for (int k = threadIdx.x; k < n4; k += kProbeConsumerWarps * 32) {
            const float4 f = v[k];
            acc += (f.x + f.y) + (f.z + f.w);
        }
        __syncwarp();
        if (lane == 0) detail::mbarrier_arrive(&empty[s]);
    }
    acc = detail::warp_sum(acc);
    if (lane == 0) atomicAdd(p.sink + blockIdx.x, acc);
}

constexpr int kL2ProbeThreads = 256;

__global__ void __launch_bounds__(kL2ProbeThreads) l2_read_probe_kernel(L2ReadProbeParams p) {
    const float4* src = reinterpret_cast<const float4*>(p.src);
    const int64_t n4 = p.bytes / 16, stride = static_cast<int64_t>(gridDim.x) * kL2ProbeThreads;
    float acc = 0.0f;
    for (int pass = 0; pass < p.passes; ++pass) {
        // Each pass starts at a different block's share, so a block does not re-read what it just read.
        const int64_t start =
            (static_cast<int64_t>((blockIdx.x + pass * 7) % gridDim.x) * kL2ProbeThreads + threadIdx.x);
#pragma unroll 4
        for (int64_t i = start; i < n4; i += stride) {
            const float4 f = __ldcg(src + i);
            acc += (f.x + f.y) + (f.z + f.w);
        }
    }
    acc = detail::warp_sum(acc);
    if ((threadIdx.x & 31) == 0) atomicAdd(p.sink + blockIdx.x, acc);
}

}  // namespace

void l2_read_probe(const L2ReadProbeParams& p, cudaStream_t stream) {
    SURF_CHECK(p.src && p.sink && p.blocks > 0 && p.bytes > 0 && p.bytes % 16 == 0 && p.passes >= 1 &&
                   reinterpret_cast<uintptr_t>(p.src) % 16 == 0,
               "l2_read_probe: blocks ", p.blocks, " bytes ", p.bytes, " passes ", p.passes);
    l2_read_probe_kernel<<<static_cast<unsigned>(p.blocks), kL2ProbeThreads, 0, stream>>>(p);
    SURF_CUDA_CHECK_LAUNCH();
}

void bulk_read_probe(const BulkReadProbeParams& p, cudaStream_t stream) {
    SURF_CHECK(p.src && p.sink && p.blocks > 0 && p.items >= 0 && p.stages >= 1 &&
                   p.stages <= kMaxProbeStages && p.stage_bytes > 0 && p.stage_bytes % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.src) % 16 == 0,
               "bulk_read_probe: blocks ", p.blocks, " stages ", p.stages, " stage_bytes ", p.stage_bytes,
               " items ", p.items);
    int device = 0, max_smem = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    // At least 116 KB so that two blocks never share an SM.
    const int smem = std::max(p.stages * p.stage_bytes, 116 * 1024);
    SURF_CHECK(smem <= max_smem, "bulk_read_probe: ", p.stages, " stages of ", p.stage_bytes,
               " bytes exceed ", max_smem, " bytes of shared memory");
    SURF_CUDA_CHECK(
        cudaFuncSetAttribute(bulk_read_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    bulk_read_probe_kernel<<<static_cast<unsigned>(p.blocks), (kProbeConsumerWarps + 1) * 32,
                             static_cast<size_t>(smem), stream>>>(p);
    SURF_CUDA_CHECK_LAUNCH();
}

void occupy_sms(const SmOccupyParams& p, cudaStream_t stream) {
    SURF_CHECK(p.blocks >= 0 && p.nanoseconds >= 0, "occupy_sms: blocks ", p.blocks, " nanoseconds ",
               p.nanoseconds);
    if (p.blocks == 0) return;
    int device = 0, sms = 0, max_smem = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    SURF_CHECK(p.blocks <= sms, "occupy_sms: ", p.blocks, " blocks for ", sms, " SMs");
    SURF_CUDA_CHECK(
        cudaFuncSetAttribute(occupy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
    // Load the probe now: under CUDA's lazy module loading (the default) a kernel's first launch may wait for
    // the device to go idle, i.e. for this hold to end, and then run on every SM.
    cudaFuncAttributes loaded{};
    SURF_CUDA_CHECK(cudaFuncGetAttributes(&loaded, probe_kernel));
    occupy_kernel<<<static_cast<unsigned>(p.blocks), 32, static_cast<size_t>(max_smem), stream>>>(
        p.nanoseconds, p.started);
    SURF_CUDA_CHECK_LAUNCH();
}

bool all_started(const int* started, int blocks) {
    for (int i = 0; i < blocks; ++i) {
        if (reinterpret_cast<const volatile int*>(started)[i] != 1) return false;
    }
    return true;
}

void probe_sm_ids(int32_t* out, int blocks, cudaStream_t stream) {
    SURF_CHECK(out != nullptr && blocks >= 0, "probe_sm_ids: out ", static_cast<void*>(out), " blocks ",
               blocks);
    if (blocks == 0) return;
    probe_kernel<<<static_cast<unsigned>(blocks), 32, kProbeSharedBytes, stream>>>(out);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
