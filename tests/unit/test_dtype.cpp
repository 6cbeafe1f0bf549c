#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "model/checkpoint/dtype.h"

using namespace surf::model;

TEST_CASE("bf16 round trip rounds to nearest even like torch") {
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(bf16_to_f32(0x3f80) == 1.0f);
    // 1 + 2^-8 is exactly half-way between two bf16 values: ties to even (down to 1.0).
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
    // 1 + 3·2^-8 is half-way: ties to even (up).
    CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-100.f, 100.f);
    for (int i = 0; i < 1000; ++i) {
        float x = dist(rng);
        float y = bf16_to_f32(f32_to_bf16(x));
        CHECK(std::fabs(x - y) <= std::fabs(x) * std::ldexp(1.0f, -8));
    }
}

TEST_CASE("f16 and f8e4m3 decode known bit patterns") {
    CHECK(f16_to_f32(0x3c00) == 1.0f);
    CHECK(f16_to_f32(0xc000) == -2.0f);
    CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(std::isinf(f16_to_f32(0x7c00)));
    CHECK(f8e4m3_to_f32(0x38) == 1.0f);    // exponent 7, mantissa 0
    CHECK(f8e4m3_to_f32(0x7e) == 448.0f);  // the largest finite value
    CHECK(std::isnan(f8e4m3_to_f32(0x7f)));
    CHECK(f8e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));
}
