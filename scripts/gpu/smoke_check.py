"""Check the stack that setup_device.sh installed; print one version line; exit 1 on a problem.

    PYTHONPATH=/tmp/site python3 scripts/gpu/smoke_check.py --site /tmp/site \
        --encoder /tmp/encoders/minilm [--require-cuda]

Checks: the carried packages are the pinned versions and are imported from ``--site`` (not the
image's transformers 5 / tokenizers 0.23 / huggingface-hub 1); spacy-sciner is installed there
with its entry points; with ``--require-cuda``, torch sees the GPU, cupy works, thinc's
``require_gpu`` works and a torch <-> cupy round trip through thinc is exact; then one
``configs/sciner_spancat.cfg`` pipeline on ``--encoder`` is initialized, updated once and run
(on the GPU when required).
"""
import argparse
import importlib
import importlib.metadata as md
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PINS = Path(__file__).resolve().parent / "bundle_requirements.txt"
# distribution name -> module name, for the carried packages whose origin matters most
MODULES = {
    "spacy": "spacy",
    "thinc": "thinc",
    "spacy-transformers": "spacy_transformers",
    "transformers": "transformers",
    "tokenizers": "tokenizers",
    "huggingface-hub": "huggingface_hub",
    "pydantic": "pydantic",
}
TEXTS = [
    "We train a convolutional neural network for image segmentation on MRI scans .",
    "The proposed parser outperforms a CRF baseline on the Penn Treebank .",
]


def fail(problems, msg):
    problems.append(msg)
    print(f"SMOKE FAIL: {msg}", file=sys.stderr, flush=True)


def read_pins():
    pins = {}
    for raw in PINS.read_text(encoding="utf8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def check_versions(site, problems):
    pins = read_pins()
    for dist, module in MODULES.items():
        mod = importlib.import_module(module)
        origin = Path(mod.__file__).resolve()
        if site and not origin.is_relative_to(site):
            fail(problems, f"{module} imported from {origin}, not from {site}")
        have = md.version(dist)
        if have != pins[dist]:
            fail(problems, f"{dist} {have} found first, {pins[dist]} pinned")


def check_sciner(site, problems):
    import spacy_sciner

    origin = Path(spacy_sciner.__file__).resolve()
    if site and not origin.is_relative_to(site):
        fail(problems, f"spacy_sciner imported from {origin}, not installed in {site}")
    factories = {ep.name for ep in md.entry_points(group="spacy_factories")}
    archs = {ep.name for ep in md.entry_points(group="spacy_architectures")}
    for name in ("sciner_spancat", "sciner_candidate_miner"):
        if name not in factories:
            fail(problems, f"entry point spacy_factories:{name} not registered")
    if "spacy-sciner.SpanCategorizer.v1" not in archs:
        fail(problems, "entry point spacy_architectures:spacy-sciner.SpanCategorizer.v1 missing")


def check_gpu(problems):
    import cupy
    import torch
    from thinc.api import get_current_ops, require_gpu, torch2xp, xp2torch

    if not torch.cuda.is_available():
        fail(problems, "torch.cuda.is_available() is False")
        return
    if cupy.cuda.runtime.getDeviceCount() < 1:
        fail(problems, "cupy sees no GPU")
        return
    require_gpu(0)
    ops = get_current_ops()
    if type(ops).__name__ != "CupyOps":
        fail(problems, f"require_gpu left {type(ops).__name__}")
    x = ops.xp.arange(12, dtype="float32").reshape(3, 4)
    t = xp2torch(x)
    if not t.is_cuda:
        fail(problems, "xp2torch gave a CPU tensor")
    back = torch2xp(t * 2)
    if not bool((back == x * 2).all()):
        fail(problems, "torch <-> cupy round trip through thinc is not exact")


def check_pipeline(encoder, problems):
    import spacy
    from spacy.training import Example
    from thinc.api import get_current_ops

    config = spacy.util.load_config(REPO / "configs" / "sciner_spancat.cfg")
    config["components"]["transformer"]["model"]["name"] = str(encoder)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = []
    for text in TEXTS:
        doc = nlp.make_doc(text)
        ref = nlp.make_doc(text)
        ref.spans["sc"] = [ref.char_span(text.index("convolutional"), text.index(" for"), label="Method")
                           if "convolutional" in text else
                           ref.char_span(text.index("CRF"), text.index(" baseline"), label="Method")]
        examples.append(Example(doc, ref))
    start = time.perf_counter()
    optimizer = nlp.initialize(lambda: examples)
    losses = nlp.update(examples, sgd=optimizer)
    docs = list(nlp.pipe(TEXTS))
    seconds = time.perf_counter() - start
    if not all(loss == loss for loss in losses.values()):  # NaN check
        fail(problems, f"NaN loss: {losses}")
    if any("sc" not in doc.spans for doc in docs):
        fail(problems, "the pipeline wrote no doc.spans['sc']")
    ops = type(get_current_ops()).__name__
    loss_str = " ".join(f"{k}={v:.3g}" for k, v in losses.items())
    print(f"pipeline OK on {ops}: init+update+predict {seconds:.1f}s, losses {loss_str}", flush=True)


def _version(dist, module):
    try:
        importlib.import_module(module)
        return md.version(dist)
    except Exception as err:  # the report must print even when an import is broken
        return f"<{type(err).__name__}>"


def version_line():
    parts = [f"python {sys.version.split()[0]}"]
    try:
        import torch

        cuda = torch.cuda.is_available()
        gpu = torch.cuda.get_device_name(0) if cuda else "-"
        parts.append(f"torch {torch.__version__} (cuda {torch.version.cuda}, available={cuda}, {gpu})")
    except Exception as err:
        parts.append(f"torch <{type(err).__name__}>")
    for dist, module in [("cupy-cuda13x", "cupy"), ("spacy", "spacy"), ("thinc", "thinc"),
                         ("spacy-transformers", "spacy_transformers"),
                         ("transformers", "transformers"), ("tokenizers", "tokenizers")]:
        parts.append(f"{dist.split('-cuda')[0]} {_version(dist, module)}")
    return "versions: " + ", ".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, default=None, help="Where the bundle was unpacked")
    parser.add_argument("--encoder", type=Path, default=None, help="Encoder folder for the pipeline check")
    parser.add_argument("--require-cuda", action="store_true")
    args = parser.parse_args(argv)
    site = args.site.resolve() if args.site else None
    problems = []
    checks = [("versions", lambda: check_versions(site, problems)),
              ("spacy-sciner", lambda: check_sciner(site, problems))]
    if args.require_cuda:
        checks.append(("gpu", lambda: check_gpu(problems)))
    if args.encoder:
        checks.append(("pipeline", lambda: check_pipeline(args.encoder, problems)))
    for name, check in checks:
        try:
            check()
        except Exception as err:  # report every check, then fail
            fail(problems, f"{name}: {type(err).__name__}: {err}")
    print(version_line(), flush=True)
    if problems:
        print(f"SMOKE FAILED ({len(problems)} problem(s))", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
