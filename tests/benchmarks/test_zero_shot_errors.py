"""benchmarks/zero_shot_errors.py: error kinds and recall on abbreviations, on hand-made spans."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import zero_shot_errors as zse  # noqa: E402


@pytest.mark.parametrize("text,expected", [
    ("DM", True), ("A - T", True), ("MPS IVA", True), ("aAPC", True), ("C2", True),
    ("tumor", False), ("C2 deficiency", False), ("Tay - Sachs disease", False), ("X", False),
    ("ABCDEFGHIJK", False),
])
def test_is_abbreviation(text, expected):
    assert zse.is_abbreviation(text) is expected


def test_fp_kinds():
    gold = [(2, 5, "D")]
    assert zse.fp_kind((3, 5, "D"), gold) == "inside gold"
    assert zse.fp_kind((2, 5, "X"), gold) == "inside gold"  # right span, wrong label
    assert zse.fp_kind((1, 6, "D"), gold) == "covers gold"
    assert zse.fp_kind((4, 7, "D"), gold) == "crosses gold"
    assert zse.fp_kind((5, 7, "D"), gold) == "no gold overlap"


def test_breakdown_counts_and_recall_by_kind():
    gold = [{(0, 1, "D"): "DM", (3, 5, "D"): "breast cancer"},
            {(0, 3, "D"): "A - T", (5, 6, "D"): "tumor"}]
    pred = [{(3, 5, "D"): "breast cancer", (7, 8, "D"): "disease"},
            {(0, 1, "D"): "A", (5, 6, "D"): "tumor"}]
    b = zse.breakdown(gold, pred)
    assert (b["tp"], b["fp"], b["fn"]) == (2, 2, 2)
    assert (b["p"], b["r"], b["f"]) == (50.0, 50.0, 50.0)
    assert (b["gold_abbreviations"], b["gold_other"]) == (2, 2)
    assert b["recall_by_kind"] == {"abbreviation": 0.0, "other": 100.0}
    assert b["fp_kinds"] == {"no gold overlap": 1, "inside gold": 1}
    assert b["fn_kinds"] == {"no prediction near": 1, "overlapped by a prediction": 1}
    assert dict(b["top_fn"]) == {"dm": 1, "a - t": 1}


def test_breakdown_rejects_unequal_doc_counts():
    with pytest.raises(ValueError):
        zse.breakdown([{}], [{}, {}])


def test_markdown_row():
    b = zse.breakdown([{(0, 1, "D"): "DM"}], [{(0, 1, "D"): "DM"}])
    res = {"dataset": "ncbi_disease", "rows": ["trf-fine-plain"], "gold": 1, "gold_abbreviations": 1,
           "systems": {"gazetteer": b}}
    md = zse.markdown(res)
    assert "| gazetteer | 100.0 | 100.0 | 100.0 | 100.0 | 0.0 |" in md
    assert "1 gold mentions, 1 of them abbreviations" in md


def test_abbreviation_potential():
    import spacy
    from spacy.tokens import Doc, Span
    vocab = spacy.blank("en").vocab
    words = "patients with chronic lymphocytic leukemia ( CLL ) ; CLL cells and CML".split()
    doc = Doc(vocab, words=words)
    doc.spans["weak"] = [Span(doc, 3, 5, label="Disease")]  # "lymphocytic leukemia": the head
    other = Doc(vocab, words="the support vector machine ( SVM ) and SVM".split())
    other.spans["weak"] = [Span(other, 1, 2, label="Disease")]  # not at the long form's end
    res = zse.abbreviation_potential([doc, other, Doc(vocab, words=["x"])])
    assert res == {"short_form_spans": 2}  # "( CLL )" and "CLL cells"
    doc.spans["weak"] = [Span(doc, 3, 5, label="Disease"), Span(doc, 6, 7, label="Disease")]
    assert zse.abbreviation_potential([doc])["short_form_spans"] == 1
