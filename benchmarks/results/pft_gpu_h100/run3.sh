#!/usr/bin/env bash
set -uo pipefail
R="$OUT/r"; mkdir -p "$R"
[[ -d /tmp/site/spacy_sciner ]] || { echo "not warm"; exit 3; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONNOUSERSITE=1 TOKENIZERS_PARALLELISM=false
t=$SECONDS
PYTHONPATH=/tmp/site timeout 200 python3 benchmarks/pft_speed.py --gpu-id 0 --encoder /tmp/encoders/minilm \
    --data .gpu/data/scierc/dev.json --rounds 4 --steps 15 --threads 4 --loader-batches 200 --out "$R/pft_speed_gpu" \
    > "$R/pft_speed_gpu.txt" 2>&1
echo "pft_speed rc=$? $((SECONDS - t))s"; grep -v "no MLM head" "$R/pft_speed_gpu.txt" | tail -32
