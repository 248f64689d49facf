"""spacy-sciner.span_scorer.v1: nested spans and flat entities in spaCy's score format."""
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_sciner.scoring import make_span_scorer

WORDS = "the support vector machine of the penn treebank corpus was trained on long text".split()


def doc_with(vocab, spans, ents=None, key="sc"):
    doc = Doc(vocab, words=WORDS)
    doc.spans[key] = [Span(doc, s, e, label=label) for s, e, label in spans]
    if ents is not None:
        doc.ents = [Span(doc, s, e, label=label) for s, e, label in ents]
    return doc


@pytest.fixture
def vocab():
    return spacy.blank("en").vocab


def test_registered_scorer_resolves():
    scorer = spacy.registry.resolve({"s": {"@scorers": "spacy-sciner.span_scorer.v1"}})["s"]
    assert scorer is make_span_scorer()


def test_nested_gold_exact_matches(vocab):
    # Gold: a nested pair (1,4)/(1,3), nested (6,8) inside (6,9), and one span of 12 tokens.
    gold = [(1, 4, "Method"), (1, 3, "Method"), (6, 8, "Material"), (6, 9, "Material"), (0, 12, "Task")]
    # Predicted: both nested Method spans, only the inner Material span, a wrong label, a false span.
    pred = [(1, 4, "Method"), (1, 3, "Method"), (6, 8, "Material"), (6, 9, "Method"), (11, 13, "Task")]
    eg = Example(doc_with(vocab, pred), doc_with(vocab, gold))
    scores = make_span_scorer()([eg], spans_key="sc", write_ents=False)
    # tp = 3 of 5 predicted, 3 of 5 gold (the 12-token span, longer than L, is a miss).
    assert scores["spans_sc_p"] == pytest.approx(3 / 5)
    assert scores["spans_sc_r"] == pytest.approx(3 / 5)
    assert scores["spans_sc_per_type"]["Method"] == {"p": pytest.approx(2 / 3), "r": 1.0, "f": pytest.approx(0.8)}
    assert scores["spans_sc_per_type"]["Material"]["r"] == pytest.approx(0.5)
    assert scores["spans_sc_per_type"]["Task"] == {"p": 0.0, "r": 0.0, "f": 0.0}
    assert "ents_f" not in scores


def test_missing_predictions_count_as_misses(vocab):
    gold = [(1, 4, "Method"), (0, 13, "Task")]  # the second one no span enumeration reaches
    eg = Example(doc_with(vocab, [(1, 4, "Method")]), doc_with(vocab, gold))
    scores = make_span_scorer()([eg], spans_key="sc")
    assert scores["spans_sc_p"] == 1.0 and scores["spans_sc_r"] == 0.5


def test_reference_without_key_is_scored(vocab):
    ref = Doc(vocab, words=WORDS)  # no doc.spans["sc"] at all: every prediction is false
    eg = Example(doc_with(vocab, [(1, 4, "Method")]), ref)
    assert make_span_scorer()([eg], spans_key="sc", write_ents=False)["spans_sc_p"] == 0.0


def test_ents_scored_with_spacy_ner_scorer(vocab):
    gold = doc_with(vocab, [(1, 4, "Method"), (1, 3, "Method")], ents=[(1, 4, "Method"), (6, 9, "Material")])
    pred = doc_with(vocab, [], ents=[(1, 4, "Method"), (6, 8, "Material")])
    scores = make_span_scorer()([Example(pred, gold)], spans_key="sc", write_ents=True, threshold=0.5)
    assert (scores["ents_p"], scores["ents_r"]) == (0.5, 0.5)
    assert scores["ents_per_type"]["Material"]["f"] == 0.0
    assert scores["spans_sc_r"] == 0.0


def test_other_spans_key(vocab):
    eg = Example(doc_with(vocab, [(1, 4, "Method")], key="ents2"), doc_with(vocab, [(1, 4, "Method")], key="ents2"))
    scores = make_span_scorer()([eg], spans_key="ents2", write_ents=False)
    assert scores["spans_ents2_f"] == 1.0
