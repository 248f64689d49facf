"""benchmarks/project_runs.py: the table of recorded project runs beside the stock ner."""
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import Doc, DocBin

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import project_runs  # noqa: E402


def _run(dataset, vars_, commit, updates=None, f=0.6):
    return {"dataset": dataset, "vars": {"dataset": dataset, **vars_}, "commit": commit, "date": "2026-12-03",
            "threads": 2, "total_min": 20.0, "updates": updates, "calibrated_dev_f": 0.65,
            "steps": [{"step": "convert", "seconds": 60.0, "returncode": 0},
                      {"step": "train", "seconds": 1140.0, "returncode": 0}],
            "test": {"spans_sc_f": f, "spans_sc_p": 0.7, "spans_sc_r": 0.5}}


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_budget_reads_project_yml_at_the_commit(tmp_path):
    """A commit whose project.yml has no min_steps: 0 (the epoch budget alone); a later one's
    default 2,000; a var passed to the run wins; an unknown commit falls back to the defaults."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "project.yml").write_text("vars:\n  max_epochs: 15\n")
    _git(tmp_path, "add", "project.yml")
    _git(tmp_path, "commit", "-qm", "one")
    old = _git(tmp_path, "rev-parse", "--short", "HEAD")
    (tmp_path / "project.yml").write_text("vars:\n  max_epochs: 15\n  min_steps: 2000\n  config: sciner_spancat\n")
    _git(tmp_path, "commit", "-qam", "two")
    new = _git(tmp_path, "rev-parse", "--short", "HEAD")
    assert project_runs.budget(_run("toy", {}, old), tmp_path) == {
        "config": "sciner_spancat_hybrid", "max_epochs": 15, "min_steps": 0, "max_steps": 0}
    assert project_runs.budget(_run("toy", {}, new), tmp_path) == {
        "config": "sciner_spancat", "max_epochs": 15, "min_steps": 2000, "max_steps": 0}
    assert project_runs.budget(_run("toy", {"max_steps": "500"}, new), tmp_path)["max_steps"] == 500
    assert project_runs.budget(_run("toy", {"min_steps": "0", "max_epochs": "3"}, new), tmp_path)["min_steps"] == 0
    assert project_runs.budget(_run("toy", {}, "0000000"), tmp_path)["min_steps"] == 0
    auto = _run("toy", {"config": "auto"}, new)
    assert project_runs.budget(auto, tmp_path)["config"] == "auto"  # a run before the train step said
    auto["config_chosen"] = "sciner_spancat"
    assert project_runs.budget(auto, tmp_path)["config"] == "auto: sciner_spancat"


def test_updates_counted_from_the_corpus_when_not_logged(tmp_path):
    """10 docs of 100 words: 2 batches of the config's batcher per epoch; 15 epochs = 30 updates,
    raised to 1,000 epochs by min_steps 2,000."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "sciner_spancat_hybrid.cfg").write_text(
        (ROOT / "configs" / "sciner_spancat_hybrid.cfg").read_text())
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text((ROOT / "scripts" / "train.py").read_text())
    (tmp_path / "corpus" / "toy").mkdir(parents=True)
    nlp = spacy.blank("en")
    DocBin(docs=[Doc(nlp.vocab, words=["w"] * 100) for _ in range(10)]).to_disk(tmp_path / "corpus" / "toy" / "train.spacy")
    plan = {"config": "sciner_spancat_hybrid", "max_epochs": 15, "min_steps": 0}
    assert project_runs.count_updates("toy", plan, tmp_path) == 30
    assert project_runs.count_updates("toy", {**plan, "min_steps": 2000}, tmp_path) == 2000
    assert project_runs.count_updates("toy", {**plan, "min_steps": 2000, "max_steps": 500}, tmp_path) == 500
    assert project_runs.count_updates("missing", plan, tmp_path) is None


def test_table_rows_and_the_stock_ner_column(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    srsly.write_json(results / "project_run_toy.json", _run("toy", {"min_steps": "2000"}, "abc1234", updates=2010, f=0.62))
    srsly.write_json(results / "project_run_toy_seed1.json", _run("toy", {"seed": "1", "min_steps": "2000"}, "abc1234", updates=2010, f=0.64))
    srsly.write_json(results / "project_run_other.json", _run("other", {"min_steps": "0"}, "abc1234", updates=500))
    summary = {"test_spans_f": 0.5}
    srsly.write_json(results / "convergence.json", {"runs": {
        f"toy/spacy_ner_cnn/{s}": {"dataset": "toy", "system": "spacy_ner_cnn", "seed": s,
                                   "summary": {"test_spans_f": 0.48 + 0.04 * s}} for s in (0, 1)} | {
        "toy/sciner_spancat/0": {"dataset": "toy", "system": "sciner_spancat", "seed": 0, "summary": summary}}})
    assert project_runs.main(["--results", str(results)]) == 0
    rows = srsly.read_json(results / "project_runs.json")
    assert [(r["dataset"], r["seed"]) for r in rows] == [("other", 0), ("toy", 0), ("toy", 1)]
    toy = rows[1]
    assert toy["stock_ner"] == {"f": pytest.approx(0.50), "seeds": [0, 1]}  # mean of the two CNN ner seeds only
    assert toy["updates"] == 2010 and toy["updates_logged"] and toy["train_min"] == 19.0
    md = (results / "project_runs.md").read_text()
    assert "| toy | all | 1 | sciner_spancat_hybrid | 15 epochs, ≥ 2,000 updates | 2,010 | abc1234 | 19.0 | 20.0 | 65.0 " \
           "| **64.0** (70.0 / 50.0) | 50.0 (seeds 0, 1) | +14.0 | `project_run_toy_seed1.json` |" in md
    assert "| other | all | 0 |" in md and "| — | — |" in md  # no stock ner run for that set: no delta


def test_an_uncountable_run_keeps_the_previous_tables_count(tmp_path):
    """No corpus on this machine to count an old run's updates: the last table's count stays."""
    results = tmp_path / "results"
    results.mkdir()
    srsly.write_json(results / "project_run_gone.json", _run("gone_set", {"min_steps": "0"}, "abc1234"))
    assert project_runs.main(["--results", str(results)]) == 0
    assert srsly.read_json(results / "project_runs.json")[0]["updates"] is None  # nothing to keep yet
    rows = srsly.read_json(results / "project_runs.json")
    rows[0]["updates"] = 1470
    srsly.write_json(results / "project_runs.json", rows)
    assert project_runs.main(["--results", str(results)]) == 0
    (row,) = srsly.read_json(results / "project_runs.json")
    assert row["updates"] == 1470 and not row["updates_logged"]
    assert "| 1,470* |" in (results / "project_runs.md").read_text()


def test_a_weak_all_run_is_its_own_row_with_its_step_cap(tmp_path):
    """A weak_all run (project_run.py --workflow weak_all) is named as such, after the `all`
    runs of its data set, with the max_steps cap it ran under in its budget."""
    results = tmp_path / "results"
    results.mkdir()
    weak = _run("toy", {"max_steps": "2000"}, "abc1234", updates=2000, f=0.66) | {"workflow": "weak_all"}
    weak["steps"] = [{"step": "pretrain-weak", "seconds": 600.0, "returncode": 0},
                     {"step": "train-weak", "seconds": 300.0, "returncode": 0}]
    capped = _run("toy", {"min_steps": "2000", "max_steps": "2000", "seed": "1"}, "abc1234", updates=2000)
    srsly.write_json(results / "project_run_toy_weak_all_max_steps2000.json", weak)
    srsly.write_json(results / "project_run_toy.json", _run("toy", {"min_steps": "2000"}, "abc1234", updates=2010))
    srsly.write_json(results / "project_run_toy_min_steps2000_max_steps2000_seed1.json", capped)
    assert project_runs.main(["--results", str(results)]) == 0
    rows = srsly.read_json(results / "project_runs.json")
    assert [(r["workflow"], r["max_steps"]) for r in rows] == [("all", 0), ("all", 2000), ("weak_all", 2000)]
    assert rows[2]["train_min"] == 5.0  # train-weak, not the weak pretraining
    md = (results / "project_runs.md").read_text()
    assert "| toy | weak_all | 0 | sciner_spancat_hybrid | 15 epochs, ≤ 2,000 updates | 2,000 | abc1234 | 5.0 |" in md
    assert "| toy | all | 1 | sciner_spancat_hybrid | 2,000 updates | 2,000 |" in md
