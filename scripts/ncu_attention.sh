#!/usr/bin/env bash
# Nsight Compute over one prefill-attention launch per kernel (device machine; `run` with carry [".deps/usr", ".deps/cutlass-include.tar.xz"]):
# builds bench_attention (NO_BUILD=1 skips that), then profiles its 4th launch (after 3 warm-ups) of CASE on each of
# KERNELS: speed of light, warp states and stall reasons, pipe utilisation (tensor = "shared" pipe, XU = SFU, FMA,
# ALU), L2 and shared-memory traffic, occupancy. Reports under $OUT/ncu_attention_<case>_<kernel>.txt; the key
# lines are printed. Per-instruction stall sampling: scripts/ncu_attention_source.sh. Example:
#   KERNELS="wgmma 208wt;wgmma 128wt" CASE=vit3 bash scripts/ncu_attention.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
if [ "${NO_BUILD:-0}" != 1 ]; then bash scripts/build_gpu.sh bench_attention || exit 1; fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
C="${CASE:-chunk}"
IFS=';' read -ra KS <<< "${KERNELS:-wgmma 64ws}"
for k in "${KS[@]}"; do
  f="$OUT/ncu_attention_${C}_${k// /_}.txt"
  timeout 240 "$NCU" --clock-control none -k regex:attention_prefill --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,lts__t_sectors.sum,lts__t_bytes.sum.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    build-gpu/apps/bench_attention --reps 2 --kernel "$k" --case "$C" > "$f" 2>&1
  echo "== $k $C rc=$?"
  grep -E "stalled_.*ratio|inst_executed|pipe_|lts__t|Duration|Registers Per|Warp Cycles Per Issued|Throughput|issue_active|wavefronts|highest-utilized" "$f" | awk '{ if ($0 !~ /stalled/ || $NF+0 > 0.1) print }'
done
