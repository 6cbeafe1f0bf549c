#!/usr/bin/env bash
# Nsight Compute of an SSD scan kernel on `bench_kernels --ssd-only`'s 924-token case (device machine; `run` with
# carry [".deps/usr", ".deps/cutlass-include.tar.xz"], after bench_kernels is built in build-gpu): speed of light, warp states and stall reasons,
# source counters, occupancy. Each run of that section times the wgmma-where-available scan, then mma.sync, 12
# launches each (2 warm-ups): the 924-token case is the 3rd launch set of ssd_wgmma (skip 26, the default) and the
# 9th of ssd_fused (KERNEL=ssd_fused SKIP=98).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
K="${KERNEL:-ssd_wgmma}"
timeout 200 "$NCU" --clock-control none -k regex:$K --launch-skip "${SKIP:-26}" --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section Occupancy --section LaunchStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_lsu.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum \
  build-gpu/apps/bench_kernels --ssd-only > "$OUT/ncu_$K.txt" 2>&1
echo "ncu $K rc=$?"
grep -E "stalled_.*ratio|inst_executed|hmma|gmma|Duration|Registers Per|Warp Cycles Per Issued" "$OUT/ncu_$K.txt" | awk '{ if ($0 !~ /stalled/ || $NF+0 > 0.1) print }'
