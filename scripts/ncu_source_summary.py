#!/usr/bin/env python3
"""Summarises an Nsight Compute source-page CSV (`ncu --section SourceCounters --section WarpStateStats --page source
--print-source sass --csv`): warp-stall samples by execution count (loop bodies vs once-a-block code), the stall
reasons of all samples and of the most-sampled execution count, samples by opcode, and the most-sampled instructions
with their main stall reason. Usage: ncu_source_summary.py FILE.csv [TOP=40]"""
import collections
import csv
import sys


def main(path, top):
    rows = list(csv.reader(l for l in open(path) if l.startswith('"')))
    hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr = rows[hi]
    ix = {h: i for i, h in enumerate(hdr)}
    reasons = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
    seq = []
    for r in rows[hi + 1:]:
        try:
            seq.append((r[ix["Address"]], r[ix["Source"]].strip(), float(r[ix["Instructions Executed"]] or 0),
                        float(r[ix["Warp Stall Sampling (All Samples)"]] or 0), {k: float(r[ix[k]] or 0) for k in reasons}))
        except (IndexError, ValueError):
            pass
    tot = sum(x[3] for x in seq) or 1

    def shares(counter):
        return [(k[6:], round(100 * v / max(1, sum(counter.values())), 1)) for k, v in counter.most_common(10)]

    def op(src):
        t = src.split()
        return (t[1] if t and t[0].startswith('@') and len(t) > 1 else (t[0] if t else '?')).split('.')[0]

    by_ex = collections.Counter()
    for x in seq:
        by_ex[x[2]] += x[3]
    print("samples by execution count:", [(int(k), round(100 * v / tot, 1)) for k, v in by_ex.most_common(8)])
    everything = collections.Counter()
    for x in seq:
        everything.update(x[4])
    print("stall reasons, all samples:", shares(everything))
    loop = by_ex.most_common(1)[0][0]
    busiest = collections.Counter()
    for x in seq:
        if x[2] == loop:
            busiest.update(x[4])
    print(f"stall reasons at the most-sampled execution count {loop:.0f}:", shares(busiest))
    by_op = collections.Counter()
    for x in seq:
        by_op[op(x[1])] += x[3]
    print("samples by opcode:", [(k, round(100 * v / tot, 1)) for k, v in by_op.most_common(16)])
    for x in sorted(seq, key=lambda x: -x[3])[:top]:
        main_reason = max(x[4].items(), key=lambda kv: kv[1])[0][6:] if x[4] else ''
        print(x[0], f"{100 * x[3] / tot:5.1f}% {x[2]:9.0f}", x[1][:90], main_reason)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
