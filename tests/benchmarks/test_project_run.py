"""benchmarks/project_run.py: the workflow's steps and the record built from the files a run leaves."""
import sys
from pathlib import Path

import pytest
import srsly

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import project_run  # noqa: E402


def test_workflow_steps_follow_project_yml():
    steps = project_run.workflow_steps("all")
    assert steps[:4] == ["convert", "train", "calibrate", "evaluate"]
    assert steps == srsly.read_yaml(ROOT / "project.yml")["workflows"]["all"]
    with pytest.raises(SystemExit, match="no workflow 'nope'"):
        project_run.workflow_steps("nope")


def test_record_reads_metrics_and_calibration(tmp_path):
    component = tmp_path / "training" / "toy" / "model-calibrated" / "sciner_spancat"
    for folder in (tmp_path / "metrics", component):
        folder.mkdir(parents=True)
    srsly.write_json(tmp_path / "metrics" / "toy.json", {"spans_sc_f": 0.61, "spans_sc_p": 0.6, "spans_sc_r": 0.62,
                                                         "ents_f": 0.6, "speed": 1000.0})
    srsly.write_json(component / "cfg", {"calibration": {"dev_f": 0.655, "decision": "floor", "threshold": 0.4,
                                                         "selected_checkpoint": "training/toy/model-last"}})
    timings = [{"step": "train", "seconds": 120.0, "returncode": 0}, {"step": "evaluate", "seconds": 30.0, "returncode": 0}]
    rec = project_run.record("toy", {"dataset": "toy"}, timings, root=tmp_path)
    assert rec["total_min"] == 2.5
    assert rec["test"] == pytest.approx({"spans_sc_p": 0.6, "spans_sc_r": 0.62, "spans_sc_f": 0.61, "ents_f": 0.6})
    assert rec["calibrated_dev_f"] == 0.655 and rec["selected_checkpoint"].endswith("model-last")
    rec.update(commit="abc1234", threads=2, load_before=1.0, load_after=2.0, date="2026-12-02")
    md = project_run.markdown(rec)
    assert "| train | 2.0 | 0 |" in md and "test span F 61.0 (P 60.0 / R 62.0)" in md
    assert "Calibrated dev F 65.5" in md


def test_record_of_a_failed_run_has_no_scores(tmp_path):
    rec = project_run.record("toy", {"dataset": "toy"}, [{"step": "convert", "seconds": 1.0, "returncode": 1}],
                             root=tmp_path)
    assert rec["test"] == {} and rec["calibrated_dev_f"] is None
