import json
import os

import pytest
import spacy

from spacy_sciner.corpora import CorpusFormatError, read_scierc
from spacy_sciner.corpora.common import ConversionStats, count_docs

# From /work/shared/data/scierc/README.md ("Counts — JSON").
README_COUNTS = {
    "train": dict(docs=350, sentences=1861, tokens=45412, entities=5598, nested_pairs=61),
    "dev": dict(docs=50, sentences=275, tokens=6521, entities=811, nested_pairs=7),
    "test": dict(docs=100, sentences=551, tokens=13401, entities=1685, nested_pairs=20),
}
README_TRAIN_TYPES = {
    "Generic": 950, "Material": 542, "Method": 1445, "Metric": 231, "OtherScientificTerm": 1536, "Task": 894,
}


@pytest.fixture(scope="module")
def vocab():
    return spacy.blank("en").vocab


def convert_split(shared_data, vocab, split, doc_unit):
    stats = ConversionStats()
    path = os.path.join(shared_data, "scierc", f"{split}.json")
    docs = list(count_docs(read_scierc(path, vocab, doc_unit=doc_unit, stats=stats), "sc", stats))
    return docs, stats


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_scierc_counts_match_readme(shared_data, vocab, split):
    expected = README_COUNTS[split]
    docs, stats = convert_split(shared_data, vocab, split, "sentence")
    assert stats.docs == stats.sentences == expected["sentences"]
    assert stats.unsplit_docs == 0
    assert stats.tokens == expected["tokens"]
    assert stats.entities == expected["entities"]
    assert stats.nested_pairs == expected["nested_pairs"]
    # No crossing spans in SciERC: every nested pair costs exactly one doc.ents entry.
    assert stats.ents_dropped == expected["nested_pairs"]
    assert sum(len(doc.spans["sc"]) for doc in docs) == expected["entities"]
    if split == "train":
        assert dict(stats.labels) == README_TRAIN_TYPES

    docs, stats = convert_split(shared_data, vocab, split, "document")
    assert stats.docs == expected["docs"] == len({doc.user_data["doc_key"] for doc in docs})
    assert stats.sentences == expected["sentences"]
    assert (stats.tokens, stats.entities, stats.nested_pairs) == (
        expected["tokens"], expected["entities"], expected["nested_pairs"],
    )


def test_scierc_ptb_unescape_real_sentence(shared_data, vocab):
    docs, _ = convert_split(shared_data, vocab, "dev", "sentence")
    doc = next(d for d in docs if d.user_data["doc_key"] == "E99-1023" and d.user_data["sent_index"] == 1)
    assert doc.text == (
        '( Ramshaw and Marcus , 1995 ) have introduced a " convenient " data representation '
        "for chunking by converting it to a tagging task ."
    )
    assert len(doc) == 25  # one token per JSON token: offsets stay valid


def test_scierc_nested_outer_wins_ents(shared_data, vocab):
    docs, _ = convert_split(shared_data, vocab, "train", "sentence")
    # Every span missing from doc.ents must be nested in a longer entity (longest wins).
    nested = [d for d in docs if len(d.spans["sc"]) > len(d.ents)]
    assert nested
    for doc in nested[:10]:
        ents = {(e.start, e.end) for e in doc.ents}
        for span in doc.spans["sc"]:
            if (span.start, span.end) not in ents:
                # the dropped span lies inside a longer entity
                assert any(e.start <= span.start and span.end <= e.end and len(e) > len(span) for e in doc.ents)


def test_scierc_offsets_are_document_level_end_inclusive(tmp_path, vocab):
    record = {
        "doc_key": "X1",
        "sentences": [["A", "-LRB-", "B", "-RRB-"], ["C", "D", "E"]],
        "ner": [[[0, 0, "Method"], [0, 3, "Task"]], [[5, 6, "Metric"]]],
    }
    path = tmp_path / "x.json"
    path.write_text(json.dumps(record) + "\n\n", encoding="utf8")
    first, second = read_scierc(path, vocab)
    assert [(s.text, s.label_) for s in first.spans["sc"]] == [("A", "Method"), ("A ( B )", "Task")]
    assert [e.text for e in first.ents] == ["A ( B )"]
    assert [(s.text, s.label_) for s in second.spans["sc"]] == [("D E", "Metric")]
    assert second.user_data == {"doc_key": "X1", "sent_index": 1}
    (doc,) = read_scierc(path, vocab, doc_unit="document", spans_key="gold")
    assert [s.text for s in doc.sents] == ["A ( B )", "C D E"]
    assert [s.text for s in doc.spans["gold"]] == ["A", "A ( B )", "D E"]


GOOD = {"doc_key": "OK", "sentences": [["a", "b"]], "ner": [[[0, 1, "Task"]]]}


@pytest.mark.parametrize(
    "second_line,message",
    [
        ('{"doc_key": "Bad", "sentences": [["a"]], "ner": [[]]', "invalid JSON"),
        (json.dumps({"doc_key": "Bad", "sentences": [["a", "b"]], "ner": [[[1, 0, "Task"]]]}), "end < start"),
        (json.dumps({"doc_key": "Bad", "sentences": [["a", "b"]], "ner": [[[1, 2, "Task"]]]}), "outside the sentence"),
        (json.dumps({"doc_key": "Bad", "sentences": [["a", "b"]], "ner": [[[-1, 0, "Task"]]]}), "outside the sentence"),
        (json.dumps({"doc_key": "Bad", "sentences": [["a"], ["b"]], "ner": [[[0, 1, "Task"]], []]}), "outside the sentence"),
        (json.dumps({"doc_key": "Bad", "sentences": [["a"]], "ner": [[], []]}), "one entry per sentence"),
        (json.dumps({"doc_key": "Bad", "sentences": [["a"]], "ner": [[[0, 0]]]}), r"not \[start, end, label\]"),
        (json.dumps({"doc_key": "Bad", "sentences": [[]], "ner": [[]]}), "non-empty list"),
        (json.dumps({"doc_key": "Bad", "ner": [[]]}), "'sentences'"),
        (json.dumps(["not", "an", "object"]), "JSON object"),
    ],
)
def test_scierc_bad_input_names_file_line_doc(tmp_path, vocab, second_line, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(GOOD) + "\n" + second_line + "\n", encoding="utf8")
    docs = read_scierc(path, vocab)
    assert next(docs).user_data["doc_key"] == "OK"
    with pytest.raises(CorpusFormatError, match=message) as info:
        next(docs)
    assert f"{path}:2" in str(info.value)
    assert info.value.line == 2
    if "JSON" not in message and "sentences" not in message:
        assert "(doc Bad)" in str(info.value)


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_scierc_empty_file(tmp_path, vocab, content):
    path = tmp_path / "empty.json"
    path.write_text(content, encoding="utf8")
    with pytest.raises(CorpusFormatError, match="empty file") as info:
        list(read_scierc(path, vocab))
    assert str(path) in str(info.value)


def test_scierc_missing_file_and_bad_unit(tmp_path, vocab):
    with pytest.raises(CorpusFormatError, match="not found"):
        list(read_scierc(tmp_path / "nope.json", vocab))
    with pytest.raises(ValueError, match="doc_unit"):
        list(read_scierc(tmp_path / "nope.json", vocab, doc_unit="paragraph"))
