// FP8 E4M3 GEMMs of the language model on the CPU against the PyTorch reference of the same scheme
// (tests/reference/make_fp8_golden.py, fixtures in tests/fixtures/fp8): quantize-on-load of the greedy_bf16
// golden model, and the two FP8 checkpoint layouts (ModelOpt, compressed-tensors). Each case checks the
// prompt's logits at every position (CpuModel, chunked prefill), then the greedy continuation and the logits
// of each greedy step through the CPU engine (decode path).
//
// Tolerance: max|Δ|/max|ref| ≤ kLogitTolerance = 1e-5. Both sides hold the same E4M3 weights and scales and
// compute in fp32, differing only in summation order (a few fp32 ulps per value). Such a difference changes
// an activation's E4M3 code only when the value sits within a few ulps of a rounding boundary, and one
// changed code moves the logits far beyond fp32 rounding (an E4M3 step is an eighth of the value). The
// generator therefore takes the first prompt window whose reference run keeps every quantized input more than
// 8 ulps from a boundary (a rule on the reference alone, like the greedy margins), so the two must agree to
// fp32 rounding; a difference in the scheme (a scale, a layer left unquantized) is orders of magnitude above
// 1e-5, and the rounding itself is held bit-exact to torch by unit_test_fp8. The measured errors are printed.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "model/checkpoint/safetensors.h"
#include "model/cpu/cpu_model.h"
#include "model/engine.h"
#include "tests/test_util.h"

using namespace surf::model;
using surf::model::cpu::CpuModel;
using surf::test::relative_error;

namespace {

constexpr double kLogitTolerance = 1e-5;

const std::string kFp8 = std::string(SURF_FIXTURES_DIR) + "/fp8/";
const std::string kGreedyBf16 = std::string(SURF_FIXTURES_DIR) + "/golden/greedy_bf16";

std::vector<int32_t> as_tokens(const std::vector<int64_t>& ids) {
    return std::vector<int32_t>(ids.begin(), ids.end());
}

// The prompt's logits [T, V] from a fresh sequence.
Tensor prompt_logits(const CpuModel& model, const std::vector<int32_t>& tokens) {
    cpu::SequenceState state = model.new_state();
    cpu::ForwardInput in;
    in.tokens = &tokens;
    in.all_logits = true;
    return model.forward(state, in);
}

// Prompt logits, then greedy tokens and each step's logits through the engine, against expected.safetensors.
void check_case(const std::string& name, const std::string& model_dir, const std::string& expected_path,
                Quantize quantize) {
    const Checkpoint expected = Checkpoint::open(expected_path);
    const std::vector<int32_t> tokens = as_tokens(expected.to_i64("input_ids"));
    const auto model = CpuModel::load(model_dir, quantize);
    const Tensor logits = prompt_logits(*model, tokens);
    const std::vector<float> want = expected.to_f32("logits");
    const double err = relative_error(logits.ptr(), want);
    MESSAGE(name << ": prompt logits [" << logits.dim(0) << ", " << logits.dim(1) << "] max|Δ| "
                 << surf::test::max_abs_diff(logits.data, want) << ", rel err " << err);
    CHECK(err <= kLogitTolerance);

    EngineOptions options;
    options.quantize = quantize;
    const auto engine = open_cpu_engine(model_dir, options);
    GenerateOptions gen;
    const std::vector<int64_t> want_tokens = expected.to_i64("greedy_tokens");
    gen.max_tokens = static_cast<int32_t>(want_tokens.size());
    gen.ignore_eos = true;
    std::vector<float> step_logits;
    gen.on_logits = [&](const float* row, int64_t vocab) {
        step_logits.insert(step_logits.end(), row, row + vocab);
    };
    const GenerateResult result =
        engine->generate(engine->open_session(), {InputPart::of_tokens(tokens)}, gen);
    CHECK(std::vector<int64_t>(result.tokens.begin(), result.tokens.end()) == want_tokens);
    const std::vector<float> want_steps = expected.to_f32("greedy_logits");
    REQUIRE(step_logits.size() == want_steps.size());
    const double step_err = relative_error(step_logits.data(), want_steps);
    MESSAGE(name << ": " << want_tokens.size() << " greedy steps' logits max|Δ| "
                 << surf::test::max_abs_diff(step_logits, want_steps) << ", rel err " << step_err);
    CHECK(step_err <= kLogitTolerance);
}

}  // namespace

TEST_CASE("--quantize fp8 on the bf16 greedy fixture matches the PyTorch FP8 reference") {
    check_case("on_load", kGreedyBf16, kFp8 + "on_load/expected.safetensors", Quantize::kFp8);
}

TEST_CASE("quantize-on-load changes the logits: the FP8 path runs, not the fp32 one") {
    const Checkpoint expected = Checkpoint::open(kFp8 + "on_load/expected.safetensors");
    const auto model = CpuModel::load(kGreedyBf16);
    const Tensor logits = prompt_logits(*model, as_tokens(expected.to_i64("input_ids")));
    const double err = relative_error(logits.ptr(), expected.to_f32("logits"));
    MESSAGE("unquantized vs the FP8 reference: rel err " << err);
    CHECK(err > 100 * kLogitTolerance);
}

TEST_CASE("a ModelOpt FP8 checkpoint (per-tensor weight scales, static input scales) matches the reference") {
    check_case("modelopt", kFp8 + "modelopt", kFp8 + "modelopt/expected.safetensors", Quantize::kNone);
}

TEST_CASE("a compressed-tensors FP8 checkpoint (per-channel weights, dynamic per-token inputs) matches") {
    check_case("compressed_tensors", kFp8 + "compressed_tensors",
               kFp8 + "compressed_tensors/expected.safetensors", Quantize::kNone);
}
