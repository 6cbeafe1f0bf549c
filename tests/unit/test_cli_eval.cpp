// `surf eval` as a child process of the built surf: each task-file format is detected and named in the
// dry-run plan, and a bad task file exits 2 naming the file, line, field and format.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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
