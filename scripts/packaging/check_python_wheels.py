"""Can spacy-sciner's requirements be installed from wheels on another Python version?
A check before widening `python_requires` in setup.cfg.

    python scripts/packaging/check_python_wheels.py 3.10 3.12 3.13

Asks pip's resolver, in dry-run mode with --only-binary=:all: for Linux x86_64, to resolve
the requirements in setup.cfg (no extras) with torch pinned to 2.13.0 (PyPI's build, whose
CUDA libraries are resolved too) for the given Python version, and prints the versions it
picked for the main packages. Metadata only, nothing is installed; it needs the package
index. A pass means "installable", not "tested".
"""
import configparser
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Any glibc-based Linux x86_64 wheel (the CUDA libraries torch requires use several tags).
PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(17, 40)) + ("manylinux2014_x86_64", "linux_x86_64")
SHOWN = ("torch", "spacy", "spacy-transformers", "thinc", "transformers", "tokenizers", "numpy", "pyahocorasick")


def requirements() -> list:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [line.split("#")[0].strip() for line in cfg["options"]["install_requires"].splitlines()]
    return [line for line in lines if line and not line.startswith("torch")] + ["torch==2.13.0"]


def check(python_version: str, reqs: list) -> bool:
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:",
             "--target", str(Path(tmp) / "target"), "--python-version", python_version, *platforms,
             "--report", str(report), *reqs],
            capture_output=True, text=True,
        )
        picked = {}
        if proc.returncode == 0:
            for item in json.loads(report.read_text())["install"]:
                picked[item["metadata"]["name"].lower()] = item["metadata"]["version"]
    if proc.returncode == 0:
        shown = ", ".join(f"{name} {picked[name]}" for name in SHOWN if name in picked)
        print(f"Python {python_version}: OK, {len(picked)} wheels ({shown})")
    else:
        print(f"Python {python_version}: FAILED")
        for line in proc.stderr.splitlines():
            if line.startswith("ERROR"):
                print("   ", line[:400])
    return proc.returncode == 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    reqs = requirements()
    ok = [check(version, reqs) for version in sys.argv[1:]]
    sys.exit(0 if all(ok) else 1)
