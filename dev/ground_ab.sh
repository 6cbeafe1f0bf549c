#!/usr/bin/env bash
# Two grounding-phase variants side by side on one GPU (train/README.md, "The grounding phase"); logs under $OUT.
COMMON="--synth-only --synth-rows 128 --lr 1e-3 --warmup 100 --schedule constant --read-check 100 --rows-scale 30 --synth-workers 7"
OUT=$OUT/a CKPT=/tmp/ck_a MODEL=models/surf-tiny STEPS=100000 MINUTES=8 TRAIN_ARGS="$COMMON --synth-sparse --synth-viewports 400x300,320x240,480x360,360x640" bash train/gpu_train.sh > /tmp/a.log 2>&1 &
OUT=$OUT/b CKPT=/tmp/ck_b MODEL=models/surf-tiny STEPS=100000 MINUTES=8 TRAIN_ARGS="$COMMON" bash train/gpu_train.sh > /tmp/b.log 2>&1 &
wait
for v in a b; do echo "== $v"; grep -E "reads at|Error|error" /tmp/$v.log | tail -40; tail -3 /tmp/$v.log; done
