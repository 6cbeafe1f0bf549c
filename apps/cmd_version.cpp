#include <cstdio>

#include "apps/cli.h"

namespace {

int run_version(const surf::cli::Args&) {
#ifdef SURF_HAVE_CUDA
    std::printf("surf 0.1.0 (CUDA backend built)\n");
#else
    std::printf("surf 0.1.0 (CPU only)\n");
#endif
    return 0;
}

SURF_COMMAND(surf::cli::Command{"version", "Print the version and the backends built in.", "", {}, run_version});

}  // namespace
