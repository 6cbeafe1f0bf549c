// One stderr line once a local model is up (surf run / eval / serve): how long loading took and how much of
// it the GPU engine's warm-up was (GEMM tuning before the first request), so a pause at start is explained.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "model/engine.h"

namespace surf::cli {

inline void print_loaded(const std::string& model_dir, const model::Engine& engine,
                         std::chrono::steady_clock::time_point load_start) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const double warm_up = engine.stats().warm_up_seconds;
    if (warm_up > 0) {
        std::fprintf(stderr, "loaded %s (%s) in %.1f s, %.1f s of it tuning GPU kernels\n", model_dir.c_str(),
                     engine.backend_name().c_str(), seconds, warm_up);
    } else {
        std::fprintf(stderr, "loaded %s (%s) in %.1f s\n", model_dir.c_str(), engine.backend_name().c_str(),
                     seconds);
    }
}

}  // namespace surf::cli
