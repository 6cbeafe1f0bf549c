#!/usr/bin/env bash
# Nsight Compute of the decode rows' state update as serving runs it (fp32 state, replay window 8, staggered counts,
# bulk staging, 100 rows): the "SSU alone" launches of `bench_overlap --branches` (device machine; `run` with carry
# [".deps"], after bench_overlap is built in build-gpu). Two passes over one launch: speed of light, memory
# workload (DRAM bytes, L2 hit rates), warp states, occupancy; then per-instruction warp-stall sampling (source page,
# SASS), summarised by scripts/ncu_source_summary.py.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
ARGS=(--clock-control none -k regex:ssu_replay_kernel --launch-skip "${SKIP:-5}" --launch-count 1)
APP=(build-gpu/apps/bench_overlap --branches --reps 3)
timeout 200 "$NCU" "${ARGS[@]}" --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section LaunchStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum \
  "${APP[@]}" > "$OUT/ncu_ssu.txt" 2>&1
echo "ncu ssu rc=$?"
grep -E "Duration|DRAM Throughput|Memory Throughput|dram__bytes|lts__t_sector_hit|inst_executed|Achieved Occupancy|Warp Cycles Per Issued|Registers Per|Block Limit|Stall|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/ncu_ssu.txt" | head -40
F="$OUT/ncu_ssu_source.csv"
timeout 200 "$NCU" "${ARGS[@]}" --section SourceCounters --section WarpStateStats --page source --print-source sass --csv "${APP[@]}" > "$F" 2>&1
echo "ncu ssu source rc=$?"
python3 scripts/ncu_source_summary.py "$F" 30
