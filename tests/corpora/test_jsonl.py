"""Character-offset JSON lines (Prodigy, doccano): mentions, tokens, skips and bad input."""
import json

import pytest
import spacy

from spacy_sciner.corpora import ConversionStats, CorpusFormatError, convert, read_jsonl

TEXT = "BRCA1 mutations cause breast cancer."


def write(tmp_path, *records, name="in.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf8")
    return path


def read(path, stats=None):
    return list(read_jsonl(path, spacy.blank("en"), stats=stats or ConversionStats()))


def spans(doc, key="sc"):
    return [(s.text, s.label_) for s in doc.spans[key]]


@pytest.mark.parametrize("mentions", [
    {"spans": [{"start": 0, "end": 5, "label": "Gene"}, {"start": 22, "end": 35, "label": "Disease"}]},
    {"entities": [{"start_offset": 0, "end_offset": 5, "label": "Gene"},
                  {"start_offset": 22, "end_offset": 35, "label": "Disease"}]},
    {"label": [[0, 5, "Gene"], [22, 35, "Disease"]]},
], ids=["prodigy", "doccano", "doccano-old"])
def test_each_mention_key(tmp_path, mentions):
    (doc,) = read(write(tmp_path, {"text": TEXT, "id": 7, **mentions}))
    assert doc.text == TEXT
    assert spans(doc) == [("BRCA1", "Gene"), ("breast cancer", "Disease")]
    assert [(e.text, e.label_) for e in doc.ents] == spans(doc)
    assert doc.user_data["doc_key"] == "7"


def test_nested_mentions_kept_in_spans_outer_in_ents(tmp_path):
    record = {"text": TEXT, "spans": [{"start": 22, "end": 35, "label": "Disease"},
                                      {"start": 29, "end": 35, "label": "Disease"}]}
    (doc,) = read(write(tmp_path, record))
    assert spans(doc) == [("breast cancer", "Disease"), ("cancer", "Disease")]
    assert [e.text for e in doc.ents] == ["breast cancer"]


def test_own_tokens_are_kept(tmp_path):
    # The annotator's tokens cut "BRCA1" into two; spaCy's tokenizer would not.
    words = [("BRCA", True, False), ("1", True, True), ("mutations", False, False)]
    text = "BRCA1 mutations"
    tokens = [{"text": w, "ws": ws} for w, _, ws in words]
    (doc,) = read(write(tmp_path, {"text": text, "tokens": tokens, "spans": [{"start": 4, "end": 5, "label": "X"}]}))
    assert [t.text for t in doc] == ["BRCA", "1", "mutations"]
    assert spans(doc) == [("1", "X")]


def test_misaligned_offsets_are_expanded_and_counted(tmp_path):
    stats = ConversionStats()
    with pytest.warns(UserWarning, match="1 mentions expanded"):
        (doc,) = read(write(tmp_path, {"text": TEXT, "spans": [{"start": 0, "end": 3, "label": "Gene"}]}), stats)
    assert spans(doc) == [("BRCA1", "Gene")] and stats.misaligned == 1
    assert "'BRC' expanded to 'BRCA1'" in stats.notes[0] and ":1:" in stats.notes[0]


def test_rejected_and_ignored_records_are_skipped_and_counted(tmp_path):
    stats = ConversionStats()
    docs = read(write(tmp_path, {"text": "a b", "answer": "reject"}, {"text": "c d", "answer": "ignore"},
                      {"text": "e f", "answer": "accept"}, {"text": "g h"}), stats)
    assert [d.text for d in docs] == ["e f", "g h"]
    assert stats.ignored_lines == {"answer=reject": 1, "answer=ignore": 1}


@pytest.mark.parametrize("line, message", [
    ('{"text": "a b", ', "invalid JSON"),
    ('["a"]', "string 'text'"),
    ('{"spans": []}', "string 'text'"),
    ('{"text": "  "}', "empty 'text'"),
    ('{"text": "a b", "spans": {"start": 0}}', "'spans' must be a list"),
    ('{"text": "a b", "spans": [{"start": 0, "end": 9, "label": "X"}]}', r"outside the text \(0\.\.3\)"),
    ('{"text": "a b", "spans": [{"start": 2, "end": 2, "label": "X"}]}', "end <= start"),
    ('{"text": "a b", "spans": [{"start": 0, "end": 1, "label": ""}]}', "no label"),
    ('{"text": "a b", "spans": [{"start": "0", "end": 1, "label": "X"}]}', "integer start and end"),
    ('{"text": "a b", "spans": [{"start": 1, "end": 2, "label": "X"}]}', "cover no token"),
    ('{"text": "a b", "tokens": [{"text": "a", "ws": false}, {"text": "b"}]}', "the tokens spell 'ab'"),
])
def test_bad_input_names_file_and_line(tmp_path, line, message):
    path = write(tmp_path, {"text": "fine"}, line)
    with pytest.raises(CorpusFormatError, match=message) as err:
        read(path)
    assert str(err.value).startswith(f"{path}:2:")


def test_empty_file_is_an_error(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n", encoding="utf8")
    with pytest.raises(CorpusFormatError, match="empty file"):
        read(path)


def test_convert_writes_a_docbin(tmp_path):
    path = write(tmp_path, {"text": TEXT, "spans": [{"start": 0, "end": 5, "label": "Gene"}]}, {"text": "x y", "answer": "reject"})
    stats = convert(path, tmp_path / "out.spacy", "jsonl")
    assert (stats.docs, stats.entities, dict(stats.labels)) == (1, 1, {"Gene": 1})
    assert stats.ignored_lines["answer=reject"] == 1
