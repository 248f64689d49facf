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


def ruler_nlp():
    """A span_ruler writing doc.spans["sc"]: finds the long form, never the short form."""
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("span_ruler", config={"spans_key": "sc"})
    ruler.add_patterns([{"label": "DISEASE", "pattern": "adenomatous polyposis"}])
    return nlp


def dev_examples(nlp, short_forms_are_gold):
    reference = nlp.make_doc(TEXT)
    spans = [(1, 3)] + ([(4, 5), (10, 11)] if short_forms_are_gold else [])
    reference.spans["sc"] = [Span(reference, s, e, label="DISEASE") for s, e in spans]
    return [Example(nlp.make_doc(TEXT), reference)]


@pytest.mark.parametrize("gold_short_forms,mode,added", [
    (True, "auto", True),     # dev F 0.5 -> 1.0
    (False, "auto", False),   # dev F 1.0 -> 0.5: dev says no
    (False, "on", True),
])
def test_choose_on_dev(gold_short_forms, mode, added):
    from spacy_sciner.abbreviations import choose_on_dev

    nlp = ruler_nlp()
    report = choose_on_dev(nlp, dev_examples(nlp, gold_short_forms), after="span_ruler", mode=mode)
    assert report["added"] is added and report["spans_added"] == 2
    f_gold, f_ruler = (1.0, 0.5) if gold_short_forms else (0.5, 1.0)
    assert report["dev_f_with"] == pytest.approx(f_gold) and report["dev_f_without"] == pytest.approx(f_ruler)
    assert nlp.pipe_names == (["span_ruler", "sciner_abbreviations"] if added else ["span_ruler"])
    assert len(nlp(TEXT).spans["sc"]) == (3 if added else 1)


def test_choose_on_dev_off_and_bad_mode():
    from spacy_sciner.abbreviations import choose_on_dev

    nlp = ruler_nlp()
    assert choose_on_dev(nlp, dev_examples(nlp, True), after="span_ruler", mode="off") == {"mode": "off", "added": False}
    assert nlp.pipe_names == ["span_ruler"]
    with pytest.raises(ValueError, match="off"):
        choose_on_dev(nlp, dev_examples(nlp, True), after="span_ruler", mode="yes")
    nlp.add_pipe("sciner_abbreviations")
    assert choose_on_dev(nlp, dev_examples(nlp, True), after="span_ruler")["note"] == "already in the pipeline"
    assert nlp.pipe_names == ["span_ruler", "sciner_abbreviations"]
