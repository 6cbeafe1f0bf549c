// Benchmark tools for running a kernel on part of the GPU: hold some SMs with blocks that take all of an
// SM's shared memory and spin, so that the next kernel's blocks (which all need shared memory: every block
// reserves 1 KB) can only be placed on the others; and a probe that reports which SM each block ran on.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surf::kernels::cuda {

struct SmOccupyParams {
    int blocks = 0;              // SMs to hold: one block each (it asks for the most shared memory a block may have)
    int64_t nanoseconds = 0;     // how long each block holds its SM (device %globaltimer)
    int* started = nullptr;      // optional, device-visible (e.g. host-mapped) [blocks]: block i sets started[i] = 1 once it runs
};
void occupy_sms(const SmOccupyParams& p, cudaStream_t stream);
// Whether every block of an occupy_sms launch has set its `started` entry (host view of host-mapped flags).
bool all_started(const int* started, int blocks);

// out[i] ← the SM that block i of a `blocks`-block kernel ran on (each block uses a little shared memory,
// so it cannot share an SM with an occupy_sms block). out is device memory.
void probe_sm_ids(int32_t* out, int blocks, cudaStream_t stream);

}  // namespace surf::kernels::cuda
