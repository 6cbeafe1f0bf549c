// The surf CLI as a child process of the built surf. `surf bench NAME [args...]`: the listing names the CPU
// benchmarks, an unknown name exits 2 naming it, flags reach the benchmark untouched (its own usage, its exit
// code), and a benchmark killed by a signal makes surf exit 3. The pass-through and the signal use small
// shell scripts placed next to the real benchmarks for the duration of a test case.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/surf_process.h"

namespace fs = std::filesystem;
using surf::test::have_surf;
using surf::test::kSurf;
using surf::test::Result;
using surf::test::run_surf;
using surf::test::slurp;

namespace {

// An executable script bench_<name> where surf looks first (the build tree's apps/), removed on scope exit.
struct FakeBench {
    std::string name;
    fs::path path;
    FakeBench(const std::string& stem, const std::string& body)
        : name(stem + "_" + std::to_string(::getpid())),
          path(fs::path(SURF_BINARY_DIR) / "apps" / ("bench_" + name)) {
        {
            std::ofstream out(path);
            out << "#!/bin/sh\n" << body << "\n";
        }
        fs::permissions(path, fs::perms::owner_all);
    }
    ~FakeBench() { fs::remove(path); }
};

}  // namespace

TEST_CASE("surf bench lists the benchmarks that are built") {
    if (!have_surf()) return;
    for (const auto& args :
         {std::vector<std::string>{"bench"}, std::vector<std::string>{"bench", "--help"}}) {
        const Result r = run_surf(args);
        CHECK(r.code == (args.size() == 1 ? 2 : 0));  // no NAME is bad usage, as a bare `surf` is
        CHECK(r.out.find("usage: surf bench NAME") != std::string::npos);
        // The CPU benchmarks are built in every non-GPU-only build, each with its description.
        CHECK(r.out.find("  tokenizer    tokenizer encode/decode throughput") != std::string::npos);
        CHECK(r.out.find("  structured   cost of JSON-schema-constrained decoding") != std::string::npos);
    }
    const Result overview = run_surf({"--help"});
    CHECK(overview.out.find("  bench ") != std::string::npos);
}

TEST_CASE("surf bench with an unknown or malformed name exits 2 and says what it looked for") {
    if (!have_surf()) return;
    const Result r = run_surf({"bench", "no_such_bench", "--flag"});
    CHECK(r.code == 2);
    CHECK(r.err.find("unknown benchmark 'no_such_bench'") != std::string::npos);
    CHECK(r.err.find("bench_no_such_bench") != std::string::npos);
    CHECK(r.err.find(std::string(SURF_BINARY_DIR)) != std::string::npos);  // where it looked

    // A path is not a name: it must not reach outside the lookup directories.
    const Result path = run_surf({"bench", "../surf"});
    CHECK(path.code == 2);
    CHECK(path.err.find("'../surf' is not a benchmark name") != std::string::npos);
}

TEST_CASE("surf bench passes arguments to the real benchmark untouched") {
    if (!have_surf()) return;
    // bench_tokenizer with too many positionals prints its own usage and exits 2 at once; --help reaches it
    // rather than surf's own help (bench_tokenizer then fails to open a tokenizer named --help: exit 2).
    const Result usage = run_surf({"bench", "tokenizer", "a", "b", "c"});
    CHECK(usage.code == 2);
    CHECK(usage.err.find("usage: bench_tokenizer TOKENIZER_JSON") != std::string::npos);
    const Result help = run_surf({"bench", "tokenizer", "--help"});
    CHECK(help.code == 2);
    CHECK(help.err.find("--help") != std::string::npos);
    CHECK(help.out.find("usage: surf") == std::string::npos);
}

TEST_CASE("surf bench forwards every argument, the exit code and a death by signal") {
    if (!have_surf()) return;
    if (!fs::is_directory(fs::path(SURF_BINARY_DIR) / "apps")) {
        MESSAGE("skipped: no " << SURF_BINARY_DIR << "/apps");
        return;
    }
    {
        FakeBench echo("surftest_echo", "printf '[%s]\\n' \"$@\"\nexit 7");
        const Result r = run_surf({"bench", echo.name, "--concurrency", "100", "--mode=stateful", "--", "-h",
                                   "--help", "two words", ""});
        CHECK(r.code == 7);
        CHECK(r.out == "[--concurrency]\n[100]\n[--mode=stateful]\n[--]\n[-h]\n[--help]\n[two words]\n[]\n");
        const Result listed = run_surf({"bench"});
        CHECK(listed.out.find("  " + echo.name) != std::string::npos);  // unknown extras are listed too
    }
    {
        FakeBench killed("surftest_kill", "kill -TERM $$");
        const Result r = run_surf({"bench", killed.name});
        CHECK(r.code == 3);
        CHECK(r.err.find("bench_" + killed.name + " was killed by signal 15") != std::string::npos);
    }
}

TEST_CASE("surf: a numeric flag outside its range exits 2 naming the flag, the value and the range") {
    if (!have_surf()) return;
    const std::string tiny = SURF_FIXTURES_DIR "/golden/tiny_fp32";
    struct Case {
        std::vector<std::string> args;
        std::string want;
    };
    const std::vector<Case> cases = {
        {{"generate", "--model", tiny, "--prompt", "hi", "--max-tokens", "1099511627776"},
         "--max-tokens: 1099511627776 is outside 0..1048576"},
        {{"generate", "--model", tiny, "--prompt", "hi", "--max-tokens", "99999999999999999999999"},
         "--max-tokens"},
        {{"generate", "--model", tiny, "--prompt", "hi", "--temperature", "1e999"},
         "--temperature: 1e999 is outside"},
        {{"generate", "--model", tiny, "--prompt", "hi", "--top-p", "nan"}, "--top-p: nan is outside"},
        {{"serve", "--model", tiny, "--threads", "1000000"}, "--threads: 1000000 is outside 1..1024"},
        {{"serve", "--model", tiny, "--max-body-mb", "1e12"}, "--max-body-mb: 1e12 is outside"},
        {{"serve", "--model", tiny, "--max-images", "-1"}, "--max-images: -1 is outside 0..256"},
        {{"run", "task", "--url", "about:blank", "--model", tiny, "--max-steps", "0"},
         "--max-steps: 0 is outside 1..1000"},
        {{"eval", "tasks.jsonl", "--out", "/tmp/x", "--model", tiny, "--concurrency", "100000"},
         "--concurrency: 100000 is outside"},
    };
    for (const Case& c : cases) {
        const Result r = run_surf(c.args);
        INFO(c.args[0] << " " << c.args.back() << ": " << r.err);
        CHECK(r.code == 2);
        CHECK(r.err.find(c.want) != std::string::npos);
    }
}

TEST_CASE("surf inspect: a checkpoint whose shapes do not match its config exits 1 and says so on stderr") {
    if (!have_surf()) return;
    const fs::path dir = fs::temp_directory_path() / ("surf_test_inspect_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::copy(SURF_FIXTURES_DIR "/golden/tiny_fp32", dir);
    std::string config = slurp(dir / "config.json");
    const std::string from = "\"intermediate_size\": 128", to = "\"intermediate_size\": 96";
    REQUIRE(config.find(from) != std::string::npos);
    config.replace(config.find(from), from.size(), to);
    std::ofstream(dir / "config.json") << config;
    const Result r = run_surf({"inspect", dir.string()});
    CHECK(r.code == 1);
    CHECK(r.out.find("SHAPE") != std::string::npos);
    CHECK(r.err.find("does not load: 0 tensors missing, 6 with the wrong shape") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("surf eval --dry-run checks the file, prints the selection and the plan, and runs nothing") {
    if (!have_surf()) return;
    const fs::path dir = fs::temp_directory_path() / ("surf_test_dry_run_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    {
        std::ofstream tasks(dir / "tasks.jsonl");
        for (int i = 0; i < 5; ++i) {
            tasks << R"({"web_name": ")" << (i < 3 ? "Amazon" : "Apple") << R"(", "id": "t)" << i
                  << R"(", "ques": "question )" << i << R"(", "web": "https://example.com/"})"
                  << "\n";
        }
    }
    // No --out, no model: a dry run needs neither.
    Result r =
        run_surf({"eval", (dir / "tasks.jsonl").string(), "--dry-run", "--sites", "amazon", "--limit", "2"});
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("5 tasks, 2 selected") != std::string::npos);
    CHECK(r.out.find("t0\tAmazon\thttps://example.com/\tquestion 0") != std::string::npos);
    CHECK(r.out.find("t2\t") == std::string::npos);
    CHECK(!fs::exists(dir / "results.jsonl"));
    r = run_surf({"eval", (dir / "tasks.jsonl").string(), "--dry-run", "--ids", "t4,t9"});
    CHECK(r.code != 0);
    CHECK(r.err.find("--ids: no task has the id \"t9\"") != std::string::npos);
    { std::ofstream(dir / "bad.jsonl") << "{\"web_name\": \"A\", \"id\": 1}\n"; }
    r = run_surf({"eval", (dir / "bad.jsonl").string(), "--dry-run"});
    CHECK(r.code != 0);
    CHECK(r.err.find("bad.jsonl:1") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("surf --version, and a mistyped command or flag gets a suggestion") {
    if (!have_surf()) return;
    Result r = run_surf({"--version"});
    CHECK(r.code == 0);
    CHECK(r.out.rfind("surf ", 0) == 0);
    r = run_surf({"evel", "tasks.jsonl"});
    CHECK(r.code == 2);
    CHECK(r.err.find("unknown command 'evel' (did you mean 'eval'?)") != std::string::npos);
    r = run_surf({"eval", "tasks.jsonl", "--out", "/tmp/x", "--concurency", "2"});
    CHECK(r.code == 2);
    CHECK(r.err.find("unknown flag --concurency (did you mean --concurrency?)") != std::string::npos);
    r = run_surf({"eval", "tasks.jsonl", "--out", "/tmp/x", "--zzzzzz"});
    CHECK(r.err.find("unknown flag --zzzzzz\n") != std::string::npos);  // nothing close: no guess
}

TEST_CASE("surf run without --url says so before anything about the model") {
    if (!have_surf()) return;
    // No --model either: the default model's problem (no weights in a checkout) comes second.
    const Result r = run_surf({"run", "find the cheapest kettle"});
    CHECK(r.code == 2);
    CHECK(r.err.find("missing required flag --url") != std::string::npos);
    CHECK(r.err.find("no --model given") == std::string::npos);
}
