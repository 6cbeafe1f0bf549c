// GEMM, norms and activations against the CPU references (kernels/cpu) on random bf16-rounded inputs,
// at the Holotron shapes and small ones. Outputs are NaN-poisoned before every launch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace cpu = surf::kernels::cpu;
namespace cu = surf::kernels::cuda;
using namespace surf::gpu_test;

namespace {

struct Shape {
    int64_t m, n, k;
};

// One GEMM case: random bf16-rounded x [m, k], w [n, k] (±0.05), bias [n] and y0 [m, n]; the CPU references
// ref = x·wᵀ + bias and ref_acc = ref + y0 (fp32 out with beta = 1); the operands and outputs on the device.
struct LinearCase {
    Shape s;
    std::string tag;  // "m x n x k"
    std::vector<float> x, w, bias, y0, ref, ref_acc;
    DeviceBuffer<bf16> dx, dw, dbias_h, dyh;
    DeviceBuffer<float> dbias_f, dyf;

    LinearCase(Shape shape, std::mt19937& rng)
        : s(shape),
          tag(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k)),
          x(random_vec(s.m * s.k, rng)),
          w(random_vec(s.n * s.k, rng, -0.05f, 0.05f)),
          bias(random_vec(s.n, rng)),
          y0(random_vec(s.m * s.n, rng)),
          ref(s.m * s.n),
          dx(to_bf16(x)),
          dw(to_bf16(w)),
          dbias_h(to_bf16(bias)),
          dyh(s.m * s.n),
          dbias_f(bias),
          dyf(s.m * s.n) {
        cpu::linear({x.data(), w.data(), bias.data(), ref.data(), s.m, s.n, s.k});
        ref_acc = ref;
        for (size_t i = 0; i < ref.size(); ++i) ref_acc[i] += y0[i];
    }
};

}  // namespace

TEST_CASE("gemm: bf16 x·Wᵀ (+bias, +beta·y) with fp32 accumulation, bf16 and fp32 outputs") {
    std::mt19937 rng(1);
    cu::GemmContext ctx;
    // (tokens, out, in): Mamba in_proj, MLP down, ViT qkv, odd small shapes.
    for (Shape shape : {Shape{37, 22656, 5120}, Shape{5, 5120, 20480}, Shape{64, 3840, 1280},
                        Shape{3, 24, 40}, Shape{17, 8, 16}}) {
        LinearCase c(shape, rng);
        const Shape s = c.s;
        auto &x = c.x, &bias = c.bias, &y0 = c.y0, &ref = c.ref;
        auto &dx = c.dx, &dw = c.dw, &dbias_h = c.dbias_h, &dyh = c.dyh;
        auto &dbias_f = c.dbias_f, &dyf = c.dyf;
        const std::string& tag = c.tag;
        // bf16 out + bias: rounding of the output dominates (2^-8 relative).
        dyh.poison();
        cu::gemm(ctx, {dx.get(), dw.get(), dbias_h.get(), dyh.get(), cu::DType::kBF16, s.m, s.n, s.k},
                 nullptr);
        compare("gemm bf16 out +bias " + tag, to_float(dyh.download()), ref, 2e-3f, 1e-2f);
        // fp32 out, beta = 1 accumulating into y0 (the residual-add use).
        dyf.upload(y0);
        cu::GemmParams gp{dx.get(), dw.get(), dbias_f.get(), dyf.get(), cu::DType::kF32, s.m, s.n, s.k};
        gp.beta = 1.0f;
        cu::gemm(ctx, gp, nullptr);
        std::vector<float> ref_acc = c.ref_acc;
        compare("gemm fp32 out +bias +y " + tag, dyf.download(), ref_acc, 1e-3f, 1e-3f);
        // No bias, strided x (a slice of a wider row).
        if (s.k % 8 == 0) {
            const int64_t ldx = s.k + 8;
            std::vector<float> xs(s.m * ldx, 0.5f);
            for (int64_t r = 0; r < s.m; ++r)
                for (int64_t c = 0; c < s.k; ++c) xs[r * ldx + c] = x[r * s.k + c];
            DeviceBuffer<bf16> dxs(to_bf16(xs));
            cu::GemmParams sp{dxs.get(), dw.get(), nullptr, dyf.get(), cu::DType::kF32, s.m, s.n, s.k};
            sp.ldx = ldx;
            dyf.poison();
            cu::gemm(ctx, sp, nullptr);
            for (size_t i = 0; i < ref.size(); ++i) ref_acc[i] = ref[i] - bias[i % s.n];
            compare("gemm fp32 strided x no bias " + tag, dyf.download(), ref_acc, 1e-3f, 1e-3f);
        }
    }
}

TEST_CASE(
    "gemm with the GELU epilogue (tanh form) against linear + exact-erf GELU, the ViT MLP's reference") {
    std::mt19937 rng(11);
    cu::GemmContext ctx;
    ctx.set_autotune(true);
    // ViT fc1 (tokens, 5120, 1280) at a small and a 3-tile row count, and an odd small shape.
    for (Shape s : {Shape{64, 5120, 1280}, Shape{3096, 5120, 1280}, Shape{7, 24, 40}}) {
        auto x = random_vec(s.m * s.k, rng), w = random_vec(s.n * s.k, rng, -0.08f, 0.08f),
             bias = random_vec(s.n, rng);
        std::vector<float> ref(s.m * s.n), ref_nb(s.m * s.n);
        cpu::linear({x.data(), w.data(), bias.data(), ref.data(), s.m, s.n, s.k});
        cpu::linear({x.data(), w.data(), nullptr, ref_nb.data(), s.m, s.n, s.k});
        cpu::gelu_erf(ref.data(), s.m * s.n);
        cpu::gelu_erf(ref_nb.data(), s.m * s.n);
        DeviceBuffer<bf16> dx(to_bf16(x)), dw(to_bf16(w)), dbias(to_bf16(bias)), dy(s.m * s.n);
        const std::string tag = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
        // bf16 rounding of the output (2^-8 relative) dominates; the tanh form adds at most 4.8e-4 absolute.
        for (int use = 0; use < 3; ++use) {  // the third use of a large row count runs the tuned algorithm
            cu::GemmParams gp{dx.get(), dw.get(), dbias.get(), dy.get(), cu::DType::kBF16, s.m, s.n, s.k};
            gp.activation = cu::GemmActivation::kGeluTanh;
            dy.poison();
            cu::gemm(ctx, gp, nullptr);
            compare("gemm +bias +GELU " + tag + " use " + std::to_string(use), to_float(dy.download()), ref,
                    2e-3f, 1e-2f);
        }
        cu::GemmParams nb{dx.get(), dw.get(), nullptr, dy.get(), cu::DType::kBF16, s.m, s.n, s.k};
        nb.activation = cu::GemmActivation::kGeluTanh;
        dy.poison();
        cu::gemm(ctx, nb, nullptr);
        compare("gemm +GELU, no bias " + tag, to_float(dy.download()), ref_nb, 2e-3f, 1e-2f);
    }
}

TEST_CASE(
    "small-m kernel (gemv): decode-row GEMMs against the CPU reference, directly and routed by gemm()") {
    std::mt19937 rng(14);
    // Decode shapes of the 12B model (in_proj, out_proj, mlp.down), an odd n, a k of one vector per
    // lane-step.
    for (Shape shape : {Shape{1, 22656, 5120}, Shape{2, 5120, 10240}, Shape{3, 5120, 20480}, Shape{4, 13, 40},
                        Shape{1, 7, 8}}) {
        LinearCase c(shape, rng);
        const Shape s = c.s;
        auto &x = c.x, &bias = c.bias, &y0 = c.y0, &ref = c.ref, &ref_acc = c.ref_acc;
        auto &dx = c.dx, &dw = c.dw, &dbias_h = c.dbias_h, &dyh = c.dyh;
        auto &dbias_f = c.dbias_f, &dyf = c.dyf;
        const std::string& tag = c.tag;
        const cu::GemmParams bf{dx.get(),         dw.get(), dbias_h.get(), dyh.get(),
                                cu::DType::kBF16, s.m,      s.n,           s.k};
        REQUIRE(cu::gemv_supported(bf));
        dyh.poison();
        cu::gemv(bf, nullptr);
        compare(
            "gemv bf16 out +bias " + tag + " (k split " + std::to_string(cu::gemv_k_split(s.n, s.k)) + ")",
            to_float(dyh.download()), ref, 2e-3f, 1e-2f);
        // Every k split by hand (warps sharing a row pair over slices of k; slices past k stay empty).
        for (int ks : {1, 2, 4, 8}) {
            dyh.poison();
            cu::gemv(bf, nullptr, ks);
            compare("gemv bf16 out +bias, k split " + std::to_string(ks) + " " + tag,
                    to_float(dyh.download()), ref, 2e-3f, 1e-2f);
        }
        // fp32 out, beta = 1 into y0 (the residual add), alpha 1.
        cu::GemmParams fp{dx.get(), dw.get(), dbias_f.get(), dyf.get(), cu::DType::kF32, s.m, s.n, s.k};
        fp.beta = 1.0f;
        dyf.upload(y0);
        cu::gemv(fp, nullptr);
        compare("gemv fp32 out +bias +y " + tag, dyf.download(), ref_acc, 1e-3f, 1e-3f);
        // Strided x (a slice of a wider row), no bias, routed through gemm() with the kernel forced.
        const int64_t ldx = s.k + 8;
        std::vector<float> xs(s.m * ldx, 0.5f);
        for (int64_t r = 0; r < s.m; ++r)
            for (int64_t c = 0; c < s.k; ++c) xs[r * ldx + c] = x[r * s.k + c];
        DeviceBuffer<bf16> dxs(to_bf16(xs));
        cu::GemmContext forced;
        forced.set_small_m_kernel(cu::GemmContext::SmallM::kAlways);
        cu::GemmParams sp{dxs.get(), dw.get(), nullptr, dyf.get(), cu::DType::kF32, s.m, s.n, s.k};
        sp.ldx = ldx;
        dyf.poison();
        cu::gemm(forced, sp, nullptr);
        std::vector<float> ref_nb(ref);
        for (size_t i = 0; i < ref.size(); ++i) ref_nb[i] -= bias[i % s.n];
        compare("gemm routed to gemv, strided x " + tag, dyf.download(), ref_nb, 1e-3f, 1e-3f);
    }
    // What it does not take falls back to cuBLASLt even when forced: 5 rows, k not a multiple of 8.
    for (Shape s : {Shape{5, 64, 32}, Shape{1, 64, 12}}) {
        auto x = random_vec(s.m * s.k, rng), w = random_vec(s.n * s.k, rng, -0.05f, 0.05f);
        std::vector<float> ref(s.m * s.n);
        cpu::linear({x.data(), w.data(), nullptr, ref.data(), s.m, s.n, s.k});
        DeviceBuffer<bf16> dx(to_bf16(x)), dw(to_bf16(w)), dy(s.m * s.n);
        const cu::GemmParams gp{dx.get(), dw.get(), nullptr, dy.get(), cu::DType::kBF16, s.m, s.n, s.k};
        CHECK_FALSE(cu::gemv_supported(gp));
        cu::GemmContext forced;
        forced.set_small_m_kernel(cu::GemmContext::SmallM::kAlways);
        dy.poison();
        cu::gemm(forced, gp, nullptr);
        compare("gemm forced small-m, unsupported " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                    std::to_string(s.k),
                to_float(dy.download()), ref, 2e-3f, 1e-2f);
    }
}

TEST_CASE(
    "gemm autotuning times the small-m kernel beside cuBLASLt's candidates and keeps the faster, with the "
    "reference result") {
    std::mt19937 rng(15);
    cu::GemmContext ctx;
    ctx.set_autotune(true);
    const int64_t m = 1, n = 20480, k = 5120;  // mlp.up of one decode row
    auto x = random_vec(m * k, rng), w = random_vec(n * k, rng, -0.05f, 0.05f);
    std::vector<float> ref(m * n);
    cpu::linear({x.data(), w.data(), nullptr, ref.data(), m, n, k});
    DeviceBuffer<bf16> dx(to_bf16(x)), dw(to_bf16(w)), dy(m * n);
    for (int use = 0; use < 2; ++use) {
        dy.poison();
        cu::gemm(ctx, {dx.get(), dw.get(), nullptr, dy.get(), cu::DType::kBF16, m, n, k}, nullptr);
        compare("tuned 1x20480x5120 use " + std::to_string(use), to_float(dy.download()), ref, 2e-3f, 1e-2f);
    }
    REQUIRE(ctx.tune_log().size() == 1);
    const auto& rec = ctx.tune_log()[0];
    CHECK(rec.gemv_timed);
    CHECK(rec.gemv_us > 0.0f);
    CHECK(rec.gemv_chosen == (rec.gemv_us < rec.best_us));
    MESSAGE("1x20480x5120: best cuBLASLt candidate "
            << rec.best_us << " µs, small-m kernel " << rec.gemv_us << " µs ("
            << (rec.gemv_chosen ? "kept" : "not kept") << "); weights "
            << (n * k * 2 / 1e3) / std::min(rec.best_us, rec.gemv_us) << " GB/s");
}

TEST_CASE(
    "gemm autotuning: tuned algorithms give the reference result; large row counts tuned on their 3rd use") {
    std::mt19937 rng(11);
    cu::GemmContext ctx;
    ctx.set_autotune(true);
    // A decode-sized shape (tuned on first use) and two prefill-sized row counts of the same weights
    // (each tuned on its own, on its third use), with bias and bf16 out, then fp32 out with beta = 1.
    for (Shape shape : {Shape{100, 5120, 2048}, Shape{924, 2048, 1024}, Shape{1024, 2048, 1024}}) {
        LinearCase c(shape, rng);
        const Shape s = c.s;
        auto &y0 = c.y0, &ref = c.ref, &ref_acc = c.ref_acc;
        auto &dx = c.dx, &dw = c.dw, &dbias_h = c.dbias_h, &dyh = c.dyh;
        auto &dbias_f = c.dbias_f, &dyf = c.dyf;
        const std::string& tag = c.tag;
        const size_t tuned_before = ctx.tune_log().size();
        for (int use = 1; use <= 4; ++use) {
            dyh.poison();
            cu::gemm(ctx, {dx.get(), dw.get(), dbias_h.get(), dyh.get(), cu::DType::kBF16, s.m, s.n, s.k},
                     nullptr);
            compare("tuned gemm bf16 out +bias " + tag + " use " + std::to_string(use),
                    to_float(dyh.download()), ref, 2e-3f, 1e-2f);
            dyf.upload(y0);
            cu::GemmParams gp{dx.get(), dw.get(), dbias_f.get(), dyf.get(), cu::DType::kF32, s.m, s.n, s.k};
            gp.beta = 1.0f;
            cu::gemm(ctx, gp, nullptr);
            compare("tuned gemm fp32 out +bias +y " + tag + " use " + std::to_string(use), dyf.download(),
                    ref_acc, 1e-3f, 1e-3f);
            // Two shapes (bf16 and fp32 out) per row count: tuned at use 1 up to 128 rows, else at use 3.
            const size_t expected = (s.m <= 128 || use >= 3) ? 2 : 0;
            CHECK(ctx.tune_log().size() - tuned_before == expected);
        }
        for (size_t i = tuned_before; i < ctx.tune_log().size(); ++i) {
            const auto& rec = ctx.tune_log()[i];
            CHECK(rec.m == s.m);
            // Every candidate was timed (batched, one wait): the pick is finite, no slower than the
            // heuristic's.
            CHECK(std::isfinite(rec.best_us));
            CHECK(rec.best_us <= rec.heuristic_us);
            CHECK(rec.tune_ms > 0.0f);
        }
    }
}

TEST_CASE(
    "gemm autotuning with reuse in 64-row buckets: a neighbouring row count takes the tuned algorithm when "
    "it is valid") {
    std::mt19937 rng(12);
    cu::GemmContext ctx;
    ctx.set_autotune(true);
    ctx.set_reuse_tuned_in_bucket(true);
    const int64_t n = 2048, k = 1024;
    auto w = random_vec(n * k, rng, -0.05f, 0.05f);
    DeviceBuffer<bf16> dw(to_bf16(w));
    // Runs m rows three times (the third use of a new row count over 128 tunes it unless it reused a
    // neighbour's pick), checking every result against the CPU reference.
    auto run = [&](int64_t m) {
        auto x = random_vec(m * k, rng);
        std::vector<float> ref(m * n);
        cpu::linear({x.data(), w.data(), nullptr, ref.data(), m, n, k});
        DeviceBuffer<bf16> dx(to_bf16(x)), dy(m * n);
        for (int use = 1; use <= 3; ++use) {
            dy.poison();
            cu::gemm(ctx, {dx.get(), dw.get(), nullptr, dy.get(), cu::DType::kBF16, m, n, k}, nullptr);
            compare("bucket-reuse gemm m " + std::to_string(m) + " use " + std::to_string(use),
                    to_float(dy.download()), ref, 2e-3f, 1e-2f);
        }
    };
    run(1000);  // tuned on its third use: nothing to reuse yet
    REQUIRE(ctx.tune_log().size() == 1);
    CHECK(ctx.reused_count() == 0);
    run(990);  // same bucket (⌈m/64⌉ = 16): reuses 1000's pick when the heuristic lists it for 990, else
               // tunes
    const bool reused = ctx.reused_count() == 1;
    MESSAGE("m = 990 " << std::string(reused ? "reused m = 1000's tuned algorithm"
                                             : "was tuned (1000's pick is not among its candidates)"));
    CHECK(ctx.tune_log().size() == (reused ? 1u : 2u));
    const size_t tuned = ctx.tune_log().size();
    const int64_t reuses = ctx.reused_count();
    run(1030);  // the next bucket: tuned on its own
    CHECK(ctx.tune_log().size() == tuned + 1);
    CHECK(ctx.reused_count() == reuses);
    CHECK(ctx.tune_log().back().m == 1030);
    // Up to 128 rows (tuned on first use): a new row count takes the choice of the nearest shape timed for 1
    // to 7 rows more, when valid.
    run(40);
    CHECK(ctx.tune_log().size() == tuned + 2);
    CHECK(ctx.tune_log().back().m == 40);
    run(36);  // 4 rows fewer than 40: reuses its choice when valid, else tunes
    const bool small_reused = ctx.reused_count() == reuses + 1;
    MESSAGE("m = 36 " << std::string(small_reused ? "reused m = 40's choice"
                                                  : "was tuned (40's pick is not among its candidates)"));
    CHECK(ctx.tune_log().size() == tuned + (small_reused ? 2u : 3u));
    const size_t tuned_small = ctx.tune_log().size();
    run(30);  // 10 fewer than 40, and 36 was not timed itself if it reused: tuned on its own then
    if (small_reused) {
        CHECK(ctx.tune_log().size() == tuned_small + 1);
        CHECK(ctx.tune_log().back().m == 30);
    }
}

namespace {

// relu(round(v))² rounded to bf16: the linear's bf16 output followed by relu_squared
// (GemmActivation::kReluSquared).
std::vector<float> relu_squared_of_bf16(const std::vector<float>& linear) {
    std::vector<float> out(linear.size());
    for (size_t i = 0; i < linear.size(); ++i) {
        const float r = std::max(round_bf16(linear[i]), 0.0f);
        out[i] = round_bf16(r * r);
    }
    return out;
}

bool wgmma_device() {
    int device = 0, major = 0, minor = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
}

}  // namespace

TEST_CASE(
    "gemm_wgmma (our Hopper GEMM) against the CPU reference: both tile widths, row / column / k tails, every "
    "epilogue") {
    if (!wgmma_device()) {
        MESSAGE("not compute capability 9.0: gemm_wgmma is not built to run here");
        return;
    }
    std::mt19937 rng(31);
    // Tails in every dimension (m % 128, n % 256 and % 128, k % 64 ≠ 0), one tile, one row, a ViT projection
    // shape (3 tiles' rows) and a Mamba out_proj-like k.
    for (Shape shape : {Shape{300, 1000, 648}, Shape{128, 256, 64}, Shape{1, 264, 72},
                        Shape{3096, 1280, 1280}, Shape{77, 512, 10240}}) {
        LinearCase c(shape, rng);
        const Shape s = c.s;
        const std::vector<float> relu2_ref = [&] {
            std::vector<float> lin(s.m * s.n);
            cpu::linear({c.x.data(), c.w.data(), nullptr, lin.data(), s.m, s.n, s.k});
            return relu_squared_of_bf16(lin);
        }();
        for (int tile_n : {256, 128}) {
            const std::string tag = c.tag + " tile " + std::to_string(tile_n);
            c.dyh.poison();
            cu::gemm_wgmma(
                {c.dx.get(), c.dw.get(), c.dbias_h.get(), c.dyh.get(), cu::DType::kBF16, s.m, s.n, s.k},
                tile_n, nullptr);
            compare("gemm_wgmma bf16 out +bias " + tag, to_float(c.dyh.download()), c.ref, 2e-3f, 1e-2f);
            c.dyf.upload(c.y0);
            cu::GemmParams acc{c.dx.get(), c.dw.get(), c.dbias_f.get(), c.dyf.get(), cu::DType::kF32, s.m,
                               s.n,        s.k};
            acc.beta = 1.0f;
            cu::gemm_wgmma(acc, tile_n, nullptr);
            compare("gemm_wgmma fp32 out +bias +y " + tag, c.dyf.download(), c.ref_acc, 1e-3f, 1e-3f);
            // ReLU²: a pre-activation one bf16 ulp apart (accumulation order) moves r² by ≈ 2 ulp; then the
            // output's.
            cu::GemmParams relu{c.dx.get(),       c.dw.get(), nullptr, c.dyh.get(),
                                cu::DType::kBF16, s.m,        s.n,     s.k};
            relu.activation = cu::GemmActivation::kReluSquared;
            c.dyh.poison();
            cu::gemm_wgmma(relu, tile_n, nullptr);
            compare("gemm_wgmma ReLU² " + tag, to_float(c.dyh.download()), relu2_ref, 2e-3f, 2e-2f);
        }
        // GELU (tanh form) with bias against exact-erf GELU, and a strided x (a slice of wider rows), alpha =
        // 0.5.
        std::vector<float> gelu_ref = c.ref;
        cpu::gelu_erf(gelu_ref.data(), s.m * s.n);
        cu::GemmParams gelu{c.dx.get(), c.dw.get(), c.dbias_h.get(), c.dyh.get(), cu::DType::kBF16, s.m,
                            s.n,        s.k};
        gelu.activation = cu::GemmActivation::kGeluTanh;
        c.dyh.poison();
        cu::gemm_wgmma(gelu, 256, nullptr);
        compare("gemm_wgmma +bias +GELU " + c.tag, to_float(c.dyh.download()), gelu_ref, 2e-3f, 1e-2f);
        const int64_t ldx = s.k + 24;
        std::vector<float> xs(s.m * ldx, 0.25f);
        for (int64_t r = 0; r < s.m; ++r)
            for (int64_t k = 0; k < s.k; ++k) xs[r * ldx + k] = c.x[r * s.k + k];
        DeviceBuffer<bf16> dxs(to_bf16(xs));
        cu::GemmParams strided{dxs.get(), c.dw.get(), nullptr, c.dyf.get(), cu::DType::kF32, s.m, s.n, s.k};
        strided.ldx = ldx, strided.alpha = 0.5f;
        c.dyf.poison();
        cu::gemm_wgmma(strided, 128, nullptr);
        std::vector<float> half_ref(c.ref.size());
        for (size_t i = 0; i < half_ref.size(); ++i) half_ref[i] = 0.5f * (c.ref[i] - c.bias[i % s.n]);
        compare("gemm_wgmma fp32 strided x alpha 0.5 " + c.tag, c.dyf.download(), half_ref, 1e-3f, 1e-3f);
        // A capped persistent grid (max_blocks: the other SMs left to another stream's kernel): 2 and 5
        // blocks (5 rounds down to 4 in clusters of two), so each block walks many tiles; same result as the
        // full grid.
        for (int max_blocks : {2, 5}) {
            c.dyh.poison();
            cu::gemm_wgmma(
                {c.dx.get(), c.dw.get(), c.dbias_h.get(), c.dyh.get(), cu::DType::kBF16, s.m, s.n, s.k}, 256,
                nullptr, true, max_blocks);
            compare("gemm_wgmma bf16 out +bias, " + std::to_string(max_blocks) + " blocks " + c.tag,
                    to_float(c.dyh.download()), c.ref, 2e-3f, 1e-2f);
        }
    }
    // What it does not take: k not a multiple of 8 (TMA rows of 16 bytes), an odd n.
    DeviceBuffer<bf16> buf(64);
    CHECK_FALSE(
        cu::gemm_wgmma_supported({buf.get(), buf.get(), nullptr, buf.get(), cu::DType::kBF16, 2, 4, 12}));
    CHECK_FALSE(
        cu::gemm_wgmma_supported({buf.get(), buf.get(), nullptr, buf.get(), cu::DType::kBF16, 2, 3, 16}));
    CHECK(cu::gemm_wgmma_supported({buf.get(), buf.get(), nullptr, buf.get(), cu::DType::kBF16, 2, 4, 16}));
}

TEST_CASE(
    "gemm() with ReLU²: cuBLASLt + relu_squared, gemm_wgmma always or for large ReLU² GEMMs only, and tuning "
    "that times both keep the reference result") {
    std::mt19937 rng(32);
    // The MLP up projection at a mixed step's 1,024 rows (cut to n 4096 to keep the CPU reference short), a
    // decode row (small-m kernel territory), an odd k that only cuBLASLt takes.
    for (Shape shape : {Shape{1024, 4096, 5120}, Shape{1, 2048, 5120}, Shape{33, 512, 20}}) {
        auto x = random_vec(shape.m * shape.k, rng), w = random_vec(shape.n * shape.k, rng, -0.05f, 0.05f);
        std::vector<float> lin(shape.m * shape.n);
        cpu::linear({x.data(), w.data(), nullptr, lin.data(), shape.m, shape.n, shape.k});
        const std::vector<float> ref = relu_squared_of_bf16(lin);
        DeviceBuffer<bf16> dx(to_bf16(x)), dw(to_bf16(w)), dy(shape.m * shape.n);
        const std::string tag =
            std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
        cu::GemmParams p{dx.get(), dw.get(), nullptr, dy.get(), cu::DType::kBF16, shape.m, shape.n, shape.k};
        p.activation = cu::GemmActivation::kReluSquared;
        for (auto mode : {cu::GemmContext::WgmmaGemm::kNever, cu::GemmContext::WgmmaGemm::kAlways,
                          cu::GemmContext::WgmmaGemm::kTuned, cu::GemmContext::WgmmaGemm::kReluSquared}) {
            cu::GemmContext ctx;
            ctx.set_autotune(mode == cu::GemmContext::WgmmaGemm::kTuned ||
                             mode == cu::GemmContext::WgmmaGemm::kReluSquared);
            ctx.set_wgmma_gemm(mode);
            const char* name = mode == cu::GemmContext::WgmmaGemm::kNever    ? "never"
                               : mode == cu::GemmContext::WgmmaGemm::kAlways ? "always"
                               : mode == cu::GemmContext::WgmmaGemm::kTuned  ? "tuned"
                                                                             : "relu2";
            for (int use = 0; use < 3; ++use) {  // a large row count is tuned on its third use
                dy.poison();
                cu::gemm(ctx, p, nullptr);
                compare(std::string("gemm ReLU² wgmma ") + name + " " + tag + " use " + std::to_string(use),
                        to_float(dy.download()), ref, 2e-3f, 2e-2f);
            }
            const bool timed_wgmma = wgmma_device() && shape.k % 8 == 0;
            // kReluSquared: the 1,024-row shape runs gemm_wgmma untimed (no tuning record), the others
            // cuBLASLt tuned as ever.
            if (mode == cu::GemmContext::WgmmaGemm::kReluSquared && timed_wgmma &&
                shape.m >= cu::GemmContext::kWgmmaReluSquaredMinRows) {
                CHECK(ctx.tune_log().empty());
            }
            if (mode == cu::GemmContext::WgmmaGemm::kTuned && (timed_wgmma || !ctx.tune_log().empty())) {
                REQUIRE(ctx.tune_log().size() ==
                        1);  // (a shape with one cuBLASLt candidate and nothing else to time keeps no record)
                const auto& rec = ctx.tune_log()[0];
                CHECK(rec.wgmma_timed == timed_wgmma);
                if (rec.wgmma_timed) {
                    CHECK(rec.wgmma_us > 0.0f);
                    CHECK((rec.wgmma_tile_n == 256 || rec.wgmma_tile_n == 128));
                    MESSAGE(tag << " ReLU²: best cuBLASLt candidate + relu pass " << rec.best_us
                                << " µs, gemm_wgmma " << rec.wgmma_us << " µs (tile " << rec.wgmma_tile_n
                                << ")"
                                << (rec.gemv_timed ? ", small-m kernel + relu pass " +
                                                         std::to_string(rec.gemv_us) + " µs"
                                                   : "")
                                << (rec.wgmma_chosen ? ": gemm_wgmma chosen" : ""));
                }
            }
        }
    }
}

TEST_CASE("rmsnorm / layernorm with fused residual add; gated grouped rmsnorm") {
    std::mt19937 rng(2);
    // Row lengths (every buffer 16-byte aligned): the language model's 5120, the ViT's 1280, 2048 and 64 take
    // the vector path (one block a row, the row in registers), 40 (not a multiple of 8) the generic kernel;
    // bf16 and fp32 x, with and without the residual, LayerNorm with and without bias. Tolerances: y bf16
    // 1e-2 / 8e-3 (bf16 output rounding); the residual after the fused add 1e-5 / 1e-6 (fp32 add).
    const int64_t rows = 37;
    for (int64_t dim : {5120, 2048, 1280, 64, 40}) {
        auto x = random_vec(rows * dim, rng, -2.0f, 2.0f),
             res = random_vec(rows * dim, rng, -3.0f, 3.0f, false);
        auto w = random_vec(dim, rng, 0.5f, 1.5f, false), b = random_vec(dim, rng, -0.5f, 0.5f, false);
        std::vector<float> sum(rows * dim);  // res + x: the CPU layernorm has no residual input
        for (size_t i = 0; i < sum.size(); ++i) sum[i] = res[i] + x[i];
        DeviceBuffer<bf16> dx(to_bf16(x)), dy(rows * dim);
        DeviceBuffer<float> dxf(x), dres(res), dw(w), db(b);
        std::vector<float> ref_res, ref_y(rows * dim);
        for (auto dt : {cu::DType::kBF16, cu::DType::kF32}) {
            const void* dxp = dt == cu::DType::kF32 ? static_cast<const void*>(dxf.get()) : dx.get();
            for (bool with_res : {true, false}) {
                const std::string tag = std::string(dt == cu::DType::kF32 ? " fp32 x" : " bf16 x") +
                                        (with_res ? " +residual" : "") + " dim " + std::to_string(dim);
                float* dresp = with_res ? dres.get() : nullptr;
                ref_res = res;
                float* ref_resp = with_res ? ref_res.data() : nullptr;
                cpu::rmsnorm({x.data(), ref_resp, w.data(), ref_y.data(), rows, dim, 1e-5f});
                dres.upload(res);
                dy.poison();
                cu::rmsnorm({dxp, dt, dresp, dw.get(), dy.get(), rows, dim, 0, 1e-5f}, nullptr);
                compare("rmsnorm" + tag, to_float(dy.download()), ref_y, 1e-2f, 8e-3f);
                if (with_res) compare("rmsnorm residual" + tag, dres.download(), ref_res, 1e-5f, 1e-6f);
                // LayerNorm with and without bias (the ViT's: fp32 x, no residual, bias).
                for (bool with_bias : {true, false}) {
                    const std::string ltag = tag + (with_bias ? " +bias" : " no bias");
                    const float* bp = with_bias ? b.data() : nullptr;
                    const float* src = with_res ? sum.data() : x.data();
                    cpu::layernorm({src, w.data(), bp, ref_y.data(), rows, dim, 1e-6f});
                    dres.upload(res);
                    dy.poison();
                    const float* dbp = with_bias ? db.get() : nullptr;
                    cu::layernorm({dxp, dt, dresp, dw.get(), dbp, dy.get(), rows, dim, 0, 1e-6f}, nullptr);
                    compare("layernorm" + ltag, to_float(dy.download()), ref_y, 1e-2f, 8e-3f);
                    if (with_res) compare("layernorm residual" + ltag, dres.download(), sum, 1e-5f, 1e-6f);
                }
            }
        }
    }
    // Gated norm: Holotron (10240 wide, 8 groups of 1280; z a slice of in_proj rows of 22656), 3 groups of
    // 2048, small_bf16's 72-wide groups, 4096-wide groups (vector path) and 20-wide ones (generic).
    struct G {
        int64_t dim, group, z_stride;
    };
    const G gated_cases[] = {
        {10240, 1280, 22656}, {6144, 2048, 6152}, {288, 72, 600}, {8192, 4096, 8192}, {60, 20, 64}};
    for (G g : gated_cases) {
        auto y = random_vec(rows * g.dim, rng, -2.0f, 2.0f),
             z = random_vec(rows * g.z_stride, rng, -3.0f, 3.0f);
        auto w = random_vec(g.dim, rng, 0.5f, 1.5f, false);
        std::vector<float> ref(rows * g.dim);
        cpu::gated_rmsnorm(
            {y.data(), z.data(), w.data(), ref.data(), rows, g.dim, g.group, g.z_stride, 1e-5f});
        DeviceBuffer<float> dyf(y), dw(w);
        DeviceBuffer<bf16> dyh(to_bf16(y)), dz(to_bf16(z)), dout(rows * g.dim);
        for (auto dt : {cu::DType::kF32, cu::DType::kBF16}) {
            dout.poison();
            cu::GatedRmsNormParams p;
            p.y = dt == cu::DType::kF32 ? static_cast<const void*>(dyf.get()) : dyh.get();
            p.y_dtype = dt;
            p.z = dz.get();
            p.weight = dw.get();
            p.out = dout.get();
            p.rows = rows;
            p.dim = g.dim;
            p.group_size = g.group;
            p.z_stride = g.z_stride;
            cu::gated_rmsnorm(p, nullptr);
            const std::string tag = "dim " + std::to_string(g.dim) + " group " + std::to_string(g.group);
            compare("gated_rmsnorm " + tag + (dt == cu::DType::kF32 ? " y fp32" : " y bf16"),
                    to_float(dout.download()), ref, 1e-2f, 8e-3f);
        }
    }
}

TEST_CASE("relu² and exact GELU in place on bf16 (vector body and scalar tail)") {
    std::mt19937 rng(3);
    for (int64_t n : {int64_t{5120} * 37, int64_t{13}}) {
        auto x = random_vec(n, rng, -4.0f, 4.0f);
        DeviceBuffer<bf16> d(to_bf16(x));
        std::vector<float> ref(x);
        cpu::relu_squared(ref.data(), n);
        cu::relu_squared(d.get(), n, nullptr);
        compare("relu_squared n=" + std::to_string(n), to_float(d.download()), ref, 1e-6f, 8e-3f);
        d.upload(to_bf16(x));
        ref = x;
        cpu::gelu_erf(ref.data(), n);
        cu::gelu_erf(d.get(), n, nullptr);
        compare("gelu_erf n=" + std::to_string(n), to_float(d.download()), ref, 1e-5f, 8e-3f);
    }
}
