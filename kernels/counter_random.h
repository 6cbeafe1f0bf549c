// Counter-based uniform random numbers (SplitMix64 finaliser over seed + counter). The CPU sampler and the
// GPU sampler draw from it with the same (seed, step), so both pick the same token; random weight and
// input fills use it per element. One definition for host and device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SURF_HOST_DEVICE __host__ __device__
#else
#define SURF_HOST_DEVICE
#endif

namespace surf::kernels {

// Uniform in [0, 1) with 24 random bits.
SURF_HOST_DEVICE inline float counter_uniform(uint64_t seed, uint64_t counter) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (counter + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

}  // namespace surf::kernels
