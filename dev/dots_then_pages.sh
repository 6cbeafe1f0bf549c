#!/usr/bin/env bash
# The grounding phase in two steps on one GPU: dev/dot_probe.py learns to read a white square's place at
# surf-tiny's 640-px tile (rows near the residual's scale), then train.py continues from those weights on
# synthetic pages (--synth-only --init). Beside it, the pages alone with the rows' scale left free
# (--scale-weight 0). Logs under $OUT.
set -uo pipefail
DOT_STEPS=${DOT_STEPS:-1500}
PAGE_MINUTES=${PAGE_MINUTES:-4.5}
COMMON="--synth-only --synth-rows 128 --lr 1e-3 --warmup 100 --schedule constant --read-check 100 --rows-scale 30 --synth-workers 7"
OUT=$OUT/free CKPT=/tmp/ck_free MODEL=models/surf-tiny STEPS=100000 MINUTES=$(python3 -c "print($PAGE_MINUTES + 4)") \
    TRAIN_ARGS="$COMMON --scale-weight 0" bash train/gpu_train.sh > $OUT/free.log 2>&1 &
python3 dev/dot_probe.py --device cuda --tile 640 --square 80 --batch 16 --steps "$DOT_STEPS" --every 250 \
    --rows-scale 30 --save /tmp/dots > $OUT/dots.log 2>&1
mkdir -p /tmp/dots_model && cp models/surf-tiny/*.json /tmp/dots_model/ && cp /tmp/dots/* /tmp/dots_model/
OUT=$OUT/pages CKPT=/tmp/ck_pages MODEL=models/surf-tiny STEPS=100000 MINUTES=$PAGE_MINUTES \
    TRAIN_ARGS="$COMMON --init /tmp/dots_model" bash train/gpu_train.sh > $OUT/pages.log 2>&1
wait
for v in dots free pages; do echo "== $v"; grep -E "^step .* gap|reads at|Error" $OUT/$v.log | tail -25; done
