// FP8 E4M3 on the CPU (kernels/cpu/fp8.h): the conversion against a table PyTorch produced
// (tests/reference/make_fp8_golden.py: every code's value, and x.clamp(-448, 448).to(torch.float8_e4m3fn) for
// ties, their neighbours, subnormals, random magnitudes and saturation), per-row quantization, and the FP8
// linear layer against its loop reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/fp8.h"
#include "model/checkpoint/dtype.h"
#include "model/checkpoint/safetensors.h"
#include "tests/test_util.h"

using namespace surf::kernels::cpu;
using surf::model::Checkpoint;
using surf::model::DType;

namespace {

const std::string kTable = std::string(SURF_FIXTURES_DIR) + "/fp8/e4m3_table.safetensors";

std::vector<uint8_t> bytes_of(const Checkpoint& ckpt, const std::string& name) {
    const auto& info = ckpt.get(name);
    REQUIRE(info.dtype == DType::kU8);
    return std::vector<uint8_t>(info.data, info.data + info.n_bytes);
}

bool same_float(float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(a)) == 0;  // -0 ≠ +0
}

}  // namespace

TEST_CASE("all 256 E4M3 codes decode exactly as torch.float8_e4m3fn") {
    const Checkpoint table = Checkpoint::open(kTable);
    const std::vector<uint8_t> codes = bytes_of(table, "codes");
    const std::vector<float> decoded = table.to_f32("decoded");
    REQUIRE(codes.size() == 256);
    int nan = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
        INFO("code 0x" << std::hex << int(codes[i]));
        CHECK(same_float(e4m3_to_f32(codes[i]), decoded[i]));
        CHECK(same_float(surf::model::f8e4m3_to_f32(codes[i]), decoded[i]));  // the checkpoint reader's
        nan += std::isnan(decoded[i]);
        // Every finite code round-trips; NaN codes encode back to NaN.
        CHECK(same_float(round_to_e4m3(decoded[i]), decoded[i]));
        if (!std::isnan(decoded[i])) CHECK(f32_to_e4m3(decoded[i]) == codes[i]);
    }
    CHECK(nan == 2);  // 0x7F and 0xFF
    CHECK(e4m3_to_f32(0x7e) == kE4M3Max);
    CHECK(e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal
}

TEST_CASE("f32 → E4M3 rounds like torch: ties to even, subnormals, saturation at ±448") {
    const Checkpoint table = Checkpoint::open(kTable);
    const std::vector<float> inputs = table.to_f32("inputs");
    const std::vector<uint8_t> expected = bytes_of(table, "expected");
    REQUIRE(inputs.size() == expected.size());
    REQUIRE(inputs.size() > 5000);
    size_t wrong = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const uint8_t got = f32_to_e4m3(inputs[i]);
        if (got != expected[i]) {
            if (++wrong <= 10)
                FAIL_CHECK("x = " << inputs[i] << ": got 0x" << std::hex << int(got) << ", torch 0x"
                                  << int(expected[i]));
        }
    }
    CHECK(wrong == 0);
    CHECK(f32_to_e4m3(INFINITY) == 0x7e);
    CHECK(f32_to_e4m3(-1e30f) == 0xfe);
    CHECK(std::isnan(round_to_e4m3(NAN)));
}

TEST_CASE("per-row quantization: scale = max|row| / 448 (1 for a zero row), the max maps to ±448") {
    std::vector<float> x = {0.5f, -2.0f, 1.0f, 0.0f, 0.0f, 0.0f, 3.0f, 0.25f, -0.001f};
    std::vector<float> q(x.size()), scale(3);
    quantize_rows_e4m3({x.data(), q.data(), scale.data(), 3, 3});
    CHECK(scale[0] == 2.0f / 448.0f);
    CHECK(q[1] == -448.0f);
    CHECK(q[0] == round_to_e4m3(0.5f / scale[0]));
    CHECK(scale[1] == 1.0f);
    CHECK(q[3] == 0.0f);
    CHECK(scale[2] == 3.0f / 448.0f);
    CHECK(q[6] == 448.0f);
    CHECK(q[8] == round_to_e4m3(-0.001f / scale[2]));
    // In place (q aliasing x) gives the same values.
    quantize_rows_e4m3({x.data(), x.data(), scale.data(), 3, 3});
    CHECK(x == q);
}

TEST_CASE("fp8_linear matches its loop reference, dynamic per token and with a static input scale") {
    std::mt19937 rng(11);
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 5}, {5, 33, 70}, {19, 64, 129}}) {
        std::vector<float> x = surf::test::random_vector(static_cast<size_t>(m * k), rng, -3.0f, 3.0f);
        std::vector<float> w = surf::test::random_vector(static_cast<size_t>(n * k), rng);
        std::vector<float> w_scale(static_cast<size_t>(n));
        quantize_rows_e4m3({w.data(), w.data(), w_scale.data(), n, k});
        for (float input_scale : {0.0f, 3.0f / 448.0f, 1.0f / 448.0f}) {  // the last saturates most inputs
            INFO("m " << m << " n " << n << " k " << k << " input_scale " << input_scale);
            std::vector<float> y(static_cast<size_t>(m * n)), ref(y.size());
            fp8_linear({x.data(), w.data(), w_scale.data(), input_scale, y.data(), m, n, k});
            fp8_linear_reference({x.data(), w.data(), w_scale.data(), input_scale, ref.data(), m, n, k});
            CHECK(surf::test::relative_error(y.data(), ref) <= 1e-5);
        }
    }
}

TEST_CASE("fp8_linear: a static scale clamps inputs at ±448 before the GEMM") {
    const std::vector<float> x = {10.0f, -10.0f};  // 10 / (1/448) = 4480 → 448
    const std::vector<float> w = {1.0f, 0.5f};     // one output row, E4M3 values
    const std::vector<float> w_scale = {2.0f};
    float y = 0.0f;
    fp8_linear({x.data(), w.data(), w_scale.data(), 1.0f / 448.0f, &y, 1, 1, 2});
    CHECK(y == (448.0f * 1.0f - 448.0f * 0.5f) * (1.0f / 448.0f) * 2.0f);
}
