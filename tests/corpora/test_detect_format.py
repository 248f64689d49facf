"""`sciner convert` without --format: the format from the suffix (and a JSON file's first record)."""
import json

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.corpora.convert import detect_format

SCIERC = {"doc_key": "a", "sentences": [["IL-2", "binds", "."]], "ner": [[[0, 0, "Gene"]]]}
PRODIGY = {"text": "IL-2 binds .", "spans": [{"start": 0, "end": 4, "label": "Gene"}]}


def write(tmp_path, name, content):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf8")
    return path


@pytest.mark.parametrize("name, content, expected", [
    ("a.json", json.dumps(SCIERC) + "\n", "scierc"),
    ("a.jsonl", json.dumps(SCIERC) + "\n", "scierc"),
    ("a.jsonl", "\n" + json.dumps(PRODIGY) + "\n", "jsonl"),
    ("a.json", json.dumps({"text": "x", "label": []}) + "\n", "jsonl"),
    ("a.json", "{not json\n", "scierc"),  # the SciERC reader names the bad line
    ("a.tsv", "IL-2\tB-Gene\n", "conll"),
    ("a.txt", "IL-2\tB-Gene\n", "conll"),
    ("a.IOB", "IL-2\tB-Gene\n", "conll"),
    ("a.ann", "T1\tGene 0 4\tIL-2\n", "brat"),
])
def test_file_formats(tmp_path, name, content, expected):
    assert detect_format(write(tmp_path, name, content)) == expected


def test_txt_with_ann_beside_it_is_brat_and_directories(tmp_path):
    txt = write(tmp_path, "brat/a.txt", "IL-2 binds .")
    write(tmp_path, "brat/a.ann", "T1\tGene 0 4\tIL-2\n")
    assert detect_format(txt) == "brat" and detect_format(tmp_path / "brat") == "brat"
    (tmp_path / "bins").mkdir()
    DocBin(docs=[spacy.blank("en")("x")]).to_disk(tmp_path / "bins" / "a.spacy")
    assert detect_format(tmp_path / "bins") == "docbin" and detect_format(tmp_path / "bins" / "a.spacy") == "docbin"


def test_cli_says_what_it_detected_and_converts(tmp_path):
    path = write(tmp_path, "a.jsonl", json.dumps(PRODIGY) + "\n")
    result = CliRunner().invoke(sciner_cli, ["convert", str(path), str(tmp_path / "o.spacy")])
    assert result.exit_code == 0, result.output
    assert "format: jsonl (detected" in result.output
    (doc,) = DocBin().from_disk(tmp_path / "o.spacy").get_docs(spacy.blank("en").vocab)
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("IL-2", "Gene")]
