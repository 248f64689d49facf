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


def test_run_step_echoes_the_output_and_reads_the_update_count(capsys):
    """The train step's "= N updates" line (scripts/train.py) is the count recorded; the exit
    code passes through; a step that announces none records None."""
    lines = "print('$ spacy train ...'); print('c.cfg: 134 epochs x 15 batches = 2010 updates'); print('E  #  LOSS')"
    code, updates, chosen = project_run.run_step([sys.executable, "-c", lines])
    assert (code, updates, chosen) == (0, 2010, None)
    assert "134 epochs x 15 batches = 2010 updates\nE  #  LOSS" in capsys.readouterr().out
    assert project_run.run_step([sys.executable, "-c", "import sys; print('calibrating'); sys.exit(3)"]) == (3, None, None)
    assert project_run.updates_in("training 1001 epochs (2002 updates)") is None  # the min_steps note, not the count


def test_run_step_reads_what_config_auto_chose():
    """scripts/train.py's note on config "auto" is recorded with the run."""
    note = "configs/auto.cfg: configs/sciner_spancat.cfg (corpus/x/train.spacy: 3782 words, fewer than --small-train-words 25000)"
    assert project_run.run_step([sys.executable, "-c", f"print({note!r})"]) == (0, None, "sciner_spancat")
    timings = [{"step": "train", "seconds": 6.0, "returncode": 0, "config": "sciner_spancat"}]
    assert project_run.record("toy", {"dataset": "toy"}, timings, root=Path("/nonexistent"))["config_chosen"] == "sciner_spancat"


def test_record_keeps_the_update_count_of_the_train_step(tmp_path):
    timings = [{"step": "convert", "seconds": 6.0, "returncode": 0},
               {"step": "train", "seconds": 54.0, "returncode": 0, "updates": 2010}]
    rec = project_run.record("toy", {"dataset": "toy"}, timings, root=tmp_path)
    assert rec["updates"] == 2010
    rec.update(commit="abc1234", threads=2, load_before=1.0, load_after=2.0, date="2026-12-03")
    assert "Total 1.0 min, 2,010 training updates." in project_run.markdown(rec)


def test_a_weak_all_run_records_its_workflow_and_the_weak_checkpoint(tmp_path):
    """A weak_all run says so (title, record) and carries the held-out weak scores its
    pretrain-weak checkpoint was chosen by; an `all` run has none."""
    best = tmp_path / "training" / "toy-weak" / "model-best"
    best.mkdir(parents=True)
    srsly.write_json(best / "meta.json", {"performance": {"spans_sc_f": 0.752, "spans_sc_p": 0.8,
                                                          "sciner_spancat_loss": 3.5, "speed": 900.0}})
    timings = [{"step": "pretrain-weak", "seconds": 60.0, "returncode": 0}]
    rec = project_run.record("toy", {"dataset": "toy"}, timings, root=tmp_path, workflow="weak_all")
    assert rec["workflow"] == "weak_all"
    assert rec["weak_model_best"] == {"spans_sc_f": 0.752, "spans_sc_p": 0.8, "speed": 900.0}
    rec.update(commit="abc1234", threads=2, load_before=1.0, load_after=2.0, date="2026-12-06")
    md = project_run.markdown(rec)
    assert md.startswith("# `spacy project run weak_all` on toy")
    assert "held-out 10% of the weak corpus: spans_sc_f 75.2." in md
    plain = project_run.record("toy", {"dataset": "toy"}, [{"step": "train", "seconds": 1.0, "returncode": 0}],
                               root=tmp_path)
    assert plain["workflow"] == "all" and plain["weak_model_best"] is None


def test_a_step_added_later_keeps_the_run_and_adds_the_zero_shot_scores(tmp_path):
    """--add-step's record: the earlier timings and scores kept, the later step listed with its
    date and commit, and evaluate-weak's zero-shot test scores read from its metrics file."""
    rec = {"dataset": "toy", "workflow": "weak_all", "vars": {"dataset": "toy"}, "commit": "abc1234",
           "threads": 2, "load_before": 1.0, "load_after": 2.0, "date": "2026-12-06",
           "steps": [{"step": "train-weak", "seconds": 120.0, "returncode": 0}], "total_min": 2.0,
           "updates": 10, "test": {"spans_sc_f": 0.8}, "calibrated_dev_f": 0.7,
           "selected_checkpoint": "model-best", "decision": "floor", "threshold": 0.5,
           "weak_model_best": None, "zero_shot": None}
    (tmp_path / "metrics").mkdir()
    srsly.write_json(tmp_path / "metrics" / "toy-weak.json",
                     {"spans_sc_f": 0.33, "spans_sc_p": 0.38, "spans_sc_r": 0.29, "ents_f": 0.327, "speed": 5.0})
    later = {"step": "evaluate-weak", "seconds": 18.0, "returncode": 0,
             "later": {"date": "2026-12-07", "commit": "def5678"}}
    out = project_run.add_step(rec, later, root=tmp_path)
    assert out["steps"] == rec["steps"] + [later] and out["test"] == {"spans_sc_f": 0.8}
    assert out["total_min"] == 2.3 and out["commit"] == "abc1234"
    assert out["zero_shot"] == {"spans_sc_f": 0.33, "spans_sc_p": 0.38, "spans_sc_r": 0.29, "ents_f": 0.327}
    md = project_run.markdown(out)
    assert "| evaluate-weak (run later: 2026-12-07, commit def5678) | 0.3 | 0 |" in md
    assert "Zero-shot (that weak model on test as it is, no gold training): span F 33.0 (P 38.0 / R 29.0)" in md
