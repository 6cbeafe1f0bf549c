#!/usr/bin/env bash
# One device call of choice (`run` with carry [".deps/usr", ".deps/cutlass-include.tar.xz"]): build TARGETS, run TESTS (gpu test binaries), then
# the APPS benchmark programs (no arguments), the APP_RUNS benchmark runs (';'-separated, with arguments), bench_step once per ';'-separated STEP_ARGS entry and
# `surf bench serve` once per ';'-separated SERVE_ARGS entry (KTRACE=S: each under apps/bench/kernel_trace.cpp's CUPTI trace, its first S
# seconds left out; add kernel_trace to TARGETS). Logs and a
# summary.txt (what the call printed) go under $OUT, the logs packed into logs.tgz at the end. Example:
#   TARGETS="gpu_test_gpu_forward bench_step bench_serve surf" TESTS="gpu_test_gpu_forward" \
#   STEP_ARGS="--tiles 3 --prefill 924 --prefill-seqs 1 --decode 100" \
#   SERVE_ARGS="--concurrency 100 --mode stateful;--concurrency 100 --mode stateful --overlap-mamba 0" bash scripts/gpu_call.sh
# `surf bench serve` needs the bench_serve target built (TARGETS); TESTS="none" skips the tests.
# CALL_BUDGET (seconds, default 540: under the device's 600-second limit per command) bounds the whole call: every
# run's timeout is cut to what is left, and a run with less than a minute left is skipped, so that a hung test or a
# slow benchmark costs the runs after it, not the logs of the whole call (a command past the limit returns nothing of
# what it printed on the terminal).
set -uo pipefail
CALL_START=$(date +%s)
CALL_BUDGET="${CALL_BUDGET:-540}"
# Seconds a run may take: min(its own limit $1, what is left of the call's budget less 10); 0 when under a minute is left.
run_limit() {
  local left=$(( CALL_BUDGET - ($(date +%s) - CALL_START) - 10 ))
  if [ "$left" -lt 60 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
S="$OUT/summary.txt"
t0=$(date +%s)
LOG_DIR="$OUT" JOBS=16 bash scripts/build_gpu.sh ${TARGETS:-gpu_test_gpu_forward bench_step surf} || exit 1
echo "build $(( $(date +%s) - t0 )) s" | tee -a "$S"
for t in ${TESTS:-gpu_test_gpu_forward}; do
  [ "$t" = none ] && continue
  lim=$(run_limit 300); [ "$lim" -eq 0 ] && { echo "$t: skipped (call budget spent)" | tee -a "$S"; continue; }
  timeout "$lim" build-gpu/tests/$t > "$OUT/$t.log" 2>&1
  echo "$t: rc=$? $(grep -E 'test cases' "$OUT/$t.log" | tail -1)" | tee -a "$S"
  grep -E "MESSAGE|ERROR|rror:|bit for bit" "$OUT/$t.log" | head -20 | tee -a "$S"
done
for a in ${APPS:-}; do  # other benchmark programs, no arguments (e.g. APPS="bench_attention bench_overlap")
  lim=$(run_limit 300); [ "$lim" -eq 0 ] && { echo "$a: skipped (call budget spent)" | tee -a "$S"; continue; }
  timeout "$lim" build-gpu/apps/$a > "$OUT/$a.log" 2>&1
  echo "$a rc=$?" | tee -a "$S"
  grep -E "^#|^\|" "$OUT/$a.log" | head -40 | tee -a "$S"
done
if [ -n "${APP_RUNS:-}" ]; then  # ';'-separated benchmark runs with arguments (app_1.log, …), e.g. APP_RUNS="bench_attention --pair-green 56"
  IFS=';' read -ra ARUNS <<< "$APP_RUNS"
  i=0
  for r in "${ARUNS[@]}"; do
    i=$((i+1))
    lim=$(run_limit 300); [ "$lim" -eq 0 ] && { echo "app run $i: skipped (call budget spent)" | tee -a "$S"; continue; }
    read -ra words <<< "$r"
    timeout "$lim" build-gpu/apps/${words[0]} "${words[@]:1}" > "$OUT/app_$i.log" 2>&1
    echo "app run $i ($r) rc=$?" | tee -a "$S"
    grep -E "^#|^\|" "$OUT/app_$i.log" | head -60 | tee -a "$S"
  done
fi
if [ -n "${STEP_ARGS:-}" ]; then  # ';'-separated: one bench_step run each (bench_step.log, bench_step_2.log, …)
  IFS=';' read -ra STEPS <<< "$STEP_ARGS"
  i=0
  for r in "${STEPS[@]}"; do
    i=$((i+1))
    log="$OUT/bench_step.log"; [ $i -gt 1 ] && log="$OUT/bench_step_$i.log"
    lim=$(run_limit 300); [ "$lim" -eq 0 ] && { echo "bench_step $i: skipped (call budget spent)" | tee -a "$S"; continue; }
    timeout "$lim" build-gpu/apps/bench_step $r > "$log" 2>&1
    echo "bench_step $i ($r) rc=$?" | tee -a "$S"
    grep -E "^#|^###|mixed step|overlap|serial|vs roofline|vision batch with|state_update|replay_fold" "$log" | tee -a "$S"
  done
fi
if [ -n "${SERVE_ARGS:-}" ]; then
  IFS=';' read -ra RUNS <<< "$SERVE_ARGS"
  i=0
  for r in "${RUNS[@]}"; do
    i=$((i+1))
    lim=$(run_limit "${BENCH_TIMEOUT:-300}"); [ "$lim" -eq 0 ] && { echo "serve $i: skipped (call budget spent)" | tee -a "$S"; continue; }
    if [ -n "${KTRACE:-}" ]; then  # traced: kernel_trace's report (TARGETS must build kernel_trace) in ktrace_$i.md
      CUDA_INJECTION64_PATH="$PWD/build-gpu/apps/libkernel_trace.so" SURF_KTRACE_SKIP_S="$KTRACE" SURF_KTRACE_OUT="$OUT/ktrace_$i.md" \
        timeout "$lim" build-gpu/surf bench serve $r > "$OUT/serve_$i.log" 2>&1
    else
      timeout "$lim" build-gpu/surf bench serve $r > "$OUT/serve_$i.log" 2>&1
    fi
    echo "serve $i ($r) rc=$?" | tee -a "$S"
    grep -E "^#|stateful|mixed|tuned" "$OUT/serve_$i.log" | head -12 | tee -a "$S"
    [ -f "$OUT/ktrace_$i.md" ] && head -3 "$OUT/ktrace_$i.md" | tee -a "$S"
  done
fi
# The device returns at most 8 files: every log but the summary goes back in one archive (tar xzf logs.tgz).
( cd "$OUT" && logs=$(ls | grep -v -e '^summary.txt$' -e '^logs.tgz$') && [ -n "$logs" ] && tar czf logs.tgz $logs && rm -f $logs )
