// Owning device allocations (one owner per buffer, DESIGN.md rule 7). Allocated at load time for the
// configured limits; nothing allocates in the decode loop.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace surf::model::cuda {

// An owning allocation from `Alloc` (device memory or pinned host memory).
template <typename Alloc>
class OwnedBuffer {
public:
    OwnedBuffer() = default;
    explicit OwnedBuffer(size_t bytes) : bytes_(bytes) {
        if (bytes_ > 0) ptr_ = Alloc::allocate(bytes_);
    }
    ~OwnedBuffer() {
        if (ptr_) Alloc::release(ptr_);
    }
    OwnedBuffer(OwnedBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    OwnedBuffer& operator=(OwnedBuffer&& o) noexcept {
        if (this != &o) {
            if (ptr_) Alloc::release(ptr_);
            ptr_ = std::exchange(o.ptr_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    OwnedBuffer(const OwnedBuffer&) = delete;
    OwnedBuffer& operator=(const OwnedBuffer&) = delete;

    template <typename T = void>
    T* as() const {
        return static_cast<T*>(ptr_);
    }
    void* get() const { return ptr_; }
    size_t bytes() const { return bytes_; }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

struct DeviceAlloc {
    static void* allocate(size_t bytes) {
        void* p = nullptr;
        SURF_CUDA_CHECK(cudaMalloc(&p, bytes));
        return p;
    }
    static void release(void* p) { cudaFree(p); }
};

// Pinned host memory, for staging uploads of per-step metadata and async copies.
struct PinnedAlloc {
    static void* allocate(size_t bytes) {
        void* p = nullptr;
        SURF_CUDA_CHECK(cudaMallocHost(&p, bytes));
        return p;
    }
    static void release(void* p) { cudaFreeHost(p); }
};

using DeviceBuffer = OwnedBuffer<DeviceAlloc>;
using PinnedBuffer = OwnedBuffer<PinnedAlloc>;

// Makes `device` current for a scope and restores the caller's device after (engines on several GPUs are
// called from client threads whose current device is theirs to keep).
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        SURF_CUDA_CHECK(cudaGetDevice(&previous_));
        if (previous_ != device) SURF_CUDA_CHECK(cudaSetDevice(device));
    }
    ~DeviceGuard() { cudaSetDevice(previous_); }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = 0;
};

}  // namespace surf::model::cuda
