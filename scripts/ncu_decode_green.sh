#!/usr/bin/env bash
# Nsight Compute of the TMA decode attention (kernels/cuda/attention_decode_tma.cu) at two blocks an SM, as
# `bench_attention --pair-green 56 --reps 3` launches it (device machine; `run` with carry [".deps/usr", ".deps/cutlass-include.tar.xz"], after bench_attention is
# built in build-gpu): on every SM (the first table's "TMA, 2 blocks an SM" row), alone on a green context of 56 SMs, and on
# those 56 beside the warp-specialized prefill on the other 76 (as the engine's mixed step runs it). Why: there it sets most
# of the pair's time (docs/BENCHMARKS.md); what bounds it per SM (bytes in flight, the warps' tile chains,
# TMA issue) decides the next change. With --reps 3 every timing makes 6 launches (3 warm-ups); attention_decode_tma_kernel
# launches in order: first table 1 block an SM (0–5), 2 blocks an SM (6–11); on 56 SMs: 1 block an SM alone (12–17) and in
# its two pairs (18–29), 2 blocks an SM alone (30–35), beside the plain prefill (36–41), beside the warp-specialized (42–47).
# Per launch: speed of light, memory workload, warp states, instruction mix; then per-instruction stall sampling on 56 SMs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
source scripts/ncu_launches.sh
APP=(build-gpu/apps/bench_attention --pair-green 56 --reps 3)
for run in "all_sms 9" "green56_alone 33" "green56_pair 45"; do
  set -- $run
  ncu_launch "$OUT/ncu_decode_$1.txt" attention_decode_tma_kernel "$2" \
    dram__bytes_read.sum,smsp__inst_executed.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg \
    "Duration|DRAM Throughput|Memory Throughput|dram__bytes|inst_executed|Warp Cycles Per Issued|Issue Slots Busy|Stall|Achieved Occupancy|Block Limit" \
    -- "${APP[@]}"
done
ncu_source "$OUT/ncu_decode_source.csv" attention_decode_tma_kernel 33 -- "${APP[@]}"
