"""The project's `demo` workflow, end to end, in a reduced variant (2 epochs).

It runs exactly the commands of project.yml in a copy of the project: convert the shipped
BRAT sample, train, calibrate on dev, evaluate on test, package a wheel, pip-install it and
load it by name on new text. The full demo (more epochs) is what the README's first command
runs; this test checks that every step works and produces its outputs.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_demo_workflow_runs_end_to_end(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("project.yml", "configs", "scripts", "assets"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
    cmd = [sys.executable, "-m", "spacy", "project", "run", "demo", str(project),
           "--vars.max_epochs", "2", "--vars.eval_frequency", "10"]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=project, timeout=1200)
        assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
        metrics = json.loads((project / "metrics" / "demo.json").read_text())
        for key in ("spans_sc_p", "spans_sc_r", "spans_sc_f", "ents_f"):
            assert key in metrics, key
        wheels = list((project / "packages").glob("*/dist/*.whl"))
        assert len(wheels) == 1
        # The predict step printed every new sentence (loaded from the installed package).
        new_text = (project / "assets" / "demo" / "new_text.txt").read_text().split("\n")
        for line in filter(None, (t.strip() for t in new_text)):
            assert line in result.stdout
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "en_sciner_demo"], capture_output=True)
