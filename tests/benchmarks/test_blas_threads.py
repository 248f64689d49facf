"""benchmarks/blas_threads.py: sciner_spancat's one-thread BLAS limit off and on, in one process."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "spancat"))
sys.path.insert(0, str(ROOT / "tests" / "tok2vec"))
import blas_threads  # noqa: E402
from spancat_helpers import make_examples, train  # noqa: E402
from tok2vec_helpers import make_cnn_nlp, make_hybrid_nlp  # noqa: E402


def _saved(nlp, tmp_path, name):
    train(nlp, make_examples(nlp), steps=5)
    nlp.to_disk(tmp_path / name)
    return tmp_path / name


def test_times_both_settings_and_checks_the_output(tiny_bert_dir, tmp_path):
    from spacy.tokens import DocBin

    nlp = make_hybrid_nlp(tiny_bert_dir)
    model = _saved(nlp, tmp_path, "hybrid")
    examples = make_examples(nlp)
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(eg.reference.text for eg in examples * 5) + "\n", encoding="utf8")
    DocBin(docs=[eg.reference for eg in examples] * 5).to_disk(tmp_path / "train.spacy")
    out = tmp_path / "out"
    report = blas_threads.main(["--model", str(model), "--data", str(texts), "--sentences", "12", "--batch-sizes", "2", "4",
                                "--rounds", "2", "--train-data", str(tmp_path / "train.spacy"), "--updates", "2",
                                "--blocks", "2", "--batch-words", "10", "--out", str(out)])
    assert report["pipeline"] == ["transformer", "sciner_spancat"] and report["texts"] == 12
    assert [row["batch_size"] for row in report["pipe"]] == [2, 4]
    for row in report["pipe"]:
        assert set(row["seconds"]) == {"transformer alone", "limit off", "limit on"}
        assert all(len(s) == 2 and min(s) > 0 for s in row["seconds"].values())
        assert row["ratio_to_first"]["limit on"] == row["words_per_s"]["limit on"] / row["words_per_s"]["transformer alone"]
        assert row["same_output"] is True  # the thread count changes the speed, not the spans
    updates = report["updates"]
    assert updates["updates"] == 2 and all(len(s) == 2 and min(s) > 0 for s in updates["seconds"].values())
    assert updates["on_over_off"] == updates["s_per_update"]["limit on"] / updates["s_per_update"]["limit off"]
    assert json.loads((out / "blas_threads.json").read_text())["pipe"][0]["words"] == report["pipe"][0]["words"]
    md = (out / "blas_threads.md").read_text()
    assert md.count("| yes |") == 2 and f"**{updates['on_over_off']:.3f}x** the time" in md
    # Switched in place only: the saved pipeline, loaded again, reads a transformer and limits.
    import spacy

    assert spacy.load(model).get_pipe("sciner_spancat")._blas_limit == 1


def test_refuses_a_pipeline_without_a_transformer(tmp_path, capsys):
    model = _saved(make_cnn_nlp(), tmp_path, "cnn")
    texts = tmp_path / "texts.txt"
    texts.write_text("One text .\n", encoding="utf8")
    with pytest.raises(SystemExit):
        blas_threads.main(["--model", str(model), "--data", str(texts), "--out", str(tmp_path / "out")])
    assert "no sciner_spancat reading a transformer" in capsys.readouterr().err


def test_checks_the_training_labels_before_timing(tiny_bert_dir, tmp_path, capsys):
    import spacy
    from spacy.tokens import DocBin, Span

    model = _saved(make_hybrid_nlp(tiny_bert_dir), tmp_path, "hybrid")
    doc = spacy.blank("en")("Aspirin treats headache .")
    doc.spans["sc"] = [Span(doc, 0, 1, label="Chemical")]  # a label the pipeline never saw
    DocBin(docs=[doc], store_user_data=True).to_disk(tmp_path / "train.spacy")
    texts = tmp_path / "texts.txt"
    texts.write_text("One text .\n", encoding="utf8")
    with pytest.raises(SystemExit):
        blas_threads.main(["--model", str(model), "--data", str(texts), "--train-data", str(tmp_path / "train.spacy"),
                           "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "train.spacy" in err and "'Aspirin'" in err and "label 'Chemical'" in err
    assert not (tmp_path / "out").exists()  # stopped before any timing
