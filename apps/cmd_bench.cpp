// surf bench NAME [args...]: runs the benchmark program bench_NAME (apps/bench_*.cpp, one executable each)
// with the arguments passed through unchanged and returns its exit code. The benchmarks stay separate
// programs because several need the CUDA backend and each owns its flags; this only finds and starts them.
// Lookup, relative to the running surf: <dir>/apps/bench_NAME (the build tree: surf in the build root, the
// benchmarks in build/apps), then <dir>/../libexec/surf/bench_NAME (installed), then <dir>/bench_NAME.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "apps/cli.h"
#include "base/data_paths.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct KnownBench {
    const char* description;
    bool needs_cuda;
};

const std::map<std::string, KnownBench>& known_benches() {
    static const std::map<std::string, KnownBench> known = {
        {"serve", {"the agent workload on the CUDA engine (random 12B weights): tok/s, latency", true}},
        {"step", {"GPU time of one engine step, op by op, at the 12B shapes", true}},
        {"kernels",
         {"kernels at the 12B shapes against the measured copy-bandwidth and GEMM ceilings", true}},
        {"attention", {"attention prefill alone at the LLM and ViT serving shapes", true}},
        {"gemm",
         {"the engine's GEMM shapes on cuBLASLt (tuned) and on our Hopper kernel (gemm_wgmma)", true}},
        {"overlap",
         {"the decode rows' state update beside a prefill GEMM (cuBLASLt or gemm_wgmma) or a ViT layer, and "
          "alone on fewer SMs",
          true}},
        {"cpu", {"the CPU backend: linear GFLOP/s, op timings, one agent step (--model DIR)", false}},
        {"structured", {"cost of JSON-schema-constrained decoding per decode step", false}},
        {"tokenizer", {"tokenizer encode/decode throughput (MB/s) on one core", false}},
        {"soak",
         {"surf serve under long mixed load (clients, slow and hostile connections, hang-ups): /health "
          "latency, "
          "memory and descriptors",
          false}},
    };
    return known;
}

// Where benchmarks are looked for, in order; empty when /proc/self/exe cannot be read.
std::vector<fs::path> search_dirs() {
    const fs::path dir = surf::program_dir();
    if (dir.empty()) return {};
    return {dir / "apps", (dir.parent_path() / "libexec" / "surf").lexically_normal(), dir};
}

bool is_executable_file(const fs::path& path) {
    std::error_code error;
    return fs::is_regular_file(path, error) && ::access(path.c_str(), X_OK) == 0;
}

// Benchmark name -> executable, the first directory winning, as the lookup does.
std::map<std::string, fs::path> available_benches() {
    std::map<std::string, fs::path> found;
    for (const auto& dir : search_dirs()) {
        std::error_code error;
        for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
            const std::string file = it->path().filename().string();
            // bench_NAME with no extension: skips build-tree leftovers such as bench_x.cpp.o or logs.
            if (file.rfind("bench_", 0) != 0 || file.size() == 6 || file.find('.') != std::string::npos)
                continue;
            if (is_executable_file(it->path())) found.emplace(file.substr(6), it->path());
        }
    }
    return found;
}

std::string describe_dirs() {
    std::string text;
    for (const auto& dir : search_dirs()) text += (text.empty() ? "" : " and ") + dir.string();
    return text.empty() ? "(the surf binary's directory: /proc/self/exe unreadable)" : text;
}

void print_list(std::FILE* out) {
    std::fprintf(
        out,
        "usage: surf bench NAME [args...]\n\n"
        "Runs the benchmark program bench_NAME with the arguments passed through unchanged and exits\n"
        "with its exit code; 'surf bench NAME --help' shows the benchmark's own flags.\n\n");
    const auto available = available_benches();
    std::fprintf(out, "benchmarks built (in %s):\n", describe_dirs().c_str());
    if (available.empty()) std::fprintf(out, "  (none)\n");
    for (const auto& [name, path] : available) {
        auto it = known_benches().find(name);
        if (it == known_benches().end()) {
            std::fprintf(out, "  %s\n", name.c_str());  // an extra bench_*.cpp: no description known
        } else {
            std::fprintf(out, "  %-12s %s\n", name.c_str(), it->second.description);
        }
    }
    std::string missing;
    for (const auto& [name, known] : known_benches()) {
        if (!available.count(name)) missing += (missing.empty() ? "" : ", ") + name;
    }
    if (!missing.empty()) std::fprintf(out, "not built here: %s\n", missing.c_str());
}

// Runs the program and waits for it, as system() does: surf ignores SIGINT/SIGQUIT while it waits so a
// Ctrl-C reaches the benchmark and surf reports how it ended; the child gets the default handlers back
// unless surf itself was started with them ignored (nohup, a background job).
int run_program(const fs::path& program, const std::vector<std::string>& args) {
    std::vector<std::string> argv_storage = {program.string()};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : argv_storage) argv.push_back(arg.data());
    argv.push_back(nullptr);

    struct sigaction ignore = {};
    struct sigaction old_int = {};
    struct sigaction old_quit = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGINT, &ignore, &old_int);
    sigaction(SIGQUIT, &ignore, &old_quit);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    if (old_int.sa_handler != SIG_IGN) sigaddset(&defaults, SIGINT);
    if (old_quit.sa_handler != SIG_IGN) sigaddset(&defaults, SIGQUIT);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);

    std::fflush(nullptr);
    pid_t pid = 0;
    const int spawn_error = posix_spawn(&pid, program.c_str(), nullptr, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    int status = 0;
    pid_t waited = -1;
    if (spawn_error == 0) {
        do {
            waited = waitpid(pid, &status, 0);
        } while (waited < 0 && errno == EINTR);
    }
    const int wait_errno = errno;
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);

    const std::string name = program.filename().string();
    if (spawn_error != 0) {
        std::fprintf(stderr, "surf bench: cannot start %s: %s\n", program.c_str(),
                     std::strerror(spawn_error));
        return 3;
    }
    if (waited < 0) {
        std::fprintf(stderr, "surf bench: waiting for %s failed: %s\n", name.c_str(),
                     std::strerror(wait_errno));
        return 3;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        std::fprintf(stderr, "surf bench: %s was killed by signal %d (%s)\n", name.c_str(), sig,
                     strsignal(sig));
    } else {
        std::fprintf(stderr, "surf bench: %s ended with wait status %d\n", name.c_str(), status);
    }
    return 3;
}

int run_bench(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        print_list(stdout);
        return args.empty() ? 2 : 0;
    }
    const std::string& name = args[0];
    // A name is a file-name fragment: no path separators or dots, so it cannot reach outside the lookup.
    bool valid = !name.empty();
    for (char c : name)
        valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
    if (!valid) {
        std::fprintf(stderr, "surf bench: '%s' is not a benchmark name (letters, digits, '_' or '-')\n\n",
                     name.c_str());
        print_list(stderr);
        return 2;
    }
    const std::string file = "bench_" + name;
    for (const auto& dir : search_dirs()) {
        const fs::path program = dir / file;
        if (is_executable_file(program)) {
            return run_program(program, std::vector<std::string>(args.begin() + 1, args.end()));
        }
    }
    auto known = known_benches().find(name);
    if (known == known_benches().end()) {
        std::fprintf(stderr, "surf bench: unknown benchmark '%s': no executable %s in %s\n\n", name.c_str(),
                     file.c_str(), describe_dirs().c_str());
    } else {
        std::fprintf(
            stderr,
            "surf bench: benchmark '%s' is not built: no executable %s in %s (build the %s target%s)\n\n",
            name.c_str(), file.c_str(), describe_dirs().c_str(), file.c_str(),
            known->second.needs_cuda ? "; it needs the CUDA backend" : "");
    }
    print_list(stderr);
    return 2;
}

SURF_COMMAND([] {
    surf::cli::Command command{
        "bench", "Run a benchmark program (bench_NAME) with its own flags.", "NAME [args...]", {}, nullptr};
    command.run_raw = run_bench;
    return command;
}());

}  // namespace
