// Tier-one checks for CUDA and cuBLAS calls (DESIGN.md §2 rule 8): a failed call is a bug or a broken
// device, never bad input, so it aborts with file, line, the call and the library's error string.
// Host-includable (plain C++), so the forward pass, tests and benchmarks use the same macros.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "base/check.h"

// SURF_CUDA_CHECK(cudaMalloc(...)): abort on any cudaError_t other than cudaSuccess.
#define SURF_CUDA_CHECK(call)                                                                            \
    do {                                                                                                 \
        const cudaError_t surf_cuda_status_ = (call);                                                    \
        SURF_CHECK(surf_cuda_status_ == cudaSuccess, #call, " -> ", cudaGetErrorName(surf_cuda_status_), \
                   ": ", cudaGetErrorString(surf_cuda_status_));                                         \
    } while (0)

// SURF_CUBLAS_CHECK(cublasLtMatmul(...)): abort on any cublasStatus_t other than success.
#define SURF_CUBLAS_CHECK(call)                                                 \
    do {                                                                        \
        const cublasStatus_t surf_cublas_status_ = (call);                      \
        SURF_CHECK(surf_cublas_status_ == CUBLAS_STATUS_SUCCESS, #call, " -> ", \
                   cublasGetStatusName(surf_cublas_status_), ": ",              \
                   cublasGetStatusString(surf_cublas_status_));                 \
    } while (0)

// After every kernel launch: catches bad launch configurations at the launch site.
#define SURF_CUDA_CHECK_LAUNCH() SURF_CUDA_CHECK(cudaGetLastError())
