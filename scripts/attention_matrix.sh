#!/usr/bin/env bash
# Device call (`run` with carry [".deps"]): build the attention kernel test and bench_attention, run the test, then
# bench_attention over a matrix of kernels × cases.
# KERNELS / CASES are space-separated (kernel names with their space written as '_': wgmma_128wt).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
D="$PWD/.deps"
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURF_GPU_ONLY=ON -DSURF_DEPS_PREFIX="$D" -DCMAKE_PREFIX_PATH="$D/usr" > /tmp/configure.log 2>&1 || { tail -20 /tmp/configure.log; exit 1; }
t0=$(date +%s)
cmake --build build-gpu -j16 --target gpu_test_kernels_attention bench_attention ${EXTRA_TARGETS:-} > /tmp/build.log 2>&1 || { grep -E "error|FAILED" /tmp/build.log | head -30; exit 1; }
echo "build $(( $(date +%s) - t0 )) s" | tee -a "$S"
if [ "${TEST:-1}" = 1 ]; then
  timeout 240 build-gpu/tests/gpu_test_kernels_attention > "$OUT/gpu_test_kernels_attention.log" 2>&1
  echo "gpu_test_kernels_attention rc=$? $(grep -E 'test cases' "$OUT/gpu_test_kernels_attention.log" | tail -1)" | tee -a "$S"
  grep -E "ERROR|rror:" "$OUT/gpu_test_kernels_attention.log" | head -10 | tee -a "$S"
fi
L="$OUT/bench_attention_matrix.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader >> "$L"
for k in ${KERNELS:-wgmma_64ws wgmma_128ws}; do
  for c in ${CASES:-chunk}; do
    echo "## kernel ${k//_/ } case $c" >> "$L"
    timeout 60 build-gpu/apps/bench_attention --reps ${REPS:-50} --kernel "${k//_/ }" --case "$c" 2>&1 | grep -E "^\| [a-z]" | grep -v "^| case" >> "$L"
  done
done
grep -E "^##|^\|" "$L" | paste - - | awk -F'|' '{print $1 "|" $5 "|" $6 "|" $7}' | tee -a "$S"
