// Device-side helpers shared by the kernel files: dtype loads/stores, warp/block reductions, the
// mma.sync / ldmatrix / cp.async wrappers. Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace surf::kernels::cuda::detail {

__device__ __forceinline__ float to_float(float v) {
    return v;
}
__device__ __forceinline__ float to_float(bf16 v) {
    return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) {
    return __float2bfloat16_rn(v);
}

// GemmActivation::kGeluTanh's function (ops.h): 0.5·v·(1 + tanh(√(2/π)·(v + 0.044715·v³))).
__device__ __forceinline__ float gelu_tanh(float v) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(u));
}

// Eight bf16 (one 16-byte load) to fp32; exact: the bf16 bits are the high half of the fp32 bits (the low
// element in the low half of each 32-bit word).
__device__ __forceinline__ void unpack_bf16x8(const uint4& raw, float (&v)[8]) {
    const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        v[2 * j] = __uint_as_float(u[j] << 16);
        v[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, ≤ 1024). `scratch` holds 32 floats; the result is
// returned to every thread. Contains __syncthreads, so every thread of the block must call it.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < n_warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

// The small-m kernels' weight stream (gemv.cu, fp8_gemv.cu): a warp's lane walks the 16-byte vectors
// [v_begin + lane, v_end) of the warp's R weight rows, 32 apart, in rounds of kLoads vectors a row: a round's
// streaming loads (read once, past L1 and L2) are all issued before use(v, w) takes its vectors one by one
// (w[r]: row r's vector v), so that kLoads · R loads a lane are in flight ahead of the FMAs.
template <int R, int kLoads, typename Use>
__device__ __forceinline__ void stream_weight_rows(const uint4* const (&wrow)[R], int64_t v_begin,
                                                   int64_t v_end, int lane, Use&& use) {
    for (int64_t v0 = v_begin + lane; v0 < v_end; v0 += 32 * kLoads) {
        uint4 wv[kLoads][R];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
            const int64_t v = v0 + u * 32;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (v < v_end) wv[u][r] = __ldcs(wrow[r] + v);
            }
        }
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
            const int64_t v = v0 + u * 32;
            if (v >= v_end) break;
            use(v, wv[u]);
        }
    }
}

// The small-m GEMMs' (gemv.cu, fp8_gemv.cu) reduction of a warp's partial dot products acc[m][r]: each summed
// over the warp, then, where KS warps split k, the group's slices added in slice order by its first warp
// (`partial`: the block's shared [warps][M][R], unused when KS = 1). Returns false on the warps whose sums
// went to their group's first warp, which have nothing to store. Contains __syncthreads when KS > 1.
template <int M, int R, int KS>
__device__ __forceinline__ bool reduce_split_k(float (&acc)[M][R], float (*partial)[M][R], int warp,
                                               int slice, int lane) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
        for (int r = 0; r < R; ++r) acc[m][r] = warp_sum(acc[m][r]);
    }
    if constexpr (KS > 1) {
        if (lane == 0) {
#pragma unroll
            for (int m = 0; m < M; ++m) {
#pragma unroll
                for (int r = 0; r < R; ++r) partial[warp][m][r] = acc[m][r];
            }
        }
        __syncthreads();
        if (slice != 0) return false;
#pragma unroll
        for (int m = 0; m < M; ++m) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float sum = partial[warp][m][r];
#pragma unroll
                for (int k = 1; k < KS; ++k) sum += partial[warp + k][m][r];
                acc[m][r] = sum;
            }
        }
    }
    return true;
}

// Maximum over the block, as block_sum.
__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < n_warps ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

__device__ __forceinline__ float softplus(float x) {
    return x > 20.0f ? x : log1pf(__expf(x));
}
// SiLU with the fast division (one reciprocal and a multiply instead of IEEE division's ~10 instructions):
// the conv and gated-norm kernels that use it are instruction-bound, and their results are rounded to bf16.
// For x < −87 the denominator overflows and the result is 0 (the true value is below 1e−36).
__device__ __forceinline__ float silu(float x) {
    return __fdividef(x, 1.0f + __expf(-x));
}

// ---- tensor-core and async-copy wrappers (sm_80+) ------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async global→shared copy; src_bytes = 0 writes zeros (used for rows past the end).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
                 "r"(src_bytes));
}
// An L2 cache policy for the accesses below that take one: evict-first for data a step touches once (the
// decode rows' KV and SSM state: gigabytes a step streaming through the 50 MB L2), so that its lines go
// before those the step's other kernels reuse (the residual stream, activations, GEMM operand tiles);
// evict-normal otherwise (= no hint).
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
    uint64_t policy;
    if (evict_first)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(policy));
    return policy;
}
// cp_async16 with an L2 cache policy (l2_policy).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid, uint64_t policy) {
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_addr(smem)),
                 "l"(gmem), "r"(src_bytes), "l"(policy));
}
// A 16-byte global store with an L2 cache policy (l2_policy); gmem 16-byte aligned.
__device__ __forceinline__ void st_global16(void* gmem, uint4 v, uint64_t policy) {
    asm volatile("st.global.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(gmem), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ---- bulk copies (the TMA engine) into shared memory, completing on an mbarrier (sm_90+) ----------------
// One thread arms the barrier with the byte count and issues the copy; every waiting thread then sees the
// bytes once the barrier's phase completes. Sizes and both addresses must be multiples of 16 bytes.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SURF_BULK_COPY_ENABLED 1
#else
#define SURF_BULK_COPY_ENABLED 0
#endif

// Initialises a CTA-local mbarrier expecting `arrivals` arrivals per phase; visible to the copy engine after
// the fence, and to the block's other threads after a __syncthreads.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
#if SURF_BULK_COPY_ENABLED
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Arms `bar` for `bytes` more bytes of this phase (one of its arrivals): for copies completing on it.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if SURF_BULK_COPY_ENABLED
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
#endif
}
// Arrives on `bar` expecting `bytes` more and copies `bytes` from global to shared memory on the copy engine.
__device__ __forceinline__ void bulk_copy_to_smem(void* smem, const void* gmem, uint32_t bytes,
                                                  uint64_t* bar) {
    mbarrier_arrive_expect_tx(bar, bytes);
#if SURF_BULK_COPY_ENABLED
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
            smem_addr(smem)),
        "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
#endif
}
// bulk_copy_to_smem with an L2 cache policy (l2_policy) for the source's lines.
__device__ __forceinline__ void bulk_copy_to_smem(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar,
                                                  uint64_t policy) {
    mbarrier_arrive_expect_tx(bar, bytes);
#if SURF_BULK_COPY_ENABLED
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, "
        "[%3], %4;\n" ::"r"(smem_addr(smem)),
        "l"(gmem), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
        : "memory");
#endif
}
// Waits until the phase with this parity of `bar` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if SURF_BULK_COPY_ENABLED
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
#endif
}

// One box of a 2D tensor map (TMA) at element coordinates (c0 innermost, c1) into shared memory, completing
// on `bar`; `tensor_map` is the generic address of a __grid_constant__ CUtensorMap. Out-of-range elements
// read as zeros.
__device__ __forceinline__ void tma_load_2d(void* smem, const void* tensor_map, int c0, int c1,
                                            uint64_t* bar) {
#if SURF_BULK_COPY_ENABLED
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];\n" ::"r"(smem_addr(smem)),
        "l"(tensor_map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
        : "memory");
#endif
}
// tma_load_2d with an L2 cache policy (l2_policy) for the source's lines.
__device__ __forceinline__ void tma_load_2d(void* smem, const void* tensor_map, int c0, int c1, uint64_t* bar,
                                            uint64_t policy) {
#if SURF_BULK_COPY_ENABLED
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
        "[%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(smem)),
        "l"(tensor_map), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "l"(policy)
        : "memory");
#endif
}
// Arrives on `bar` (release: this thread's earlier shared-memory accesses happen before the phase completes).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if SURF_BULK_COPY_ENABLED
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}
// Arrives on `bar` once every cp.async this thread issued so far has landed (counts as one of the phase's
// arrivals: noinc).
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint64_t* bar) {
#if SURF_BULK_COPY_ENABLED
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// D = A·B + D for one m16n8k16 tile, bf16 inputs, fp32 accumulators (PTX ISA fragment layouts).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four transposed 8×8 b16 matrices: lane l supplies the row address of matrix l/8.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(smem_row)));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

inline unsigned grid_1d(int64_t n, int threads) {
    return static_cast<unsigned>((n + threads - 1) / threads);
}

// ---- programmatic dependent launch (PDL, sm_90)
// ---------------------------------------------------------------- Kernels go out through launch_kernel
// below, which (while ops.h programmatic_launch() is on) lets the next kernel in the stream be launched
// before this one has finished: its blocks take the SMs this grid's last wave leaves, so the launch, block
// scheduling and setup of kernel i + 1 overlap the tail of kernel i instead of following it. Correct only
// because every kernel launched that way begins with pdl_prologue(): griddepcontrol.wait holds all its
// threads until the grids it depends on have completed and their memory is visible (so nothing is read or
// written before the previous kernel is done), then griddepcontrol.launch_dependents lets the kernel after it
// be launched as soon as every block of this grid has started. Launched without the attribute (or after a
// non-kernel operation) both instructions return at once.
__device__ __forceinline__ void pdl_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The launch attribute that allows it (for cudaLaunchKernelEx configs that carry other attributes too).
inline cudaLaunchAttribute programmatic_serialization() {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    return attr;
}

// kernel<<<grid, block, smem, stream>>>(args…), with programmatic_serialization() while programmatic_launch()
// is on. `kernel` must begin with pdl_prologue(). Launch errors throw (SURF_CUDA_CHECK).
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args&&... args) {
    cudaLaunchAttribute attr = programmatic_serialization();
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    cfg.attrs = &attr, cfg.numAttrs = programmatic_launch() ? 1 : 0;
    SURF_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

// A positive int about the current device, computed once per device by `compute(device)` and kept in `known`
// (0 = not yet; engines on several GPUs launch from their own threads). Devices past 63 are computed on every
// call.
template <typename Compute>
int per_device(std::atomic<int> (&known)[64], Compute&& compute) {
    int device = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    int value = device < 64 ? known[device].load(std::memory_order_relaxed) : 0;
    if (value == 0) {
        value = compute(device);
        if (device < 64) known[device].store(value, std::memory_order_relaxed);
    }
    return value;
}

// Whether the current device is compute capability 9.0 exactly, where the sm_90a code (wgmma kernels) runs
// (asked per launch by several ops: kept per device; 1 no, 2 yes).
inline bool device_runs_sm90a() {
    static std::atomic<int> known[64] = {};
    return per_device(known, [](int device) {
               int major = 0, minor = 0;
               SURF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
               SURF_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
               return major == 9 && minor == 0 ? 2 : 1;
           }) == 2;
}

// Multiprocessors of the current device (launch planning: waves of blocks, split counts), kept per device.
inline int device_sm_count() {
    static std::atomic<int> known[64] = {};
    return per_device(known, [](int device) {
        int sms = 0;
        SURF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        return sms;
    });
}

}  // namespace surf::kernels::cuda::detail
