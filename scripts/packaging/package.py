"""Package a calibrated pipeline so that it installs without the spacy-sciner checkout.

    python scripts/packaging/package.py MODEL_DIR OUTPUT_DIR --name NAME --version VERSION \
        --dataset DATASET --test-metrics metrics/D.json --dev-metrics metrics/D-dev.json \
        --dev-data corpus/D/dev.spacy [--gpu-id -1]

1. Model card: writes meta.json fields (description, license, sources, calibrated dev and
   test scores) with scripts/packaging/model_card.py. The test scores come from the
   project's `evaluate` step; the dev scores from DEV_METRICS, which is computed here with
   `spacy evaluate` on DEV_DATA when it is missing or older than the model.
2. `spacy package --build none` with that meta.json.
3. Builds two wheels into OUTPUT_DIR/<lang>_<name>-<version>/dist/, without build isolation
   (no package index needed): the pipeline's, and spacy-sciner's own (from the source tree
   that the running spacy_sciner was imported from), so that

       pip install OUTPUT_DIR/<lang>_<name>-<version>/dist/*.whl

   installs the pipeline and the code its entry points name, with the rest from PyPI.

The build tools' output is kept and shown only when a step fails; a short summary is printed.
"""
import argparse
import email.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import model_card  # noqa: E402

SOURCE_FILES = ("setup.cfg", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "setup.py")


def run_quiet(cmd: Sequence[str], what: str, cwd: Optional[Path] = None) -> str:
    """Run a command with its output captured; on failure print the output and exit."""
    env = dict(os.environ, PYTHONWARNINGS=os.environ.get("PYTHONWARNINGS", "ignore"))
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-20000:])
        sys.exit(f"error: {what} failed (exit {proc.returncode}): {' '.join(map(str, cmd))}")
    return proc.stdout


def newer(path: Path, than: Path) -> bool:
    return path.exists() and path.stat().st_mtime >= than.stat().st_mtime


def sciner_source() -> Path:
    """The source tree of the spacy_sciner being run (an editable install or a checkout)."""
    import spacy_sciner

    root = Path(spacy_sciner.__file__).resolve().parent.parent
    cfg = root / "setup.cfg"
    if not cfg.exists() or "name = spacy-sciner" not in cfg.read_text(encoding="utf8"):
        sys.exit(
            f"error: spacy_sciner was imported from {root}, which is not a spacy-sciner source tree; "
            "run the package step from an environment with `pip install -e <checkout>`"
        )
    return root


def build_sciner_wheel(source: Path, dist: Path) -> None:
    # Build from a clean copy: no build/ or egg-info left in the checkout, none picked up from it.
    with tempfile.TemporaryDirectory(prefix="sciner-src-") as tmp:
        copy = Path(tmp) / "spacy-sciner"
        copy.mkdir()
        for name in SOURCE_FILES:
            if (source / name).exists():
                shutil.copy2(source / name, copy / name)
        shutil.copytree(
            source / "spacy_sciner", copy / "spacy_sciner",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
        )
        run_quiet(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(copy)],
            "building the spacy-sciner wheel",
        )


def wheel_metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(zf.read(name).decode("utf8"))
        eps = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        entry_points = zf.read(eps[0]).decode("utf8") if eps else ""
    return meta, entry_points


def check_dist(dist: Path, pipeline_name: str) -> List[Path]:
    """Both wheels are there, the pipeline requires spacy-sciner and the built one satisfies it."""
    from packaging.requirements import Requirement

    wheels = sorted(dist.glob("*.whl"))
    pipeline = [w for w in wheels if w.name.startswith(pipeline_name.replace("-", "_") + "-")]
    sciner = [w for w in wheels if w.name.startswith("spacy_sciner-")]
    if len(pipeline) != 1 or len(sciner) != 1 or len(wheels) != 2:
        sys.exit(f"error: expected the pipeline's and spacy-sciner's wheel in {dist}, found {[w.name for w in wheels]}")
    meta, _ = wheel_metadata(pipeline[0])
    reqs = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    sciner_meta, entry_points = wheel_metadata(sciner[0])
    version = sciner_meta["Version"]
    wanted = [r for r in reqs if r.name.lower().replace("_", "-") == "spacy-sciner"]
    if wanted and not wanted[0].specifier.contains(version, prereleases=True):
        sys.exit(f"error: {pipeline[0].name} requires {wanted[0]}, but the built spacy-sciner is {version}")
    if "[spacy_factories]" not in entry_points or "sciner_spancat" not in entry_points:
        sys.exit(f"error: {sciner[0].name} registers no spacy_factories entry points")
    return wheels


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--test-metrics", type=Path, required=True)
    parser.add_argument("--dev-metrics", type=Path, required=True)
    parser.add_argument("--dev-data", type=Path, required=True)
    parser.add_argument("--gpu-id", type=int, default=-1)
    args = parser.parse_args(argv)

    model_meta = args.model_dir / "meta.json"
    if not model_meta.exists():
        sys.exit(f"error: {args.model_dir} is not a pipeline directory (no meta.json)")
    if not newer(args.test_metrics, model_meta):
        sys.exit(
            f"error: {args.test_metrics} is missing or older than {args.model_dir}: "
            "run the project's evaluate step first"
        )
    if not newer(args.dev_metrics, model_meta):
        print(f"Evaluating {args.model_dir} on {args.dev_data} -> {args.dev_metrics}")
        args.dev_metrics.parent.mkdir(parents=True, exist_ok=True)
        run_quiet(
            [sys.executable, "-m", "spacy", "evaluate", str(args.model_dir), str(args.dev_data),
             "--output", str(args.dev_metrics), "--gpu-id", str(args.gpu_id)],
            "evaluating on dev",
        )

    args.output_dir.mkdir(parents=True, exist_ok=True)
    meta = model_card.build_meta(
        args.model_dir, args.dataset,
        json.loads(args.test_metrics.read_text(encoding="utf8")),
        json.loads(args.dev_metrics.read_text(encoding="utf8")),
    )
    lang = meta.get("lang", "en")
    pkg_name = args.name if args.name.startswith(lang + "_") else f"{lang}_{args.name}"
    main_path = args.output_dir / f"{pkg_name}-{args.version}"
    dist = main_path / "dist"
    if dist.exists():  # no stale wheel of an older version next to the new ones
        shutil.rmtree(dist)
    with tempfile.TemporaryDirectory(prefix="sciner-meta-") as tmp:
        meta_path = Path(tmp) / "meta.json"
        meta_path.write_text(json.dumps(meta, indent=2), encoding="utf8")
        run_quiet(
            [sys.executable, "-m", "spacy", "package", str(args.model_dir), str(args.output_dir),
             "--name", args.name, "--version", args.version, "--meta-path", str(meta_path),
             "--build", "none", "--force"],
            "spacy package",
        )
    run_quiet(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(main_path)],
        "building the pipeline wheel",
    )
    build_sciner_wheel(sciner_source(), dist)
    for leftover in (main_path / "build", *main_path.glob("*.egg-info")):
        shutil.rmtree(leftover, ignore_errors=True)
    wheels = check_dist(dist, pkg_name)
    scores = meta["sciner"]["scores"]
    print(
        f"Packaged {pkg_name} {args.version} ({meta['sciner']['dataset']}, encoder {meta['sciner']['encoder']}): "
        f"calibrated span F dev {100 * scores['dev']['spans_sc_f']:.1f}, test {100 * scores['test']['spans_sc_f']:.1f}"
    )
    for wheel in wheels:
        print(f"  {wheel}")
    print(f"Install anywhere (torch first, see README): pip install {dist}/*.whl")


if __name__ == "__main__":
    main()
