"""benchmarks/recipes.py: the recipe table from convergence.json plus measured words/s."""
import json
import sys
from pathlib import Path

import pytest
import spacy

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import recipes  # noqa: E402


def summary(test_f, status="converged"):
    return {"status": status, "test_spans_f": test_f, "best_dev_f": 0.5, "best_seconds": 120.0, "train_seconds": 600.0}


@pytest.fixture
def state(tmp_path):
    """A state dir with the demo corpus and one trained-looking CNN ner pipeline."""
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("ner")
    ner.add_label("TASK")
    nlp.initialize()
    model = tmp_path / "state" / "runs" / "demo" / "spacy_ner_cnn-seed0" / "model-best"
    model.parent.mkdir(parents=True)
    nlp.to_disk(model)
    conv = {"runs": {
        "demo/spacy_ner_cnn/0": {"dataset": "demo", "system": "spacy_ner_cnn", "seed": 0, "summary": summary(0.42)},
        "demo/sciner_spancat_cnn/0": {"dataset": "demo", "system": "sciner_spancat_cnn", "seed": 0,
                                      "summary": summary(None, "stopped")},
    }}
    (tmp_path / "convergence.json").write_text(json.dumps(conv))
    return tmp_path


def test_measures_evaluated_runs_only(state, capsys):
    out = state / "recipes"
    args = ["--state", state / "state", "--convergence", state / "convergence.json", "--results", out,
            "--sentences", "50", "--rounds", "2", "--threads", "1"]
    assert recipes.main([str(a) for a in args]) == 0
    saved = json.loads(out.with_suffix(".json").read_text())
    speed = saved["speeds"]["demo"]["words_per_s"]
    assert list(speed) == ["spacy_ner_cnn"]  # the run without test F is not measured
    assert saved["meta"]["max_batch_items"] == 4096  # every transformer pipeline timed with it
    assert len(speed["spacy_ner_cnn"]["all"]) == 2 and speed["spacy_ner_cnn"]["median"] > 0
    rows = [line for line in out.with_suffix(".md").read_text().splitlines() if line.startswith("| demo")]
    assert rows[0].startswith("| demo | spacy_ner_cnn | no | converged | 42.0 | 50.0 | 2 / 10 |")
    assert rows[1].split(" | ")[4:] == ["—", "50.0", "2 / 10", "—", "— |"]
    # --report-only rewrites the same table from the saved speeds, measuring nothing.
    before = out.with_suffix(".md").read_text()
    out.with_suffix(".md").unlink()
    assert recipes.main([str(a) for a in args] + ["--report-only"]) == 0
    assert out.with_suffix(".md").read_text() == before


def test_missing_convergence_results_is_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        recipes.main(["--convergence", str(tmp_path / "nope.json")])
    assert err.value.code == 2
    assert "nope.json not found" in capsys.readouterr().err


def test_scored_model_is_the_evaluated_copy(tmp_path):
    assert recipes.scored_model(tmp_path, "sciner_spancat_cnn") == tmp_path / "eval" / "calibrated"
    assert recipes.scored_model(tmp_path, "spacy_spancat") == tmp_path / "eval" / "calibrated"
    # spaCy's ner: model-best, in sciner train's output folder (RUN/train), or directly in RUN
    # for a run of the segment runner before it
    assert recipes.scored_model(tmp_path, "spacy_ner_cnn") == tmp_path / "train" / "model-best"
    (tmp_path / "model-best").mkdir()
    assert recipes.scored_model(tmp_path, "spacy_ner_cnn") == tmp_path / "model-best"


def test_datasets_option_keeps_the_other_speeds_with_their_conditions(state):
    """--datasets measures only those; a data set measured in an earlier call keeps its
    speeds and its own thread/load record, and the table names each one's conditions."""
    out = state / "recipes"
    old_meta = {"rounds": 3, "threads": 1, "load_start": 2.2, "load_end": 2.1, "updated": "2026-11-01T00:00:00Z"}
    out.with_suffix(".json").write_text(json.dumps({"meta": old_meta, "speeds": {
        "other": {"sentences": 5, "words": 50, "words_per_s": {"sciner_spancat_cnn": {"median": 9000.0, "all": [9000.0]}}}}}))
    args = ["--state", state / "state", "--convergence", state / "convergence.json", "--results", out,
            "--sentences", "50", "--rounds", "1", "--threads", "1", "--datasets", "demo"]
    assert recipes.main([str(a) for a in args]) == 0
    saved = json.loads(out.with_suffix(".json").read_text())["speeds"]
    assert saved["other"]["words_per_s"]["sciner_spancat_cnn"]["median"] == 9000.0
    assert saved["other"]["meta"] == old_meta and saved["demo"]["meta"]["rounds"] == 1
    text = out.with_suffix(".md").read_text()
    assert "other: 1 thread(s), transformer max_batch_items 4096, load average 2.2 -> 2.1 (2026-11-01)" in text and "demo: 1 thread(s)" in text


def test_each_seed_gets_its_own_speed_and_label(state):
    """Two seeds of one system: each row is labelled with its seed and shows the speed of its
    own model (seed 0 has none here: '—', not seed 1's)."""
    runs_dir = state / "state" / "runs" / "demo"
    (runs_dir / "spacy_ner_cnn-seed0").rename(runs_dir / "spacy_ner_cnn-seed1")
    conv = json.loads((state / "convergence.json").read_text())
    conv["runs"]["demo/spacy_ner_cnn/1"] = {**conv["runs"]["demo/spacy_ner_cnn/0"], "seed": 1}
    (state / "convergence.json").write_text(json.dumps(conv))
    out = state / "recipes"
    args = ["--state", state / "state", "--convergence", state / "convergence.json", "--results", out,
            "--sentences", "20", "--rounds", "1", "--threads", "1"]
    assert recipes.main([str(a) for a in args]) == 0
    assert list(json.loads(out.with_suffix(".json").read_text())["speeds"]["demo"]["words_per_s"]) == ["spacy_ner_cnn-seed1"]
    rows = {line.split(" | ")[1]: line.split(" | ")[7] for line in out.with_suffix(".md").read_text().splitlines()
            if line.startswith("| demo")}
    assert rows["spacy_ner_cnn (seed 0)"] == "—" and rows["spacy_ner_cnn (seed 1)"] != "—"
    assert rows["sciner_spancat_cnn"] == "—"


def test_a_lost_models_earlier_speed_is_kept_and_flagged(state):
    """Re-measuring a data set whose earlier model is no longer on disk keeps that model's
    earlier speed, flagged '*' with the earlier call's conditions, instead of dropping it; the
    models found are measured now (an earlier value of theirs is replaced)."""
    out = state / "recipes"
    old_meta = {"rounds": 3, "threads": 1, "load_start": 0.7, "load_end": 0.9, "updated": "2026-11-02T00:00:00Z"}
    out.with_suffix(".json").write_text(json.dumps({"meta": old_meta, "speeds": {"demo": {
        "sentences": 5, "words": 50, "meta": old_meta, "words_per_s": {
            "sciner_spancat_cnn": {"median": 9000.0, "all": [9000.0]},
            "spacy_ner_cnn": {"median": 1.0, "all": [1.0]}}}}}))
    conv = json.loads((state / "convergence.json").read_text())
    conv["runs"]["demo/sciner_spancat_cnn/0"]["summary"] = summary(0.6)  # evaluated, model gone
    (state / "convergence.json").write_text(json.dumps(conv))
    args = ["--state", state / "state", "--convergence", state / "convergence.json", "--results", out,
            "--sentences", "20", "--rounds", "1", "--threads", "1", "--datasets", "demo"]
    assert recipes.main([str(a) for a in args]) == 0
    speeds = json.loads(out.with_suffix(".json").read_text())["speeds"]["demo"]["words_per_s"]
    assert speeds["sciner_spancat_cnn"]["median"] == 9000.0 and speeds["sciner_spancat_cnn"]["earlier"] == old_meta
    assert speeds["spacy_ner_cnn"]["median"] > 1.0 and "earlier" not in speeds["spacy_ner_cnn"]
    text = out.with_suffix(".md").read_text()
    rows = {line.split(" | ")[1]: line.split(" | ")[7] for line in text.splitlines() if line.startswith("| demo")}
    assert rows["sciner_spancat_cnn"] == "9,000*" and not rows["spacy_ner_cnn"].endswith("*")
    assert "\\* measured in an earlier call whose model is no longer on disk" in text
    assert "demo 2026-11-02, 1 thread(s), load average 0.7 -> 0.9" in text


def test_by_dataset_table_means_seeds_marks_stopped_runs_and_the_best():
    def run(ds, system, seed, f, status="converged"):
        return {"dataset": ds, "system": system, "seed": seed, "summary": summary(f, status)}

    conv = {"runs": {str(i): r for i, r in enumerate([
        run("b", "sciner_spancat_cnn", 0, 0.742), run("b", "sciner_spancat_cnn", 1, 0.740),
        run("b", "spacy_ner_cnn", 0, 0.70), run("a", "spacy_ner_cnn", 0, 0.45, "stopped"),
        run("a", "sciner_spancat_hybrid", 0, 0.593, "stopped"), run("a", "sciner_spancat_cnn", 0, None)])}}
    lines = recipes.by_dataset(conv)
    # a run without any evaluation yet (just started) is a row of dashes in the long table
    conv["runs"]["new"] = {**run("b", "sciner_spancat", 1, None, "running"),
                           "summary": {**summary(None, "running"), "best_dev_f": None, "best_seconds": None}}
    row = [line for line in recipes.table(conv, {}, {"rounds": 1, "threads": 1, "load_start": 0.0, "load_end": 0.0})
           .splitlines() if line.startswith("| b | sciner_spancat |")]
    assert row == ["| b | sciner_spancat | yes | running | — | — | — / 10 | — | — |"]
    assert lines[0] == "| test span F | a | b |"
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines[2:]}
    # the package's recipes first, then the baselines; an unevaluated run is no cell
    assert list(rows) == ["sciner_spancat_hybrid", "sciner_spancat_cnn", "spacy_ner_cnn"]
    assert rows["sciner_spancat_hybrid"] == ["**59.3** (stopped)", "— |"]
    assert rows["sciner_spancat_cnn"] == ["—", "**74.1** (seeds 0, 1: 74.2, 74.0) |"]
    assert rows["spacy_ner_cnn"] == ["45.0 (stopped)", "70.0 |"]


def test_a_fixed_budget_variant_is_marked_by_its_updates_not_as_stopped():
    """A *_decay<N> run ends at max_steps by design: its cell says how many updates it had."""
    run = {"dataset": "b", "system": "sciner_spancat_hybrid_decay2000", "seed": 0,
           "summary": summary(0.793, "max steps"), "settings": {"max_steps": 2000}}
    lines = recipes.by_dataset({"runs": {"x": run}})
    # alone in its column: nothing to be best against, so not bold
    assert lines[2] == "| sciner_spancat_hybrid_decay2000 | 79.3 (2,000 updates) |"
