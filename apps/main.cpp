// surf: web agents on a real browser with an embedded vision-language model.
// Dispatches to the subcommands registered in apps/cmd_*.cpp. Exit codes: 0 success, 1 the task
// failed (e.g. no answer), 2 bad usage or input, 3 internal or environment error.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "base/error.h"
#ifdef SURF_HAVE_CUDA
#include "model/cuda/cuda_engine.h"
#endif

namespace {

void print_overview() {
    std::printf(
        "surf — web agents on a real browser with an embedded Holotron model\n\nusage: surf <command> "
        "[flags]\n\ncommands:\n");
    for (const auto& [name, command] : surf::cli::commands()) {
        std::printf("  %-12s %s\n", name.c_str(), command.summary.c_str());
    }
    std::printf("\n'surf <command> --help' shows a command's flags.\n");
}

}  // namespace

int main(int argc, char** argv) {
#ifdef SURF_HAVE_CUDA
    surf::model::cuda::register_backend();  // --backend cuda
#endif
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        print_overview();
        return argc < 2 ? 2 : 0;
    }
    const auto& registry = surf::cli::commands();
    const std::string name =
        std::string(argv[1]) == "--version" || std::string(argv[1]) == "-V" ? "version" : argv[1];
    auto it = registry.find(name);
    if (it == registry.end()) {
        std::vector<std::string> names;
        for (const auto& [n, c] : registry) names.push_back(n);
        const std::string guess = surf::cli::closest(name, names);
        std::fprintf(stderr, "surf: unknown command '%s'%s\n\n", argv[1],
                     guess.empty() ? "" : (" (did you mean '" + guess + "'?)").c_str());
        print_overview();
        return 2;
    }
    const surf::cli::Command& command = it->second;
    std::vector<std::string> rest(argv + 2, argv + argc);
    for (const auto& arg : rest) {
        if (!command.run_raw && (arg == "--help" || arg == "-h")) {
            std::printf("%s", surf::cli::usage_text(command).c_str());
            return 0;
        }
    }
    try {
        if (command.run_raw) return command.run_raw(rest);
        surf::cli::Args args(rest, command.flags);
        return command.run(args);
    } catch (const surf::Error& error) {
        std::fprintf(stderr, "surf %s: %s\n", command.name.c_str(), error.what());
        bool usage = error.kind() == surf::ErrorKind::kInvalidArgument;
        if (usage) std::fprintf(stderr, "\n%s", surf::cli::usage_text(command).c_str());
        return error.kind() == surf::ErrorKind::kInvalidArgument ||
                       error.kind() == surf::ErrorKind::kFormat || error.kind() == surf::ErrorKind::kConfig ||
                       error.kind() == surf::ErrorKind::kIo || error.kind() == surf::ErrorKind::kUnsupported
                   ? 2
                   : 3;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "surf %s: internal error: %s\n", command.name.c_str(), error.what());
        return 3;
    }
}
