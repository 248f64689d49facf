"""``sciner_abbreviations``: short forms take their long form's predicted label."""
import numpy
import pytest
import spacy
from spacy.tokens import Span
from spacy.training import Example

TEXT = "Familial adenomatous polyposis ( FAP ) is rare . Most FAP patients have APC mutations ."
GOLD = [("adenomatous polyposis", "DISEASE"), ("FAP", "DISEASE"), ("FAP", "DISEASE")]


def make_nlp(with_abbreviations=True, **config):
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "DISEASE", "pattern": "adenomatous polyposis"}])
    if with_abbreviations:
        nlp.add_pipe("sciner_abbreviations", config=config)
    return nlp


def ents(doc):
    return [(e.text, e.label_) for e in doc.ents]


def test_default_config_resolves_and_round_trips(tmp_path):
    nlp = make_nlp()
    assert nlp.get_pipe_config("sciner_abbreviations") == {
        "factory": "sciner_abbreviations", "spans_key": "sc", "ents": True}
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert loaded.pipe_names == ["entity_ruler", "sciner_abbreviations"]
    assert ents(loaded(TEXT)) == ents(nlp(TEXT)) == GOLD


def test_ents_extended_without_touching_other_predictions():
    assert ents(make_nlp(False)(TEXT)) == GOLD[:1]
    assert ents(make_nlp(ents=False)(TEXT)) == GOLD[:1]
    # No definition in the doc: nothing is added ("FAP" alone is not known to be a disease).
    assert ents(make_nlp()("Most FAP patients have adenomatous polyposis .")) == [
        ("adenomatous polyposis", "DISEASE")]


def test_span_group_gets_short_forms_with_the_long_form_score():
    nlp = make_nlp(ents=False)
    doc = nlp.make_doc(TEXT)
    doc.spans["sc"] = [Span(doc, 1, 3, label="DISEASE"), Span(doc, 13, 14, label="GENE")]
    doc.spans["sc"].attrs["scores"] = numpy.asarray([0.75, 0.5], dtype="f")
    doc = nlp.get_pipe("sciner_abbreviations")(doc)
    group = doc.spans["sc"]
    assert [(s.text, s.label_, s.start) for s in group] == [
        ("adenomatous polyposis", "DISEASE", 1), ("APC", "GENE", 13), ("FAP", "DISEASE", 4),
        ("FAP", "DISEASE", 10)]
    assert group.attrs["scores"].tolist() == pytest.approx([0.75, 0.5, 0.75, 0.75])
    # Another key is left alone.
    other = make_nlp(spans_key="other", ents=False)
    doc2 = nlp.make_doc(TEXT)
    doc2.spans["sc"] = [Span(doc2, 1, 3, label="DISEASE")]
    assert len(other.get_pipe("sciner_abbreviations")(doc2).spans["sc"]) == 1


def test_evaluate_counts_the_propagated_short_forms():
    def example(nlp):
        reference = nlp.make_doc(TEXT)
        reference.ents = [Span(reference, 1, 3, label="DISEASE"), Span(reference, 4, 5, label="DISEASE"),
                          Span(reference, 10, 11, label="DISEASE")]
        return Example(nlp.make_doc(TEXT), reference)

    without, with_ = make_nlp(False), make_nlp()
    scores = [nlp.evaluate([example(nlp)]) for nlp in (without, with_)]
    assert scores[0]["ents_r"] == pytest.approx(1 / 3) and scores[0]["ents_p"] == 1.0
    assert scores[1]["ents_r"] == 1.0 and scores[1]["ents_p"] == 1.0
