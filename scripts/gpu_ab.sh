#!/usr/bin/env bash
# Same-machine A/B of a change in one device call (`run` with carry [".deps/usr", ".deps/cutlass-include.tar.xz", "ab_base"]). The base tree is this
# tree with every file under ab_base/ (same relative paths, e.g. ab_base/kernels/cuda/ssu.cu: the old version, from
# `git show REV:path`) put in its place; ab_base/ is git-ignored, so it travels only when carried. Both trees build
# TARGETS at once (build-gpu here, /tmp/ab_base/build-gpu there; BASE_TARGETS, when set, for the base tree), TESTS (gpu test binaries) run on the new tree,
# then each ';'-separated RUNS entry (a command relative to the build directory, e.g. "apps/bench_overlap
# --branches" or "surf bench serve --concurrency 100") runs new, base, new, base … (REPEAT pairs, default 2), so
# drift of the card's clocks falls on both sides. Logs and summary.txt under $OUT; CALL_BUDGET (default 540 s)
# bounds the whole call as in gpu_call.sh. Build logs stay on the device (/tmp/ab_logs; their errors go to the summary):
# the device returns only a few files from $OUT, so it holds summary.txt and the runs' logs only.
set -uo pipefail
CALL_START=$(date +%s)
CALL_BUDGET="${CALL_BUDGET:-540}"
run_limit() {  # seconds a run may take: min($1, what is left of the budget less 10); 0 under a minute
  local left=$(( CALL_BUDGET - ($(date +%s) - CALL_START) - 10 ))
  if [ "$left" -lt 60 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/gpu_out}"; mkdir -p "$OUT"
S="$OUT/summary.txt"
[ -d ab_base ] && [ -n "$(find ab_base -type f | head -1)" ] || { echo "gpu_ab: ab_base/ holds no base files (carry it)" | tee -a "$S"; exit 2; }
D="$ROOT/.deps"
BASE=/tmp/ab_base
rm -rf "$BASE"; mkdir -p "$BASE"
tar -c --exclude='./build*' --exclude=./.git --exclude=./.deps --exclude=./ab_base . | tar -x -C "$BASE"
ln -s "$D" "$BASE/.deps"
(cd ab_base && find . -type f) | while read -r f; do cp "ab_base/$f" "$BASE/$f"; echo "base: $f from ab_base" | tee -a "$S"; done
LOGS=/tmp/ab_logs; mkdir -p "$LOGS"
build() {  # $1 tree, $2 its log directory (configure.log, build.log), $3 targets; $2.errors.txt: what a failed build printed
  LOG_DIR="$2" JOBS=8 bash "$1/scripts/build_gpu.sh" $3 > "$2.errors.txt" 2>&1
}
t0=$(date +%s)
build "$ROOT" "$LOGS/new" "${TARGETS:-bench_overlap}" & pn=$!
build "$BASE" "$LOGS/base" "${BASE_TARGETS:-${TARGETS:-bench_overlap}}" & pb=$!
wait $pn; rn=$?; wait $pb; rb=$?
echo "build new rc=$rn base rc=$rb ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
[ $rn -ne 0 ] && { head -20 "$LOGS/new.errors.txt" | tee -a "$S"; exit 1; }
[ $rb -ne 0 ] && { head -20 "$LOGS/base.errors.txt" | tee -a "$S"; exit 1; }
for t in ${TESTS:-}; do
  lim=$(run_limit 300); [ "$lim" -eq 0 ] && { echo "$t: skipped (call budget spent)" | tee -a "$S"; continue; }
  timeout "$lim" build-gpu/tests/$t > "$OUT/$t.log" 2>&1
  echo "$t: rc=$? $(grep -E 'test cases' "$OUT/$t.log" | tail -1)" | tee -a "$S"
  grep -E "MESSAGE|ERROR|rror:" "$OUT/$t.log" | head -20 | tee -a "$S"
done
IFS=';' read -ra RUN_LIST <<< "${RUNS:-}"
i=0
for r in "${RUN_LIST[@]}"; do
  i=$((i+1))
  for pair in $(seq 1 "${REPEAT:-2}"); do
    for side in new base; do
      dir="$ROOT"; [ $side = base ] && dir="$BASE"
      log="$OUT/run${i}_${side}_${pair}.log"
      lim=$(run_limit "${RUN_TIMEOUT:-300}"); [ "$lim" -eq 0 ] && { echo "run $i $side $pair: skipped (call budget spent)" | tee -a "$S"; continue; }
      (cd "$dir/build-gpu" && timeout "$lim" $r) > "$log" 2>&1
      echo "run $i $side $pair ($r) rc=$?" | tee -a "$S"
      grep -E "${GREP:-^#|^\||stateful|mixed}" "$log" | head -"${GREP_LINES:-12}" | tee -a "$S"
    done
  done
done
