// `surf eval --config docs/examples/eval_run.yaml` run for real (surf as a child, real Chromium, the tiny
// fixture model, tasks on data: URLs): the folder records its configuration, model, version, date and host
// (config.json, summary.json, report.html) and gets the WebJudge layout; resuming into it with another
// configuration exits 2 naming the differing keys, unless only free keys differ or --force is given.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/surf_process.h"

namespace fs = std::filesystem;
using surf::test::have_surf;
using surf::test::Result;
using surf::test::run_surf;
using surf::test::slurp;

TEST_CASE(
    "an example-config run records what it ran with, and a resume with another configuration is refused") {
    if (!have_surf()) return;
    const fs::path out = fs::temp_directory_path() / ("surf_test_cli_eval_run_" + std::to_string(::getpid()));
    fs::remove_all(out);
    const std::vector<std::string> base = {
        "eval",       "--config",       "docs/examples/eval_run.yaml", "--out",
        out.string(), "--mind2web-out", (out / "m2w").string()};
    const auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return run_surf(args, SURF_SOURCE_DIR);
    };
    Result r = with({});
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("2 of 2 tasks recorded") != std::string::npos);

    const auto record = nlohmann::json::parse(slurp(out / "config.json"));
    CHECK(record["config"]["max-steps"] == 3);
    CHECK(record["config"]["out"] == out.string());
    CHECK(record["model"]["path"] == std::string(SURF_SOURCE_DIR) + "/tests/fixtures/golden/tiny_fp32");
    CHECK(record["model"]["checksum"].get<std::string>().rfind("fnv1a64:", 0) == 0);
    CHECK(record["surf_version"].get<std::string>().rfind("0.", 0) == 0);
    CHECK(!record["host"].get<std::string>().empty());
    const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
    CHECK(summary["run"]["config"] == record["config"]);
    CHECK(slurp(out / "report.html").find("<summary>Configuration</summary>") != std::string::npos);
    CHECK(fs::exists(out / "m2w" / "kettle" / "result.json"));
    CHECK(fs::exists(out / "m2w" / "kettle" / "trajectory" / "0.png"));
    // The folder's config.json is a configuration for the same run.
    r = run_surf({"eval", "--config", (out / "config.json").string(), "--dry-run"});
    CHECK(r.code == 0);
    const size_t at = r.out.find("config: ");
    REQUIRE(at != std::string::npos);
    CHECK(nlohmann::json::parse(r.out.substr(at + 8)) == record["config"]);

    r = with({"--max-steps", "5", "--seed", "8"});
    CHECK(r.code == 2);
    CHECK(r.err.find("max-steps (3 → 5), seed (7 → 8)") != std::string::npos);
    CHECK(r.err.find("--force") != std::string::npos);
    CHECK(nlohmann::json::parse(slurp(out / "config.json"))["config"]["max-steps"] == 3);

    r = with({"--concurrency", "1"});  // how fast is free to change: everything is recorded, nothing runs
    CHECK(r.code == 0);
    CHECK(r.out.find("0 this run, 2 skipped") != std::string::npos);

    r = with({"--max-steps", "5", "--force"});
    CHECK(r.code == 0);
    CHECK(r.err.find("--force: max-steps (3 → 5) differs") != std::string::npos);
    CHECK(nlohmann::json::parse(slurp(out / "config.json"))["config"]["max-steps"] == 5);
    fs::remove_all(out);
}
