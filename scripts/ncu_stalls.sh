#!/usr/bin/env bash
# Nsight Compute stall reasons of one bench_attention launch per kernel (device machine; `run` with carry
# [".deps"], after bench_attention is built in build-gpu): warp-state samples per issued instruction, and the
# source lines with the most stall samples. Example: KERNELS="wgmma 64;wgmma 64ws" CASE=chunk bash scripts/ncu_stalls.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
IFS=';' read -ra KS <<< "${KERNELS:-wgmma 64}"
for k in "${KS[@]}"; do
  f="$OUT/stalls_${CASE:-chunk}_${k/ /_}.txt"
  timeout 240 "$NCU" --clock-control none -k regex:attention_prefill --launch-skip 3 --launch-count 1 \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    build-gpu/apps/bench_attention --reps 1 --kernel "$k" --case "${CASE:-chunk}" > "$f" 2>&1
  echo "== $k ${CASE:-chunk} rc=$?"
  grep -E "stalled|inst_executed|gmma" "$f" | awk '{ if ($NF+0 > 0.05 || $0 ~ /inst_executed|gmma/) print }' | sort -k3 -rn | head -14
done
