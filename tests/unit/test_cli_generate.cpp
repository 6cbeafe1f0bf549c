// `surf generate --backend NAME` as a child process of the built surf: the flag is in the help, an unknown
// name exits 2 before any model loads (a model folder that does not exist is never reached), cuda in a
// CPU-only build says so, and --backend cpu generates on the shipped surf-tiny.
#include <doctest/doctest.h>

#include <string>

#include "tests/surf_process.h"

using surf::test::have_surf;
using surf::test::Result;
using surf::test::run_surf;

namespace {

const std::string kNoModel = "/nonexistent/surf_test_cli_generate_model";

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("surf generate --help lists --backend") {
    if (!have_surf()) return;
    const Result r = run_surf({"generate", "--help"});
    CHECK(r.code == 0);
    CHECK(contains(r.out, "[--backend cpu|cuda]"));
    CHECK(contains(r.out, "--backend NAME"));
    CHECK(contains(r.out, "cpu (default) or cuda"));
}

TEST_CASE("surf generate: an unknown --backend exits 2 naming it, before the model loads") {
    if (!have_surf()) return;
    const Result r = run_surf({"generate", "--backend", "tpu", "--model", kNoModel, "--prompt", "hi"});
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, "surf generate: --backend \"tpu\": expected cpu or cuda"));
    CHECK(!contains(r.err, kNoModel));
}

TEST_CASE("surf generate --backend cuda in a CPU-only build says it has no CUDA backend") {
    if (!have_surf()) return;
    if (!contains(run_surf({"version"}).out, "CPU only")) {
        MESSAGE("skipped: this surf has the CUDA backend");
        return;
    }
    const Result r = run_surf({"generate", "--backend", "cuda", "--model", kNoModel, "--prompt", "hi"});
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, "surf generate: --backend cuda: this surf is built without the CUDA backend"));
    CHECK(contains(r.err, "use --backend cpu"));
    CHECK(!contains(r.err, kNoModel));
}

TEST_CASE("surf generate --backend cpu generates on the shipped surf-tiny") {
    if (!have_surf()) return;
    const Result r = run_surf({"generate", "--backend", "cpu", "--model", SURF_SOURCE_DIR "/models/surf-tiny",
                               "--prompt", "hi", "--max-tokens", "2", "--show-tokens"});
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(contains(r.err, "[cpu] prefill"));
}
