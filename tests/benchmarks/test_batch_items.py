"""benchmarks/batch_items.py: words/s by the transformer's max_batch_items, same spans checked."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "spancat"))
import batch_items  # noqa: E402
from spancat_helpers import make_examples, make_nlp, train  # noqa: E402


@pytest.fixture
def state(tmp_path, tiny_bert_dir, shared_data):
    """A convergence state dir holding one trained transformer + sciner_spancat run on the demo set."""
    nlp = make_nlp(tiny_bert_dir)
    train(nlp, make_examples(nlp), steps=20)
    model = tmp_path / "runs" / "demo" / "sciner_spancat-seed0" / "eval" / "calibrated"
    model.parent.mkdir(parents=True)
    nlp.to_disk(model)
    return tmp_path


def test_measures_every_value_and_checks_the_spans(state, tmp_path):
    out = tmp_path / "results" / "batch_items"
    report = batch_items.main(["--runs", "demo/sciner_spancat/0", "--state", str(state), "--values", "4096", "16",
                               "--sentences", "30", "--rounds", "2", "--batch-size", "8", "--results", str(out)])
    run = report["runs"]["demo/sciner_spancat/0"]
    assert run["sentences"] == 30 and [r["max_batch_items"] for r in run["rows"]] == [4096, 16]
    for row in run["rows"]:
        assert row["pipeline_wps"] > 0 and row["transformer_wps"] > 0
        assert row["span_head_share"] == 1 - row["pipeline_wps"] / row["transformer_wps"]
        # Sub-batches of at most 16 padded tokens instead of one per batch: the encoder
        # masks its padding, so the predicted spans are the same.
        assert row["same_spans"] is True
    # ... and there are spans to compare: the model predicts some on these sentences.
    import spacy

    texts = batch_items.recipes.sentences(batch_items.convergence.get_corpus("demo", state), 30)
    assert sum(map(len, batch_items.timed_pipe(spacy.load(state / run["model"]), texts, 8)[1])) > 0
    assert json.loads(out.with_suffix(".json").read_text())["meta"]["rounds"] == 2
    assert run["model"] == "runs/demo/sciner_spancat-seed0/eval/calibrated"  # relative to --state
    assert "| demo/sciner_spancat/0 | 30 | 16 |" in out.with_suffix(".md").read_text()
    try:
        import matplotlib  # noqa: F401  (the [bench] extra)
    except ImportError:
        assert not out.with_suffix(".png").exists()
    else:
        assert out.with_suffix(".png").stat().st_size > 0


def test_a_run_without_a_trained_pipeline_is_a_one_line_error(tmp_path):
    with pytest.raises(SystemExit, match="no trained pipeline for demo/x/0"):
        batch_items.main(["--runs", "demo/x/0", "--state", str(tmp_path)])
    with pytest.raises(SystemExit, match="dataset/system/seed"):
        batch_items.main(["--runs", "demo/x", "--state", str(tmp_path)])


def test_first_words_caps_the_docs_by_words():
    texts = [["a"] * 5, ["b"] * 5, ["c"] * 5]
    assert batch_items.first_words(texts, 10) == texts[:2]
    assert batch_items.first_words(texts, 9) == texts[:1]
    assert batch_items.first_words(texts, 3) == texts[:1]  # at least one doc
    assert batch_items.first_words(texts, 100) == texts
