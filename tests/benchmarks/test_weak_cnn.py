"""benchmarks/weak_cnn.py: zero-shot only where the weak labels are the target's; the table."""
import json
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.util import load_config, registry

from spacy_sciner.weak.config import weak_config

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import weak_cnn  # noqa: E402


def test_zero_shot_skipped_when_labels_differ(tmp_path):
    pre = {"granularity": "coarse", "labels": {"tok2vec": [], "sciner_spancat": ["ENTITY_TYPED"]}}
    res = weak_cnn.zero_shot("ncbi_disease", tmp_path, tmp_path, pre, env={})
    assert res == {"skipped": "n/a: weak labels ['ENTITY_TYPED'] ≠ target labels (['Disease'])"}
    pre = {"granularity": "fine", "labels": {"sciner_spancat": ["Gene"]}}
    assert "skipped" in weak_cnn.zero_shot("bionlp13cg", tmp_path, tmp_path, pre, env={})


def test_table_rows(tmp_path):
    scores = {"spans_p": 0.5, "spans_r": 0.25, "spans_f": 1 / 3}
    results = {"lines": 100, "steps": 10, "seed": 0, "threads": 1, "datasets": {"ncbi_disease": {
        "weak_corpus": {"labeling": {"spans": 77}},
        "pretrain": {"fine": {"steps": 10, "train_seconds": 90, "heldout_weak_scores": {"spans_sc_f": 0.8}},
                     "coarse": {"train_seconds": 30, "heldout_weak_scores": {}}},
        "zero_shot": {"fine": {"model": scores, "gazetteer": scores}, "coarse": {"skipped": "no"}}}}}
    weak_cnn.write_results(results, tmp_path / "weak_cnn")
    rows = [r for r in (tmp_path / "weak_cnn.md").read_text().splitlines() if r.startswith("| ncbi")]
    assert rows == ["| ncbi_disease | fine | 77 | 10 | 1.5 | 80.0 | 50.0 / 25.0 / **33.3** | — | — | 50.0 / 25.0 / **33.3** | — |",
                    "| ncbi_disease | coarse | 77 | — | 0.5 | — | n/a: weak types ≠ target types | — | — | — | — |"]
    results["datasets"]["ncbi_disease"]["zero_shot"]["fine"]["model_weak_calibrated"] = {
        "spans_p": 0.6, "spans_r": 0.2, "spans_f": 0.3}
    weak_cnn.write_results(results, tmp_path / "weak_cnn")
    row = next(r for r in (tmp_path / "weak_cnn.md").read_text().splitlines() if r.startswith("| ncbi_disease | fine"))
    assert "| 50.0 / 25.0 / **33.3** | — | 60.0 / 20.0 / **30.0** | 50.0 / 25.0 / **33.3** | — |" in row
    # An -abbr row: its weak span count is that of the abbreviation-labeled corpus, and the
    # abbreviation columns are filled.
    ds = results["datasets"]["ncbi_disease"]
    ds["weak_corpus-abbr"] = {"labeling": {"spans": 80}}
    ds["pretrain"]["fine-abbr"] = dict(ds["pretrain"]["fine"], abbreviations=True)
    ds["zero_shot"]["fine-abbr"] = {"model": scores, "model_abbreviations": {"spans_p": 0.6, "spans_r": 0.3, "spans_f": 0.4},
                                    "gazetteer": scores, "gazetteer_abbreviations": {"spans_p": 0.7, "spans_r": 0.3, "spans_f": 0.42}}
    weak_cnn.write_results(results, tmp_path / "weak_cnn")
    row = next(r for r in (tmp_path / "weak_cnn.md").read_text().splitlines() if r.startswith("| ncbi_disease | fine-abbr"))
    assert row == ("| ncbi_disease | fine-abbr | 80 | 10 | 1.5 | 80.0 | 50.0 / 25.0 / **33.3** | 60.0 / 30.0 / **40.0** | — "
                   "| 50.0 / 25.0 / **33.3** | 70.0 / 30.0 / **42.0** |")
    ds["zero_shot"]["fine-abbr"]["dev"] = {k: {"spans_f": f} for k, f in (
        ("model", 0.3), ("model_abbreviations", 0.35), ("gazetteer", 0.31), ("gazetteer_abbreviations", 0.36))}
    weak_cnn.write_results(results, tmp_path / "weak_cnn")
    assert ("* ncbi_disease fine-abbr: model 30.0, + abbreviations 35.0; gazetteer 31.0, + abbreviations 36.0"
            in (tmp_path / "weak_cnn.md").read_text())


def test_heldout_docbin_is_the_weak_dev_split(tmp_path):
    """The zero-shot threshold is chosen on the weak held-out sentences (spans in "sc", labels
    as the pretraining saw them), disjoint from the sentences the pretraining trained on."""
    sys.path.insert(0, str(ROOT / "tests" / "weak"))
    from test_weak_corpus import corpus, write_docbin

    nlp = spacy.blank("en")
    sentences = corpus(nlp)
    weak = write_docbin(tmp_path / "weak.spacy", sentences)
    config = weak_config(load_config(ROOT / "configs" / "sciner_spancat_cnn.cfg", interpolate=False))
    config.to_disk(tmp_path / "w.cfg")
    n = weak_cnn.heldout_docbin(tmp_path / "w.cfg", weak, tmp_path / "heldout.spacy")
    held = list(DocBin().from_disk(tmp_path / "heldout.spacy").get_docs(nlp.vocab))
    assert n == len(held) and 0 < n < len(sentences) // 5
    spans_of = {s.doc.text: sorted((a, b, label) for a, b, label in s.spans) for s in sentences}
    for doc in held:
        assert sorted((sp.start, sp.end, sp.label_) for sp in doc.spans["sc"]) == spans_of[doc.text]
    resolved = load_config(tmp_path / "w.cfg", overrides={"paths.weak": str(weak)}, interpolate=True)
    train = registry.resolve({"r": resolved["corpora"]["train"]})["r"]
    assert {eg.reference.text for eg in train(nlp)}.isdisjoint({d.text for d in held})


def test_save_keeps_rows_of_a_concurrent_run(tmp_path):
    """Two runs (different data sets, or the same set with another granularity) started from
    the same file both keep their rows: save() merges into what is on disk at write time."""
    meta = {"lines": 100, "steps": 10, "seed": 0, "threads": 1}
    row = {"steps": 10, "train_seconds": 60, "heldout_weak_scores": {}, "weights": str(Path.home() / "w.bin")}
    weak_cnn.save(tmp_path / "weak_cnn", "bc5cdr", {"pretrain": {"trf-fine-plain": row}}, meta)
    # A second process whose snapshot predates the first write:
    weak_cnn.save(tmp_path / "weak_cnn", "bionlp13cg", {"pretrain": {"trf-fine-plain": row}}, meta)
    weak_cnn.save(tmp_path / "weak_cnn", "bc5cdr", {"pretrain": {"trf-coarse-plain": row}}, meta)
    saved = json.loads((tmp_path / "weak_cnn.json").read_text())["datasets"]
    assert sorted(saved) == ["bc5cdr", "bionlp13cg"]
    assert sorted(saved["bc5cdr"]["pretrain"]) == ["trf-coarse-plain", "trf-fine-plain"]
    assert saved["bionlp13cg"]["pretrain"]["trf-fine-plain"]["weights"] == "~/w.bin"  # no machine's home
    md = (tmp_path / "weak_cnn.md").read_text()
    assert md.count("| bc5cdr |") == 2 and md.count("| bionlp13cg |") == 1


@pytest.mark.parametrize("bad", [["--lines", "0"], ["--datasets", "scierc"]])
def test_bad_arguments(bad, capsys):
    with pytest.raises(SystemExit) as err:
        weak_cnn.main(bad)
    assert err.value.code == 2
