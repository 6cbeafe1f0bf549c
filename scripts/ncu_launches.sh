# Sourced by the Nsight Compute scripts that profile single launches of one kernel from a benchmark run
# (scripts/ncu_decode_green.sh); device machine, after the benchmark is built in build-gpu.
# Needs OUT set; finds ncu.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)

# ncu_launch FILE KERNEL_REGEX SKIP METRICS GREP -- APP...: launch SKIP + 1 of the kernel (speed of light, memory workload,
# warp states, instruction mix, occupancy, the extra METRICS) into FILE, then the lines of it matching GREP.
ncu_launch() {
  local file=$1 kernel=$2 skip=$3 metrics=$4 pattern=$5; shift 6
  timeout 150 "$NCU" --clock-control none -k "regex:$kernel" --launch-skip "$skip" --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats --section Occupancy \
    --metrics "$metrics" "$@" > "$file" 2>&1
  echo "ncu $(basename "$file") rc=$?"
  grep -E "$pattern" "$file" | head -30
}

# ncu_source FILE KERNEL_REGEX SKIP -- APP...: per-instruction warp-stall sampling (source page, SASS) of launch SKIP + 1
# into the CSV FILE, summarised by scripts/ncu_source_summary.py.
ncu_source() {
  local file=$1 kernel=$2 skip=$3; shift 4
  timeout 200 "$NCU" --clock-control none -k "regex:$kernel" --launch-skip "$skip" --launch-count 1 --section SourceCounters \
    --section WarpStateStats --page source --print-source sass --csv "$@" > "$file" 2>&1
  echo "ncu $(basename "$file") rc=$?"
  python3 scripts/ncu_source_summary.py "$file" 30
}
