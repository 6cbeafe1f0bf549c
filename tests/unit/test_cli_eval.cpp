// `surf eval` as a child process of the built surf: each task-file format is detected and named in the
// dry-run plan, and a bad task file exits 2 naming the file, line, field and format; --config run
// configurations (YAML or JSON keyed like the flags) under the command line, checked key by key, and the
// resolved configuration a dry run prints.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/surf_process.h"

namespace fs = std::filesystem;
using surf::test::have_surf;
using surf::test::Result;
using surf::test::run_surf;

namespace {

const std::string kFormats = SURF_FIXTURES_DIR "/eval_formats/";

fs::path fresh_dir(const std::string& name) {
    const fs::path dir =
        fs::temp_directory_path() / ("surf_test_cli_eval_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

}  // namespace

TEST_CASE("surf eval --dry-run reads every task format and names it in the plan") {
    if (!have_surf()) return;
    struct Case {
        std::string file, format, line;
    } cases[] = {
        {"WebVoyager_data.jsonl", "(WebVoyager format): 5 tasks",
         "Amazon--0\tAmazon\thttps://www.amazon.com/\t"},
        {"GAIA_web.jsonl", "(WebVoyager format): 3 tasks", "level1-1\tgoogle.com\thttps://www.google.com/\t"},
        {"Online_Mind2Web.json", "(Online-Mind2Web format): 3 tasks",
         "7d2e9f4a1c6b4e8d0a5f3b7c9e2d1a68\trei.com\t"},
        {"surf_tasks.jsonl", "(surf format): 3 tasks", "capital\twiki.example.org\t"},
    };
    for (const Case& c : cases) {
        const Result r = run_surf({"eval", kFormats + c.file, "--dry-run"});
        INFO(c.file << ": " << r.err);
        CHECK(r.code == 0);
        CHECK(r.out.find(c.format) != std::string::npos);
        CHECK(r.out.find(c.line) != std::string::npos);
    }
}

TEST_CASE("surf eval: a bad task file exits 2 naming the file, line, field and format") {
    if (!have_surf()) return;
    const fs::path dir = fresh_dir("bad");
    std::ofstream(dir / "tasks.json") << "[\n {\"task_id\": \"a\", \"confirmed_task\": \"q\"}\n]\n";
    const Result r = run_surf({"eval", (dir / "tasks.json").string(), "--dry-run"});
    CHECK(r.code == 2);
    CHECK(r.err.find((dir / "tasks.json").string() +
                     ":2: missing field \"website\" (Online-Mind2Web task)") != std::string::npos);
    fs::remove_all(dir);
}

namespace {

// The resolved configuration a dry run prints on its "config: " line.
nlohmann::json printed_config(const Result& r) {
    const size_t at = r.out.find("config: ");
    REQUIRE(at != std::string::npos);
    return nlohmann::json::parse(r.out.substr(at + 8, r.out.find('\n', at) - at - 8));
}

}  // namespace

TEST_CASE(
    "surf eval --config: the file's keys are the flags, the command line wins, the tasks key is the file") {
    if (!have_surf()) return;
    const fs::path dir = fresh_dir("config");
    std::ofstream(dir / "run.yaml") << "tasks: " << kFormats << "surf_tasks.jsonl\n"
                                    << "max-steps: 4\n"
                                    << "viewport: 320x240\n"
                                    << "judge: none\n"
                                    << "no-validator: true\n"
                                    << "allow-domain: [example.com, example.org]\n"
                                    << "sites: [Shop, Wiki.Example.org]\n"
                                    << "timeout: 90.5\n"
                                    << "seed: null\n";
    Result r = run_surf({"eval", "--config", (dir / "run.yaml").string(), "--dry-run", "--max-steps", "6"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("3 tasks, 2 selected") != std::string::npos);
    nlohmann::json c = printed_config(r);
    CHECK(c["tasks"] == kFormats + "surf_tasks.jsonl");
    CHECK(c["max-steps"] == 6);  // the command line wins
    CHECK(c["viewport"] == "320x240");
    CHECK(c["judge"] == "none");
    CHECK(c["no-validator"] == true);
    CHECK(c["allow-domain"] == nlohmann::json{"example.com", "example.org"});
    CHECK(c["timeout"] == 90.5);
    CHECK(c["seed"] == 0);          // null leaves the default
    CHECK(c["attempts"] == 3);      // defaults are recorded too
    CHECK(!c.contains("api-key"));  // a secret is never recorded

    // A repeatable flag on the command line replaces the file's whole list; a positional replaces "tasks".
    r = run_surf({"eval", kFormats + "Online_Mind2Web.json", "--config", (dir / "run.yaml").string(),
                  "--dry-run", "--sites", "rei.com", "--allow-domain", "rei.com"});
    REQUIRE(r.code == 0);
    c = printed_config(r);
    CHECK(c["tasks"] == kFormats + "Online_Mind2Web.json");
    CHECK(c["sites"] == nlohmann::json{"rei.com"});
    CHECK(c["allow-domain"] == nlohmann::json{"rei.com"});

    // The printed configuration, as JSON, is itself a configuration for the same run.
    std::ofstream(dir / "again.json") << c.dump(2);
    r = run_surf({"eval", "--config", (dir / "again.json").string(), "--dry-run"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(printed_config(r) == c);
    fs::remove_all(dir);
}

TEST_CASE(
    "surf eval --config: unknown keys and values of the wrong kind exit 2 naming the file, line and key") {
    if (!have_surf()) return;
    const fs::path dir = fresh_dir("config_bad");
    const std::string tasks = kFormats + "surf_tasks.jsonl";
    struct Case {
        std::string yaml, error;
    } cases[] = {
        {"judge: none\nmax_step: 3\n", "bad.yaml:2: unknown key \"max_step\" (did you mean \"max-steps\"?)"},
        {"zzzz: 1\n", "bad.yaml:1: unknown key \"zzzz\"\n"},
        {"config: other.yaml\n", "bad.yaml:1: unknown key \"config\""},
        {"max-steps: [3, 4]\n", "bad.yaml:1: \"max-steps\" takes one value, not a list"},
        {"no-validator: 1\n", "bad.yaml:1: \"no-validator\" is a switch: true or false"},
        {"viewport: {w: 3}\n", "bad.yaml:1: \"viewport\" must be a string or a number"},
        {"max-steps: 3\nmax-steps: 4\n", "bad.yaml:2:1: key \"max-steps\" appears twice"},
        {"- a\n", "expected a mapping of flag names to values"},
        {"max-steps: 0\n", "--max-steps: 0 is outside 1..1000"},
    };
    for (const Case& c : cases) {
        std::ofstream(dir / "bad.yaml") << c.yaml;
        const Result r = run_surf({"eval", tasks, "--config", (dir / "bad.yaml").string(), "--dry-run"});
        INFO(c.yaml << " -> " << r.err);
        CHECK(r.code == 2);
        CHECK(r.err.find(c.error) != std::string::npos);
    }
    const Result missing = run_surf({"eval", tasks, "--config", (dir / "none.yaml").string(), "--dry-run"});
    CHECK(missing.code == 2);
    CHECK(missing.err.find("none.yaml: cannot open") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("the example run configuration in docs/examples is valid") {
    if (!have_surf()) return;
    const Result r =
        run_surf({"eval", "--config", "docs/examples/eval_run.yaml", "--dry-run"}, SURF_SOURCE_DIR);
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("(surf format): 2 tasks, 2 selected") != std::string::npos);
    const nlohmann::json c = printed_config(r);
    CHECK(c["model"] == std::string(SURF_SOURCE_DIR) + "/tests/fixtures/golden/tiny_fp32");
    CHECK(c["max-steps"] == 3);
}
