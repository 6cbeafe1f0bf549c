// The fast CPU kernels against their naive references (kernels/cpu/cpu_ops.h, *_reference) on random
// inputs: every GEMM microkernel the CPU supports, odd and tile-straddling sizes, strided and transposed
// operands, accumulation; attention, SSD, conv, norms and activations at small and model-like shapes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tests/test_util.h"

namespace k = surf::kernels::cpu;
using surf::test::max_abs_diff;
using surf::test::random_vector;

namespace {

float max_abs(const std::vector<float>& a) {
    float m = 0.0f;
    for (float x : a) m = std::max(m, std::fabs(x));
    return m;
}

std::vector<k::CpuIsa> supported_isas() {
    std::vector<k::CpuIsa> out;
    for (k::CpuIsa isa : {k::CpuIsa::kPortable, k::CpuIsa::kAvx2, k::CpuIsa::kAvx512})
        if (k::isa_supported(isa)) out.push_back(isa);
    return out;
}

// Operand layouts: B as a weight [n, k] or as [k, n]; A as [m, k] or transposed ([k, m]).
struct Layout {
    bool b_nk, a_transposed;
};

void check_gemm(k::CpuIsa isa, int64_t m, int64_t n, int64_t kk, Layout layout, bool accumulate, bool bias,
                std::mt19937& rng) {
    CAPTURE(k::isa_name(isa));
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(kk);
    CAPTURE(layout.b_nk);
    CAPTURE(layout.a_transposed);
    CAPTURE(accumulate);
    // Padded leading dimensions, so strides differ from the logical sizes.
    const int64_t lda = (layout.a_transposed ? m : kk) + 3, ldb = (layout.b_nk ? kk : n) + 5, ldc = n + 2;
    const auto a = random_vector(static_cast<size_t>((layout.a_transposed ? kk : m) * lda), rng);
    const auto b = random_vector(static_cast<size_t>((layout.b_nk ? n : kk) * ldb), rng);
    const auto bv = random_vector(static_cast<size_t>(n), rng);
    const auto c0 = random_vector(static_cast<size_t>(m * ldc), rng);
    k::GemmParams g;
    g.a = a.data();
    g.a_row = layout.a_transposed ? 1 : lda;
    g.a_col = layout.a_transposed ? lda : 1;
    g.b = b.data();
    g.b_row = layout.b_nk ? 1 : ldb;
    g.b_col = layout.b_nk ? ldb : 1;
    g.bias = bias ? bv.data() : nullptr;
    g.ldc = ldc, g.m = m, g.n = n, g.k = kk, g.accumulate = accumulate;
    std::vector<float> want = c0, got = c0;
    g.c = want.data();
    k::gemm_reference(g);
    g.c = got.data();
    k::gemm_with_isa(g, isa);
    // Summation order differs (blocks of k, lanes, FMA): allow a few ulp per term of the k-term sums.
    CHECK(max_abs_diff(got, want) <= 1e-6f * static_cast<float>(kk + 4) * (1.0f + max_abs(want)) / 4.0f);
    // Padding columns of C are left alone.
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = n; j < ldc; ++j) REQUIRE(got[i * ldc + j] == c0[i * ldc + j]);
}

}  // namespace

TEST_CASE("gemm: every supported microkernel equals the triple loop, odd sizes, strides, transposes") {
    std::mt19937 rng(101);
    const std::vector<int64_t> sizes = {1, 2, 3, 4, 5, 7, 12, 13, 17, 31, 33, 64, 65};
    for (k::CpuIsa isa : supported_isas()) {
        for (int trial = 0; trial < 60; ++trial) {
            const int64_t m = sizes[rng() % sizes.size()], n = sizes[rng() % sizes.size()],
                          kk = sizes[rng() % sizes.size()];
            check_gemm(isa, m, n, kk, {trial % 2 == 0, trial % 3 == 0}, trial % 4 == 1, trial % 5 != 0, rng);
        }
    }
}

TEST_CASE("gemm: sizes across the cache blocks (k > 256, m > 192, n > 1024) and the thread split") {
    std::mt19937 rng(102);
    struct Shape {
        int64_t m, n, k;
    };
    for (k::CpuIsa isa : supported_isas()) {
        for (Shape s : {Shape{200, 70, 300}, Shape{37, 1100, 40}, Shape{390, 45, 513}, Shape{5, 300, 700},
                        Shape{64, 256, 256}, Shape{1, 1536, 384}, Shape{3, 257, 1025}}) {
            check_gemm(isa, s.m, s.n, s.k, {true, false}, false, true, rng);
            check_gemm(isa, s.m, s.n, s.k, {false, true}, true, false, rng);
        }
    }
}

TEST_CASE("gemm: k = 0 leaves bias (or zero), or C unchanged when accumulating") {
    std::vector<float> a(1), b(1), bias = {1.5f, -2.0f}, c = {7.0f, 8.0f, 9.0f, 10.0f};
    k::GemmParams g;
    g.a = a.data(), g.a_row = 0, g.b = b.data(), g.b_row = 0, g.bias = bias.data(), g.c = c.data(), g.ldc = 2;
    g.m = 2, g.n = 2, g.k = 0;
    k::gemm(g);
    CHECK(c == std::vector<float>{1.5f, -2.0f, 1.5f, -2.0f});
    g.accumulate = true, g.bias = nullptr;
    k::gemm(g);
    CHECK(c == std::vector<float>{1.5f, -2.0f, 1.5f, -2.0f});
}

TEST_CASE("linear equals linear_reference at LM/ViT shapes and odd ones") {
    std::mt19937 rng(103);
    struct Shape {
        int64_t m, n, k;
    };
    for (Shape s : {Shape{1, 256, 256}, Shape{2, 1027, 64}, Shape{4, 97, 33}, Shape{5, 64, 1024},
                    Shape{77, 576, 192}, Shape{300, 1160, 256}, Shape{13, 7, 3}}) {
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(s.k);
        const auto x = random_vector(static_cast<size_t>(s.m * s.k), rng),
                   w = random_vector(static_cast<size_t>(s.n * s.k), rng);
        const auto b = random_vector(static_cast<size_t>(s.n), rng);
        for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
            std::vector<float> want(static_cast<size_t>(s.m * s.n)), got(want.size());
            k::linear_reference({x.data(), w.data(), bias, want.data(), s.m, s.n, s.k});
            k::linear({x.data(), w.data(), bias, got.data(), s.m, s.n, s.k});
            CHECK(max_abs_diff(got, want) <= 2e-6f * static_cast<float>(s.k));
        }
    }
}

TEST_CASE(
    "attention equals attention_reference: causal with a past, GQA, decode, bidirectional with strides") {
    std::mt19937 rng(104);
    struct Case {
        int64_t T, L, H, KVH, D;
        bool causal;
        int64_t q_pad, kv_pad;  // extra floats per row (strided q / kv as in the ViT's fused qkv)
    };
    for (Case c : {Case{9, 9, 4, 2, 8, true, 0, 0}, Case{150, 170, 4, 2, 16, true, 0, 0},
                   Case{1, 300, 4, 2, 64, true, 0, 0}, Case{3, 3, 1, 1, 5, true, 0, 0},
                   Case{130, 130, 3, 3, 24, false, 7, 11}, Case{70, 70, 6, 2, 8, false, 0, 0},
                   Case{65, 200, 2, 1, 32, true, 3, 0}}) {
        CAPTURE(c.T);
        CAPTURE(c.L);
        CAPTURE(c.causal);
        const int64_t q_stride = c.H * c.D + c.q_pad, kv_stride = c.KVH * c.D + c.kv_pad;
        const auto q = random_vector(static_cast<size_t>(c.T * q_stride), rng, -2.0f, 2.0f);
        const auto kc = random_vector(static_cast<size_t>(c.L * kv_stride), rng, -2.0f, 2.0f);
        const auto vc = random_vector(static_cast<size_t>(c.L * kv_stride), rng);
        std::vector<float> want(static_cast<size_t>(c.T * c.H * c.D)), got(want.size());
        k::AttentionParams p;
        p.q = q.data(), p.k = kc.data(), p.v = vc.data();
        p.T = c.T, p.L = c.L, p.n_heads = c.H, p.n_kv_heads = c.KVH, p.head_dim = c.D;
        p.q_stride = q_stride, p.kv_stride = kv_stride, p.causal = c.causal;
        p.out = want.data();
        k::attention_reference(p);
        p.out = got.data();
        k::attention(p);
        CHECK(max_abs_diff(got, want) < 2e-6f);
    }
}

TEST_CASE("ssd equals ssd_reference: chunked at several chunk sizes and lengths, and the token recurrence") {
    std::mt19937 rng(105);
    struct Case {
        int64_t H, P, G, N;
    };
    for (Case c : {Case{6, 5, 3, 7}, Case{8, 64, 1, 64}, Case{4, 16, 2, 16}}) {
        const int64_t xs =
            c.H * c.P + 2 * c.G * c.N + 3;  // x, B, C in one strided row, as in the model's xBC
        for (int64_t T : {1, 7, 37, 200}) {
            for (int64_t chunk : {0, 16, 64, 128}) {
                CAPTURE(c.H);
                CAPTURE(c.P);
                CAPTURE(c.N);
                CAPTURE(T);
                CAPTURE(chunk);
                const auto xbc = random_vector(static_cast<size_t>(T * xs), rng);
                const auto dt = random_vector(static_cast<size_t>(T * c.H), rng, 0.01f, 0.5f);
                const auto A = random_vector(c.H, rng, -4.0f, -0.5f), D = random_vector(c.H, rng);
                const auto state0 = random_vector(static_cast<size_t>(c.H * c.P * c.N), rng);
                k::SsdParams p;
                p.x = xbc.data(), p.B = xbc.data() + c.H * c.P, p.C = xbc.data() + c.H * c.P + c.G * c.N;
                p.dt = dt.data(), p.A = A.data(), p.D = D.data();
                p.T = T, p.H = c.H, p.P = c.P, p.G = c.G, p.N = c.N;
                p.x_stride = xs, p.dt_stride = c.H, p.bc_stride = xs, p.chunk = chunk;
                std::vector<float> s_want = state0, s_got = state0,
                                   y_want(static_cast<size_t>(T * c.H * c.P)), y_got(y_want.size());
                p.state = s_want.data(), p.y = y_want.data();
                k::ssd_reference(p);
                p.state = s_got.data(), p.y = y_got.data();
                k::ssd(p);
                CHECK(max_abs_diff(y_got, y_want) <= 2e-5f * (1.0f + max_abs(y_want)));
                CHECK(max_abs_diff(s_got, s_want) <= 2e-5f * (1.0f + max_abs(s_want)));
            }
        }
    }
}

TEST_CASE("causal conv1d equals causal_conv1d_reference, state included, for short and long T") {
    std::mt19937 rng(106);
    for (int64_t C : {1, 9, 37, 640}) {
        for (int64_t T : {1, 2, 3, 11, 100}) {
            for (int64_t K : {2, 4}) {
                CAPTURE(C);
                CAPTURE(T);
                CAPTURE(K);
                const int64_t xs = C + 5;
                const auto x = random_vector(static_cast<size_t>(T * xs), rng),
                           w = random_vector(static_cast<size_t>(C * K), rng);
                const auto b = random_vector(static_cast<size_t>(C), rng);
                const auto state0 = random_vector(static_cast<size_t>(C * (K - 1)), rng);
                std::vector<float> s_want = state0, s_got = state0, o_want(static_cast<size_t>(T * C)),
                                   o_got(o_want.size());
                k::causal_conv1d_reference(
                    {x.data(), w.data(), b.data(), s_want.data(), o_want.data(), T, C, K, xs});
                k::causal_conv1d({x.data(), w.data(), b.data(), s_got.data(), o_got.data(), T, C, K, xs});
                CHECK(max_abs_diff(o_got, o_want) <= 1e-6f);
                CHECK(s_got == s_want);
            }
        }
    }
}

TEST_CASE("norms equal their references (with residual, groups, odd dims)") {
    std::mt19937 rng(107);
    for (int64_t dim : {7, 32, 33, 192, 256, 1024}) {
        for (int64_t rows : {1, 3, 900}) {
            CAPTURE(dim);
            CAPTURE(rows);
            const auto x = random_vector(static_cast<size_t>(rows * dim), rng, -3.0f, 3.0f);
            const auto w = random_vector(static_cast<size_t>(dim), rng, 0.5f, 1.5f),
                       b = random_vector(static_cast<size_t>(dim), rng);
            const auto res0 = random_vector(x.size(), rng);
            std::vector<float> y_want(x.size()), y_got(x.size()), r_want = res0, r_got = res0;
            k::rmsnorm_reference({x.data(), r_want.data(), w.data(), y_want.data(), rows, dim, 1e-5f});
            k::rmsnorm({x.data(), r_got.data(), w.data(), y_got.data(), rows, dim, 1e-5f});
            CHECK(max_abs_diff(y_got, y_want) <= 2e-6f * max_abs(y_want));
            CHECK(r_got == r_want);
            k::layernorm_reference({x.data(), w.data(), b.data(), y_want.data(), rows, dim, 1e-6f});
            k::layernorm({x.data(), w.data(), b.data(), y_got.data(), rows, dim, 1e-6f});
            CHECK(max_abs_diff(y_got, y_want) <= 2e-6f * max_abs(y_want));
            k::layernorm_reference({x.data(), w.data(), nullptr, y_want.data(), rows, dim, 1e-6f});
            k::layernorm({x.data(), w.data(), nullptr, y_got.data(), rows, dim, 1e-6f});
            CHECK(max_abs_diff(y_got, y_want) <= 2e-6f * max_abs(y_want));
            if (dim % 16 == 0 || dim == 33) {
                const int64_t group = dim % 16 == 0 ? dim / 2 : dim;
                const int64_t zs = dim + 3;
                const auto z = random_vector(static_cast<size_t>(rows * zs), rng, -6.0f, 6.0f);
                k::gated_rmsnorm_reference(
                    {x.data(), z.data(), w.data(), y_want.data(), rows, dim, group, zs, 1e-5f});
                k::gated_rmsnorm({x.data(), z.data(), w.data(), y_got.data(), rows, dim, group, zs, 1e-5f});
                CHECK(max_abs_diff(y_got, y_want) <= 2e-6f * max_abs(y_want));
            }
        }
    }
}

TEST_CASE("gelu and silu equal std::erf / std::exp forms within a few ulp") {
    std::vector<float> x;
    for (int i = -200000; i <= 200000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);  // [-20, 20]
    for (float v : {-100.0f, -88.0f, -30.0f, 30.0f, 88.0f, 100.0f, 0.0f, -0.0f}) x.push_back(v);
    std::vector<float> want = x, got = x;
    k::gelu_erf_reference(want.data(), static_cast<int64_t>(want.size()));
    k::gelu_erf(got.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < x.size(); ++i)
        REQUIRE(std::fabs(got[i] - want[i]) <= 1e-6f * (1.0f + std::fabs(x[i])));
    want = x, got = x;
    k::silu_reference(want.data(), static_cast<int64_t>(want.size()));
    k::silu(got.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < x.size(); ++i)
        REQUIRE(std::fabs(got[i] - want[i]) <= 1e-6f * (1.0f + std::fabs(want[i])));
}

TEST_CASE("parallel_for covers [0, n) exactly once, nested regions run inline") {
    for (int64_t n : {1, 2, 3, 17, 1000}) {
        std::vector<int> hits(static_cast<size_t>(n), 0);
        k::parallel_for(n, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
            k::parallel_for(4, [&](int64_t, int64_t) {});
        });
        CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    }
}
