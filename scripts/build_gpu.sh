#!/usr/bin/env bash
# Configures build-gpu (Release, GPU-only targets, header-only dependencies from .deps: scripts/fetch_gpu_deps.sh) and
# builds the given targets on a device machine; logs in /tmp/build_gpu_{configure,build}.log, the last lines of the
# build log printed on failure. Used by the Nsight Compute scripts:  bash scripts/build_gpu.sh bench_attention
set -uo pipefail
cd "$(dirname "$0")/.."
D="$PWD/.deps"; export PKG_CONFIG_PATH="$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURF_GPU_ONLY=ON -DSURF_DEPS_PREFIX="$D" -DCMAKE_PREFIX_PATH="$D/usr" > /tmp/build_gpu_configure.log 2>&1 \
  || { tail -20 /tmp/build_gpu_configure.log; exit 1; }
cmake --build build-gpu -j16 --target "$@" > /tmp/build_gpu_build.log 2>&1 || { tail -20 /tmp/build_gpu_build.log; exit 1; }
