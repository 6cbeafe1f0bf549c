// fp32 GEMM for the CPU backend: the reference triple loop, and the fast form.
//
// The fast form follows the BLIS/GotoBLAS layering. B is copied ("packed") a block of kKc × kNc at a
// time into panels of NR columns laid out [kc][NR]; A a block of kMc × kKc at a time into panels of MR
// rows laid out [kc][MR]. A microkernel keeps an MR × NR tile of C in vector registers and runs over kc,
// reading one NR-vector of B and broadcasting MR values of A per step, so each weight loaded from memory
// is used MR times and each activation NR times. Edges are zero-padded in the packed panels and the
// partial tiles go through a small buffer. The microkernel is chosen once per call by instruction set:
// AVX-512 (12 × 32, 24 zmm accumulators), AVX2+FMA (6 × 16, 12 ymm) or portable C++ (4 × 16).
//
// A row-major A is read in place by the microkernel (no packing). Products with few rows (decode,
// m ≤ kSkinnyRows) skip the blocking altogether: each output is a vectorised dot product (B contiguous
// along k) or the rows of B are added up scaled (B contiguous along n), and B is streamed once.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/check.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace surf::kernels::cpu {

void gemm_reference(const GemmParams& p) {
    for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
            float acc = 0.0f;
            for (int64_t q = 0; q < p.k; ++q)
                acc += p.a[i * p.a_row + q * p.a_col] * p.b[q * p.b_row + j * p.b_col];
            if (p.bias) acc += p.bias[j];
            float& c = p.c[i * p.ldc + j];
            c = p.accumulate ? c + acc : acc;
        }
    }
}

namespace {

// Block sizes (floats): a packed B block (kKc × kNc, 1 MiB) stays in L2 across the row blocks; a packed
// A block (kMc × kKc, 192 KiB) stays in L2 across the column panels; one B panel (kKc × NR) stays in L1
// while the microkernel walks down the A panels.
constexpr int64_t kKc = 256, kMc = 192, kNc = 1024;
constexpr int64_t kSkinnyRows = 4;
constexpr int kMaxMr = 12, kMaxNr = 32;

// C[MR, NR] += A[MR, kc] · Bpanel[kc][NR], C rows ldc apart. A is either a packed panel [kc][MR] or read in
// place from row-major memory (rows lda apart), which saves packing when A is already row-major.
using TileFn = void (*)(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc);

struct Microkernel {
    int mr, nr;
    TileFn tile_packed_a, tile_row_major_a;
    void (*pack_b_transposed)(const float* src, int64_t ld, int64_t kc, int64_t cols, int nr, float* panel);
};

// A(i, q) of a microkernel's A operand.
template <bool kPackedA, int MR>
inline float a_at(const float* a, int64_t lda, int i, int64_t q) {
    return kPackedA ? a[q * MR + i] : a[i * lda + q];
}

template <bool kPackedA>
void tile_portable(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc) {
    constexpr int MR = 4, NR = 16;
    float acc[MR][NR] = {};
    for (int64_t q = 0; q < kc; ++q) {
        const float* bq = b + q * NR;
        for (int i = 0; i < MR; ++i) {
            const float ai = a_at<kPackedA, MR>(a, lda, i, q);
            for (int j = 0; j < NR; ++j) acc[i][j] += ai * bq[j];
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) c[i * ldc + j] += acc[i][j];
}

// panel[q·nr + j] = src[j·ld + q] for j < cols, q < kc; columns cols..nr-1 are zero.
void pack_transposed_portable(const float* src, int64_t ld, int64_t kc, int64_t cols, int nr, float* panel) {
    if (cols < nr) std::fill(panel, panel + kc * nr, 0.0f);
    for (int64_t j = 0; j < cols; ++j)
        for (int64_t q = 0; q < kc; ++q) panel[q * nr + j] = src[j * ld + q];
}

#if defined(__x86_64__) && defined(__GNUC__)
template <bool kPackedA>
__attribute__((target("avx2,fma"))) void tile_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                                   float* c, int64_t ldc) {
    constexpr int MR = 6;
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t q = 0; q < kc; ++q) {
        const __m256 b0 = _mm256_loadu_ps(b + q * 16), b1 = _mm256_loadu_ps(b + q * 16 + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; ++i) {
            const __m256 ai = _mm256_set1_ps(a_at<kPackedA, MR>(a, lda, i, q));
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
        float* ci = c + i * ldc;
        _mm256_storeu_ps(ci, _mm256_add_ps(_mm256_loadu_ps(ci), acc[i][0]));
        _mm256_storeu_ps(ci + 8, _mm256_add_ps(_mm256_loadu_ps(ci + 8), acc[i][1]));
    }
}

template <bool kPackedA>
__attribute__((target("avx512f"))) void tile_avx512(int64_t kc, const float* a, int64_t lda, const float* b,
                                                    float* c, int64_t ldc) {
    constexpr int MR = 12;
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t q = 0; q < kc; ++q) {
        const __m512 b0 = _mm512_loadu_ps(b + q * 32), b1 = _mm512_loadu_ps(b + q * 32 + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
            const __m512 ai = _mm512_set1_ps(a_at<kPackedA, MR>(a, lda, i, q));
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
        float* ci = c + i * ldc;
        _mm512_storeu_ps(ci, _mm512_add_ps(_mm512_loadu_ps(ci), acc[i][0]));
        _mm512_storeu_ps(ci + 16, _mm512_add_ps(_mm512_loadu_ps(ci + 16), acc[i][1]));
    }
}

// pack_transposed_portable with 8 × 8 blocks transposed in registers (unpack / shuffle / permute).
__attribute__((target("avx2"))) void pack_transposed_avx2(const float* src, int64_t ld, int64_t kc,
                                                          int64_t cols, int nr, float* panel) {
    if (cols < nr) std::fill(panel, panel + kc * nr, 0.0f);
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        int64_t q = 0;
        for (; q + 8 <= kc; q += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + (j + i) * ld + q);
            const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
            const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
            const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
            const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float* d = panel + q * nr + j;
            _mm256_storeu_ps(d + 0 * nr, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + 1 * nr, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 2 * nr, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 3 * nr, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 4 * nr, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 5 * nr, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 6 * nr, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 7 * nr, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (; q < kc; ++q)
            for (int64_t i = 0; i < 8; ++i) panel[q * nr + j + i] = src[(j + i) * ld + q];
    }
    for (; j < cols; ++j)
        for (int64_t q = 0; q < kc; ++q) panel[q * nr + j] = src[j * ld + q];
}
#endif

Microkernel microkernel_for(CpuIsa isa) {
    switch (isa) {
#if defined(__x86_64__) && defined(__GNUC__)
        case CpuIsa::kAvx512: return {12, 32, tile_avx512<true>, tile_avx512<false>, pack_transposed_avx2};
        case CpuIsa::kAvx2: return {6, 16, tile_avx2<true>, tile_avx2<false>, pack_transposed_avx2};
#else
        case CpuIsa::kAvx512:
        case CpuIsa::kAvx2: break;
#endif
        case CpuIsa::kPortable:
            return {4, 16, tile_portable<true>, tile_portable<false>, pack_transposed_portable};
    }
    SURF_CHECK(false, "gemm: no microkernel for ", isa_name(isa));
    return {};
}

// Per-thread packing buffers, 64-byte aligned, grown to the largest block seen and then reused.
struct AlignedBuffer {
    std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
    size_t capacity = 0;
    float* get(size_t n) {
        if (n > capacity) {
            const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
            data.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
            SURF_CHECK(data, "gemm: cannot allocate ", bytes, " bytes of packing buffer");
            capacity = n;
        }
        return data.get();
    }
};

// Packs B(p0 .. p0+kc, j0 .. j0+nc) into panels of nr columns: panel t holds [kc][nr], zero beyond nc.
void pack_b(const GemmParams& g, const Microkernel& mk, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
            float* out) {
    const int nr = mk.nr;
    for (int64_t jp = 0; jp < nc; jp += nr) {
        const int64_t cols = std::min<int64_t>(nr, nc - jp);
        float* panel = out + jp * kc;
        const float* src = g.b + p0 * g.b_row + (j0 + jp) * g.b_col;
        if (g.b_col == 1) {  // rows of B contiguous: copy nr at a time
            for (int64_t q = 0; q < kc; ++q) {
                const float* s = src + q * g.b_row;
                float* d = panel + q * nr;
                for (int64_t j = 0; j < cols; ++j) d[j] = s[j];
                for (int64_t j = cols; j < nr; ++j) d[j] = 0.0f;
            }
        } else if (g.b_row == 1) {  // columns of B contiguous along k (a weight [n, k]): transpose
            mk.pack_b_transposed(src, g.b_col, kc, cols, nr, panel);
        } else {
            if (cols < nr) std::fill(panel, panel + kc * nr, 0.0f);
            for (int64_t j = 0; j < cols; ++j)
                for (int64_t q = 0; q < kc; ++q) panel[q * nr + j] = src[j * g.b_col + q * g.b_row];
        }
    }
}

// Packs A(i0 .. i0+mc, p0 .. p0+kc) into panels of mr rows: panel t holds [kc][mr], zero beyond mc.
void pack_a(const GemmParams& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int mr, float* out) {
    for (int64_t ip = 0; ip < mc; ip += mr) {
        const int64_t rows = std::min<int64_t>(mr, mc - ip);
        float* panel = out + ip * kc;
        const float* src = g.a + (i0 + ip) * g.a_row + p0 * g.a_col;
        if (rows < mr) std::fill(panel, panel + kc * mr, 0.0f);
        if (g.a_row == 1) {  // columns of A contiguous
            for (int64_t q = 0; q < kc; ++q) {
                const float* s = src + q * g.a_col;
                float* d = panel + q * mr;
                for (int64_t i = 0; i < rows; ++i) d[i] = s[i];
            }
        } else {
            for (int64_t i = 0; i < rows; ++i) {
                const float* s = src + i * g.a_row;
                for (int64_t q = 0; q < kc; ++q) panel[q * mr + i] = s[q * g.a_col];
            }
        }
    }
}

// C rows [i0, i1) × columns [j0, j1) start as bias (or 0), or get bias added when accumulating.
void init_c(const GemmParams& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    for (int64_t i = i0; i < i1; ++i) {
        float* c = g.c + i * g.ldc;
        if (!g.accumulate) {
            if (g.bias)
                std::copy(g.bias + j0, g.bias + j1, c + j0);
            else
                std::fill(c + j0, c + j1, 0.0f);
        } else if (g.bias) {
            for (int64_t j = j0; j < j1; ++j) c[j] += g.bias[j];
        }
    }
}

// The blocked product on one thread over C rows [i0, i1) × columns [j0, j1). A row-major A (a_col = 1) is
// read in place; other layouts, and the last partial row panel, are packed. Each C tile is initialised
// (init_c) just before its first microkernel call, while it is in cache.
void gemm_block(const GemmParams& g, const Microkernel& mk, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    if (g.k == 0) {
        init_c(g, i0, i1, j0, j1);
        return;
    }
    thread_local AlignedBuffer a_buf, b_buf;
    const int mr = mk.mr, nr = mk.nr;
    const bool a_in_place = g.a_col == 1;
    const int64_t mc_max = std::min<int64_t>(kMc, (i1 - i0 + mr - 1) / mr * mr);
    const int64_t nc_max = std::min<int64_t>(kNc, (j1 - j0 + nr - 1) / nr * nr);
    const int64_t kc_max = std::min<int64_t>(kKc, g.k);
    float* ap = a_buf.get(static_cast<size_t>((a_in_place ? mr : mc_max) * kc_max));
    float* bp = b_buf.get(static_cast<size_t>(nc_max * kc_max));
    float edge[kMaxMr * kMaxNr];
    for (int64_t jc = j0; jc < j1; jc += kNc) {
        const int64_t nc = std::min(kNc, j1 - jc);
        for (int64_t pc = 0; pc < g.k; pc += kKc) {
            const int64_t kc = std::min(kKc, g.k - pc);
            pack_b(g, mk, pc, kc, jc, nc, bp);
            for (int64_t ic = i0; ic < i1; ic += kMc) {
                const int64_t mc = std::min(kMc, i1 - ic);
                const int64_t full_rows = a_in_place ? mc / mr * mr : 0;  // rows read in place
                if (a_in_place) {
                    if (full_rows < mc) pack_a(g, ic + full_rows, mc - full_rows, pc, kc, mr, ap);
                } else {
                    pack_a(g, ic, mc, pc, kc, mr, ap);
                }
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    const int64_t cols = std::min<int64_t>(nr, nc - jr);
                    const float* b_panel = bp + jr * kc;
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        const int64_t rows = std::min<int64_t>(mr, mc - ir);
                        float* c = g.c + (ic + ir) * g.ldc + jc + jr;
                        const bool in_place = ir < full_rows;
                        const float* a =
                            in_place ? g.a + (ic + ir) * g.a_row + pc : ap + (ir - full_rows) * kc;
                        const TileFn tile = in_place ? mk.tile_row_major_a : mk.tile_packed_a;
                        if (pc == 0) init_c(g, ic + ir, ic + ir + rows, jc + jr, jc + jr + cols);
                        if (rows == mr && cols == nr) {
                            tile(kc, a, g.a_row, b_panel, c, g.ldc);
                            continue;
                        }
                        std::fill(edge, edge + mr * nr, 0.0f);
                        tile(kc, a, g.a_row, b_panel, edge, nr);
                        for (int64_t i = 0; i < rows; ++i)
                            for (int64_t j = 0; j < cols; ++j) c[i * g.ldc + j] += edge[i * nr + j];
                    }
                }
            }
        }
    }
}

// Few rows, A and B contiguous along k: C(i, j) (+)= Σ_p A(i, p)·B(p, j) as dot products with 16 lanes, four
// outputs at a time (four rows of B streamed together, each A row loaded once for the four).
SURF_CPU_CLONES void gemm_skinny_dot(const GemmParams& g, int64_t j0, int64_t j1) {
    constexpr int kLanes = 16;
    for (int64_t j = j0; j < j1; j += 4) {
        const int64_t cols = std::min<int64_t>(4, j1 - j);
        // Columns past j1 repeat the last one; their sums are not stored.
        const float* w0 = g.b + j * g.b_col;
        const float* w1 = g.b + (j + std::min<int64_t>(1, cols - 1)) * g.b_col;
        const float* w2 = g.b + (j + std::min<int64_t>(2, cols - 1)) * g.b_col;
        const float* w3 = g.b + (j + std::min<int64_t>(3, cols - 1)) * g.b_col;
        for (int64_t i = 0; i < g.m; ++i) {
            const float* x = g.a + i * g.a_row;
            float a0[kLanes] = {}, a1[kLanes] = {}, a2[kLanes] = {}, a3[kLanes] = {};
            int64_t q = 0;
            for (; q + kLanes <= g.k; q += kLanes) {
                for (int u = 0; u < kLanes; ++u) {
                    const float xv = x[q + u];
                    a0[u] += xv * w0[q + u];
                    a1[u] += xv * w1[q + u];
                    a2[u] += xv * w2[q + u];
                    a3[u] += xv * w3[q + u];
                }
            }
            float sums[4] = {vec::sum16(a0), vec::sum16(a1), vec::sum16(a2), vec::sum16(a3)};
            for (; q < g.k; ++q) {
                sums[0] += x[q] * w0[q];
                sums[1] += x[q] * w1[q];
                sums[2] += x[q] * w2[q];
                sums[3] += x[q] * w3[q];
            }
            for (int64_t c = 0; c < cols; ++c) {
                const float sum = sums[c] + (g.bias ? g.bias[j + c] : 0.0f);
                float& out = g.c[i * g.ldc + j + c];
                out = g.accumulate ? out + sum : sum;
            }
        }
    }
}

// Few rows, A contiguous along k and B along n: C(i, j0..j1) (+)= Σ_p A(i, p)·B(p, j0..j1), one row of B at a
// time.
SURF_CPU_CLONES void gemm_skinny_axpy(const GemmParams& g, int64_t j0, int64_t j1) {
    for (int64_t i = 0; i < g.m; ++i) {
        float* c = g.c + i * g.ldc;
        if (!g.accumulate) std::fill(c + j0, c + j1, 0.0f);
        if (g.bias)
            for (int64_t j = j0; j < j1; ++j) c[j] += g.bias[j];
        const float* a = g.a + i * g.a_row;
        for (int64_t q = 0; q < g.k; ++q) {
            const float aq = a[q];
            const float* b = g.b + q * g.b_row;
            for (int64_t j = j0; j < j1; ++j) c[j] += aq * b[j];
        }
    }
}

// Products smaller than this many multiply-adds run on the calling thread: waking a worker costs more.
constexpr int64_t kMinParallelMacs = 1 << 17;

}  // namespace

CpuIsa detected_isa() {
    static const CpuIsa isa = [] {
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f")) return CpuIsa::kAvx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::kAvx2;
#endif
        return CpuIsa::kPortable;
    }();
    return isa;
}

bool isa_supported(CpuIsa isa) {
    return static_cast<int>(isa) <= static_cast<int>(detected_isa());
}

const char* isa_name(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::kPortable: return "portable";
        case CpuIsa::kAvx2: return "avx2";
        case CpuIsa::kAvx512: return "avx512";
    }
    return "?";
}

void gemm_with_isa(const GemmParams& p, CpuIsa isa) {
    SURF_CHECK(p.a && p.b && p.c && p.m >= 0 && p.n >= 0 && p.k >= 0, "gemm: m ", p.m, " n ", p.n, " k ",
               p.k);
    SURF_CHECK(isa_supported(isa), "gemm: this CPU has no ", isa_name(isa));
    if (p.m == 0 || p.n == 0) return;
    const bool parallel = p.m * p.n * p.k >= kMinParallelMacs;
    if (p.m <= kSkinnyRows && p.a_col == 1 && (p.b_row == 1 || p.b_col == 1)) {
        auto run = [&](int64_t j0, int64_t j1) {
            if (p.b_row == 1)
                gemm_skinny_dot(p, j0, j1);
            else
                gemm_skinny_axpy(p, j0, j1);
        };
        if (parallel)
            parallel_for(p.n, run, 16);
        else
            run(0, p.n);
        return;
    }
    const Microkernel mk = microkernel_for(isa);
    if (!parallel) {
        gemm_block(p, mk, 0, p.m, 0, p.n);
        return;
    }
    // Split the larger side into whole tiles: splitting rows repacks B on every thread, splitting columns
    // repacks A, so the side that is split is the one whose operand is cheaper to repeat.
    if (p.m >= p.n) {
        const int64_t units = (p.m + mk.mr - 1) / mk.mr;
        parallel_for(units, [&](int64_t u0, int64_t u1) {
            gemm_block(p, mk, u0 * mk.mr, std::min(p.m, u1 * mk.mr), 0, p.n);
        });
    } else {
        const int64_t units = (p.n + mk.nr - 1) / mk.nr;
        parallel_for(units, [&](int64_t u0, int64_t u1) {
            gemm_block(p, mk, 0, p.m, u0 * mk.nr, std::min(p.n, u1 * mk.nr));
        });
    }
}

void gemm(const GemmParams& p) {
    gemm_with_isa(p, detected_isa());
}

void linear(const LinearParams& p) {
    SURF_CHECK(p.x && p.w && p.y, "linear: null pointer");
    GemmParams g;
    g.a = p.x, g.a_row = p.k, g.a_col = 1;
    g.b = p.w, g.b_row = 1, g.b_col = p.k;
    g.bias = p.bias;
    g.c = p.y, g.ldc = p.n;
    g.m = p.m, g.n = p.n, g.k = p.k;
    gemm(g);
}

}  // namespace surf::kernels::cpu
