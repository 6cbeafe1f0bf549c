#!/usr/bin/env bash
# Per-instruction warp-stall sampling (Nsight Compute source page, SASS) of the warp-specialized prefill attention
# on one bench_attention case (device machine, after bench_attention is built in build-gpu: scripts/ncu_attention.sh
# or attention_matrix.sh build it). KERNEL (one bench_attention kernel name) / CASE. Writes the full CSV and a summary by
# scripts/ncu_source_summary.py (samples by execution count, stall reasons, opcodes, the 40 most-sampled instructions).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
K="${KERNEL:-wgmma 208wt}"; C="${CASE:-vit3}"
F="$OUT/ncu_source_${C}_${K// /_}.csv"
timeout 240 "$NCU" --clock-control none -k regex:attention_prefill_wgmma_ws --launch-skip 3 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
  build-gpu/apps/bench_attention --reps 2 --kernel "$K" --case "$C" > "$F" 2>&1
echo "ncu source $K $C rc=$?"
python3 scripts/ncu_source_summary.py "$F" 40
