#!/usr/bin/env bash
# Nsight Compute of the warp-specialized prefill attention kernel on one bench_attention case (device machine; `run`
# with carry [".deps"], after bench_attention is built in build-gpu): speed of light, pipe utilisation (tensor, SFU
# = xu, FMA, ALU), L2 and shared-memory throughput, warp stall reasons. KERNEL / CASE name the bench_attention row
# (default the serving chunk on "wgmma 64ws"); the 4th launch of the kernel (after 3 warm-ups) is profiled.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
K="${KERNEL:-wgmma 64ws}"; C="${CASE:-chunk}"
F="$OUT/ncu_attention_${C}_${K// /_}.txt"
timeout 240 "$NCU" --clock-control none -k regex:attention_prefill_wgmma_ws --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,lts__t_sectors.sum,lts__t_bytes.sum.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
  build-gpu/apps/bench_attention --reps 2 --kernel "$K" --case "$C" > "$F" 2>&1
echo "ncu $K $C rc=$?"
grep -E "stalled_.*ratio|inst_executed|gmma|pipe_|lts__t|Duration|Registers Per|Warp Cycles Per Issued|Throughput|issue_active|wavefronts" "$F" | awk '{ if ($0 !~ /stalled/ || $NF+0 > 0.1) print }'
