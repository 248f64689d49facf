"""Install a packaged pipeline's wheels into a new virtual environment that cannot see the
spacy-sciner checkout, then use the pipeline there from a temporary directory.

    python tests/packaging/fresh_venv.py DIST_DIR VENV_DIR PACKAGE_NAME TEXT_FILE [--mode linked|full]

Two modes (the test uses `linked` unless SCINER_FRESH_VENV=full):

* ``full``: a bare venv (no system site-packages) and `pip install torch==2.13.0 DIST/*.whl`,
  every dependency resolved from the configured package index and pip's cache, as a user
  does (README): 4 to 9 min and 1.7 GB on a busy 2-core machine (measured).
* ``linked``: a bare venv whose only view of the outer environment is a folder of symlinks
  to the outer site-packages' third-party entries, *without* spacy_sciner (its editable
  finder, .pth hooks and metadata), en_sciner_* pipeline packages or any .pth file. Then
  `pip install --no-index DIST/*.whl`: pip must satisfy every requirement of both wheels
  from what is already there (so the requirements are consistent and nothing is fetched),
  and spacy_sciner can only come from the wheel. What it does not prove: that the package
  index serves the dependencies (the CI's own `pip install -e .` resolves the same ones).
  About 20 s to install on a busy 2-core machine (measured), plus loading the pipeline.
"""
import argparse
import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
CHECK_SCRIPT = HERE / "use_installed_pipeline.py"
# The distributions under test, and hooks that would bring the checkout in.
EXCLUDED_PREFIXES = ("spacy_sciner", "spacy-sciner", "en_sciner", "__editable__", "__pycache__")


def _pip(venv_python: Path, args: List[str]) -> subprocess.CompletedProcess:
    # The outer pip, run for the venv's interpreter: the venv needs no pip of its own.
    cmd = [sys.executable, "-m", "pip", "--python", str(venv_python), "install", "-q", *args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def link_third_party(venv_site: Path, farm: Path) -> int:
    """Symlink the outer site-packages' entries except spacy-sciner and pipeline packages."""
    farm.mkdir(parents=True, exist_ok=True)
    n = 0
    for site in dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]):
        for entry in Path(site).iterdir():
            name = entry.name
            if name.lower().startswith(EXCLUDED_PREFIXES) or name.endswith(".pth") or (farm / name).exists():
                continue
            (farm / name).symlink_to(entry)
            n += 1
    (venv_site / "_outer_third_party.pth").write_text(str(farm) + "\n", encoding="utf8")
    return n


def make_venv(dist: Path, venv: Path, mode: str) -> Dict[str, float]:
    wheels = sorted(str(w) for w in dist.glob("*.whl"))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    venv_python = venv / "bin" / "python"
    venv_site = Path(
        subprocess.run(
            [str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, stdout=subprocess.PIPE, text=True,
        ).stdout.strip()
    )
    if mode == "linked":
        link_third_party(venv_site, venv.parent / (venv.name + "-third-party"))
        result = _pip(venv_python, ["--no-index", *wheels])
    elif mode == "full":
        result = _pip(venv_python, ["torch==2.13.0", *wheels])
    else:
        raise ValueError(mode)
    if result.returncode != 0:
        raise RuntimeError(f"pip install into the fresh venv failed:\n{result.stdout[-6000:]}")
    return {"install_s": time.perf_counter() - t0}


def use_pipeline(venv: Path, package: str, text_file: Path, cwd: Path) -> dict:
    """Run the check script with the venv's python in isolated mode (-I: no PYTHONPATH, no
    user site, no cwd on sys.path) from `cwd`, outside the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-I", str(CHECK_SCRIPT), package, str(text_file)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"using {package} in the fresh venv failed:\n{proc.stderr[-6000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dist", type=Path)
    parser.add_argument("venv", type=Path)
    parser.add_argument("package")
    parser.add_argument("text_file", type=Path)
    parser.add_argument("--mode", choices=("linked", "full"), default="linked")
    args = parser.parse_args()
    timing = make_venv(args.dist.resolve(), args.venv.resolve(), args.mode)
    t0 = time.perf_counter()
    report = use_pipeline(args.venv.resolve(), args.package, args.text_file.resolve(), Path(os.sep, "tmp"))
    timing["use_s"] = time.perf_counter() - t0
    print(json.dumps({"timing": timing, "report": report}, indent=2))
