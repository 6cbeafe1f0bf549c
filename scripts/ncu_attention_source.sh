#!/usr/bin/env bash
# Per-instruction warp-stall sampling (Nsight Compute source page, SASS) of the warp-specialized prefill attention
# on one bench_attention case (device machine, after bench_attention is built in build-gpu). KERNEL / CASE as in
# ncu_attention.sh. Writes the full CSV and a summary: samples by opcode and the 40 most-sampled instructions.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
K="${KERNEL:-wgmma 208wt}"; C="${CASE:-vit3}"
F="$OUT/ncu_source_${C}_${K// /_}.csv"
timeout 240 "$NCU" --clock-control none -k regex:attention_prefill_wgmma_ws --launch-skip 3 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
  build-gpu/apps/bench_attention --reps 2 --kernel "$K" --case "$C" > "$F" 2>&1
echo "ncu source $K $C rc=$?"
python3 - "$F" <<'PY'
import csv, sys, collections
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
hdr = rows[0]; print("columns:", hdr[:12])
def col(name):
    for i, h in enumerate(hdr):
        if h.strip() == name: return i
    return None
src, samp, nis, ex = col("Source"), col("Warp Stall Sampling (All Samples)"), col("Warp Stall Sampling (Not-issued Samples)"), col("Instructions Executed")
addr = col("Address")
data = []
for r in rows[1:]:
    try: data.append((r[addr], r[src].strip(), float(r[samp] or 0), float(r[nis] or 0), float(r[ex] or 0)))
    except Exception: pass
tot = sum(d[2] for d in data) or 1
by = collections.Counter()
for d in data: by[d[1].split()[0].lstrip('@!P0123456789T ').split('.')[0] if d[1] else '?'] += d[2]
print("total samples", tot)
for op, n in by.most_common(25): print(f"{op:20s} {100*n/tot:5.1f}%")
print("top instructions (address, samples %, not-issued %, executed):")
for d in sorted(data, key=lambda d: -d[2])[:40]: print(d[0], f"{100*d[2]/tot:5.1f}% {100*d[3]/tot:5.1f}% {d[4]:10.0f}", d[1][:90])
PY
