import os
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.util import registry

from spacy_sciner.corpora import CorpusFormatError, convert


def load(path, nlp):
    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def test_cli_scierc_docbin_round_trip(shared_data, tmp_path):
    out = tmp_path / "out" / "dev.spacy"
    src = os.path.join(shared_data, "scierc", "dev.json")
    result = subprocess.run(
        [sys.executable, "-m", "spacy_sciner", "convert", src, str(out), "--format", "scierc",
         "--doc-unit", "document", "--spans-key", "gold"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    counts = dict(line.rsplit(None, 1) for line in result.stdout.splitlines()[1:] if not line.startswith(" "))
    assert counts["docs"] == "50" and counts["sentences"] == "275" and counts["tokens"] == "6521"
    assert counts["entities (doc.spans)"] == "811" and counts["nested pairs"] == "7"
    assert counts["dropped from doc.ents (overlap)"] == "7"
    assert counts["docs without sentence boundaries"] == "0" and counts["repairs"] == "0"
    docs = load(out, spacy.blank("en"))
    assert len(docs) == 50
    assert sum(len(d.spans["gold"]) for d in docs) == 811
    assert sum(len(d.ents) for d in docs) == 804
    assert sum(len(list(d.sents)) for d in docs) == 275
    assert all(d.user_data["doc_key"] for d in docs)
    assert not os.path.exists(str(out) + ".tmp")


def test_cli_error_exit_via_spacy_cli(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tO\nb\tX-Foo\n", encoding="utf8")
    out = tmp_path / "bad.spacy"
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "sciner", "convert", str(bad), str(out), "--format", "conll"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1
    assert f"{bad}:2: unknown tag 'X-Foo'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_convert_conll_and_brat(shared_data, tmp_path):
    nlp = spacy.blank("en")
    src = os.path.join(shared_data, "crossner_ai", "train.txt")
    stats = convert(src, tmp_path / "ai.spacy", "conll", scheme="iob2")
    docs = load(tmp_path / "ai.spacy", nlp)
    # crossner_ai/README.md: 100 sentences, 532 entities in train.
    assert len(docs) == stats.docs == 100
    assert sum(len(d.spans["sc"]) for d in docs) == sum(len(d.ents) for d in docs) == 532
    assert docs[0].user_data["source"] == "train.txt:1"

    brat = tmp_path / "brat"
    brat.mkdir()
    (brat / "a.txt").write_text("IL-2 activates T cells.", encoding="utf8")
    (brat / "a.ann").write_text("T1\tGene 0 4\tIL-2\nT2\tCell 15 22\tT cells\nE1\tPositive_regulation:T1\n", encoding="utf8")
    stats = convert(brat, tmp_path / "brat.spacy", "brat")
    (doc,) = load(tmp_path / "brat.spacy", nlp)
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("IL-2", "Gene"), ("T cells", "Cell")]
    assert doc.user_data["doc_key"] == "a" and stats.ignored_lines["events"] == 1
    with pytest.raises(ValueError, match="format"):
        convert(src, tmp_path / "x.spacy", "json")


def check_examples(examples, n, key="sc"):
    assert len(examples) == n
    for eg in examples:
        ref, pred = eg.reference, eg.predicted
        assert [t.text for t in pred] == [t.text for t in ref]
        assert pred.text == ref.text
        assert not pred.spans and not pred.ents and not pred.user_data
        assert not pred.has_annotation("SENT_START")
    assert sum(len(eg.reference.spans[key]) for eg in examples) > 0


def test_registered_readers(shared_data, tmp_path):
    nlp = spacy.blank("en")
    scierc = registry.readers.get("spacy-sciner.SciERCReader.v1")(
        path=os.path.join(shared_data, "scierc", "dev.json"), doc_unit="document"
    )
    examples = list(scierc(nlp))
    check_examples(examples, 50)
    assert sum(len(eg.reference.spans["sc"]) for eg in examples) == 811
    assert examples[0].reference.has_annotation("SENT_START")
    # Re-iterable: spaCy calls the train corpus once per epoch.
    assert len(list(scierc(nlp))) == 50

    conll = registry.readers.get("spacy-sciner.CoNLLReader.v1")(
        path=os.path.join(shared_data, "BioNLP13CG", "dev.tsv"), limit=20
    )
    check_examples(list(conll(nlp)), 20)

    (tmp_path / "a.txt").write_text("IL-2 activates T cells.", encoding="utf8")
    (tmp_path / "a.ann").write_text("T1\tGene 0 4\tIL-2\n", encoding="utf8")
    brat = registry.readers.get("spacy-sciner.BratReader.v1")(path=tmp_path, spans_key="gold")
    (eg,) = list(brat(nlp))
    check_examples([eg], 1, key="gold")
    assert [t.text for t in eg.predicted] == [t.text for t in nlp.make_doc("IL-2 activates T cells.")]

    (tmp_path / "a.jsonl").write_text('{"text": "IL-2 activates T cells.", "spans": [{"start": 0, "end": 4, "label": "Gene"}]}\n')
    jsonl = registry.readers.get("spacy-sciner.JSONLReader.v1")(path=tmp_path / "a.jsonl", spans_key="gold")
    (eg,) = list(jsonl(nlp))
    check_examples([eg], 1, key="gold")
    assert [(s.text, s.label_) for s in eg.reference.spans["gold"]] == [("IL-2", "Gene")]


def test_reader_from_training_config(shared_data):
    config = {
        "train": {
            "@readers": "spacy-sciner.CoNLLReader.v1",
            "path": os.path.join(shared_data, "scierc", "conll", "dev.txt"),
            "scheme": "iob1",
        }
    }
    corpus = registry.resolve(config)["train"]
    examples = list(corpus(spacy.blank("en")))
    assert len(examples) == 275
    assert sum(len(eg.reference.ents) for eg in examples) == 808


def test_reader_errors_surface(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json}\n", encoding="utf8")
    reader = registry.readers.get("spacy-sciner.SciERCReader.v1")(path=bad)
    with pytest.raises(CorpusFormatError, match=r"bad.json:1: invalid JSON"):
        list(reader(spacy.blank("en")))
