#!/usr/bin/env bash
# Nsight Compute of the one-launch mixed attention (kernels/cuda/attention_mixed.cu) as `bench_attention --mixed --reps 3`
# launches it (device machine; `run` with carry [".deps"], after bench_attention is built in build-gpu): the full pair (924
# new tokens on 5,000 past beside 100 decode rows on 5,000), the decode side beside a 1-token prefill, and the prefill side
# beside one decode row. With --reps 3 every timing makes 6 launches (3 warm-ups), so the first timed launch of each is the
# 4th, 10th and 16th attention_mixed_kernel. Per launch: speed of light, memory workload (DRAM and L2 → SM bytes, L1 /
# shared-memory pipes), warp states (which stall the copying and multiplying warps hit), instruction mix; then one pass of
# per-instruction warp-stall sampling of the full pair, summarised by scripts/ncu_source_summary.py.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
source scripts/ncu_launches.sh
APP=(build-gpu/apps/bench_attention --mixed --reps 3)
for run in "full 3" "decode_side 9" "prefill_side 15"; do
  set -- $run
  ncu_launch "$OUT/ncu_mixed_$1.txt" attention_mixed_kernel "$2" \
    dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_pipe_lsu.sum \
    "Duration|DRAM Throughput|Memory Throughput|L2 Hit|dram__bytes|lts__t_sectors|inst_executed|wavefronts|Warp Cycles Per Issued|Issue Slots Busy|Stall|Mem Pipes Busy" \
    -- "${APP[@]}"
done
ncu_source "$OUT/ncu_mixed_source.csv" attention_mixed_kernel 3 -- "${APP[@]}"
