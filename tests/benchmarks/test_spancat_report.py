"""benchmarks/spancat_report.py: spancat.md from spancat.json, also from a run still going."""
import argparse
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import spancat_report  # noqa: E402

ROW = {"spans_p": 0.8, "spans_r": 0.6, "spans_f": 0.6857, "ents_f": 0.7, "seqeval_f": 0.7,
       "train_seconds": 61.0, "load_avg_1min_at_end": 1.5}


def results(accuracy):
    return {"seed": 0, "epochs": {"demo": 2}, "encoder": "tiny", "machine": "2 CPU cores", "load_start": 0.5,
            "batch_words": 500, "lr": 1e-4, "accuracy": accuracy, "speed": {}, "before_rev": "abc",
            "before": {"demo": {"spacy_ner": {"spans_f": 0.5}}}}


def report(tmp_path, accuracy, systems):
    (tmp_path / "spancat.json").write_text(json.dumps(results(accuracy)))
    args = argparse.Namespace(results=tmp_path, datasets=["demo"], systems=systems, speed_dataset="demo")
    spancat_report.report_only(args)
    return (tmp_path / "spancat.md").read_text()


def test_rows_decision_and_before_column(tmp_path):
    accuracy = {"demo": {"spacy_ner": ROW,
                         "sciner_spancat": {**ROW, "calibration": {"threshold": 0.25, "dev_f": 0.7}}}}
    md = report(tmp_path, accuracy, ["spacy_ner", "sciner_spancat"])
    assert "| demo | spacy_ner | 80.0 | 60.0 | 68.6 | 50.0 | 70.0 | 70.0 | model's own decoding | 61 | 1.5 |" in md
    assert "threshold 0.250 (dev F 70.0)" in md and "| sciner_spancat |" in md
    assert "Not finished" not in md


def test_systems_not_yet_evaluated_are_listed_missing(tmp_path):
    md = report(tmp_path, {"demo": {"spacy_ner": ROW}}, ["spacy_ner", "spacy_spancat"])
    assert "Not finished in time (no result): demo/spacy_spancat." in md
    assert json.loads((tmp_path / "spancat.json").read_text())["missing"] == ["demo/spacy_spancat"]


def test_no_results_yet_is_one_clear_line(tmp_path):
    args = argparse.Namespace(results=tmp_path / "none", datasets=["demo"], systems=["spacy_ner"], speed_dataset="demo")
    with pytest.raises(SystemExit, match="no .*spancat.json yet"):
        spancat_report.report_only(args)
