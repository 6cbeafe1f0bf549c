#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <vector>

#include "model/engine_input.h"
#include "model/sampler.h"
#include "tests/test_util.h"

using namespace surf::model;

TEST_CASE("greedy picks the argmax, respects the mask, and reports an empty mask") {
    std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f};
    SamplingParams greedy;
    CHECK(sample_token(logits.data(), 4, greedy, 0) == 1);
    uint32_t mask = 0b1001;  // tokens 0 and 3
    CHECK(sample_token(logits.data(), 4, greedy, 0, &mask) == 3);
    uint32_t none = 0;
    CHECK(sample_token(logits.data(), 4, greedy, 0, &none) == -1);
}

TEST_CASE("temperature sampling follows the softmax, reproducibly per (seed, step)") {
    std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = 42;
    std::map<int, int> counts;
    const int n = 20000;
    for (int step = 0; step < n; ++step) counts[sample_token(logits.data(), 3, p, step)]++;
    CHECK(counts[0] / double(n) == doctest::Approx(0.5).epsilon(0.03));
    CHECK(counts[1] / double(n) == doctest::Approx(0.3).epsilon(0.05));
    CHECK(counts[2] / double(n) == doctest::Approx(0.2).epsilon(0.06));
    CHECK(sample_token(logits.data(), 3, p, 17) == sample_token(logits.data(), 3, p, 17));
}

TEST_CASE("top-k and top-p cut the tail") {
    std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 2;
    for (int step = 0; step < 2000; ++step) CHECK(sample_token(logits.data(), 4, p, step) < 2);
    p.top_k = 0;
    p.top_p = 0.7f;  // 0.5 + 0.3 reaches 0.7: tokens 0 and 1 only
    for (int step = 0; step < 2000; ++step) CHECK(sample_token(logits.data(), 4, p, step) < 2);
}

TEST_CASE("bad sampling parameters are rejected by name") {
    SamplingParams p;
    p.top_p = 0.0f;
    CHECK(surf::test::error_of([&] { validate(p); }).find("top_p") != std::string::npos);
    p = {};
    p.temperature = -1.0f;
    CHECK(surf::test::error_of([&] { validate(p); }).find("temperature") != std::string::npos);
}

TEST_CASE("the output mask keeps every token but the image placeholders, even when they would win") {
    ImageTokenIds ids;
    ids.context = 40, ids.start = 41, ids.end = 42;
    const std::vector<uint32_t> mask = output_token_mask(45, ids);
    REQUIRE(mask.size() == 2);
    for (int t = 0; t < 45; ++t) CHECK(((mask[t / 32] >> (t % 32)) & 1u) == (t < 40 ? 1u : t < 43 ? 0u : 1u));
    CHECK((mask[1] >> 13) == 0u);  // bits past the vocabulary stay clear
    std::vector<float> logits(45, 0.0f);
    logits[40] = 9.0f, logits[41] = 8.0f, logits[7] = 1.0f;
    CHECK(sample_token(logits.data(), 45, SamplingParams{}, 0, mask.data()) == 7);
    CHECK(output_token_mask(64, ImageTokenIds{}) == std::vector<uint32_t>{~0u, ~0u});  // text-only model
}
