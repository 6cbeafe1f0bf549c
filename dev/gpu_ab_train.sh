#!/usr/bin/env bash
# The first call of a surf-tiny chain (train/gpu_train.sh, CHAIN=1) with two variants compared, each given by
# extra train.py arguments: A_ARGS (default: the --init weights rebalanced) and B_ARGS (default: the language
# model from --init with a fresh vision tower and projector). Both train side by side on .train_data/p1 (+ synthetic pages) for
# AB_MINUTES; the one with the lower held-out localizer median error then continues alone for REST_MINUTES
# and its weights become the chain's (/tmp/surf_tiny_chain/latest), so that later calls continue it with
# `CHAIN=1 NEED_PREVIOUS=1 bash train/gpu_train.sh`.
set -euo pipefail
export PYTHONUNBUFFERED=1
: "${OUT:=/tmp/surf_tiny_out}" "${AB_MINUTES:=3}" "${REST_MINUTES:=4}"
CH=/tmp/surf_tiny_chain
rm -rf "$CH" && mkdir -p "$CH/data" "$OUT"
cp -r .train_data/p1 "$CH/data/"
mkdir -p /tmp/surf_fonts && tar -xJf .train_data/fonts.tar.xz -C /tmp/surf_fonts
common=(--data "$CH/data/p1" --model .train_data/model --init .train_data/init --steps 1000000
        --synth-fonts /tmp/surf_fonts --holdout-limit 150 ${TRAIN_ARGS:-})
python3 -m train.surf_tiny.train "${common[@]}" --ckpt "$CH/ckA" --max-minutes "$AB_MINUTES" --workers 7 \
    --synth-workers 7 ${A_ARGS:---rebalance} >"$OUT/A.log" 2>&1 &
python3 -m train.surf_tiny.train "${common[@]}" --ckpt "$CH/ckB" --max-minutes "$AB_MINUTES" --workers 7 \
    --synth-workers 7 ${B_ARGS:---fresh-vision} >"$OUT/B.log" 2>&1 &
wait
err() { grep '^held-out (end' "$OUT/$1.log" | sed 's/.*"localizer".*"median_err": \([0-9.]*\).*/\1/' | head -1; }
a=$(err A) b=$(err B)
echo "held-out localizer median error: A $a px, B $b px"
win=B
if [ -n "$a" ] && { [ -z "$b" ] || python3 -c "import sys; sys.exit(0 if $a < $b else 1)"; }; then win=A; fi
echo "continuing $win"
python3 -m train.surf_tiny.train "${common[@]}" --ckpt "$CH/ck$win" --max-minutes "$REST_MINUTES" --workers 14 \
    --synth-workers 14 --out "$CH/latest" --weights-out "$OUT/weights" 2>&1 | tee "$OUT/train.log"
