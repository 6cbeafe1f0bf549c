#include <cstdio>

#include "apps/cli.h"
#include "base/data_paths.h"
#include "base/error.h"
#include "model/engine.h"

std::string surf::cli::version() {
#ifdef SURF_HAVE_CUDA
    return "0.1.0 (CUDA backend built)";
#else
    return "0.1.0 (CPU only)";
#endif
}

namespace {

// The data folders this surf uses (base/data_paths.h); a folder that is missing prints the error instead.
void print_paths() {
    try {
        std::printf("prompts: %s\n", surf::data_dir("prompts", "SURF_PROMPTS_DIR").c_str());
    } catch (const surf::Error& e) {
        std::printf("prompts: (none: %s)\n", e.what());
    }
    try {
        std::printf("default model: %s\n", surf::model::default_model_dir().c_str());
    } catch (const surf::Error& e) {
        std::printf("default model: (none: %s)\n", e.what());
    }
}

int run_version(const surf::cli::Args& args) {
    std::printf("surf %s\n", surf::cli::version().c_str());
    if (args.has("paths")) print_paths();
    return 0;
}

SURF_COMMAND(surf::cli::Command{
    "version",
    "Print the version and the backends built in.",
    "[--paths]",
    {{"paths", "", "also print where the prompts and the default model are read from"}},
    run_version});

}  // namespace
