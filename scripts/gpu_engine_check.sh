#!/usr/bin/env bash
# One device call for the engine: build the GPU-only targets, run the forward/engine gpu tests, then
# `surf bench serve` (arguments passed through). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
LOG_DIR="$OUT" bash scripts/build_gpu.sh gpu_test_gpu_forward gpu_test_decode_graphs gpu_test_vision_batch gpu_test_cuda_engine gpu_test_agent_gpu \
    gpu_test_kernels_mamba gpu_test_kernels_misc gpu_test_kernels_attention bench_serve surf || exit 1
for t in gpu_test_decode_graphs gpu_test_vision_batch gpu_test_gpu_forward gpu_test_cuda_engine gpu_test_agent_gpu gpu_test_kernels_mamba gpu_test_kernels_misc gpu_test_kernels_attention; do
    timeout 300 build-gpu/tests/$t > "$OUT/$t.log" 2>&1
    echo "$t: rc=$? $(grep -E 'test cases' "$OUT/$t.log" | tail -1)"
    grep -E "MESSAGE|ERROR|values|rror:" "$OUT/$t.log" | grep -v "layers\." | head -30
done
if [ "$#" -gt 0 ]; then
    timeout "${BENCH_TIMEOUT:-400}" build-gpu/surf bench serve "$@" 2>&1 | tee "$OUT/bench_serve.log"
fi
