// `--quantize none|fp8` on the command line (surf generate, run, serve) and FP8 checkpoints in surf generate
// and surf inspect, through the built surf as a child process.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/surf_process.h"

using surf::test::have_surf;
using surf::test::Result;
using surf::test::run_surf;

namespace {

const std::string kBf16 = SURF_FIXTURES_DIR "/golden/greedy_bf16";
const std::string kModelOpt = SURF_FIXTURES_DIR "/fp8/modelopt";
const std::string kCompressed = SURF_FIXTURES_DIR "/fp8/compressed_tensors";

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("--quantize takes none or fp8 on generate, run and serve; anything else exits 2 naming the flag") {
    if (!have_surf()) return;
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"generate", "--model", kBf16, "--prompt", "hi", "--quantize", "int4"},
          {"run", "task", "--url", "about:blank", "--model", kBf16, "--quantize", "int4"},
          {"serve", "--model", kBf16, "--port", "0", "--quantize", "int4"}}) {
        const Result r = run_surf(args);
        INFO(args[0] << ": " << r.err);
        CHECK(r.code == 2);
        CHECK(contains(r.err, "--quantize \"int4\": expected none or fp8"));
    }
}

TEST_CASE("surf generate --quantize fp8 runs the bf16 model with FP8 GEMMs; an FP8 checkpoint runs as is") {
    if (!have_surf()) return;
    const Result on_load = run_surf({"generate", "--model", kBf16, "--raw", "--prompt", "Hello there",
                                     "--max-tokens", "4", "--quantize", "fp8"});
    INFO(on_load.err);
    CHECK(on_load.code == 0);
    CHECK(contains(on_load.err, "[cpu, fp8 on load]"));

    const Result modelopt = run_surf({"generate", "--model", kModelOpt, "--raw", "--prompt", "Hello there",
                                      "--max-tokens", "4", "--show-tokens"});
    INFO(modelopt.err);
    CHECK(modelopt.code == 0);
    CHECK(contains(modelopt.err, "[cpu, modelopt FP8]"));

    const Result twice =
        run_surf({"generate", "--model", kModelOpt, "--raw", "--prompt", "Hello", "--quantize", "fp8"});
    CHECK(twice.code == 2);
    CHECK(contains(twice.err, "is already quantized"));
}

TEST_CASE("surf inspect names an FP8 checkpoint's quantization and finds every scale it declares") {
    if (!have_surf()) return;
    const Result r = run_surf({"inspect", kCompressed});
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(contains(r.out, "quantization compressed-tensors FP8"));
    CHECK(contains(r.out, "every tensor present with the expected shape and dtype"));
    CHECK_FALSE(contains(r.out, "UNEXPECTED"));
}
