#!/usr/bin/env bash
# Nsight Compute over one prefill-attention launch per kernel (device machine; `run` with carry [".deps"]):
# builds bench_attention, then profiles its 4th launch (after 3 warm-ups) of CASE on each of KERNELS.
# Reports under $OUT/ncu_<kernel>.txt; the key lines are printed. Example:
#   KERNELS="wgmma 128;mma 32" CASE=llm bash scripts/ncu_attention.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
D="$PWD/.deps"; export PKG_CONFIG_PATH="$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSURF_GPU_ONLY=ON -DSURF_DEPS_PREFIX="$D" -DCMAKE_PREFIX_PATH="$D/usr" > "$OUT/configure.log" 2>&1
cmake --build build-gpu -j16 --target bench_attention > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
IFS=';' read -ra KS <<< "${KERNELS:-wgmma 128;mma 32}"
for k in "${KS[@]}"; do
  f="$OUT/ncu_${k/ /_}.txt"
  timeout 240 "$NCU" --clock-control none -k regex:attention_prefill --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
    --section InstructionStats --section Occupancy --section SourceCounters \
    build-gpu/apps/bench_attention --reps 1 --kernel "$k" --case "${CASE:-llm}" > "$f" 2>&1
  echo "== $k rc=$?"
  grep -E "Duration|Throughput|Pipe|Stall|Bank|Issue Slot|Warp Cycles|Registers|Achieved|Executed Ipc|onflict" "$f" | head -40
done
