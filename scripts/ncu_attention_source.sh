#!/usr/bin/env bash
# Per-instruction warp-stall sampling (Nsight Compute source page, SASS) of the warp-specialized prefill attention
# on one bench_attention case (device machine, after bench_attention is built in build-gpu: scripts/ncu_attention.sh
# or attention_matrix.sh build it). KERNEL (one bench_attention kernel name) / CASE. Writes the full CSV and a summary:
# samples by opcode and the 40 most-sampled instructions. docs/ncu_source_*_s15_* were summarised from such CSVs.
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
hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
hdr = rows[hi]; ix = {h: i for i, h in enumerate(hdr)}
reasons = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
seq = []
for r in rows[hi + 1:]:
    try: seq.append((r[ix["Address"]], r[ix["Source"]].strip(), float(r[ix["Instructions Executed"]] or 0),
                     float(r[ix["Warp Stall Sampling (All Samples)"]] or 0), {k: float(r[ix[k]] or 0) for k in reasons}))
    except (IndexError, ValueError): pass
tot = sum(x[3] for x in seq) or 1
def op(src):
    t = src.split()
    return (t[1] if t and t[0].startswith('@') and len(t) > 1 else (t[0] if t else '?')).split('.')[0]
by_ex = collections.Counter()
for x in seq: by_ex[x[2]] += x[3]
print("samples by execution count (loop bodies vs once-a-block code):", [(int(k), round(100 * v / tot, 1)) for k, v in by_ex.most_common(8)])
loop = by_ex.most_common(1)[0][0]
g = collections.Counter()
for x in seq:
    if x[2] == loop: g.update(x[4])
print(f"most-sampled execution count {loop:.0f}: stall reasons", [(k[6:], round(100 * v / max(1, sum(g.values())), 1)) for k, v in g.most_common(8)])
by_op = collections.Counter()
for x in seq: by_op[op(x[1])] += x[3]
print("samples by opcode:", [(k, round(100 * v / tot, 1)) for k, v in by_op.most_common(16)])
for x in sorted(seq, key=lambda x: -x[3])[:40]: print(x[0], f"{100 * x[3] / tot:5.1f}% {x[2]:9.0f}", x[1][:90])
PY
