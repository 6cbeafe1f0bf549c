// `surf run` as a person runs it (surf as a child, real Chromium, the tiny fixture model on a local page):
// a line per step, the policy's thought under it, the status and the trace folder; no spinner when the
// output is not a terminal; --confirm asking on the terminal (a pseudo-terminal here).
#include <doctest/doctest.h>

#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/browser/forced_profile.h"
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

namespace {

// Runs surf in SURF_SOURCE_DIR on a new pseudo-terminal (its /dev/tty and its output), typing `answer` and
// Enter each time the output shows `prompt` once more; returns the exit code and all it printed.
Result run_surf_on_terminal(const std::vector<std::string>& args, const std::string& prompt,
                            const std::string& answer) {
    std::vector<std::string> storage = {surf::test::kSurf};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int master = -1;
    const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::chdir(SURF_SOURCE_DIR) != 0) ::_exit(125);
        ::execv(surf::test::kSurf.c_str(), argv.data());
        ::_exit(127);
    }
    std::string out;
    size_t answered = 0;
    for (;;) {
        pollfd p{master, POLLIN, 0};
        if (::poll(&p, 1, 120000) <= 0) break;
        char buf[4096];
        const ssize_t n = ::read(master, buf, sizeof buf);
        if (n <= 0) break;  // EIO once the child has closed the terminal
        out.append(buf, static_cast<size_t>(n));
        size_t shown = 0;
        for (size_t at = out.find(prompt); at != std::string::npos; at = out.find(prompt, at + prompt.size()))
            ++shown;
        for (; answered < shown; ++answered) {
            const std::string line = answer + "\n";
            REQUIRE(::write(master, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
        }
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ::close(master);
    Result result;
    result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = out;
    return result;
}

}  // namespace

TEST_CASE("surf run --confirm asks on the terminal before each page action; --confirm-on only on its hosts") {
    if (!have_surf()) return;
    const fs::path dir = fs::temp_directory_path() / ("surf_test_cli_confirm_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    // The policy may only write "abc" into the field: every step is a page action to confirm.
    const std::string profile = surf::test::profile_offering(
        dir,
        surf::test::action_with({{"type", "write"}, {"content", "abc"}, {"element", "the field"}}, true));
    const std::string page =
        "file://" + std::string(SURF_SOURCE_DIR) + "/tests/browser/agent_pages/field.html";
    const auto args = [&](const std::string& out, const std::vector<std::string>& confirm) {
        std::vector<std::string> a = {"run",         "Type abc into the field",
                                      "--url",       page,
                                      "--model",     "tests/fixtures/golden/tiny_fp32",
                                      "--profile",   profile,
                                      "--viewport",  "320x240",
                                      "--max-steps", "2",
                                      "--out",       (dir / out).string()};
        a.insert(a.end(), confirm.begin(), confirm.end());
        return a;
    };
    const Result asked = run_surf_on_terminal(args("asked", {"--confirm"}), "go ahead?", "not on this page");
    INFO(asked.out);
    CHECK(asked.code <= 1);
    CHECK(asked.out.find("step 1 on file://") != std::string::npos);
    CHECK(slurp(dir / "asked" / "trace.jsonl").find("refused by the operator: not on this page") !=
          std::string::npos);
    // Rules for another host: the action on this page goes ahead without a question.
    const Result other =
        run_surf_on_terminal(args("other", {"--confirm-on", "shop.example"}), "go ahead?", "no");
    INFO(other.out);
    CHECK(other.out.find("go ahead?") == std::string::npos);
    CHECK(slurp(dir / "other" / "trace.jsonl").find("typed 3 characters") != std::string::npos);
    fs::remove_all(dir);
}
