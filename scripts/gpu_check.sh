#!/usr/bin/env bash
# One device call: build the CUDA targets (GPU-only configuration), run every gpu test and the kernel
# benchmarks (bench_kernels, bench_attention, bench_gemm: cuBLASLt vs gemm_wgmma at the engine's shapes, bench_step: per-op profile of the 12B step), write logs to $OUT and print a short summary last. Needs .deps/ (scripts/fetch_gpu_deps.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/gpu_out}"
mkdir -p "$OUT"
JOBS="$(nproc)"
status() { echo "$1" | tee -a "$OUT/summary.log"; }
: > "$OUT/summary.log"

{ date -u; nvidia-smi; nvcc --version; cmake --version; } > "$OUT/env.log" 2>&1
status "card: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"

t0=$(date +%s)
LOG_DIR="$OUT" bash scripts/build_gpu.sh  # configure only: the targets are read from the build files it writes
cfg=$?
status "configure: rc=$cfg ($(( $(date +%s) - t0 ))s)"
[ $cfg -ne 0 ] && exit 1

targets=$(ninja -C build-gpu -t targets all 2>/dev/null | grep -oE '^(gpu_test_[a-z0-9_]+|bench_kernels|bench_attention|bench_gemm|bench_step)(:| )' | tr -d ': ' | sort -u)
t0=$(date +%s)
LOG_DIR="$OUT" JOBS="$JOBS" bash scripts/build_gpu.sh $targets  # prints the build's error lines if it fails
brc=$?
status "build ($(echo $targets | wc -w) targets): rc=$brc ($(( $(date +%s) - t0 ))s)"

# Register/spill report of the kernels (sm_90a); off by default (same nvcc runs on the dev machine and the
# result is in docs/KERNELS.md), SURF_PTXAS=1 turns it on.
[ "${SURF_PTXAS:-0}" = 1 ] && for f in kernels/cuda/*.cu; do
    nvcc -std=c++20 -O3 --expt-relaxed-constexpr -I. -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c "$f" \
        -o /dev/null 2>&1 | c++filt | grep -E "Compiling entry|registers|spill|stack" | sed "s|^|$(basename $f): |"
done > "$OUT/ptxas.log" 2>&1
[ -s "$OUT/ptxas.log" ] && status "ptxas: $(grep -cE '[1-9][0-9]* bytes spill' "$OUT/ptxas.log") kernels with spills (see ptxas.log)"

t0=$(date +%s)
ctest --test-dir build-gpu -L gpu -V --timeout 600 > "$OUT/ctest.log" 2>&1
trc=$?
status "ctest -L gpu: rc=$trc ($(( $(date +%s) - t0 ))s): $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
grep -E '\[FAIL\]|ERROR|FAILED|mismatch|Subprocess aborted|Exception' "$OUT/ctest.log" | head -40 | tee -a "$OUT/summary.log"

if [ -x build-gpu/apps/bench_kernels ] || [ -x build-gpu/bench_kernels ]; then
    bench=$(ls build-gpu/apps/bench_kernels build-gpu/bench_kernels 2>/dev/null | head -1)
    t0=$(date +%s)
    timeout 400 "$bench" > "$OUT/bench_kernels.log" 2>&1
    status "bench_kernels: rc=$? ($(( $(date +%s) - t0 ))s)"
fi
for b in bench_attention bench_gemm bench_step; do
    if [ -x "build-gpu/apps/$b" ]; then
        t0=$(date +%s)
        timeout 200 "build-gpu/apps/$b" > "$OUT/$b.log" 2>&1
        status "$b: rc=$? ($(( $(date +%s) - t0 ))s)"
    fi
done
if [ "${SURF_SKIP_TORCH:-0}" != 1 ] && python3 -c "import torch" 2>/dev/null && [ -f tests/reference/bench_torch_kernels.py ]; then
    timeout 120 python3 tests/reference/bench_torch_kernels.py > "$OUT/bench_torch.log" 2>&1
    status "bench_torch: rc=$?"
fi

echo
echo "==== per-check results ===="
grep -E '^\[(ok|FAIL)\]|\[ok\]|\[FAIL\]' "$OUT/ctest.log" | sed 's/^.*\(\[ok\]\|\[FAIL\]\)/\1/' | cut -c1-150 | tail -70
echo
echo "==== benchmark ===="
sed -n '/^## Kernel benchmark/,$p' "$OUT/bench_kernels.log" 2>/dev/null
echo
echo "==== summary ===="
cat "$OUT/summary.log"
