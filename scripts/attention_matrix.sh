#!/usr/bin/env bash
# Device call (`run` with carry [".deps/usr", ".deps/cutlass-include.tar.xz"]): build the attention kernel test and bench_attention, run the test, then
# bench_attention over a matrix of kernels × cases.
# KERNELS / CASES are space-separated (kernel names with their space written as '_': wgmma_128wt).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
S="$OUT/summary.txt"
t0=$(date +%s)
JOBS=16 bash scripts/build_gpu.sh gpu_test_kernels_attention bench_attention ${EXTRA_TARGETS:-} || exit 1
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
