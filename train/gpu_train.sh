#!/usr/bin/env bash
# One training run of surf-tiny on the GPU machine (device tool), from the repo root there:
#   DATA=.train_data/data MODEL=.train_data/model STEPS=N MINUTES=M bash train/gpu_train.sh
# with `.train_data` carried (git-ignored here; it holds the packed data and the model folder's config and
# tokenizer). A checkpoint at .train_data/ckpt/last.pt (carried back from an earlier run) is resumed.
# The exported weights and the log land in $OUT.
set -euo pipefail
export PYTHONUNBUFFERED=1
: "${DATA:?}" "${MODEL:?}" "${STEPS:?}" "${MINUTES:=8}" "${OUT:=/tmp/surf_tiny_out}"
CKPT=${CKPT:-.train_data/ckpt}
mkdir -p "$OUT" "$CKPT"
python3 -c "import torch, transformers, PIL; print('torch', torch.__version__, 'transformers', transformers.__version__, 'pillow', PIL.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
python3 -m train.surf_tiny.train --data "$DATA" --model "$MODEL" --ckpt "$CKPT" --steps "$STEPS" \
    --max-minutes "$MINUTES" --workers "${WORKERS:-14}" --weights-out "$OUT/weights" ${TRAIN_ARGS:-} 2>&1 | tee "$OUT/train.log"
