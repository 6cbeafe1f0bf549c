#!/usr/bin/env bash
# Configures build-gpu on a device machine (Release, GPU-only targets, header-only dependencies from .deps:
# scripts/fetch_gpu_deps.sh; pkgconf from .deps where the machine has no pkg-config) and builds the given targets
# (none: configure only). LOG_DIR (default /tmp) receives configure.log and build.log, JOBS (default nproc) the build's
# parallelism. On failure it prints the configure log's tail or the build's error lines and exits 1. Every device
# script builds through it:  LOG_DIR="$OUT" bash scripts/build_gpu.sh bench_attention
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR="${LOG_DIR:-/tmp}"; mkdir -p "$LOG_DIR"
D="$PWD/.deps"
# CUTLASS's headers travel packed (a device call carries at most 64 MiB; scripts/fetch_gpu_deps.sh packs them).
if [ ! -f "$D/cutlass/include/cutlass/cutlass.h" ] && [ -f "$D/cutlass-include.tar.xz" ]; then
  mkdir -p "$D/cutlass" && tar xJf "$D/cutlass-include.tar.xz" -C "$D/cutlass"
fi
export PKG_CONFIG_PATH="$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
extra=()
if ! command -v pkg-config > /dev/null && [ -x "$D/usr/bin/pkgconf" ]; then
  export LD_LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  extra+=("-DPKG_CONFIG_EXECUTABLE=$D/usr/bin/pkgconf")
fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURF_GPU_ONLY=ON -DSURF_DEPS_PREFIX="$D" -DCMAKE_PREFIX_PATH="$D/usr" "${extra[@]}" \
  > "$LOG_DIR/configure.log" 2>&1 || { tail -20 "$LOG_DIR/configure.log"; exit 1; }
[ $# -eq 0 ] && exit 0
cmake --build build-gpu -j"${JOBS:-$(nproc)}" --target "$@" > "$LOG_DIR/build.log" 2>&1 || {
  grep -E "error|FAILED" "$LOG_DIR/build.log" | head -30 | grep . || tail -20 "$LOG_DIR/build.log"
  exit 1
}
