#include <cstdio>

#include "apps/cli.h"

std::string surf::cli::version() {
#ifdef SURF_HAVE_CUDA
    return "0.1.0 (CUDA backend built)";
#else
    return "0.1.0 (CPU only)";
#endif
}

namespace {

int run_version(const surf::cli::Args&) {
    std::printf("surf %s\n", surf::cli::version().c_str());
    return 0;
}

SURF_COMMAND(surf::cli::Command{"version", "Print the version and the backends built in.", "", {}, run_version});

}  // namespace
