#!/usr/bin/env bash
set -uo pipefail
REPO="$(pwd)"; R="$OUT/r"; mkdir -p "$R"
export ENCODER_SIZES=minilm SMOKE_PIPELINE=0
t0=$SECONDS
if [[ ! -d /tmp/site/spacy_sciner ]]; then
  bash scripts/gpu/setup_device.sh > "$R/setup.log" 2>&1 || { tail -40 "$R/setup.log"; exit 1; }
else
  # warm machine: reinstall only the working tree's spacy_sciner (the code may have changed)
  rm -rf /tmp/site/spacy_sciner && cp -r spacy_sciner /tmp/site/
fi
echo "setup done in $((SECONDS - t0))s"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONNOUSERSITE=1 TOKENIZERS_PARALLELISM=false
python3 benchmarks/work/pft_gpu/make_corpus.py .gpu/data/scierc/dev.json /tmp/corpus.jsonl
run() {
    local name=$1 pp=$2 obj=$3; shift 3
    local t=$SECONDS
    (cd / && PYTHONPATH="$pp" timeout 120 python3 -m spacy_sciner pft /tmp/corpus.jsonl "/tmp/runs2/$name" \
        --encoder /tmp/encoders/minilm --objective "$obj" --gpu-id 0 --max-steps 600 --eval-every 1000 \
        --save-every 1000 --log-every 10 --seed 0 "$@") > "$R/$name.txt" 2>&1
    echo "$name rc=$? $((SECONDS - t))s: $(tail -2 "$R/$name.txt" | head -1)"
    cp "/tmp/runs2/$name/pft_log.json" "$R/$name.json" 2>/dev/null
}
OLD="$REPO/benchmarks/work/pft_gpu/old:/tmp/site"
run new_random /tmp/site mlm_random
run old_random "$OLD" mlm_random
run new_cand /tmp/site mlm_cand+ecb
run old_cand "$OLD" mlm_cand+ecb
t=$SECONDS
PYTHONPATH=/tmp/site timeout 150 python3 benchmarks/pft_speed.py --gpu-id 0 --encoder /tmp/encoders/minilm \
    --data .gpu/data/scierc/dev.json --rounds 4 --steps 20 --threads 4 --loader-batches 200 --out "$R/pft_speed_gpu" \
    > "$R/pft_speed_gpu.txt" 2>&1
echo "pft_speed rc=$? $((SECONDS - t))s"; tail -25 "$R/pft_speed_gpu.txt"
tar -C "$R" -czf "$OUT/run2.tgz" .
echo "total $((SECONDS - t0))s"
