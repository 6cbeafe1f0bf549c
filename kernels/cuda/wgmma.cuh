// Hopper warpgroup MMA (wgmma, PTX ISA 8.0+, sm_90a only): shared-memory matrix descriptors, the fences and
// group waits, and the products the wgmma kernels need:
//   wgmma_ss<N>      D[64×N] (+)= A·Bᵀ, A [64][16] and B [N][16] in shared memory, both K-major
//                    (S = Q·Kᵀ in attention_wgmma.cu; N = 256: the GEMM of gemm_wgmma.cu);
//   wgmma_rs_mn<N>   D[64×N] += A·B, A [64][16] bf16 from registers, B [16][N] in shared memory, N-major
//                    (O += P·V with V rows as stored);
//   issue_pv<D, NK>  O += P·V of an attention key tile by wgmma_rs_mn.
// One warpgroup (4 warps, 128 threads) issues each product together. Accumulator layout: warp w of the group
// holds rows 16w + lane/4 and + 8; d[i][0..1] are row lane/4, columns 8i + 2·(lane%4) + {0, 1}; d[i][2..3]
// row lane/4 + 8 — per warp the layout of mma.sync m16n8k16's C over N/8 n-tiles, so WarpFlash's softmax runs
// on it unchanged. The register A operand has mma.sync m16n8k16's A layout per warp (rows 16w..16w + 15).
//
// Shared-memory layout (32-byte swizzle, what the PTX ISA's canonical layouts call SW32, T = 8 elements): a
// tile [R][C] of bf16 (R a multiple of 8) is stored as C/16 slabs of 16 columns, slab s at s·R·32 bytes, row
// r of a slab at +32·r, its two 16-byte halves h at +16·(h ^ (r/4 % 2)) (address bit 4 ^= bit 7; slabs start
// on 256-byte boundaries). Canonical forms:
//   K-major  ((8,m),(T,2k)):((2T,SBO),(1,T))          → SBO = 256 (next 8 rows), LBO unused; next 16
//            columns (one k-step) = next slab;
//   MN-major ((T,2,m),(8,k)):((1,T,LBO),(2T,SBO)) with rows along K → LBO = R·32 (next 16 columns of N,
//            the next slab), SBO = 256 (next 8 rows of K).
// (Not the no-swizzle core-matrix layout: same results, but most of its shared-memory wavefronts are
// bank-conflict excess and the kernel runs slower than the mma.sync one; docs/BENCHMARKS.md.) On any other
// target the wrappers compile to nothing (the kernel checks the device before it launches).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SURF_WGMMA_ENABLED 1
#else
#define SURF_WGMMA_ENABLED 0
#endif

namespace surf::kernels::cuda::wgmma {

// Descriptor of a 32-byte-swizzled tile starting at `smem` (bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO
// >> 4, base offset 0, bits 62-63 layout 3 = 32-byte swizzle). Adding n to it moves the start by 16·n bytes.
__device__ __forceinline__ uint64_t make_desc_sw32(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes) {
    const uint32_t addr = detail::smem_addr(smem);
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
           (static_cast<uint64_t>(sbo_bytes >> 4) << 32) | (uint64_t{3} << 62);
}

// Descriptor of a 128-byte-swizzled K-major tile (the GEMM's: rows of 64 bf16 = 128 bytes, as TMA's
// CU_TENSOR_MAP_SWIZZLE_128B writes them; 16-byte chunk c of row r at chunk c ^ (r % 8), 8-row groups of
// 1,024 bytes = SBO; LBO unused for K-major swizzled layouts; layout 1 = 128-byte swizzle). `smem` must lie
// 1,024-byte aligned or be such a tile's start plus a k offset inside its rows: adding 2·j to the descriptor
// moves it to the j-th 16-column k-step (the swizzle applies to address bits, so the start may move inside
// the atom).
__device__ __forceinline__ uint64_t make_desc_sw128(const void* smem) {
    const uint32_t addr = detail::smem_addr(smem);
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
           (uint64_t{1} << 62);
}

// Byte offset of element (row, col) of a 32-byte-swizzled [rows][C] tile, col a multiple of 8 (one 16-byte
// half of a slab row).
__device__ __forceinline__ int sw32_offset(int row, int col, int rows) {
    const int slab = col >> 4, half = (col >> 3) & 1;
    return slab * rows * 32 + row * 32 + ((half ^ ((row >> 2) & 1)) << 4);
}

// 16-byte chunk i of a [rows][C] tile (C a multiple of 16): its row and column, and its byte offset in the
// 32-byte-swizzled layout. Eight consecutive chunks are four rows' 32 bytes of one slab (128 contiguous bytes
// of shared memory: conflict-free copies), a warp's 32 chunks four rows × four slabs.
template <int C>
__device__ __forceinline__ int sw32_chunk(int i, int rows, int& row, int& col) {
    constexpr int kSlabs = C / 16;
    const int j = i >> 3, slab = j % kSlabs;
    row = (j / kSlabs) * 4 + ((i >> 1) & 3);
    col = slab * 16 + (i & 1) * 8;
    return sw32_offset(row, col, rows);
}

// Orders this thread's register writes to accumulators / A fragments before the next wgmma reads them.
__device__ __forceinline__ void fence() {
#if SURF_WGMMA_ENABLED
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if SURF_WGMMA_ENABLED
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wait() {
#if SURF_WGMMA_ENABLED
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Makes this thread's generic-proxy shared-memory writes (cp.async, st.shared) visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async_smem() {
#if SURF_WGMMA_ENABLED
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving accesses of accumulator registers across an asynchronous wgmma: call on
// them after wait() and before fence().
template <int NT>
__device__ __forceinline__ void fence_operands(float (&d)[NT][4]) {
#pragma unroll
    for (int i = 0; i < NT; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
    }
}
// The same for register A fragments: keeps them alive and unmoved until the product reading them is waited
// for.
template <int NT>
__device__ __forceinline__ void fence_operands(uint32_t (&a)[NT][4]) {
#pragma unroll
    for (int i = 0; i < NT; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
    }
}

template <int N>
__device__ void wgmma_ss(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b, int scale_d);
template <int N>
__device__ void wgmma_rs_mn(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b);

#define SURF_WGMMA_D4(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])

// ---- S = Q·Kᵀ: m64nNk16, A and B from shared memory, both K-major; scale_d = 0 overwrites D -------------

template <>
__device__ __forceinline__ void wgmma_ss<64>(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b,
                                             int scale_d) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1), SURF_WGMMA_D4(2), SURF_WGMMA_D4(3), SURF_WGMMA_D4(4),
          SURF_WGMMA_D4(5), SURF_WGMMA_D4(6), SURF_WGMMA_D4(7)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}

template <>
__device__ __forceinline__ void wgmma_ss<128>(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b,
                                              int scale_d) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1), SURF_WGMMA_D4(2), SURF_WGMMA_D4(3), SURF_WGMMA_D4(4),
          SURF_WGMMA_D4(5), SURF_WGMMA_D4(6), SURF_WGMMA_D4(7), SURF_WGMMA_D4(8), SURF_WGMMA_D4(9),
          SURF_WGMMA_D4(10), SURF_WGMMA_D4(11), SURF_WGMMA_D4(12), SURF_WGMMA_D4(13), SURF_WGMMA_D4(14),
          SURF_WGMMA_D4(15)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}

template <>
__device__ __forceinline__ void wgmma_ss<256>(float (&d)[32][4], uint64_t desc_a, uint64_t desc_b,
                                              int scale_d) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1), SURF_WGMMA_D4(2), SURF_WGMMA_D4(3), SURF_WGMMA_D4(4),
          SURF_WGMMA_D4(5), SURF_WGMMA_D4(6), SURF_WGMMA_D4(7), SURF_WGMMA_D4(8), SURF_WGMMA_D4(9),
          SURF_WGMMA_D4(10), SURF_WGMMA_D4(11), SURF_WGMMA_D4(12), SURF_WGMMA_D4(13), SURF_WGMMA_D4(14),
          SURF_WGMMA_D4(15), SURF_WGMMA_D4(16), SURF_WGMMA_D4(17), SURF_WGMMA_D4(18), SURF_WGMMA_D4(19),
          SURF_WGMMA_D4(20), SURF_WGMMA_D4(21), SURF_WGMMA_D4(22), SURF_WGMMA_D4(23), SURF_WGMMA_D4(24),
          SURF_WGMMA_D4(25), SURF_WGMMA_D4(26), SURF_WGMMA_D4(27), SURF_WGMMA_D4(28), SURF_WGMMA_D4(29),
          SURF_WGMMA_D4(30), SURF_WGMMA_D4(31)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}

// ---- m64n80k16, A and B from shared memory in either major order ----------------------------------------
// D[64×80] (+)= A·B, each operand K-major (0) or MN-major (1: transposed, rows along K) as kTransA / kTransB
// say (the SSD scan's C·S_inᵀ: A K-major, B MN-major; its state update Bᵀ·(w ⊙ X): both MN-major).

template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_ss_n80(float (&d)[10][4], uint64_t desc_a, uint64_t desc_b,
                                             int scale_d) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %42, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39"
        "}, %40, %41, p, 1, 1, %43, %44;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1), SURF_WGMMA_D4(2), SURF_WGMMA_D4(3), SURF_WGMMA_D4(4),
          SURF_WGMMA_D4(5), SURF_WGMMA_D4(6), SURF_WGMMA_D4(7), SURF_WGMMA_D4(8), SURF_WGMMA_D4(9)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB));
#endif
}

// ---- O += P·V: m64nNk16, A from registers, B from shared memory N-major (imm-trans-b = 1) ------------

template <>
__device__ __forceinline__ void wgmma_rs_mn<16>(float (&d)[2][4], const uint32_t (&a)[4], uint64_t desc_b) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
#endif
}

template <>
__device__ __forceinline__ void wgmma_rs_mn<48>(float (&d)[6][4], const uint32_t (&a)[4], uint64_t desc_b) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %29, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23"
        "}, {%24, %25, %26, %27}, %28, p, 1, 1, 1;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1), SURF_WGMMA_D4(2), SURF_WGMMA_D4(3), SURF_WGMMA_D4(4),
          SURF_WGMMA_D4(5)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
#endif
}

template <>
__device__ __forceinline__ void wgmma_rs_mn<80>(float (&d)[10][4], const uint32_t (&a)[4], uint64_t desc_b) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %45, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39"
        "}, {%40, %41, %42, %43}, %44, p, 1, 1, 1;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1), SURF_WGMMA_D4(2), SURF_WGMMA_D4(3), SURF_WGMMA_D4(4),
          SURF_WGMMA_D4(5), SURF_WGMMA_D4(6), SURF_WGMMA_D4(7), SURF_WGMMA_D4(8), SURF_WGMMA_D4(9)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
#endif
}

template <>
__device__ __forceinline__ void wgmma_rs_mn<128>(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b) {
#if SURF_WGMMA_ENABLED
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : SURF_WGMMA_D4(0), SURF_WGMMA_D4(1), SURF_WGMMA_D4(2), SURF_WGMMA_D4(3), SURF_WGMMA_D4(4),
          SURF_WGMMA_D4(5), SURF_WGMMA_D4(6), SURF_WGMMA_D4(7), SURF_WGMMA_D4(8), SURF_WGMMA_D4(9),
          SURF_WGMMA_D4(10), SURF_WGMMA_D4(11), SURF_WGMMA_D4(12), SURF_WGMMA_D4(13), SURF_WGMMA_D4(14),
          SURF_WGMMA_D4(15)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
#endif
}

#undef SURF_WGMMA_D4

// ---- O += P·V of an attention key tile: P (the tile's weights, packed as A fragments, one per 16-key
// k-step) from registers, V [NK keys][D] in shared memory as N-major 32-byte-swizzled slabs of 16 head-dim
// columns (NK · 32 bytes apart; 8 keys per 256 bytes, so 16 keys = 512 bytes a k-step). Issued and committed;
// the caller waits. ------------
template <int D, int NK>
__device__ __forceinline__ void issue_pv(float (&o)[D / 8][4], const uint32_t (&pa)[NK / 16][4],
                                         const void* v_tile) {
    const uint64_t desc_v = make_desc_sw32(v_tile, NK * 32, 256);
    fence_operands(o);
    fence();
#pragma unroll
    for (int kk = 0; kk < NK / 16; ++kk) wgmma_rs_mn<D>(o, pa[kk], desc_v + kk * (512 / 16));
    commit();
}

}  // namespace surf::kernels::cuda::wgmma
