#!/usr/bin/env bash
# Nsight Compute over ranges a benchmark marks (device machine; `run` with carry [".deps/usr", ".deps/cutlass-include.tar.xz"]):
#   bash scripts/ncu_ranges.sh bench_attention --pair --reps 2 --profile-ranges
#   bash scripts/ncu_ranges.sh bench_overlap --reps 3 --profile-ranges
# Builds the target (NO_BUILD=1 skips that), then runs it under application-range replay: each cudaProfilerStart / Stop
# range it marks is one result whose metrics cover every kernel that ran in it, concurrent ones included (duration,
# DRAM and L2 throughput, L2 → SM bytes, SM throughput): whether such pairs are bound by the L2 (docs/KERNELS.md, "the
# L2's partition fabric"). The ranges carry profiler overhead that swamps short kernels, so use their byte totals, not
# their rates; per-kernel ncu gives the units' shares. Report: $OUT/ncu_<target>.txt, key lines printed.
# If this ncu rejects a metric in range mode, drop it from METRICS.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: ncu_ranges.sh TARGET [ARGS...]" >&2; exit 2; }
target="$1"; shift
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
if [ "${NO_BUILD:-0}" != 1 ]; then LOG_DIR="$OUT" bash scripts/build_gpu.sh "$target" || exit 1; fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
METRICS="${METRICS:-gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed}"
f="$OUT/ncu_$target.txt"
timeout "${NCU_TIMEOUT:-500}" "$NCU" --replay-mode app-range --clock-control none --metrics "$METRICS" \
  "build-gpu/apps/$target" "$@" > "$f" 2>&1
echo "ncu $target rc=$?"
grep -E "profile range|Range|gpu__time|dram__|lts__|l1tex__|sm__throughput|==ERROR|==WARNING" "$f" | head -"${NCU_LINES:-120}"
