#!/usr/bin/env bash
# Runs probe variants side by side on one GPU (one line of arguments each, from the file $1 or stdin; a line
# that starts with a dev/*.py script runs that probe, any other line dev/dot_probe.py), each for at most $LIMIT
# seconds; logs under $OUT (dot_<k>.log) and a summary of the last lines. The fonts that dev/read_probe.py
# paints with travel as .train_data/fonts.tar.xz and are unpacked to /tmp/surf_fonts.
set -uo pipefail
set -f  # argument lines may hold a layer pattern such as "*-M-M*-M-": never a file glob
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/dot_out}"
LIMIT="${LIMIT:-480}"
mkdir -p "$OUT"
if [ -f .train_data/fonts.tar.xz ]; then mkdir -p /tmp/surf_fonts && tar -xJf .train_data/fonts.tar.xz -C /tmp/surf_fonts; fi
k=0
while read -r args; do
    [ -z "$args" ] && continue
    k=$((k + 1))
    echo "$args" > "$OUT/dot_$k.args"
    case "$args" in
        dev/*.py*) script=${args%% *}; rest=${args#"$script"} ;;
        *) script=dev/dot_probe.py; rest=$args ;;
    esac
    timeout "$LIMIT" python3 $script --device cuda $rest > "$OUT/dot_$k.log" 2>&1 &
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
