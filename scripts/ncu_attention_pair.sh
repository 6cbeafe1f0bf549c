#!/usr/bin/env bash
# Nsight Compute over a mixed step's attention layer as ranges (device machine; `run` with carry [".deps"]): builds
# bench_attention (NO_BUILD=1 skips that), then runs `bench_attention --pair --reps 2 --profile-ranges` under
# application-range replay. Each cudaProfilerStart / Stop range it marks (per pairing: the prefill alone, the decode alone,
# the two issued together) is one result whose metrics cover every kernel that ran in it, concurrent ones included:
# duration, DRAM and L2 throughput, L2 → SM bytes, SM throughput. The question (docs/BENCHMARKS.md "Session 18"): is the
# pair bound by the L2 (the prefill streaming K/V from L2 while the decode pulls its KV from DRAM through it)?
# Report: $OUT/ncu_attention_pair.txt, key lines printed. Written in session 18 and not yet run on a device: if this
# ncu rejects a metric in range mode, drop it from METRICS.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
if [ "${NO_BUILD:-0}" != 1 ]; then bash scripts/build_gpu.sh bench_attention || exit 1; fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
METRICS="${METRICS:-gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed}"
f="$OUT/ncu_attention_pair.txt"
timeout 500 "$NCU" --replay-mode app-range --profile-from-start off --clock-control none --metrics "$METRICS" \
  build-gpu/apps/bench_attention --pair --reps 2 --profile-ranges > "$f" 2>&1
echo "ncu attention pair rc=$?"
grep -E "profile ranges|Range|gpu__time|dram__|lts__|l1tex__|sm__throughput|==ERROR|==WARNING" "$f" | head -80
