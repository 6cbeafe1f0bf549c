#!/usr/bin/env bash
# Nsight Compute of the SSD scan kernel on `bench_kernels --ssd-only`'s 924-token case (device machine; `run` with
# carry [".deps"], after bench_kernels is built in build-gpu): speed of light, warp states and stall reasons,
# source counters, occupancy. The case is the sixth of that section (5 runs × 12 launches + 2 warm-ups skipped).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
timeout 200 "$NCU" --clock-control none -k regex:ssd_fused --launch-skip 62 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section Occupancy --section LaunchStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_lsu.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum \
  build-gpu/apps/bench_kernels --ssd-only > "$OUT/ncu_ssd.txt" 2>&1
echo "ncu ssd rc=$?"
grep -E "stalled_.*ratio|inst_executed|hmma|Duration|Registers Per|Warp Cycles Per Issued" "$OUT/ncu_ssd.txt" | awk '{ if ($0 !~ /stalled/ || $NF+0 > 0.1) print }'
