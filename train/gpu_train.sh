#!/usr/bin/env bash
# One training run of surf-tiny on the GPU machine (device tool), from the repo root there:
#   DATA=.train_data/data MODEL=.train_data/model STEPS=N MINUTES=M bash train/gpu_train.sh
# with `.train_data` carried (git-ignored here; it holds the packed data and the model folder's config and
# tokenizer). A checkpoint at .train_data/ckpt/last.pt (carried back from an earlier run) is resumed.
# The exported weights and the log land in $OUT.
#
# Chained runs (CHAIN=1): one call's upload is small, but a machine kept warm between calls keeps the
# git-ignored files of the earlier calls. Each call then carries only a new packed folder
# (.train_data/pN), trains on every .train_data/p* folder present, starts from the weights the previous
# call left in .train_data/chain/latest (or from .train_data/init on the first call), and leaves its own there.
# NEED_PREVIOUS=1 refuses to start without the previous call's weights.
set -euo pipefail
export PYTHONUNBUFFERED=1
: "${MODEL:?}" "${STEPS:?}" "${MINUTES:=8}" "${OUT:=/tmp/surf_tiny_out}"
CKPT=${CKPT:-.train_data/ckpt}
ARGS=()
if [ "${CHAIN:-0}" = 1 ]; then
    DATA=$(ls -d .train_data/p*/ | sed 's:/$::' | paste -sd,)
    CKPT=.train_data/chain/ckpt
    rm -rf "$CKPT"
    if [ "${NEED_PREVIOUS:-0}" = 1 ] && [ ! -d .train_data/chain/latest ]; then
        echo "chain: no weights from a previous call (the machine went cold): nothing trained" >&2
        exit 3
    fi
    if [ -d .train_data/chain/latest ]; then ARGS+=(--init .train_data/chain/latest)
    elif [ -d .train_data/init ]; then ARGS+=(--init .train_data/init); fi
    ARGS+=(--out .train_data/chain/next)
    echo "chain: data $DATA; ${ARGS[*]}"
fi
: "${DATA:?}"
mkdir -p "$OUT" "$CKPT"
python3 -c "import torch, transformers, PIL; print('torch', torch.__version__, 'transformers', transformers.__version__, 'pillow', PIL.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
python3 -m train.surf_tiny.train --data "$DATA" --model "$MODEL" --ckpt "$CKPT" --steps "$STEPS" \
    --max-minutes "$MINUTES" --workers "${WORKERS:-14}" --weights-out "$OUT/weights" "${ARGS[@]}" ${TRAIN_ARGS:-} \
    2>&1 | tee -a "$OUT/train.log"
if [ "${CHAIN:-0}" = 1 ]; then
    rm -rf .train_data/chain/latest && mv .train_data/chain/next .train_data/chain/latest
fi
