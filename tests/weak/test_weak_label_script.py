"""scripts/weak_label.py: the --abbreviations flag as the project passes it."""
import argparse
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("weak_label", ROOT / "scripts" / "weak_label.py")
weak_label = importlib.util.module_from_spec(spec)
spec.loader.exec_module(weak_label)


@pytest.mark.parametrize("value,expected", [("True", True), ("false", False), ("1", True), ("off", False)])
def test_truth_reads_project_variable_values(value, expected):
    assert weak_label.truth(value) is expected


def test_truth_rejects_other_words():
    with pytest.raises(argparse.ArgumentTypeError, match="expected true or false, got 'maybe'"):
        weak_label.truth("maybe")


def test_abbreviations_reach_label_weak(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(weak_label.subprocess, "call", lambda cmd: calls.append(cmd) or 0)
    aux = tmp_path / "aux.txt"
    aux.write_text("one line\n")
    base = ["ncbi_disease", str(aux), "--gazetteer-dir", str(tmp_path), "--train", str(tmp_path / "t.spacy"),
            "--text", str(tmp_path / "w.txt"), "--output", str(tmp_path / "w.spacy")]
    for extra in ([], ["--abbreviations"], ["--abbreviations", "True"], ["--abbreviations", "False"]):
        assert weak_label.main(base + extra) == 0
    assert ["--abbreviations" in cmd for cmd in calls] == [False, True, True, False]
