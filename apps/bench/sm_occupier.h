// Benchmark tools for running a kernel on part of the GPU: hold some SMs with blocks that take all of an
// SM's shared memory and spin, so that the next kernel's blocks can only be placed on the others, provided
// they ask for shared memory (the kernels measured this way all do: the state update stages 20 KB a block)
// and are already loaded: under CUDA's lazy module loading (the default) a kernel's first launch may wait
// for the device to go idle, i.e. for the hold to end, and then runs on every SM. Launch the kernel once
// before (benchmarks time it alone first) or call cudaFuncGetAttributes on it. And a probe that reports
// which SM each block ran on (occupy_sms loads it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surf::kernels::cuda {

struct SmOccupyParams {
    int blocks = 0;  // SMs to hold: one block each (it asks for the most shared memory a block may have)
    int64_t nanoseconds = 0;  // how long each block holds its SM (device %globaltimer)
    int* started = nullptr;   // optional, device-visible (e.g. host-mapped) [blocks]: block i sets started[i]
                              // = 1 once it runs
};
void occupy_sms(const SmOccupyParams& p, cudaStream_t stream);
// Whether every block of an occupy_sms launch has set its `started` entry (host view of host-mapped flags).
bool all_started(const int* started, int blocks);

// out[i] ← the SM that block i of a `blocks`-block kernel ran on (each block asks for 2 KB of dynamic shared
// memory, so it cannot share an SM with an occupy_sms block). out is device memory.
void probe_sm_ids(int32_t* out, int blocks, cudaStream_t stream);

// How much read bandwidth K SMs get from bulk copies (the TMA engine) alone: `blocks` persistent blocks (one
// an SM: each asks for over half an SM's shared memory) walk `items` consecutive `stage_bytes` pieces of
// `src` (block b takes b, b + blocks, …) through a ring of `stages` shared-memory stages. One thread issues
// the copies `stages` deep; four warps add up each stage (so the bytes are used) and free it. The sums go to
// sink[block]. Decides whether a state update that keeps its copies in flight this way could leave most SMs
// to other work.
struct BulkReadProbeParams {
    const float* src = nullptr;  // device, items · stage_bytes bytes, 16-byte aligned
    float* sink = nullptr;       // device [blocks]
    int blocks = 0;
    int stages = 4;
    int stage_bytes = 20480;  // multiple of 16
    int64_t items = 0;
};
void bulk_read_probe(const BulkReadProbeParams& p, cudaStream_t stream);

// How much read bandwidth the SMs get from the L2 alone: `blocks` blocks of 256 threads read `bytes` of `src`
// (small enough to stay in the 50 MB L2 after the first pass) `passes` times in 16-byte loads that skip the
// L1 (ld.global.cg), adding them up into sink[block]: the L2 → SM ceiling. What a GEMM and a bandwidth-bound
// kernel running together run out of first is another unit, the fabric between the L2's two partitions
// (docs/KERNELS.md, "the L2's partition fabric").
struct L2ReadProbeParams {
    const float* src = nullptr;  // device, bytes, 16-byte aligned
    float* sink = nullptr;       // device [blocks]
    int blocks = 0;
    int64_t bytes = 0;  // multiple of 16
    int passes = 1;
};
void l2_read_probe(const L2ReadProbeParams& p, cudaStream_t stream);

}  // namespace surf::kernels::cuda
