#!/usr/bin/env bash
# The H200 record of docs/BENCHMARKS.md in three device calls (each under the 600 s a command may run):
#   PART=bf16 bash scripts/gpu_record.sh       # bf16 stateful C = 1, 16, 64, 100 (10 steps), then the HF
#                                              # transformers baseline (sessions in batches of 6)
#   PART=fp8 bash scripts/gpu_record.sh        # the same stateful runs with --quantize fp8
#   PART=stateless bash scripts/gpu_record.sh  # stateless C = 100 (5 steps), bf16 then fp8
# A warm machine keeps build-gpu between the calls (the first call builds, about 2 minutes). Logs under $OUT
# (build.log, record_<part>*.log); the table rows and each run's header lines go to $OUT/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
S="$OUT/summary.txt"
PART="${PART:-bf16}"
case "$PART" in
  bf16 | fp8 | stateless) ;;
  *) echo "gpu_record: PART is bf16, fp8 or stateless, got $PART" >&2; exit 2 ;;
esac
echo "card: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $(date -u)" | tee -a "$S"
LOG_DIR="$OUT" bash scripts/build_gpu.sh bench_serve surf || exit 1
run() {  # $1 log name, $2 limit in seconds, then bench_serve arguments
  local log="$OUT/$1.log" limit="$2"; shift 2
  echo "run: surf bench serve $*" | tee -a "$S"
  timeout "$limit" build-gpu/surf bench serve "$@" > "$log" 2>&1
  echo "  rc=$?" | tee -a "$S"
  grep -E "^# bench_serve|^# capacity|^\| (stateful|stateless|HF)|^\| mode|baseline" "$log" | cut -c1-400 | tee -a "$S"
}
case "$PART" in
  bf16) run record_bf16 420 --concurrency 1,16,64,100 --steps 10 --mode stateful --hf-baseline 6 ;;
  fp8) run record_fp8 300 --concurrency 1,16,64,100 --steps 10 --mode stateful --quantize fp8 ;;
  stateless)
    run record_stateless_bf16 200 --concurrency 100 --steps 5 --mode stateless
    run record_stateless_fp8 200 --concurrency 100 --steps 5 --mode stateless --quantize fp8
    ;;
esac
