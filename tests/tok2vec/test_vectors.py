"""In-domain floret vectors (``sciner train-vectors``) and the plain-text pretraining reader."""
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.training import Example
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.corpora.readers import create_text_lines_reader
from spacy_sciner.tok2vec.vectors import FloretSettings, VectorsError, train_vectors

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
WORDS = ["kinase", "tumour", "PD-L1", "cells", "expression", "inhibits", "the", "of", "mutant", "p53"]
TINY = dict(dim=8, epochs=2, min_count=1, minn=3, maxn=4, bucket=500, threads=1)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = numpy.random.default_rng(0)
    path = tmp_path_factory.mktemp("text") / "aux.txt"
    lines = [" ".join(rng.choice(WORDS, size=8)) for _ in range(300)]
    path.write_text("\n".join(lines[:150]) + "\n\n" + "\n".join(lines[150:]) + "\n", encoding="utf8")
    return path


def test_train_vectors_writes_a_floret_pipeline(text_file, tmp_path):
    log = train_vectors([str(text_file)], tmp_path / "vec", FloretSettings(**TINY))
    tokenizer = spacy.blank("en").tokenizer  # the pipeline's tokens ("PD-L1" -> PD - L1), not whitespace's
    expected = sum(len(tokenizer(line)) for line in text_file.read_text().splitlines() if line)
    assert log["lines"] == 300 and log["tokens"] == expected > 2400
    assert log["read"]["empty_lines_skipped"] == 1
    nlp = spacy.load(tmp_path / "vec")
    assert nlp.vocab.vectors.mode == "floret"
    assert nlp.vocab.vectors.shape == (500, 8)
    # floret gives any string a vector from its subwords, an unseen word included
    unseen = nlp.vocab.vectors.get_batch(["kinases"])[0]
    assert numpy.abs(unseen).sum() > 0
    assert (tmp_path / "vec" / "vectors_log.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".vec")]  # no temporary folder left


def test_one_thread_same_vectors(text_file, tmp_path):
    train_vectors([str(text_file)], tmp_path / "a", FloretSettings(**TINY))
    train_vectors([str(text_file)], tmp_path / "b", FloretSettings(**TINY))
    a, b = spacy.load(tmp_path / "a").vocab.vectors.data, spacy.load(tmp_path / "b").vocab.vectors.data
    assert numpy.array_equal(a, b)


def test_vectors_feed_the_cnn_config(text_file, tmp_path):
    """The config's MultiHashEmbed takes the floret table with include_static_vectors."""
    train_vectors([str(text_file)], tmp_path / "vec", FloretSettings(**TINY))
    config = spacy.util.load_config(CONFIGS / "sciner_spancat_cnn.cfg", overrides={
        "paths.vectors": str(tmp_path / "vec"), "components.tok2vec.model.embed.include_static_vectors": True,
        "components.tok2vec.model.encode.width": 16, "components.tok2vec.model.encode.depth": 1})
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    doc = nlp.make_doc("mutant p53 inhibits kinase expression")
    doc.spans["sc"] = [doc.char_span(0, 10, "GENE")]
    nlp.initialize(lambda: [Example(nlp.make_doc(doc.text), doc)])
    assert nlp.vocab.vectors.shape == (500, 8)
    losses = nlp.update([Example(nlp.make_doc(doc.text), doc)])
    assert losses["sciner_spancat"] > 0


def test_bad_settings_and_missing_input_fail_in_one_line(tmp_path):
    with pytest.raises(VectorsError, match="hash_count"):
        FloretSettings(hash_count=9).check()
    result = CliRunner().invoke(sciner_cli, ["train-vectors", str(tmp_path / "nope.txt"), str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "text file not found" in result.output and "Traceback" not in result.output
    (tmp_path / "empty.txt").write_text("\n\n")
    result = CliRunner().invoke(sciner_cli, ["train-vectors", str(tmp_path / "empty.txt"), str(tmp_path / "out")])
    assert result.exit_code == 1 and "no tokens" in result.output
    assert not (tmp_path / "out").exists()


def test_text_lines_reader_bounds_and_limit(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("one two three four five\nshort line\n\nsix seven eight nine ten eleven\n" + "a " * 600 + "\n")
    nlp = spacy.blank("en")
    texts = [eg.reference.text for eg in create_text_lines_reader(path)(nlp)]
    assert texts == ["one two three four five", "six seven eight nine ten eleven"]  # < 5 and > 500 tokens skipped
    assert len(list(create_text_lines_reader(path, min_length=0, max_length=0)(nlp))) == 4
    assert len(list(create_text_lines_reader(path, limit=1)(nlp))) == 1
    with pytest.raises(ValueError, match="paths.raw_text"):
        list(create_text_lines_reader(tmp_path / "missing.txt")(nlp))


def test_spacy_pretrain_then_init_tok2vec(text_file, tmp_path):
    """spacy pretrain on plain text with the CNN config, then spacy train from its weights."""
    small = ["--components.tok2vec.model.encode.width", "16", "--components.tok2vec.model.encode.depth", "1"]
    cmd = [sys.executable, "-m", "spacy", "pretrain", str(CONFIGS / "sciner_spancat_cnn.cfg"), str(tmp_path / "pre"),
           "--paths.raw_text", str(text_file), "--pretraining.max_epochs", "1", *small]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    weights = tmp_path / "pre" / "model0.bin"
    assert weights.exists()
    config = spacy.util.load_config(CONFIGS / "sciner_spancat_cnn.cfg", overrides={
        "paths.init_tok2vec": str(weights), "components.tok2vec.model.encode.width": 16,
        "components.tok2vec.model.encode.depth": 1})
    pretrained = _initialized(config)
    fresh = _initialized(spacy.util.load_config(CONFIGS / "sciner_spancat_cnn.cfg", overrides={
        "components.tok2vec.model.encode.width": 16, "components.tok2vec.model.encode.depth": 1}))
    # Same seed, same random init: the weights differ only because init_tok2vec loaded them.
    assert pretrained.get_pipe("tok2vec").model.to_bytes() != fresh.get_pipe("tok2vec").model.to_bytes()
    doc = pretrained("mutant p53 inhibits kinase expression")
    assert pretrained.get_pipe("tok2vec").model.get_dim("nO") == 16 and len(doc) == 5


def _initialized(config):
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    doc = nlp.make_doc("mutant p53 inhibits kinase expression")
    doc.spans["sc"] = [doc.char_span(0, 10, "GENE")]
    nlp.initialize(lambda: [Example(nlp.make_doc(doc.text), doc)])
    return nlp
