"""spacy-sciner.GoldTokensCorpus.v1: gold tokens and sentences, span groups kept."""
import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Corpus

from spacy_sciner.corpora.docbin import GoldTokensCorpus

# "Graph-based" is one gold token; spaCy's tokenizer would make it three.
WORDS = ["Graph-based", "parsing", "works", ".", "We", "use", "CRF", "models", "."]
SPACES = [True, True, False, True, True, True, True, False, False]


def two_sentence_doc(nlp, cross=False):
    doc = Doc(nlp.vocab, words=WORDS, spaces=SPACES, sent_starts=[True] + [False] * 3 + [True] + [False] * 4)
    doc.spans["sc"] = [Span(doc, 0, 2, "Method"), Span(doc, 6, 8, "Method"), Span(doc, 6, 7, "Task")]
    doc.spans["sc"].attrs["source"] = "gold"
    if cross:
        doc.spans["sc"] = [Span(doc, 1, 6, "Method")]
    doc.ents = [Span(doc, 6, 7, "Method")]
    return doc


def write(tmp_path, docs, name="train.spacy"):
    path = tmp_path / name
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def test_sentences_carry_their_spans_and_the_gold_words(tmp_path):
    nlp = spacy.blank("en")
    path = write(tmp_path, [two_sentence_doc(nlp)])
    egs = list(GoldTokensCorpus(path)(nlp))
    assert [[t.text for t in eg.reference] for eg in egs] == [WORDS[:4], WORDS[4:]]
    # The predicted docs have the gold words, not spaCy's tokens, and no annotation.
    assert [[t.text for t in eg.predicted] for eg in egs] == [WORDS[:4], WORDS[4:]]
    assert len(nlp.make_doc(egs[0].reference.text)) == 6
    assert all(not eg.predicted.spans and not eg.predicted.ents for eg in egs)
    got = [[(s.start, s.end, s.label_, s.text) for s in eg.reference.spans["sc"]] for eg in egs]
    assert got == [[(0, 2, "Method", "Graph-based parsing")], [(2, 4, "Method", "CRF models"), (2, 3, "Task", "CRF")]]
    assert [eg.reference.spans["sc"].attrs["source"] for eg in egs] == ["gold", "gold"]
    assert [[e.text for e in eg.reference.ents] for eg in egs] == [[], ["CRF"]]


def test_spacy_gold_preproc_drops_span_groups_and_this_reader_does_not(tmp_path):
    """The reason for the reader: spaCy's Corpus with gold_preproc loses doc.spans, so a
    spancat cannot even initialize its labels."""
    nlp = spacy.blank("en")
    path = write(tmp_path, [two_sentence_doc(nlp)])
    assert all(len(eg.reference.spans.get("sc", [])) == 0 for eg in Corpus(path, gold_preproc=True)(nlp))

    def labels(corpus):
        spancat_nlp = spacy.blank("en")
        spancat = spancat_nlp.add_pipe("spancat")
        spancat_nlp.initialize(lambda: corpus(spancat_nlp))
        return sorted(spancat.labels)

    assert labels(GoldTokensCorpus(path)) == ["Method", "Task"]
    with pytest.raises(ValueError, match="E143"):
        labels(Corpus(path, gold_preproc=True))


def test_single_sentence_and_unsegmented_docs_are_kept_whole(tmp_path):
    nlp = spacy.blank("en")
    doc = Doc(nlp.vocab, words=WORDS, spaces=SPACES)  # no sentence starts
    doc.spans["sc"] = [Span(doc, 6, 8, "Method")]
    egs = list(GoldTokensCorpus(write(tmp_path, [doc, Doc(nlp.vocab, words=[])]))(nlp))
    assert len(egs) == 1 and len(egs[0].reference) == len(WORDS)  # the empty doc is skipped
    assert [s.text for s in egs[0].reference.spans["sc"]] == ["CRF models"]


def test_a_span_across_sentences_names_file_doc_and_characters(tmp_path):
    nlp = spacy.blank("en")
    path = write(tmp_path, [two_sentence_doc(nlp), two_sentence_doc(nlp, cross=True)])
    with pytest.raises(ValueError, match=r"train\.spacy, doc 1: span 'sc' Method at characters 12-33 \(.parsing works. We use.\) crosses a sentence boundary"):
        list(GoldTokensCorpus(path)(nlp))


def test_directory_limit_and_missing_path(tmp_path):
    nlp = spacy.blank("en")
    write(tmp_path, [two_sentence_doc(nlp)], "a.spacy")
    write(tmp_path, [two_sentence_doc(nlp)], "b.spacy")
    assert len(list(GoldTokensCorpus(tmp_path)(nlp))) == 4
    assert len(list(GoldTokensCorpus(tmp_path, limit=1)(nlp))) == 2  # one doc, two sentences
    with pytest.raises(ValueError, match="corpus not found: .*missing.spacy"):
        list(GoldTokensCorpus(tmp_path / "missing.spacy")(nlp))


def test_registered_reader_resolves_from_a_config(tmp_path):
    from spacy.util import registry

    path = write(tmp_path, [two_sentence_doc(spacy.blank("en"))])
    corpus = registry.resolve({"c": {"@readers": "spacy-sciner.GoldTokensCorpus.v1", "path": str(path), "shuffle": True}})["c"]
    assert isinstance(corpus, GoldTokensCorpus) and corpus.shuffle
    assert len(list(corpus(spacy.blank("en")))) == 2
