#!/usr/bin/env bash
# One device call for FP8 on the CUDA backend: build, the FP8 kernel and engine tests (the latter prints the
# surf-tiny accuracy table), the bf16 engine tests that the shared code paths touch, then `surf bench serve`
# at C = 100 stateful in bf16 and in fp8 (same call, same card: the A/B). Logs under $OUT.
# BENCH_ARGS overrides the bench arguments (default: --concurrency 100 --mode stateful); PART=tests or
# PART=bench runs one half (a call has about 9 minutes: build ~2, tests ~2, each bench run ~2).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
LOG_DIR="$OUT" bash scripts/build_gpu.sh gpu_test_fp8 gpu_test_fp8_engine gpu_test_gpu_forward gpu_test_decode_graphs \
    gpu_test_cuda_engine bench_serve surf || exit 1
PART="${PART:-all}"
[ "$PART" = bench ] || for t in gpu_test_fp8 gpu_test_fp8_engine gpu_test_gpu_forward gpu_test_decode_graphs gpu_test_cuda_engine; do
    timeout 150 build-gpu/tests/$t > "$OUT/$t.log" 2>&1
    echo "$t: rc=$? $(grep -E 'test cases' "$OUT/$t.log" | tail -1)"
    grep -E "MESSAGE|ERROR|values|rror:|^\|" "$OUT/$t.log" | grep -v "layers\." | head -40
done
[ "$PART" = tests ] && exit 0
read -r -a args <<< "${BENCH_ARGS:---concurrency 100 --mode stateful}"
for q in none fp8; do
    echo "== bench serve --quantize $q"
    timeout "${BENCH_TIMEOUT:-150}" build-gpu/surf bench serve "${args[@]}" --quantize "$q" > "$OUT/bench_serve_$q.log" 2>&1
    echo "rc=$?"
    grep -E "^\| |capacity|device memory" "$OUT/bench_serve_$q.log" | head -8
done
