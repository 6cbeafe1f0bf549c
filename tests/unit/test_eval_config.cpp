// What an evaluation ran with (eval/eval_config.h): the model's fingerprint, the differences that make a
// resume into a results folder refused, config.json read and written; and the runner refusing a folder
// recorded with another configuration before it touches the folder (the tiny fixture model; no browser, every
// task is already recorded).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/conversation.h"
#include "agent/profile.h"
#include "base/error.h"
#include "eval/eval_config.h"
#include "eval/eval_runner.h"
#include "model/engine.h"
#include "tests/test_util.h"

using namespace surf;
using namespace surf::eval;
using nlohmann::ordered_json;
using surf::test::error_of;
namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) {
    const fs::path d =
        fs::temp_directory_path() / ("surf_eval_config_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

ordered_json record(int max_steps, int concurrency, const std::string& checksum = "fnv1a64:1") {
    ordered_json config = {{"model", "/m"}, {"max-steps", max_steps}, {"concurrency", concurrency}};
    return make_run_record(config, {{"path", "/m"}, {"checksum", checksum}}, "0.1.0 (test)");
}

// Overwrites `n` bytes at `offset` of a file.
void poke(const fs::path& path, uint64_t offset, const std::string& bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("a run record holds the config, the model, the version, the date and the host") {
    const ordered_json r = record(15, 4);
    CHECK(r["config"]["max-steps"] == 15);
    CHECK(r["model"]["checksum"] == "fnv1a64:1");
    CHECK(r["surf_version"] == "0.1.0 (test)");
    CHECK(r["date"].get<std::string>().size() == 20);  // 2026-11-28T10:15:00Z
    CHECK(!r["host"].get<std::string>().empty());
}

TEST_CASE("run differences: every differing config key but the free ones, and the model checksum") {
    CHECK(run_differences(record(15, 4), record(15, 4), {}).empty());
    CHECK(run_differences(record(15, 4), record(15, 8), {"concurrency"}).empty());
    CHECK(run_differences(record(15, 4), record(20, 8), {"concurrency"}) ==
          std::vector<std::string>{"max-steps (15 → 20)"});
    CHECK(run_differences(record(15, 4), record(15, 4, "fnv1a64:2"), {}) ==
          std::vector<std::string>{"model checksum (\"fnv1a64:1\" → \"fnv1a64:2\")"});
    ordered_json extra = record(15, 4);
    extra["config"]["seed"] = 3;
    CHECK(run_differences(record(15, 4), extra, {}) == std::vector<std::string>{"seed ((absent) → 3)"});
    CHECK(run_differences(extra, record(15, 4), {}) == std::vector<std::string>{"seed (3 → (absent))"});
}

TEST_CASE("the model fingerprint reads config.json and each weight file's size, first and last MiB") {
    const fs::path dir = fresh("model");
    std::ofstream(dir / "config.json") << R"({"hidden_size": 8})";
    std::ofstream(dir / "README.md") << "not part of the model";
    {
        std::ofstream w(dir / "model.safetensors", std::ios::binary);
        w << std::string(3 << 20, 'w');  // 3 MiB: first, middle and last MiB
    }
    const ordered_json a = model_fingerprint(dir.string());
    CHECK(a["path"] == fs::absolute(dir).lexically_normal().string());
    CHECK(a["files"] == 2);
    CHECK(a["bytes"] == (3 << 20) + 18);
    CHECK(a["checksum"].get<std::string>().rfind("fnv1a64:", 0) == 0);
    CHECK(model_fingerprint(dir.string())["checksum"] == a["checksum"]);
    std::ofstream(dir / "README.md") << "edited";
    CHECK(model_fingerprint(dir.string())["checksum"] == a["checksum"]);  // not a model file

    poke(dir / "model.safetensors", (3 << 20) / 2,
         "x");  // the middle MiB is not read (fast, not a full hash)
    CHECK(model_fingerprint(dir.string())["checksum"] == a["checksum"]);
    poke(dir / "model.safetensors", 10, "x");  // the first MiB
    const std::string first = model_fingerprint(dir.string())["checksum"];
    CHECK(first != a["checksum"]);
    poke(dir / "model.safetensors", (3 << 20) - 10, "x");  // the last MiB
    const std::string last = model_fingerprint(dir.string())["checksum"];
    CHECK(last != first);
    std::ofstream(dir / "config.json") << R"({"hidden_size": 16})";
    const std::string config = model_fingerprint(dir.string())["checksum"];
    CHECK(config != last);
    std::ofstream(dir / "model-00002.safetensors") << "shard";
    CHECK(model_fingerprint(dir.string())["checksum"] != config);

    const ordered_json remote = model_fingerprint("http://gpu:8000/v1", "holotron");
    CHECK(remote == ordered_json{{"url", "http://gpu:8000/v1"}, {"name", "holotron"}});
    CHECK(error_of([] { model_fingerprint("/nonexistent/model"); }).find("/nonexistent/model") !=
          std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("config.json is written and read back; a folder without one has none; a broken one is an error") {
    const fs::path dir = fresh("record");
    CHECK_FALSE(read_run_record(dir.string()).has_value());
    write_run_record(dir.string(), record(15, 4));
    CHECK(read_run_record(dir.string())->at("config") == record(15, 4).at("config"));
    std::ofstream(dir / "config.json") << "{";
    CHECK(error_of([&] { read_run_record(dir.string()); }).find("config.json: not valid JSON") !=
          std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE(
    "the runner refuses a folder recorded with another configuration before touching it; force goes on") {
    const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";
    std::shared_ptr<model::Engine> engine = model::open_cpu_engine(kModel);
    auto chat = agent::EngineChatModel::open(engine);
    const auto profile = agent::load_profile(SURF_SOURCE_DIR "/tests/browser/agent_pages/profile_tiny.json");
    const fs::path dir = fresh("runner");
    const std::string line = R"({"id": "t1", "status": "error", "error": "the start page did not load"})"
                             "\n";
    std::ofstream(dir / "results.jsonl") << line;
    write_run_record(dir.string(), record(15, 4));
    const std::vector<EvalTask> tasks =
        parse_tasks(R"({"id": "t1", "task": "q", "url": "about:blank"})", "t");

    EvalOptions o;
    o.run_record = record(20, 8);
    o.resume_free_keys = {"concurrency"};
    o.retry_errors = true;  // would rewrite results.jsonl, were the run not refused first
    EvalRunner refused(chat, profile, nullptr, o);
    const std::string error = error_of([&] { refused.run(tasks, dir.string()); });
    CHECK(error.find("max-steps (15 → 20)") != std::string::npos);
    CHECK(error.find("concurrency") == std::string::npos);
    CHECK(error.find("--force") != std::string::npos);
    CHECK(surf::test::read_file((dir / "results.jsonl").string()) == line);
    CHECK(read_run_record(dir.string())->at("config")["max-steps"] == 15);

    o.retry_errors = false;
    o.force = true;
    EvalRunner forced(chat, profile, nullptr, o);
    const EvalOutcome out = forced.run(tasks, dir.string());  // t1 is recorded: nothing runs, no browser
    CHECK(out.progress.skipped == 1);
    CHECK(read_run_record(dir.string())->at("config")["max-steps"] == 20);
    const auto summary = nlohmann::json::parse(surf::test::read_file((dir / "summary.json").string()));
    CHECK(summary["run"]["config"]["max-steps"] == 20);
    CHECK(summary["run"]["surf_version"] == "0.1.0 (test)");
    CHECK(surf::test::read_file((dir / "report.html").string()).find("Configuration") != std::string::npos);

    // Only free keys differ: no force needed.
    o.force = false;
    o.run_record = record(20, 2);
    EvalRunner free_change(chat, profile, nullptr, o);
    CHECK_NOTHROW(free_change.run(tasks, dir.string()));
    fs::remove_all(dir);
}
