"""DocBins of your own as a source format: where the gold comes from, what is kept, bad files."""
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_sciner.corpora import ConversionStats, CorpusFormatError, convert, read_docbin

NLP = spacy.blank("en")


def make_doc(text="BRCA1 mutations cause breast cancer .", sent_starts=None):
    doc = NLP.make_doc(text)
    if sent_starts is not None:
        for token, start in zip(doc, sent_starts):
            token.is_sent_start = start
    return doc


def save(path, docs):
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def read(path, **kwargs):
    return list(read_docbin(path, NLP.vocab, stats=ConversionStats(), **kwargs))


def test_ents_only_docbin_gives_spans_and_ents(tmp_path):
    doc = make_doc()
    doc.ents = [doc.char_span(0, 5, "Gene"), doc.char_span(22, 35, "Disease")]
    doc.user_data["doc_key"] = "pmid1"
    (out,) = read(save(tmp_path / "a.spacy", [doc]))
    assert [(s.text, s.label_) for s in out.spans["sc"]] == [("BRCA1", "Gene"), ("breast cancer", "Disease")]
    assert [e.text for e in out.ents] == ["BRCA1", "breast cancer"]
    assert out.user_data["doc_key"] == "pmid1"


def test_span_group_wins_keeps_nesting_tokens_and_sentences_drops_the_rest(tmp_path):
    doc = make_doc("IL-2 binds . breast cancer grows", sent_starts=[True, False, False, False, True, False, False])
    doc.spans["sc"] = [doc.char_span(13, 26, "Disease"), doc.char_span(20, 26, "Disease")]
    doc.ents = [doc.char_span(0, 4, "Other")]  # ignored: the span group holds the gold
    doc.spans["candidates"] = [doc[0:1]]
    doc[0].tag_ = "NN"
    second = make_doc("nothing here")  # no span group: no mentions
    (out, empty) = read(save(tmp_path / "a.spacy", [doc, second]))
    assert [t.text for t in out] == [t.text for t in doc] and out.text == doc.text
    assert [s.start for s in out.sents] == [0, 4]
    assert [(s.text, s.label_) for s in out.spans["sc"]] == [("breast cancer", "Disease"), ("cancer", "Disease")]
    assert [e.text for e in out.ents] == ["breast cancer"]
    assert "candidates" not in out.spans and out[0].tag_ == ""
    assert len(empty.spans["sc"]) == 0 and empty.user_data["doc_key"] == "a.spacy#1"


def test_a_directory_of_docbins(tmp_path):
    for name in ("b", "a"):
        doc = make_doc(f"{name} x")
        doc.ents = [doc.char_span(0, 1, "L")]
        save(tmp_path / f"{name}.spacy", [doc])
    assert [d.text for d in read(tmp_path)] == ["a x", "b x"]


def test_other_span_groups_only_is_an_error_naming_them(tmp_path):
    doc = make_doc()
    doc.spans["gold"] = [doc.char_span(0, 5, "Gene")]
    path = save(tmp_path / "a.spacy", [doc])
    with pytest.raises(CorpusFormatError, match=r"no span group 'sc' .* span groups \['gold'\]"):
        read(path)
    (out,) = read(path, spans_key="gold")
    assert [(s.text, s.label_) for s in out.spans["gold"]] == [("BRCA1", "Gene")]


@pytest.mark.parametrize("problem, message", [
    ("not a docbin", "not a spaCy DocBin"),
    ("no docs", "no docs in the DocBin"),
    ("empty dir", "no .spacy file found"),
])
def test_bad_files(tmp_path, problem, message):
    path = tmp_path / "a.spacy"
    if problem == "not a docbin":
        path.write_text("IL-2\tB-Gene\n")
    elif problem == "no docs":
        save(path, [])
    else:
        path = tmp_path / "empty"
        path.mkdir()
    with pytest.raises(CorpusFormatError, match=message) as err:
        read(path)
    assert str(path) in str(err.value)


def test_convert_writes_the_project_docbin(tmp_path):
    doc = make_doc()
    doc.ents = [doc.char_span(0, 5, "Gene")]
    stats = convert(save(tmp_path / "in.spacy", [doc, make_doc("x")]), tmp_path / "out.spacy", "docbin")
    assert (stats.docs, stats.entities, dict(stats.labels)) == (2, 1, {"Gene": 1})
