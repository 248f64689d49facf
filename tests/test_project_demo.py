"""The project's `demo` workflow, end to end, in a reduced variant (2 epochs).

It runs exactly the commands of project.yml in a copy of the project: convert the shipped
BRAT sample, train, calibrate on dev, evaluate on test, package (model card + wheels),
pip-install it and load it by name on new text. The full demo (more epochs) is what the
README's first command runs; these tests check that every step works and that its outputs
are right, then install the packaged wheels into a fresh virtual environment that cannot see
the checkout (tests/packaging/fresh_venv.py) and use the pipeline there.

The workflow runs with PIP_NO_INDEX=1: packaging must not need a package index (no
isolated build).
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_fresh_venv():
    spec = importlib.util.spec_from_file_location("sciner_fresh_venv", ROOT / "tests" / "packaging" / "fresh_venv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    project = tmp_path_factory.mktemp("demo") / "project"
    project.mkdir()
    for name in ("project.yml", "configs", "scripts", "assets"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
    cmd = [sys.executable, "-m", "spacy", "project", "run", "demo", str(project),
           "--vars.max_epochs", "2", "--vars.min_steps", "0", "--vars.eval_frequency", "10"]
    env = dict(os.environ, PIP_NO_INDEX="1")
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=project, timeout=1800, env=env)
        yield project, result
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "en_sciner_demo"], capture_output=True)


def _ok(result):
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])


def test_demo_workflow_runs_end_to_end(demo):
    project, result = demo
    _ok(result)
    # config "auto": the demo's 311 training sentences (4,875 words) are a small set, so the
    # transformer-only config trains (scripts/train.py, resolve_auto)
    assert "configs/auto.cfg: configs/sciner_spancat.cfg (corpus/demo/train.spacy: 4875 words, fewer than" in result.stdout
    metrics = json.loads((project / "metrics" / "demo.json").read_text())
    for key in ("spans_sc_p", "spans_sc_r", "spans_sc_f", "ents_f"):
        assert key in metrics, key
    # The pipeline's wheel and spacy-sciner's, side by side.
    wheels = sorted(w.name for w in (project / "packages").glob("*/dist/*.whl"))
    assert wheels == ["en_sciner_demo-0.1.0-py3-none-any.whl", "spacy_sciner-0.1.0-py3-none-any.whl"]
    # The predict step printed every new sentence (loaded from the installed package).
    new_text = (project / "assets" / "demo" / "new_text.txt").read_text().split("\n")
    for line in filter(None, (t.strip() for t in new_text)):
        assert line in result.stdout


def test_package_step_is_quiet(demo):
    project, result = demo
    _ok(result)
    out = result.stdout + result.stderr
    assert "Packaged en_sciner_demo 0.1.0" in out
    # setuptools / build chatter (hundreds of lines before) stays hidden on success
    for noise in ("running bdist_wheel", "running build", "adding '", "copying ", "* Building wheel"):
        assert noise not in out, noise


def test_packaged_model_card_has_calibrated_dev_and_test_scores(demo):
    project, result = demo
    _ok(result)
    test = json.loads((project / "metrics" / "demo.json").read_text())
    dev = json.loads((project / "metrics" / "demo-dev.json").read_text())
    wheel = next((project / "packages").glob("*/dist/en_sciner_demo-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        meta = json.loads(zf.read("en_sciner_demo/meta.json"))
        readme = zf.read("en_sciner_demo/en_sciner_demo-0.1.0/README.md").decode("utf8")
    for key in ("spans_sc_p", "spans_sc_r", "spans_sc_f", "ents_p", "ents_r", "ents_f"):
        assert meta["performance"][key] == test[key], key
        assert meta["sciner"]["scores"]["test"][key] == test[key], key
        assert meta["sciner"]["scores"]["dev"][key] == dev[key], key
    assert not any(k.endswith("_loss") for k in meta["performance"])
    calibration = meta["sciner"]["calibration"]
    assert meta["sciner"]["calibrated"] and calibration["target_recall"] == 0.99
    # `sciner calibrate` measured the same dev F on the same docs, and (the project's
    # --abbreviations auto) added sciner_abbreviations only where it raised that F.
    abbr = calibration["abbreviations"]
    assert abbr["mode"] == "auto" and abbr["dev_f_without"] == pytest.approx(calibration["dev_f"], abs=1e-6)
    assert abbr["added"] == (abbr["dev_f_with"] > abbr["dev_f_without"])
    assert ("sciner_abbreviations" in meta["pipeline"]) == abbr["added"]
    expected = abbr["dev_f_with"] if abbr["added"] else abbr["dev_f_without"]
    assert dev["spans_sc_f"] == pytest.approx(expected, abs=1e-6)
    # calibrate scored model-best and model-last on dev (the run's last updates are never
    # evaluated by spacy train) and packaged the better one.
    assert Path(calibration["selected_checkpoint"]).name in ("model-best", "model-last")
    assert "training/demo/model-last: calibrated dev F" in result.stdout
    assert meta["sciner"]["dataset"] == "demo" and meta["sciner"]["encoder"] == "sciner-minilm"
    assert meta["license"] == "MIT" and "sciner-minilm" in meta["description"]
    assert meta["version"] == "0.1.0" and any(r.startswith("spacy-sciner") for r in meta["requirements"])
    assert "| dev |" in readme and "| test |" in readme and "all-MiniLM-L6-v2" in readme


def test_packaged_wheels_install_and_run_in_a_fresh_venv(demo, tmp_path):
    """`pip install packages/en_sciner_demo-0.1.0/dist/*.whl` into a venv without the
    checkout, then spacy.load + nlp.pipe from a script that never imports spacy_sciner,
    run from a temporary directory. SCINER_FRESH_VENV=full installs every dependency from
    the package index instead of reusing the outer third-party packages (slow)."""
    project, result = demo
    _ok(result)
    fresh_venv = _load_fresh_venv()
    dist = next((project / "packages").glob("en_sciner_demo-*/dist"))
    venv = tmp_path / "venv"
    mode = os.environ.get("SCINER_FRESH_VENV", "linked")
    t0 = time.perf_counter()
    fresh_venv.make_venv(dist, venv, mode)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    report = fresh_venv.use_pipeline(venv, "en_sciner_demo", project / "assets" / "demo" / "new_text.txt", cwd)
    print(f"fresh venv ({mode}): install + use {time.perf_counter() - t0:.1f} s")

    site = Path(report["spacy_sciner_dist_location"]).resolve()
    assert Path(report["prefix"]).resolve() == venv.resolve()
    assert site.is_relative_to(venv.resolve())
    # spacy_sciner came from the installed wheel, and only from there
    assert report["spacy_sciner_imported_before_load"] is False
    assert Path(report["spacy_sciner_file"]).resolve().is_relative_to(site)
    assert Path(report["pipeline_file"]).resolve().is_relative_to(site)
    assert len(report["spacy_sciner_dists"]) == 1
    direct_url = json.loads(report["spacy_sciner_direct_url"])
    assert direct_url["url"].endswith("/spacy_sciner-0.1.0-py3-none-any.whl")
    assert "dir_info" not in direct_url  # not an editable / directory install
    for entry in report["sys_path"]:
        assert not Path(entry).resolve().is_relative_to(ROOT), entry
    # the pipeline ran: sciner_spancat wrote doc.spans["sc"] with scores for every text
    assert report["factories"]["sciner_spancat"] == "sciner_spancat"
    texts = [t.strip() for t in (project / "assets" / "demo" / "new_text.txt").read_text().splitlines() if t.strip()]
    assert [d["text"] for d in report["docs"]] == texts
    for doc in report["docs"]:
        assert doc["has_sc"] and len(doc["scores"]) == len(doc["spans"])
