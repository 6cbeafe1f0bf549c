#!/usr/bin/env bash
# One training run of surf-tiny on the GPU machine (device tool), from the repo root there:
#   DATA=.train_data/data MODEL=.train_data/model STEPS=N MINUTES=M bash train/gpu_train.sh
# with `.train_data` carried (git-ignored here; it holds the packed data and the model folder's config and
# tokenizer). A checkpoint at .train_data/ckpt/last.pt (carried back from an earlier run) is resumed.
# The exported weights and the log land in $OUT.
#
# Chained runs (CHAIN=1): one call's upload is small, but a machine kept warm between calls keeps the
# files outside the checkout that the earlier calls left. Each call then carries only a new packed folder
# (.train_data/pN), which joins the chain's data in $CHAIN_DIR, trains on all of it, starts from
# .train_data/init when carried, else the weights the previous call left there, else $INIT (a model folder
# in the checkout, such as the shipped models/surf-tiny, which every call uploads anyway), and leaves its own
# there. NEED_PREVIOUS=1 refuses to start without the previous call's weights.
set -euo pipefail
export PYTHONUNBUFFERED=1
: "${MODEL:?}" "${STEPS:?}" "${MINUTES:=8}" "${OUT:=/tmp/surf_tiny_out}"
CKPT=${CKPT:-.train_data/ckpt}
ARGS=()
if [ "${CHAIN:-0}" = 1 ]; then
    # The sync of the working tree removes git-ignored paths that a call does not carry, so the chain's
    # state lives outside the checkout.
    CH=${CHAIN_DIR:-/tmp/surf_tiny_chain}
    mkdir -p "$CH/data"
    for p in .train_data/p*/; do
        [ -d "$p" ] || continue  # a call may carry no new data and train on the chain's
        p=${p%/}; rm -rf "$CH/data/${p##*/}"; cp -r "$p" "$CH/data/"
    done
    DATA=$(ls -d "$CH"/data/p*/ | sed 's:/$::' | paste -sd,)
    CKPT=$CH/ckpt
    rm -rf "$CKPT"
    if [ "${NEED_PREVIOUS:-0}" = 1 ] && [ ! -d "$CH/latest" ] && [ ! -d .train_data/init ]; then
        echo "chain: no weights from a previous call (the machine went cold): nothing trained" >&2
        exit 3
    fi
    if [ -d .train_data/init ]; then ARGS+=(--init .train_data/init)
    elif [ -d "$CH/latest" ]; then ARGS+=(--init "$CH/latest")
    elif [ -n "${INIT:-}" ]; then ARGS+=(--init "$INIT"); fi
    ARGS+=(--out "$CH/latest")  # train.py replaces the folder only once the new export is complete
    echo "chain: data $DATA; ${ARGS[*]}"
fi
DATA=${DATA:-}  # empty only for the grounding phase: TRAIN_ARGS="--synth-only ..." (train/README.md)
# Fonts for synthetic pages (synth.py) travel packed: .train_data/fonts.tar.xz (train/README.md).
if [ -f .train_data/fonts.tar.xz ]; then
    mkdir -p /tmp/surf_fonts && tar -xJf .train_data/fonts.tar.xz -C /tmp/surf_fonts
    ARGS+=(--synth-fonts /tmp/surf_fonts)
fi
mkdir -p "$OUT" "$CKPT"
python3 -c "import torch, transformers, PIL; print('torch', torch.__version__, 'transformers', transformers.__version__, 'pillow', PIL.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
python3 -m train.surf_tiny.train --data "$DATA" --model "$MODEL" --ckpt "$CKPT" --steps "$STEPS" \
    --max-minutes "$MINUTES" --workers "${WORKERS:-14}" --weights-out "$OUT/weights" "${ARGS[@]}" ${TRAIN_ARGS:-} \
    2>&1 | tee -a "$OUT/train.log"
