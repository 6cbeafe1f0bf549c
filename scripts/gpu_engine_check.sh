#!/usr/bin/env bash
# One device call for the engine: build the GPU-only targets, run the forward/engine gpu tests, then
# `surf bench serve` (arguments passed through). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
DEPS="$PWD/.deps"
export PKG_CONFIG_PATH="$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURF_GPU_ONLY=ON -DSURF_DEPS_PREFIX="$DEPS" -DCMAKE_PREFIX_PATH="$DEPS/usr" \
    > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
cmake --build build-gpu -j"$(nproc)" --target gpu_test_gpu_forward gpu_test_decode_graphs gpu_test_vision_batch gpu_test_cuda_engine gpu_test_agent_gpu gpu_test_kernels_mamba gpu_test_kernels_misc gpu_test_kernels_attention bench_serve surf > "$OUT/build.log" 2>&1 \
    || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
for t in gpu_test_decode_graphs gpu_test_vision_batch gpu_test_gpu_forward gpu_test_cuda_engine gpu_test_agent_gpu gpu_test_kernels_mamba gpu_test_kernels_misc gpu_test_kernels_attention; do
    timeout 300 build-gpu/tests/$t > "$OUT/$t.log" 2>&1
    echo "$t: rc=$? $(grep -E 'test cases' "$OUT/$t.log" | tail -1)"
    grep -E "MESSAGE|ERROR|values|rror:" "$OUT/$t.log" | grep -v "layers\." | head -30
done
if [ "$#" -gt 0 ]; then
    timeout "${BENCH_TIMEOUT:-400}" build-gpu/surf bench serve "$@" 2>&1 | tee "$OUT/bench_serve.log"
fi
