#!/usr/bin/env bash
# One device call on a host with two GPUs (`run` with kind nvidia-h200-x2, carry [".deps/usr", ".deps/cutlass-include.tar.xz"]): build bench_serve,
# surf and the replica GPU test, run gpu_test_replicas_gpu, then the same workload on one GPU and on two:
#   surf bench serve --gpus 0   --concurrency 100 ARGS
#   surf bench serve --gpus 0,1 --concurrency 200 ARGS
# (ARGS: this script's arguments, default --mode stateful --steps 10), and print the two total tok/s and their
# ratio. Logs under $OUT (build.log, gpu_test_replicas_gpu.log, serve_1gpu_c100.log, serve_2gpu_c200.log,
# summary.txt). A second call on a warm machine skips the build. The run limits add up to under the device's
# 600 s a command; BENCH_TIMEOUT (default 230) bounds each serve run.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
S="$OUT/summary.txt"
: > "$S"
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--mode stateful --steps 10)
echo "card: $(nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null | tr '\n' ';')" | tee -a "$S"

t0=$(date +%s)
LOG_DIR="$OUT" bash scripts/build_gpu.sh gpu_test_replicas_gpu bench_serve surf || exit 1
echo "build $(( $(date +%s) - t0 )) s" | tee -a "$S"

timeout 120 build-gpu/tests/gpu_test_replicas_gpu > "$OUT/gpu_test_replicas_gpu.log" 2>&1
echo "gpu_test_replicas_gpu: rc=$? $(grep -E 'test cases' "$OUT/gpu_test_replicas_gpu.log" | tail -1)" | tee -a "$S"
grep -E "MESSAGE|ERROR|rror:" "$OUT/gpu_test_replicas_gpu.log" | head -20 | tee -a "$S"

# total tok/s of the stateful row at concurrency $2 in log $1
total() { awk -F'|' -v c="$2" '$2 ~ /stateful/ && $3 + 0 == c { gsub(/ /, "", $5); print $5 }' "$1"; }

serve() {  # $1 log name, then bench_serve arguments
  local log="$OUT/$1.log"; shift
  echo "run: surf bench serve $*" | tee -a "$S"
  timeout "${BENCH_TIMEOUT:-230}" build-gpu/surf bench serve "$@" > "$log" 2>&1
  echo "  rc=$?" | tee -a "$S"
  grep -E "^\| stateful|GPU [0-9]+:|^# replicas|rror" "$log" | tee -a "$S"
}
serve serve_1gpu_c100 --gpus 0 --concurrency 100 "${ARGS[@]}"
serve serve_2gpu_c200 --gpus 0,1 --concurrency 200 "${ARGS[@]}"
one=$(total "$OUT/serve_1gpu_c100.log" 100)
two=$(total "$OUT/serve_2gpu_c200.log" 200)
if [ -n "$one" ] && [ -n "$two" ]; then
  echo "total tok/s: 1 GPU at C = 100: $one; 2 GPUs at C = 200: $two; ratio $(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.3f", b / a }') (target >= 1.9)" | tee -a "$S"
else
  echo "total tok/s: missing a stateful row (see the logs)" | tee -a "$S"
fi
