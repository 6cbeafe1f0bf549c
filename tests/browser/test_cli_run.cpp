// `surf run` as a person runs it (surf as a child, real Chromium, the tiny fixture model on a local page):
// a line per step, the policy's thought under it, the status and the trace folder; no spinner when the
// output is not a terminal.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/surf_process.h"

namespace fs = std::filesystem;
using surf::test::have_surf;
using surf::test::Result;
using surf::test::run_surf;
using surf::test::slurp;

TEST_CASE("surf run prints each step with the policy's thought, then the status; no spinner off a terminal") {
    if (!have_surf()) return;
    const fs::path out = fs::temp_directory_path() / ("surf_test_cli_run_" + std::to_string(::getpid()));
    fs::remove_all(out);
    const std::string page = "file://" + std::string(SURF_SOURCE_DIR) + "/tests/browser/pages/keys.html";
    const Result r = run_surf(
        {"run", "Press Enter in the field", "--url", page, "--model", "tests/fixtures/golden/tiny_fp32",
         "--profile", "tests/browser/agent_pages/profile_tiny.json", "--viewport", "320x240", "--max-steps",
         "2", "--out", out.string(), "--validator-model", "tests/fixtures/golden/small_bf16"},
        SURF_SOURCE_DIR);
    INFO(r.out << r.err);
    REQUIRE(r.code <= 1);  // answered or not: the random model's choice
    // The validator runs on a model of its own.
    CHECK(r.err.find("loading tests/fixtures/golden/small_bf16 (--validator-model)") != std::string::npos);
    CHECK(r.out.find("step   1") != std::string::npos);
    CHECK(r.out.find("status: ") != std::string::npos);
    CHECK(r.out.find(" running  ") == std::string::npos);  // the spinner is for terminals only
    // Every step whose trace has a thought shows it under the step line.
    std::istringstream trace(slurp(out / "trace.jsonl"));
    int thoughts = 0;
    for (std::string line; std::getline(trace, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j.value("type", "") != "step" || j.value("thought", "").empty()) continue;
        ++thoughts;
        std::string thought = j["thought"];
        for (char& c : thought)
            if (c == '\n' || c == '\r' || c == '\t') c = ' ';  // one line, as the step line prints it
        CHECK(r.out.find("thought: " + thought.substr(0, 40)) != std::string::npos);
    }
    MESSAGE(thoughts << " steps with a thought");
    fs::remove_all(out);
}
