// The `surf` command line: each subcommand lives in its own apps/cmd_<name>.cpp and registers itself
// with SURF_COMMAND. Flags are declared up front so that an unknown or malformed flag is an error
// that names it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace surf::cli {

struct FlagSpec {
    std::string name;        // without the leading "--"
    std::string value_name;  // empty: a boolean switch
    std::string help;
    bool repeatable = false;
};

class Args {
public:
    // Parses argv against the specs; throws surf::Error(kInvalidArgument) naming the bad flag.
    Args(const std::vector<std::string>& argv, const std::vector<FlagSpec>& specs);

    bool has(const std::string& name) const;
    std::string get(const std::string& name, const std::string& fallback = "") const;
    std::string require(const std::string& name) const;
    std::vector<std::string> all(const std::string& name) const;
    // An integer flag in [lo, hi]; throws kInvalidArgument naming the flag, the text and the range otherwise.
    long long get_int(const std::string& name, long long fallback, long long lo, long long hi) const;
    // A WIDTHxHEIGHT flag ("1280x720"); false when absent. Throws kInvalidArgument naming the flag.
    bool get_size(const std::string& name, int* width, int* height) const;
    // A finite number flag in [lo, hi]; throws kInvalidArgument naming the flag, the text and the range
    // otherwise.
    double get_double(const std::string& name, double fallback, double lo, double hi) const;
    const std::vector<std::string>& positional() const { return positional_; }
    // Fills in a flag (or the positional arguments) from another source, a run configuration: only when the
    // command line did not give it, so the command line wins.
    void set_default(const std::string& name, std::vector<std::string> values);
    void set_default_positional(std::vector<std::string> values);

private:
    std::map<std::string, std::vector<std::string>> values_;
    std::vector<std::string> positional_;
};

struct Command {
    std::string name;
    std::string summary;
    std::string usage;
    std::vector<FlagSpec> flags;
    std::function<int(const Args&)> run;  // returns the process exit code
    // When set, main calls this instead of run with the arguments after the command name untouched: no
    // flag parsing and no --help interception, for commands that hand them to another program (surf bench).
    std::function<int(const std::vector<std::string>&)> run_raw = nullptr;
};

int register_command(Command command);

// The model folder or URL a command runs: --model, else model::default_model_dir() ($SURF_MODEL, else the
// shipped surf-tiny). Throws kInvalidArgument, saying what to do, when the default is the shipped folder and
// it holds no weights.
std::string model_flag(const Args& args);
// The engine backend a command runs: --backend, default cpu, checked before anything loads. Throws
// kInvalidArgument for a name other than cpu or cuda, and kUnsupported for cuda in a surf built without the
// CUDA backend; both say what to pass instead.
std::string backend_flag(const Args& args);
const std::map<std::string, Command>& commands();
// The candidate nearest to `word` by edit distance when it is close enough to be a typo of it, else "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);
std::string usage_text(const Command& command);
// The non-empty items of a comma-separated list ("a,,b" → a, b).
std::vector<std::string> comma_items(const std::string& text);

// surf's version and the backends built in: "0.1.0 (CPU only)".
std::string version();

// A thread that calls `tick(n)` (n = 0, 1, ...) every `period` while the command works, for a live status
// line and for turning Ctrl-C into a cancel; `tick` returns false to stop early. Destruction (on every exit
// path, exceptions included) stops it, joins it and then calls `done` once from it (clearing the status
// line).
class Ticker {
public:
    Ticker(std::chrono::milliseconds period, std::function<bool(int)> tick, std::function<void()> done = {})
        : thread_([this, period, tick = std::move(tick), done = std::move(done)] {
              for (int n = 0; !stop_.load() && tick(n); ++n) std::this_thread::sleep_for(period);
              if (done) done();
          }) {}
    ~Ticker() {
        stop_ = true;
        thread_.join();
    }
    Ticker(const Ticker&) = delete;
    Ticker& operator=(const Ticker&) = delete;

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace surf::cli

#define SURF_CLI_CONCAT_INNER(a, b) a##b
#define SURF_CLI_CONCAT(a, b) SURF_CLI_CONCAT_INNER(a, b)
#define SURF_COMMAND(...)                                                  \
    static const int SURF_CLI_CONCAT(surf_command_registered_, __LINE__) = \
        ::surf::cli::register_command(__VA_ARGS__)
