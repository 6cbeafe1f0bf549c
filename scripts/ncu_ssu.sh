#!/usr/bin/env bash
# Nsight Compute of the decode rows' state update as serving runs it (fp32 state, replay window 8, staggered counts,
# bulk staging, 100 rows): the "SSU alone" launches of `bench_overlap --branches` (device machine; `run` with carry
# [".deps"], after bench_overlap is built in build-gpu). Two passes over one launch: speed of light, memory
# workload (DRAM bytes, L2 hit rates), warp states, occupancy; then per-instruction warp-stall sampling (source page,
# SASS), summarised by opcode and the 30 most-sampled instructions.
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
g = collections.Counter()
for x in seq: g.update(x[4])
print("stall reasons (all samples):", [(k[6:], round(100 * v / max(1, sum(g.values())), 1)) for k, v in g.most_common(10)])
def op(src):
    t = src.split()
    return (t[1] if t and t[0].startswith('@') and len(t) > 1 else (t[0] if t else '?')).split('.')[0]
by_op = collections.Counter()
for x in seq: by_op[op(x[1])] += x[3]
print("samples by opcode:", [(k, round(100 * v / tot, 1)) for k, v in by_op.most_common(16)])
for x in sorted(seq, key=lambda x: -x[3])[:30]:
    top = max(x[4].items(), key=lambda kv: kv[1])[0][6:] if x[4] else ''
    print(x[0], f"{100 * x[3] / tot:5.1f}% {x[2]:9.0f}", x[1][:80], top)
PY
