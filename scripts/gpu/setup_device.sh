#!/usr/bin/env bash
# First step of every command on the GPU machine (no network there). With .gpu carried
# (built here by scripts/gpu/build_bundle.sh), the device command is
#
#     bash scripts/gpu/setup_device.sh && PYTHONPATH=/tmp/site python3 benchmarks/gpu_check.py ...
#
# 1. unpacks .gpu/bundle.tar.xz into $SITE (spaCy 3.8, thinc 8.3, spacy-transformers 1.4,
#    transformers 4.53, tokenizers 0.21, huggingface-hub 0.36, pydantic, ...); with
#    PYTHONPATH=$SITE they shadow the image's transformers 5 / tokenizers 0.23 / hub 1.x;
# 2. installs spacy-sciner from this working tree into $SITE (a dist-info, so spaCy finds
#    the entry points);
# 3. writes random-weight encoders $ENCODERS/{minilm,bert-base} from MiniLM's config/vocab;
# 4. runs scripts/gpu/smoke_check.py: versions and where they come from, entry points, GPU
#    (torch, cupy, thinc require_gpu, torch<->cupy), one sciner_spancat update on
#    $ENCODERS/minilm; prints one "versions: ..." line.
# Any failure exits non-zero. Env (defaults for the GPU machine): PY (python3), SITE
# (/tmp/site), ENCODERS (/tmp/encoders), ENCODER_SIZES ("minilm bert-base"), GPU_DIR
# (<repo>/.gpu), REQUIRE_CUDA (1; 0 for a CPU rehearsal), SMOKE_PIPELINE (1).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PY:-python3}"
SITE="${SITE:-/tmp/site}"
ENCODERS="${ENCODERS:-/tmp/encoders}"
ENCODER_SIZES="${ENCODER_SIZES-minilm bert-base}"  # "" = none
GPU_DIR="${GPU_DIR:-$REPO/.gpu}"
REQUIRE_CUDA="${REQUIRE_CUDA:-1}"
SMOKE_PIPELINE="${SMOKE_PIPELINE:-1}"
t0=$SECONDS

die() { echo "setup_device: FAILED: $*" >&2; exit 1; }
trap 'echo "setup_device: FAILED at line $LINENO (exit $?)" >&2' ERR

[[ -f "$GPU_DIR/bundle.tar.xz" ]] || die "no $GPU_DIR/bundle.tar.xz: run scripts/gpu/build_bundle.sh here and carry .gpu"
[[ -f "$GPU_DIR/encoders/minilm-config/config.json" ]] || die "no $GPU_DIR/encoders/minilm-config (build_bundle.sh stages it)"
want_py="$(cat "$GPU_DIR/bundle_python.txt" 2>/dev/null || echo 3.12)"
"$PY" -c "import sys; sys.exit('%d.%d' % sys.version_info[:2] != '$want_py')" \
    || die "$PY is $("$PY" -V 2>&1), the bundle is for CPython $want_py"

echo "setup_device: unpacking the bundle into $SITE"
rm -rf "$SITE"
mkdir -p "$SITE"
tar -xJf "$GPU_DIR/bundle.tar.xz" -C "$SITE"
export PYTHONPATH="$SITE"
export PYTHONNOUSERSITE=1
# No hub, no telemetry: everything is local.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1

echo "setup_device: installing spacy-sciner from $REPO into $SITE"
# The working tree's code (others edit it between runs), built with the image's setuptools
# from a copy, so that no build/ or egg-info lands in the working tree. setup.cfg admits only
# Python 3.11 (the tested one): 3.12 here is deliberate.
SRC="$(mktemp -d "${TMPDIR:-/tmp}/sciner-src.XXXXXX")"
tar -C "$REPO" -cf - --exclude=__pycache__ setup.cfg pyproject.toml README.md spacy_sciner \
    | tar -C "$SRC" -xf -
"$PY" -m pip install -q --no-deps --no-build-isolation --no-index --ignore-requires-python \
    --no-compile --no-warn-script-location --disable-pip-version-check \
    --target "$SITE" "$SRC"
rm -rf "$SRC"
compgen -G "$SITE/spacy_sciner-*.dist-info/entry_points.txt" >/dev/null \
    || die "no spacy_sciner dist-info with entry points in $SITE"

for size in $ENCODER_SIZES; do
    (cd / && "$PY" "$REPO/scripts/gpu/make_random_encoder.py" "$ENCODERS/$size" --size "$size" \
        --seed 0 --source "$GPU_DIR/encoders/minilm-config")
done

smoke_args=(--site "$SITE")
[[ "$REQUIRE_CUDA" == 1 ]] && smoke_args+=(--require-cuda)
if [[ "$SMOKE_PIPELINE" == 1 ]]; then
    first_size="${ENCODER_SIZES%% *}"
    [[ -n "$first_size" ]] && smoke_args+=(--encoder "$ENCODERS/$first_size")
fi
# From / so that nothing is imported from the working tree by accident.
(cd / && "$PY" "$REPO/scripts/gpu/smoke_check.py" "${smoke_args[@]}")
echo "setup_device: OK in $((SECONDS - t0))s (site $SITE, encoders $ENCODERS: $ENCODER_SIZES)"
