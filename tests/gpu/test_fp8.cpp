// FP8 E4M3 kernels against kernels/cpu/fp8 on random inputs: quantize_e4m3's codes and scales bit for bit
// (per row from bf16 and fp32, static scale with saturation, all-zero rows, subnormal codes), and fp8_gemm
// against fp8_linear_reference on the same quantized operands (both cuBLASLt paths: scale vectors in the
// GEMM, and unit scales + epilogue kernel with fp32 or bf16 products), for m = 1, 3, 64, 300 with fp32 / bf16
// outputs, beta = 1 into a residual, ReLU², bias, GELU and a row stride past n; fast accumulation and
// CUTLASS's kernels up to the language model's k; and the producers' FP8 outputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/fp8.h"
#include "kernels/cuda/fp8_cutlass.h"
#include "tests/gpu/gpu_test_util.h"

namespace cpu = surf::kernels::cpu;
namespace cu = surf::kernels::cuda;
using namespace surf::gpu_test;

namespace {

// Rows of bf16 values with a spread of magnitudes: most rows random, row 0 all zeros (scale 1), row 1 one
// large value among tiny ones (subnormal codes after scaling).
std::vector<float> test_rows(int64_t rows, int64_t cols, std::mt19937& rng) {
    std::vector<float> x = random_vec(static_cast<size_t>(rows * cols), rng, -3.0f, 3.0f);
    if (rows > 1) std::fill(x.begin(), x.begin() + cols, 0.0f);
    if (rows > 2) {
        for (int64_t i = 0; i < cols; ++i) x[cols + i] = round_bf16(x[cols + i] * 1e-4f);
        x[cols] = 40.0f;
    }
    return x;
}

struct Quantized {
    std::vector<uint8_t> codes;
    std::vector<float> scale;
};

Quantized gpu_quantize(const std::vector<float>& x, int64_t rows, int64_t cols, bool bf16_input,
                       float static_scale) {
    DeviceBuffer<uint8_t> q(static_cast<size_t>(rows * cols));
    DeviceBuffer<float> s(static_cast<size_t>(rows));
    cu::Fp8QuantParams p;
    DeviceBuffer<bf16> xb(bf16_input ? to_bf16(x) : std::vector<bf16>{});
    DeviceBuffer<float> xf(bf16_input ? std::vector<float>{} : x);
    p.x = bf16_input ? static_cast<const void*>(xb.get()) : static_cast<const void*>(xf.get());
    p.x_dtype = bf16_input ? cu::DType::kBF16 : cu::DType::kF32;
    p.q = q.get(), p.scale = s.get(), p.static_scale = static_scale, p.rows = rows, p.cols = cols;
    cu::quantize_e4m3(p, nullptr);
    return {q.download(), s.download()};
}

// The CPU's codes and scales: quantize_rows_e4m3's scales, f32_to_e4m3 of x / scale.
Quantized cpu_quantize(const std::vector<float>& x, int64_t rows, int64_t cols, float static_scale) {
    Quantized out;
    out.scale.assign(static_cast<size_t>(rows), static_scale);
    if (static_scale <= 0.0f) {
        std::vector<float> values(x.size());
        cpu::quantize_rows_e4m3({x.data(), values.data(), out.scale.data(), rows, cols});
    }
    out.codes.resize(x.size());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < cols; ++i)
            out.codes[r * cols + i] = cpu::f32_to_e4m3(x[r * cols + i] / out.scale[r]);
    return out;
}

void check_same(const std::string& what, const Quantized& got, const Quantized& want) {
    size_t bad_codes = 0, bad_scales = 0, first = SIZE_MAX;
    for (size_t i = 0; i < want.codes.size(); ++i) {
        if (got.codes[i] != want.codes[i]) {
            ++bad_codes;
            if (first == SIZE_MAX) first = i;
        }
    }
    for (size_t r = 0; r < want.scale.size(); ++r) bad_scales += got.scale[r] != want.scale[r];
    INFO(what, ": ", bad_codes, " codes differ (first at ", first, "), ", bad_scales, " scales differ");
    CHECK(bad_codes == 0);
    CHECK(bad_scales == 0);
}

}  // namespace

TEST_CASE("quantize_e4m3: codes and scales bit for bit as kernels/cpu/fp8") {
    std::mt19937 rng(81);
    // bf16 rows of a multiple of 8 take the vectorized kernels (a warp a row up to 2,048 columns, a block a
    // row up to 24,576); 1,036 and 24,584 columns (and fp32 input) the general one.
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 64},
                              {3, 1040},
                              {77, 1280},
                              {9, 2048},
                              {5, 2056},
                              {64, 4096},
                              {300, 200},
                              {3, 20480},
                              {3, 24576},
                              {3, 24584},
                              {4, 1036}}) {
        const std::vector<float> x = test_rows(rows, cols, rng);
        const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
        check_same("per row, bf16 " + shape, gpu_quantize(x, rows, cols, true, 0.0f),
                   cpu_quantize(x, rows, cols, 0.0f));
        check_same("per row, fp32 " + shape, gpu_quantize(x, rows, cols, false, 0.0f),
                   cpu_quantize(x, rows, cols, 0.0f));
        // A static scale that saturates the larger values (|x| / 0.005 > 448 for |x| > 2.24).
        check_same("static scale " + shape, gpu_quantize(x, rows, cols, true, 0.005f),
                   cpu_quantize(x, rows, cols, 0.005f));
    }
    // Every fp32 value halfway between two E4M3 values (ties to even) and just beside them, scale 1.
    std::vector<float> ties;
    for (int code = 0; code < 0x7e; ++code) {
        const float a = cpu::e4m3_to_f32(static_cast<uint8_t>(code)),
                    b = cpu::e4m3_to_f32(static_cast<uint8_t>(code + 1)), mid = 0.5f * (a + b);
        for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
            ties.push_back(v);
            ties.push_back(-v);
        }
    }
    const int64_t n = static_cast<int64_t>(ties.size());
    check_same("ties, static scale 1", gpu_quantize(ties, 1, n, false, 1.0f), cpu_quantize(ties, 1, n, 1.0f));
}

namespace {

struct GemmCase {
    int64_t m, n, k;
    cu::DType y_dtype;
    bool residual, relu2;
    int64_t ldy;        // 0 → n
    bool bias = false;  // a bias [n] in y's dtype
    bool gelu = false;  // GELU (tanh form) after the bias
};

double gelu_tanh(double v) {
    return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

// y on the GPU (quantize x per token, fp8_gemm) against fp8_linear_reference on the same bf16 x and the same
// E4M3 weights. Tolerance: Hopper's FP8 tensor cores accumulate a k-slice at reduced precision before
// cuBLASLt adds it into fp32, and the order differs from the loop's, so the accumulated sum may differ by a
// few units of 2^-14 of Σ|xq·wq| (bound 2^-12 of it, times the scales); a bf16 output adds up to one bf16 ulp
// (2^-8 relative: the two sums may round to either side of a boundary), ReLU² doubles relative errors and
// GELU (slope ≤ 1.13) carries them through with its own float rounding.
// bf16_products: the product is rounded to bf16 before the scales (2^-9 relative; 2^-8 allowed, as above).
// acc_rel replaces the accumulation bound 2^-12 (fast accumulation's); worst_acc, where given, receives the
// largest |error| / (Σ|xq·wq| · scales) over the outputs.
void run_gemm_case(cu::Fp8GemmContext& ctx, const GemmCase& c, std::mt19937& rng, bool bf16_products = false,
                   double acc_rel = 0x1p-12, double* worst_acc = nullptr) {
    const std::vector<float> x = random_vec(static_cast<size_t>(c.m * c.k), rng, -2.0f, 2.0f);
    const std::vector<float> w = random_vec(static_cast<size_t>(c.n * c.k), rng, -0.1f, 0.1f);
    const Quantized wq = gpu_quantize(w, c.n, c.k, true, 0.0f);
    check_same("weights", wq, cpu_quantize(w, c.n, c.k, 0.0f));
    std::vector<float> w_values(wq.codes.size());
    for (size_t i = 0; i < w_values.size(); ++i) w_values[i] = cpu::e4m3_to_f32(wq.codes[i]);
    std::vector<float> ref(static_cast<size_t>(c.m * c.n));
    cpu::fp8_linear_reference({x.data(), w_values.data(), wq.scale.data(), 0.0f, ref.data(), c.m, c.n, c.k});
    // Σ|xq·wq|·sx·sw per output: the accumulation error's scale.
    const Quantized xq = cpu_quantize(x, c.m, c.k, 0.0f);
    std::vector<double> magnitude(ref.size());
    for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
            double s = 0;
            for (int64_t t = 0; t < c.k; ++t)
                s += std::fabs(cpu::e4m3_to_f32(xq.codes[i * c.k + t]) * w_values[j * c.k + t]);
            magnitude[i * c.n + j] = s * xq.scale[i] * wq.scale[j];
        }
    const int64_t ldy = c.ldy ? c.ldy : c.n;
    const std::vector<float> residual = random_vec(static_cast<size_t>(c.m * ldy), rng, -4.0f, 4.0f);
    std::vector<float> bias =
        c.bias ? random_vec(static_cast<size_t>(c.n), rng, -1.0f, 1.0f) : std::vector<float>{};
    if (c.y_dtype == cu::DType::kBF16)
        for (float& b : bias) b = round_bf16(b);
    DeviceBuffer<uint8_t> dxq(static_cast<size_t>(c.m * c.k)), dwq(wq.codes);
    DeviceBuffer<float> dsx(static_cast<size_t>(c.m)), dsw(wq.scale);
    DeviceBuffer<bf16> dx(to_bf16(x));
    cu::Fp8QuantParams qp;
    qp.x = dx.get(), qp.q = dxq.get(), qp.scale = dsx.get(), qp.rows = c.m, qp.cols = c.k;
    cu::quantize_e4m3(qp, nullptr);
    const bool f32 = c.y_dtype == cu::DType::kF32;
    DeviceBuffer<float> yf(f32 ? residual : std::vector<float>{});
    DeviceBuffer<bf16> yb(f32 ? std::vector<bf16>{} : to_bf16(residual));
    DeviceBuffer<float> bias_f(f32 ? bias : std::vector<float>{});
    DeviceBuffer<bf16> bias_b(f32 ? std::vector<bf16>{} : to_bf16(bias));
    cu::Fp8GemmParams p;
    p.x = dxq.get(), p.x_scale = dsx.get(), p.w = dwq.get(), p.w_scale = dsw.get();
    p.y = f32 ? static_cast<void*>(yf.get()) : static_cast<void*>(yb.get());
    p.y_dtype = c.y_dtype, p.m = c.m, p.n = c.n, p.k = c.k, p.ldy = c.ldy, p.beta = c.residual ? 1.0f : 0.0f;
    p.activation = c.relu2  ? cu::GemmActivation::kReluSquared
                   : c.gelu ? cu::GemmActivation::kGeluTanh
                            : cu::GemmActivation::kNone;
    if (c.bias)
        p.bias = f32 ? static_cast<const void*>(bias_f.get()) : static_cast<const void*>(bias_b.get());
    for (int rep = 0; rep < 2; ++rep) {  // the second run takes the tuned plan (the first may tune)
        if (f32) yf.upload(residual);
        cu::fp8_gemm(ctx, p, nullptr);
    }
    const std::vector<float> got = f32 ? yf.download() : to_float(yb.download());
    size_t bad = 0, first = SIZE_MAX;
    double max_err = 0;
    for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < ldy; ++j) {
            const size_t o = static_cast<size_t>(i * ldy + j);
            double want, tol;
            if (j >= c.n) {
                want = f32 ? residual[o] : round_bf16(residual[o]), tol = 0;  // untouched
            } else {
                const double v =
                    ref[i * c.n + j] + (c.bias ? bias[j] : 0.0f) + (c.residual ? residual[o] : 0.0f);
                if (worst_acc && magnitude[i * c.n + j] > 0)
                    *worst_acc = std::max(*worst_acc, std::fabs(got[o] - v) / magnitude[i * c.n + j]);
                const double acc_tol = acc_rel * magnitude[i * c.n + j] + 1e-6 * std::fabs(v) +
                                       (bf16_products ? std::ldexp(std::fabs(ref[i * c.n + j]), -8) : 0.0);
                want = v, tol = acc_tol + (f32 ? 0.0 : std::ldexp(std::fabs(v), -8));
                if (c.relu2) {
                    const double r = std::max(0.0, static_cast<double>(round_bf16(static_cast<float>(v))));
                    want = r * r;
                    tol = 2.0 * (std::fabs(v) + tol) * tol + std::ldexp(want, -7) + 1e-30;
                }
                if (c.gelu) {
                    want = gelu_tanh(v);
                    tol = 1.13 * acc_tol + std::ldexp(std::fabs(want), -8) + 1e-6;
                }
            }
            const double err = std::fabs(got[o] - want);
            max_err = std::max(max_err, err);
            if (!(err <= tol)) {
                ++bad;
                if (first == SIZE_MAX) first = o;
            }
        }
    INFO("fp8_gemm m ", c.m, " n ", c.n, " k ", c.k, (f32 ? " fp32" : " bf16"),
         (c.residual ? " +residual" : ""), (c.relu2 ? " relu2" : ""), (c.bias ? " +bias" : ""),
         (c.gelu ? " gelu" : ""), " ldy ", ldy, ": ", bad, " outside tolerance (first ", first,
         "), max abs err ", max_err);
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("fp8_gemm against fp8_linear_reference, both scale paths, fp32 and bf16 products") {
    for (int mode = 0; mode < 3; ++mode) {
        const bool force_epilogue = mode > 0, bf16_products = mode == 2;
        cu::Fp8GemmContext ctx;
        ctx.set_autotune(true);
        ctx.set_force_epilogue(force_epilogue);
        ctx.set_bf16_products(bf16_products);
        ctx.set_small_m_kernel(false);  // cuBLASLt at every m here; fp8_gemv has its own case below
        std::mt19937 rng(82 + mode);
        for (int64_t m : {1, 3, 64, 300}) {
            run_gemm_case(ctx, {m, 256, 512, cu::DType::kF32, false, false, 0}, rng, bf16_products);
            run_gemm_case(ctx, {m, 200, 1024, cu::DType::kF32, true, false, 0}, rng, bf16_products);
            run_gemm_case(ctx, {m, 384, 256, cu::DType::kBF16, false, false, 0}, rng, bf16_products);
            run_gemm_case(ctx, {m, 512, 768, cu::DType::kBF16, false, true, 0}, rng, bf16_products);
            run_gemm_case(ctx, {m, 128, 512, cu::DType::kBF16, false, false, 192}, rng, bf16_products);
            // n = 196: a bf16 D's 392-byte columns have no algorithm, so these take fp32 products
            run_gemm_case(ctx, {m, 196, 256, cu::DType::kF32, true, false, 0}, rng, bf16_products);
            // bias and GELU (the vision tower's epilogues): the epilogue path in every mode
            run_gemm_case(ctx, {m, 384, 256, cu::DType::kBF16, false, false, 0, true}, rng, bf16_products);
            run_gemm_case(ctx, {m, 512, 320, cu::DType::kBF16, false, false, 0, true, true}, rng,
                          bf16_products);
            run_gemm_case(ctx, {m, 256, 512, cu::DType::kF32, true, false, 0, true}, rng, bf16_products);
        }
        MESSAGE(std::string(mode == 0   ? "scale vectors: "
                            : mode == 1 ? "forced epilogue: "
                                        : "bf16 products: ")
                << ctx.planned() << " shapes, " << ctx.epilogue_planned() << " on the epilogue path");
        if (force_epilogue) CHECK(ctx.epilogue_planned() == ctx.planned());
        CHECK(ctx.epilogue_planned() >= 12);  // the bias and GELU shapes at each m
    }
}

// Fast accumulation (Fp8GemmContext::set_fast_accum): the tensor cores keep about 14 bits of the running sum
// in each addition (DeepSeek-V3 §3.3.2 measured this on Hopper), so an error of up to 2^-14 of the sum's
// magnitude may enter at each of the k / 32 MMA steps: bound (k / 32) · 2^-14 of Σ|xq·wq|. Measured beside
// the promoted path at k = 1,024 and at the language model's k (5,120 to 20,480).
TEST_CASE("fp8_gemm with fast accumulation against fp8_linear_reference, up to k = 20,480") {
    for (const bool fast : {false, true}) {
        cu::Fp8GemmContext ctx;
        ctx.set_autotune(true);
        ctx.set_small_m_kernel(false);
        ctx.set_fast_accum(fast);
        std::mt19937 rng(97);
        for (int64_t k : {1024, 5120, 20480}) {
            double worst = 0;
            const double bound = fast ? static_cast<double>(k) / 32 * 0x1p-14 : 0x1p-12;
            run_gemm_case(ctx, {200, 256, k, cu::DType::kF32, true, false, 0}, rng, false, bound, &worst);
            run_gemm_case(ctx, {200, 256, k, cu::DType::kBF16, false, false, 0}, rng, false, bound);
            MESSAGE(std::string(fast ? "fast" : "promoted")
                    << " accumulation, k " << k << ": largest error " << worst << " of Σ|xq·wq| (bound "
                    << bound << ")");
        }
    }
}

// CUTLASS's kernels accumulate as fast accumulation does: the bound of the case above, (k / 32) · 2^-14 of
// Σ|xq·wq| (at least the promoted path's 2^-12).
TEST_CASE(
    "fp8_gemm on each CUTLASS config (scales, bias, GELU in its epilogue) against fp8_linear_reference") {
    REQUIRE(cu::Fp8GemmContext::cutlass_available());  // GPU builds carry .deps/cutlass
    auto run_case = [](cu::Fp8GemmContext& ctx, const GemmCase& c, std::mt19937& rng) {
        run_gemm_case(ctx, c, rng, false, std::max(0x1p-12, static_cast<double>(c.k) / 32 * 0x1p-14));
    };
    for (int config = 0; config < cu::fp8_cutlass::kConfigs; ++config) {
        cu::Fp8GemmContext ctx;
        ctx.set_autotune(true);
        ctx.set_small_m_kernel(false);
        ctx.set_fast_accum(true);
        ctx.set_cutlass(cu::Fp8GemmContext::Cutlass::kAlways, config);  // every shape it takes
        std::mt19937 rng(90 + config);
        for (int64_t m : {1, 3, 64, 130, 300, 1100}) {
            run_case(ctx, {m, 200, 1024, cu::DType::kF32, true, false, 0}, rng);  // residual, n % 8 ≠ 0
            run_case(ctx, {m, 384, 256, cu::DType::kBF16, false, false, 0}, rng);
            run_case(ctx, {m, 520, 272, cu::DType::kBF16, false, false, 0}, rng);    // k % 128 ≠ 0
            run_case(ctx, {m, 128, 512, cu::DType::kBF16, false, false, 192}, rng);  // y's columns of 192
            run_case(ctx, {m, 196, 256, cu::DType::kF32, true, false, 200}, rng);
            run_case(ctx, {m, 384, 256, cu::DType::kBF16, false, false, 0, true}, rng);        // + bias
            run_case(ctx, {m, 512, 320, cu::DType::kBF16, false, false, 0, true, true}, rng);  // + bias, GELU
            run_case(ctx, {m, 256, 640, cu::DType::kBF16, false, false, 0, false, true}, rng);  // GELU
            run_case(ctx, {m, 256, 512, cu::DType::kF32, true, false, 0, true}, rng);  // residual + bias
            // not CUTLASS's (fp32 without residual, ReLU², a bias with n % 8 ≠ 0): cuBLASLt plans
            run_case(ctx, {m, 256, 512, cu::DType::kF32, false, false, 0}, rng);
            run_case(ctx, {m, 512, 768, cu::DType::kBF16, false, true, 0}, rng);
            run_case(ctx, {m, 196, 256, cu::DType::kBF16, false, false, 0, true}, rng);
        }
        MESSAGE(std::string(cu::fp8_cutlass::config_name(config))
                << ": " << ctx.planned() << " cuBLASLt plans");
        CHECK(ctx.planned() == 18);  // only the three shapes CUTLASS does not take, at each m
    }
    // Tuned: each shape CUTLASS takes runs on whichever way (cuBLASLt + epilogue pass, or a config) is
    // fastest.
    cu::Fp8GemmContext ctx;
    ctx.set_autotune(true);
    ctx.set_small_m_kernel(false);
    ctx.set_fast_accum(true);
    std::mt19937 rng(95);
    for (int64_t m : {64, 1100}) {
        run_case(ctx, {m, 1024, 2048, cu::DType::kBF16, false, false, 0}, rng);
        run_case(ctx, {m, 1024, 2048, cu::DType::kF32, true, false, 0}, rng);
        run_case(ctx, {m, 1024, 1280, cu::DType::kBF16, false, false, 0, true, true}, rng);
    }
    MESSAGE("tuned: " << ctx.cutlass_planned() << " of " << ctx.planned() << " shapes on CUTLASS");
}

TEST_CASE("fp8_gemv (decode rows, m ≤ 4) against fp8_linear_reference, k split or not") {
    cu::Fp8GemmContext ctx;  // the small-m kernel is on by default: every case below runs on it
    std::mt19937 rng(84);
    for (int64_t m : {1, 2, 3, 4}) {
        run_gemm_case(ctx, {m, 256, 512, cu::DType::kF32, false, false, 0}, rng);
        run_gemm_case(ctx, {m, 200, 1024, cu::DType::kF32, true, false, 0}, rng);
        run_gemm_case(ctx, {m, 384, 256, cu::DType::kBF16, false, false, 0}, rng);
        run_gemm_case(ctx, {m, 512, 768, cu::DType::kBF16, false, true, 0}, rng);
        run_gemm_case(ctx, {m, 128, 512, cu::DType::kBF16, false, false, 192}, rng);
        run_gemm_case(ctx, {m, 34, 8192, cu::DType::kF32, true, false, 0}, rng);  // few long rows: k split
    }
    MESSAGE("small-m: " << ctx.planned() << " cuBLASLt plans (0 expected)");
    CHECK(ctx.planned() == 0);
    CHECK(cu::fp8_gemv_k_split(34, 8192) > 1);
}

// ---- producers with an FP8 output (Fp8RowOut) --------------------------------------------------------
// Each producer's codes and scales must be quantize_e4m3's of its own bf16 result, bit for bit: the CPU's
// quantization (cpu_quantize) of the downloaded bf16 rows is the reference, and the bf16 result itself must
// not change with the FP8 output on.

namespace {

struct Fp8Out {
    DeviceBuffer<uint8_t> q;
    DeviceBuffer<float> scale;
    Fp8Out(int64_t rows, int64_t cols)
        : q(static_cast<size_t>(rows * cols)), scale(static_cast<size_t>(rows)) {}
    cu::Fp8RowOut out(float static_scale, bool keep_y = true) {
        cu::Fp8RowOut o;
        o.q = q.get(), o.scale = scale.get(), o.static_scale = static_scale, o.keep_y = keep_y;
        return o;
    }
    Quantized download() { return {q.download(), scale.download()}; }
};

void check_bf16_same(const std::string& what, const std::vector<bf16>& got, const std::vector<bf16>& want) {
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += std::memcmp(&got[i], &want[i], sizeof(bf16)) != 0;
    INFO(what, ": ", bad, " bf16 values differ with the FP8 output on");
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("rmsnorm with an FP8 output: quantize_e4m3's codes of its bf16 rows") {
    std::mt19937 rng(85);
    // 5,120: block teams; 1,024: warp teams; 1,004: the generic kernel, then quantize_e4m3.
    for (auto [rows, dim] : {std::pair<int64_t, int64_t>{5, 5120}, {37, 1024}, {3, 1004}, {130, 5120}}) {
        for (bool f32 : {true, false}) {
            for (float static_scale : {0.0f, 0.004f}) {
                std::vector<float> x = random_vec(static_cast<size_t>(rows * dim), rng, -3.0f, 3.0f);
                std::fill(x.begin(), x.begin() + dim, 0.0f);  // an all-zero row: scale 1
                const std::vector<float> w = random_vec(static_cast<size_t>(dim), rng, 0.5f, 1.5f);
                DeviceBuffer<float> dxf(f32 ? x : std::vector<float>{}), dw(w);
                DeviceBuffer<bf16> dxb(f32 ? std::vector<bf16>{} : to_bf16(x));
                DeviceBuffer<bf16> plain(static_cast<size_t>(rows * dim)),
                    fused(static_cast<size_t>(rows * dim));
                cu::RmsNormParams p;
                p.x = f32 ? static_cast<const void*>(dxf.get()) : static_cast<const void*>(dxb.get());
                p.x_dtype = f32 ? cu::DType::kF32 : cu::DType::kBF16, p.weight = dw.get();
                p.rows = rows, p.dim = dim, p.y = plain.get();
                cu::rmsnorm(p, nullptr);
                Fp8Out out(rows, dim);
                p.y = fused.get(), p.fp8_out = out.out(static_scale);
                cu::rmsnorm(p, nullptr);
                const std::vector<bf16> y = fused.download();
                const std::string tag = std::to_string(rows) + "x" + std::to_string(dim) +
                                        (f32 ? " fp32" : " bf16") +
                                        (static_scale > 0 ? " static" : " per row");
                check_bf16_same("rmsnorm " + tag, y, plain.download());
                check_same("rmsnorm " + tag, out.download(),
                           cpu_quantize(to_float(y), rows, dim, static_scale));
            }
        }
    }
}

TEST_CASE("gated_rmsnorm with an FP8 output: quantize_e4m3's codes of its bf16 rows") {
    std::mt19937 rng(86);
    struct G {
        int64_t rows, dim, group;
    };
    // 8 groups of 1,280 (the model's): one block a row of warp teams, fused; 40 groups of 256: more groups
    // than a block's warps; one group of 4,096: block teams. Both take quantize_e4m3 after the norm.
    for (G g : {G{7, 10240, 1280}, G{130, 10240, 1280}, G{3, 10240, 256}, G{3, 4096, 4096}}) {
        const std::vector<float> y = random_vec(static_cast<size_t>(g.rows * g.dim), rng, -2.0f, 2.0f),
                                 z = random_vec(static_cast<size_t>(g.rows * g.dim), rng, -3.0f, 3.0f),
                                 w = random_vec(static_cast<size_t>(g.dim), rng, 0.5f, 1.5f);
        DeviceBuffer<float> dy(y), dw(w);
        DeviceBuffer<bf16> dz(to_bf16(z)), plain(y.size()), fused(y.size());
        cu::GatedRmsNormParams p;
        p.y = dy.get(), p.y_dtype = cu::DType::kF32, p.z = dz.get(), p.weight = dw.get(), p.out = plain.get();
        p.rows = g.rows, p.dim = g.dim, p.group_size = g.group;
        cu::gated_rmsnorm(p, nullptr);
        Fp8Out out(g.rows, g.dim);
        p.out = fused.get(), p.fp8_out = out.out(0.0f);
        cu::gated_rmsnorm(p, nullptr);
        const std::vector<bf16> got = fused.download();
        const std::string tag =
            std::to_string(g.rows) + "x" + std::to_string(g.dim) + " group " + std::to_string(g.group);
        check_bf16_same("gated_rmsnorm " + tag, got, plain.download());
        check_same("gated_rmsnorm " + tag, out.download(), cpu_quantize(to_float(got), g.rows, g.dim, 0.0f));
    }
}

TEST_CASE(
    "fp8_gemm with an FP8 output: the epilogue row kernel, fp8_gemv and the widths past the row kernel") {
    std::mt19937 rng(87);
    struct C {
        int64_t m, n, k;
        bool relu2;
    };
    for (int mode = 0; mode < 3; ++mode) {
        const bool small_m = mode == 2;
        cu::Fp8GemmContext ctx;
        ctx.set_force_epilogue(!small_m);  // the fused row kernel on every cuBLASLt shape (what sm_90 runs)
        ctx.set_bf16_products(mode == 1);
        for (C c : {C{64, 20480, 512, true}, C{300, 1024, 256, false}, C{3, 2048, 512, true},
                    C{5, 24584, 256, true}}) {
            if (small_m && c.m > 4) c.m = 2;
            const std::vector<float> x = random_vec(static_cast<size_t>(c.m * c.k), rng, -2.0f, 2.0f),
                                     w = random_vec(static_cast<size_t>(c.n * c.k), rng, -0.1f, 0.1f);
            const Quantized xq = cpu_quantize(x, c.m, c.k, 0.0f), wq = cpu_quantize(w, c.n, c.k, 0.0f);
            DeviceBuffer<uint8_t> dxq(xq.codes), dwq(wq.codes);
            DeviceBuffer<float> dsx(xq.scale), dsw(wq.scale);
            DeviceBuffer<bf16> plain(static_cast<size_t>(c.m * c.n)), fused(static_cast<size_t>(c.m * c.n));
            cu::Fp8GemmParams p;
            p.x = dxq.get(), p.x_scale = dsx.get(), p.w = dwq.get(), p.w_scale = dsw.get(), p.y = plain.get();
            p.y_dtype = cu::DType::kBF16, p.m = c.m, p.n = c.n, p.k = c.k;
            p.activation = c.relu2 ? cu::GemmActivation::kReluSquared : cu::GemmActivation::kNone;
            cu::fp8_gemm(ctx, p, nullptr);
            const std::vector<bf16> want = plain.download();
            const std::string tag = std::string(small_m     ? "fp8_gemv "
                                                : mode == 1 ? "epilogue, bf16 products "
                                                            : "epilogue ") +
                                    std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                                    std::to_string(c.k) + (c.relu2 ? " relu2" : "");
            const Quantized want_q = cpu_quantize(to_float(want), c.m, c.n, 0.0f);
            for (bool keep_y : {true, false}) {
                Fp8Out out(c.m, c.n);
                p.y = fused.get(), p.fp8_out = out.out(0.0f, keep_y);
                cu::fp8_gemm(ctx, p, nullptr);
                if (keep_y) check_bf16_same("fp8_gemm " + tag, fused.download(), want);
                check_same("fp8_gemm " + tag + (keep_y ? " keep y" : " codes only"), out.download(), want_q);
            }
        }
    }
}
