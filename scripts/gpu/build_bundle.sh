#!/usr/bin/env bash
# Build .gpu/ (git-ignored): what the GPU machine needs that its image lacks, carried there by
# the device tool (carry: [".gpu"]). Run from anywhere, here, with network to PyPI:
#
#     bash scripts/gpu/build_bundle.sh
#
# Writes
#   .gpu/bundle.tar.xz              the wheels of scripts/gpu/bundle_requirements.txt (cp312,
#                                   manylinux x86_64) installed into one folder, stripped, xz -9
#   .gpu/encoders/minilm-config/    MiniLM's config.json + tokenizer files (no weights)
#   .gpu/data/scierc/               SciERC {train,dev,test}.json from $DATA (never committed)
# On the machine, scripts/gpu/setup_device.sh unpacks it to /tmp/site and installs spacy-sciner
# from the working tree. Env: BUILD_PY (a Python of PY_VERSION, runs pip install --target;
# default python$PY_VERSION on PATH, else pyenv's), PY_VERSION (3.12), DATA
# (../shared/data beside the checkout), GPU_DIR (.gpu), WHEEL_CACHE (keep downloaded wheels there).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$REPO/scripts/gpu"
PY_VERSION="${PY_VERSION:-3.12}"
PYTAG="cp${PY_VERSION/./}"
GPU_DIR="${GPU_DIR:-$REPO/.gpu}"
DATA="${DATA:-$REPO/../shared/data}"
py_ok() { [[ -n "$1" ]] && "$1" -c "import sys; sys.exit(sys.version[:len('$PY_VERSION')] != '$PY_VERSION')" 2>/dev/null; }
if [[ -z "${BUILD_PY:-}" ]]; then
    # python3.12 on PATH (may be a pyenv shim that refuses), else pyenv's own 3.12.x
    for cand in "$(command -v "python$PY_VERSION" || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$PY_VERSION".*/bin/python3; do
        if py_ok "$cand"; then BUILD_PY="$cand"; break; fi
    done
fi
py_ok "${BUILD_PY:-}" || { echo "build_bundle: no working Python $PY_VERSION found; set BUILD_PY" >&2; exit 1; }
HOST_PY="${HOST_PY:-python3}"  # runs pip download and the checks (needs `packaging`)

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sciner-gpu-bundle.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
WHEELS="${WHEEL_CACHE:-$WORK/wheels}"
STAGE="$WORK/site"
mkdir -p "$WHEELS" "$GPU_DIR"

echo "== 1/5 download $PYTAG wheels into $WHEELS"
# Drop wheels of other versions left in a reused cache (the check wants exactly one each).
find "$WHEELS" -name '*.whl' -delete
"$HOST_PY" -m pip download -q --progress-bar off --no-deps --only-binary=:all: \
    --python-version "$PY_VERSION" --implementation cp --abi "$PYTAG" --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
    --platform any \
    -d "$WHEELS" -r "$HERE/bundle_requirements.txt"

echo "== 2/5 check: one version each, every Requires-Dist carried or in the image"
"$HOST_PY" "$HERE/check_bundle_deps.py" --wheels "$WHEELS"

echo "== 3/5 install into a stage with $BUILD_PY, strip, prune"
"$BUILD_PY" -m pip install -q --no-deps --no-index --no-compile --no-warn-script-location \
    --disable-pip-version-check --target "$STAGE" "$WHEELS"/*.whl
# Debug symbols out of the extensions; tests and bytecode out of the tree. Not pruned:
# transformers/models (AutoTokenizer/AutoModel import the model packages by name).
find "$STAGE" -name '*.so' -exec strip --strip-unneeded {} +
find "$STAGE" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +
find "$STAGE" -name '*.pyc' -delete
# Console scripts point at $BUILD_PY's path, useless there (spacy runs as `python3 -m spacy`).
rm -rf "$STAGE/bin"

echo "== 4/5 pack $GPU_DIR/bundle.tar.xz"
rm -f "$GPU_DIR/bundle.tar.xz"
(cd "$STAGE" && tar -cf - --sort=name --owner=0 --group=0 --numeric-owner . \
    | xz -9 -T1 > "$GPU_DIR/bundle.tar.xz")
cp "$HERE/bundle_requirements.txt" "$GPU_DIR/bundle_requirements.txt"
echo "$PY_VERSION" > "$GPU_DIR/bundle_python.txt"

echo "== 5/5 stage the MiniLM config/tokenizer and the SciERC data"
rm -rf "$GPU_DIR/encoders/minilm-config"
"$HOST_PY" "$HERE/make_random_encoder.py" --stage-only "$GPU_DIR/encoders/minilm-config"
mkdir -p "$GPU_DIR/data/scierc"
for split in train dev test; do
    cp "$DATA/scierc/$split.json" "$GPU_DIR/data/scierc/$split.json"
done

echo "== done: $(du -sh "$GPU_DIR/bundle.tar.xz" | cut -f1) bundle; .gpu in all $(du -sh "$GPU_DIR" | cut -f1)"
du -ah "$GPU_DIR" | sort -k2
