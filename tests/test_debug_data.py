"""`sciner debug-data`: span statistics per label and per length of a DocBin."""
import json

import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.debug import span_statistics


@pytest.fixture
def docs():
    nlp = spacy.blank("en")
    # 0    1      2      3       4  5   6 7    8     9   10  11
    words = "the support vector machine ( SVM ) beats neural nets , today".split()
    a = Doc(nlp.vocab, words=words)
    a.spans["sc"] = [
        Span(a, 1, 4, "Method"),  # holds 1-3
        Span(a, 1, 3, "Other"),  # nested in 1-4
        Span(a, 1, 7, "Method"),  # matched brackets at the edge: fine; holds 1-4 and 1-3
        Span(a, 5, 7, "Method"),  # "SVM )": unmatched bracket
        Span(a, 6, 9, "Task"),  # ") beats neural": crosses 5-7 and 1-7
        Span(a, 8, 11, "Method"),  # ends on ","
        Span(a, 8, 11, "Method"),  # exact duplicate
        Span(a, 8, 11, "Task"),  # same tokens, other label
        Span(a, 2, 2, "Other"),  # empty
        Span(a, 0, 12, "Task"),  # longer than 8, holds everything
    ]
    b = Doc(nlp.vocab, words=["no", "spans", " "], spaces=[True, False, False])
    b.spans["sc"] = []
    c = Doc(nlp.vocab, words=["x", " ", "y"])
    c.spans["sc"] = [Span(c, 0, 2, "Task")]  # ends on a whitespace token
    d = Doc(nlp.vocab, words=["other", "key"])
    d.spans["gold"] = [Span(d, 0, 1, "Task")]
    return [a, b, c, d]


def test_span_statistics(docs):
    stats = span_statistics(docs, max_span_length=8)
    assert stats["docs"] == 4 and stats["tokens"] == 12 + 3 + 3 + 2 and stats["spans"] == 11
    assert stats["docs_without_key"] == 1 and stats["docs_without_spans"] == 2
    assert stats["duplicates"] == 1 and stats["same_extent_pairs"] == 3  # 3 spans on 8-11
    assert stats["longer_than_max"] == 1 and stats["empty"] == 1 and stats["whitespace_edged"] == 1
    assert stats["punct_edged"] == 5  # "SVM )", ") beats neural" and the three spans ending on ","
    # extents of doc a: 0-12 1-3 1-4 1-7 5-7 6-9 8-11; crossing: 5-7/6-9, 1-7/6-9, 6-9/8-11
    assert stats["crossing_pairs"] == 3
    assert stats["nested_pairs"] == 6 + 3 + 1  # all in 0-12; 1-3 in 1-4, 1-3 and 1-4 in 1-7; 5-7 in 1-7
    assert stats["lengths"] == {0: 1, 2: 3, 3: 5, 6: 1, 12: 1}
    method = stats["labels"]["Method"]
    assert method["count"] == 5 and method["max_length"] == 6 and method["mean_length"] == pytest.approx((3 + 6 + 2 + 3 + 3) / 5)
    # nested: 1-4, 1-7, 5-7 and both 8-11 (all in 0-12); containing: 1-4, 1-7; crossing 6-9: 1-7, 5-7, 8-11 x2
    assert method["nested"] == 5 and method["containing"] == 2 and method["crossing"] == 4
    assert stats["labels"]["Task"]["longer_than_max"] == 1
    assert any("'SVM )' Method" in e for e in stats["examples"]["punct_edged"])
    assert stats["examples"]["longer_than_max"] == ["doc 0: 'the support vector machine ( SVM ) beats neural nets , today' Task (tokens 0-12)"]


def test_span_statistics_other_key(docs):
    stats = span_statistics(docs, spans_key="gold")
    assert stats["spans"] == 1 and stats["docs_without_key"] == 3


def test_debug_data_cli(docs, tmp_path):
    DocBin(docs=docs, store_user_data=True).to_disk(tmp_path / "d.spacy")
    out = tmp_path / "new" / "stats.json"
    result = CliRunner().invoke(sciner_cli, ["debug-data", str(tmp_path / "d.spacy"), "-L", "8", "--json", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("4 docs, 20 tokens, 11 spans in doc.spans['sc']")
    assert any(line.split()[:2] == ["Method", "5"] for line in lines)
    assert any(line.split() == [">8", "1", "#" * 8] for line in lines)  # bars: 40 chars for the top count, 5
    assert "crossing pairs 3" in result.output and "examples (longer than max):" in result.output
    assert json.loads(out.read_text())["labels"]["Method"]["count"] == 5


def test_debug_data_cli_errors(docs, tmp_path, assert_cli_error, tree):
    DocBin(docs=docs).to_disk(tmp_path / "d.spacy")
    (tmp_path / "bad.spacy").write_text("not a docbin")
    (tmp_path / "afile").write_text("x")
    before = tree(tmp_path)
    runner = CliRunner()

    def run(*args):
        return runner.invoke(sciner_cli, ["debug-data", *map(str, args)])

    assert_cli_error(run(tmp_path / "nope.spacy"), tmp_path / "nope.spacy", "not found")
    assert_cli_error(run(tmp_path / "bad.spacy"), tmp_path / "bad.spacy", "not a readable DocBin")
    assert_cli_error(run(tmp_path), tmp_path, "is a directory")
    assert_cli_error(run(tmp_path / "d.spacy", "--spans-key", "nope"), "doc.spans['nope']", "['gold', 'sc']")
    assert_cli_error(run(tmp_path / "d.spacy", "--json", tmp_path / "afile" / "s.json"), tmp_path / "afile", "not a directory")
    assert tree(tmp_path) == before


def test_agrees_with_convert_on_scierc_dev(shared_data, tmp_path):
    import os

    from spacy_sciner.corpora import convert

    conversion = convert(os.path.join(shared_data, "scierc", "dev.json"), tmp_path / "dev.spacy", "scierc")
    docs = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(spacy.blank("en").vocab))
    stats = span_statistics(docs)
    assert stats["docs"] == conversion.docs and stats["spans"] == conversion.entities == 811
    assert stats["nested_pairs"] == conversion.nested_pairs
    assert {label: row["count"] for label, row in stats["labels"].items()} == dict(conversion.labels)
    assert sum(stats["lengths"].values()) == 811 and stats["longer_than_max"] == 5
