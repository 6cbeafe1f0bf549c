// The CPU reference kernels against the definitions they implement, on random (never zero) inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tests/test_util.h"

namespace k = surf::kernels::cpu;
using surf::test::max_abs_diff;
using surf::test::random_vector;

TEST_CASE("SSD: chunked form equals the token recurrence, across ragged chunks and from a non-zero state") {
    std::mt19937 rng(11);
    const int64_t H = 6, P = 5, G = 3, N = 7;
    for (int64_t T : {1, 7, 16, 37}) {
        for (int64_t chunk : {4, 16, 64}) {
            auto x = random_vector(T * H * P, rng);
            auto dt = random_vector(T * H, rng, 0.01f, 0.5f);
            auto A = random_vector(H, rng, -4.0f, -0.5f);
            auto B = random_vector(T * G * N, rng);
            auto C = random_vector(T * G * N, rng);
            auto D = random_vector(H, rng);
            auto state0 = random_vector(H * P * N, rng);
            std::vector<float> s_rec = state0, s_chunk = state0, y_rec(T * H * P), y_chunk(T * H * P);
            k::SsdParams p;
            p.x = x.data(), p.dt = dt.data(), p.A = A.data(), p.B = B.data(), p.C = C.data(), p.D = D.data();
            p.T = T, p.H = H, p.P = P, p.G = G, p.N = N, p.x_stride = H * P, p.dt_stride = H,
            p.bc_stride = G * N;
            p.state = s_rec.data(), p.y = y_rec.data(), p.chunk = 0;
            k::ssd(p);
            p.state = s_chunk.data(), p.y = y_chunk.data(), p.chunk = chunk;
            k::ssd(p);
            CHECK(max_abs_diff(y_rec, y_chunk) < 1e-4f);
            CHECK(max_abs_diff(s_rec, s_chunk) < 1e-4f);
        }
    }
}

TEST_CASE("causal conv1d: one call over T tokens equals T one-token calls") {
    std::mt19937 rng(12);
    const int64_t C = 9, K = 4, T = 11;
    auto x = random_vector(T * C, rng), w = random_vector(C * K, rng), b = random_vector(C, rng);
    auto state0 = random_vector(C * (K - 1), rng);
    std::vector<float> s_all = state0, out_all(T * C);
    k::causal_conv1d({x.data(), w.data(), b.data(), s_all.data(), out_all.data(), T, C, K, C});
    std::vector<float> s_step = state0, out_step(T * C);
    for (int64_t t = 0; t < T; ++t) {
        k::causal_conv1d(
            {x.data() + t * C, w.data(), b.data(), s_step.data(), out_step.data() + t * C, 1, C, K, C});
    }
    CHECK(max_abs_diff(out_all, out_step) < 1e-6f);
    CHECK(max_abs_diff(s_all, s_step) == 0.0f);
    // The definition at t = 0, channel 2: window = [state(3), x_0].
    const int64_t c = 2;
    float acc = b[c] + w[c * K + 3] * x[c];
    for (int64_t j = 0; j < K - 1; ++j) acc += w[c * K + j] * state0[c * (K - 1) + j];
    CHECK(out_all[c] == doctest::Approx(acc / (1.0f + std::exp(-acc))).epsilon(1e-6));
}

TEST_CASE("attention: prefill in one call equals token-by-token decode against the growing cache") {
    std::mt19937 rng(13);
    const int64_t H = 4, KVH = 2, Dh = 8, T = 9;
    auto q = random_vector(T * H * Dh, rng), kc = random_vector(T * KVH * Dh, rng),
         vc = random_vector(T * KVH * Dh, rng);
    std::vector<float> all(T * H * Dh), step(T * H * Dh);
    k::AttentionParams p;
    p.q = q.data(), p.k = kc.data(), p.v = vc.data(), p.out = all.data();
    p.T = T, p.L = T, p.n_heads = H, p.n_kv_heads = KVH, p.head_dim = Dh;
    k::attention(p);
    for (int64_t t = 0; t < T; ++t) {
        p.q = q.data() + t * H * Dh, p.out = step.data() + t * H * Dh, p.T = 1, p.L = t + 1;
        k::attention(p);
    }
    CHECK(max_abs_diff(all, step) < 1e-6f);
    // Token 0 sees only key 0: its output is v_0 of its kv head.
    for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dh; ++d) CHECK(all[h * Dh + d] == doctest::Approx(vc[(h / 2) * Dh + d]));
}

TEST_CASE("bilinear resize matches PyTorch align_corners=False on a 4→2 and 2→3 grid") {
    // 4→2: src = 2·dst + 0.5, the mean of the 2×2 block (as spec §4.3's closed form for 128→32).
    std::vector<float> in(16);
    for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(i * i % 7) + 0.25f * i;
    std::vector<float> out(4);
    k::bilinear_resize({in.data(), out.data(), 1, 4, 4, 2, 2});
    CHECK(out[0] == doctest::Approx(0.25f * (in[0] + in[1] + in[4] + in[5])));
    CHECK(out[3] == doctest::Approx(0.25f * (in[10] + in[11] + in[14] + in[15])));
    // 2→3 (upsampling), values computed with torch.nn.functional.interpolate:
    // torch.tensor([[[[1., 2.], [3., 4.]]]]) → [[1.0, 1.5, 2.0], [2.0, 2.5, 3.0], [3.0, 3.5, 4.0]]
    std::vector<float> small = {1, 2, 3, 4}, up(9);
    k::bilinear_resize({small.data(), up.data(), 1, 2, 2, 3, 3});
    const float want[9] = {1.0f, 1.5f, 2.0f, 2.0f, 2.5f, 3.0f, 3.0f, 3.5f, 4.0f};
    for (int i = 0; i < 9; ++i) CHECK(up[i] == doctest::Approx(want[i]));
}

TEST_CASE("pixel shuffle v2 follows the spec's index map") {
    const int64_t side = 4, C = 3;
    std::vector<float> in(side * side * C), out(side * side * C);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) + 0.5f;
    k::pixel_shuffle({in.data(), out.data(), side, C, 2});
    for (int64_t i = 0; i < side; ++i)
        for (int64_t j = 0; j < side; ++j)
            for (int64_t c = 0; c < C; ++c) {
                const int64_t t = (i / 2) * 2 + j / 2, ch = (i % 2) * 2 * C + (j % 2) * C + c;
                CHECK(out[t * 4 * C + ch] == in[(i * side + j) * C + c]);
            }
}

TEST_CASE("norms and linear against direct formulas") {
    std::mt19937 rng(14);
    const int64_t rows = 3, dim = 12;
    auto x = random_vector(rows * dim, rng), w = random_vector(dim, rng, 0.5f, 1.5f),
         z = random_vector(rows * dim, rng);
    std::vector<float> y(rows * dim);
    k::gated_rmsnorm({x.data(), z.data(), w.data(), y.data(), rows, dim, 4, dim, 1e-5f});
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < 3; ++g) {
            double ss = 0;
            float v[4];
            for (int i = 0; i < 4; ++i) {
                const int64_t idx = r * dim + g * 4 + i;
                v[i] = x[idx] * z[idx] / (1.0f + std::exp(-z[idx]));
                ss += v[i] * v[i];
            }
            const float inv = 1.0f / std::sqrt(static_cast<float>(ss / 4) + 1e-5f);
            for (int i = 0; i < 4; ++i)
                CHECK(y[r * dim + g * 4 + i] == doctest::Approx(w[g * 4 + i] * v[i] * inv).epsilon(1e-5));
        }
    auto W = random_vector(5 * dim, rng), bias = random_vector(5, rng);
    std::vector<float> out(rows * 5);
    k::linear({x.data(), W.data(), bias.data(), out.data(), rows, 5, dim});
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < 5; ++o) {
            double acc = bias[o];
            for (int64_t i = 0; i < dim; ++i) acc += static_cast<double>(x[r * dim + i]) * W[o * dim + i];
            CHECK(out[r * 5 + o] == doctest::Approx(acc).epsilon(1e-5));
        }
}
