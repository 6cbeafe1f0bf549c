#!/usr/bin/env bash
# Runs dev/dot_probe.py variants side by side on one GPU (one line of arguments each, from the file $1 or
# stdin), each for at most $LIMIT seconds; logs under $OUT (dot_<k>.log) and a summary of the last lines.
set -uo pipefail
set -f  # argument lines may hold a layer pattern such as "*-M-M*-M-": never a file glob
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/dot_out}"
LIMIT="${LIMIT:-480}"
mkdir -p "$OUT"
k=0
while read -r args; do
    [ -z "$args" ] && continue
    k=$((k + 1))
    echo "$args" > "$OUT/dot_$k.args"
    timeout "$LIMIT" python3 dev/dot_probe.py --device cuda $args > "$OUT/dot_$k.log" 2>&1 &
done < "${1:-/dev/stdin}"
wait
set +f
for f in "$OUT"/dot_*.args; do
    n="${f%.args}"
    echo "== $(cat "$f")"
    grep -E "^step" "$n.log" | awk 'NR % 4 == 1' | tail -6
    grep -E "^step" "$n.log" | tail -1
    grep -E "Error|error" "$n.log" | tail -2
done
