"""Weak-pretraining configs from any training config, and the CNN head swap (export-tok2vec)."""
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.util import load_config
from thinc.api import Config
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.weak.config import weak_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_weak_corpus import corpus, write_docbin  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_the_shipped_weak_config_is_the_derived_one():
    """configs/sciner_spancat_weak.cfg == weak_config(configs/sciner_spancat.cfg): no drift."""
    derived = weak_config(load_config(CONFIGS / "sciner_spancat.cfg", interpolate=False))
    shipped = load_config(CONFIGS / "sciner_spancat_weak.cfg", interpolate=False)
    assert Config().from_str(derived.to_str()) == Config().from_str(shipped.to_str())


def test_weak_config_keeps_the_model_and_swaps_the_data():
    base = load_config(CONFIGS / "sciner_spancat_cnn.cfg", interpolate=False)
    cfg = weak_config(base, granularity="coarse", max_steps=300)
    assert cfg["components"] == {**base["components"], "sciner_spancat": {
        **base["components"]["sciner_spancat"], "negatives_avoid": None}}
    avoid = weak_config(base, negatives="avoid")
    assert avoid["components"]["sciner_spancat"]["negatives_avoid"] == ["sc"]
    with pytest.raises(ValueError, match="negatives must be 'plain' or 'avoid'"):
        weak_config(base, negatives="some")
    assert cfg["corpora"]["train"]["@readers"] == "spacy-sciner.WeakBalancedCorpus.v1"
    assert cfg["corpora"]["dev"]["split"] == "heldout" and cfg["weak"]["granularity"] == "coarse"
    assert cfg["training"]["max_steps"] == 300 and cfg["training"]["max_epochs"] == -1
    assert "train" in base["paths"] and "train" not in cfg["paths"]  # base unchanged
    with pytest.raises(ValueError, match="no sciner_spancat"):
        weak_config(load_config(CONFIGS / "spacy_ner_cnn.cfg", interpolate=False))


def test_cnn_weak_pretraining_then_head_swap(tmp_path):
    """weak-config -> spacy train on a weak corpus -> export-tok2vec -> a gold CNN pipeline
    initialized from those weights (fresh head, other labels)."""
    nlp0 = spacy.blank("en")
    weak = write_docbin(tmp_path / "weak.spacy", corpus(nlp0))
    runner = CliRunner()
    result = runner.invoke(sciner_cli, ["weak-config", str(CONFIGS / "sciner_spancat_cnn.cfg"), str(tmp_path / "w.cfg"),
                                        "--max-steps", "6"])
    assert result.exit_code == 0, result.output
    small = ["--components.tok2vec.model.encode.width", "16", "--components.tok2vec.model.encode.depth", "1"]
    done = subprocess.run([sys.executable, "-m", "spacy", "train", str(tmp_path / "w.cfg"), "--output", str(tmp_path / "weak"),
                           "--paths.weak", str(weak), "--training.eval_frequency", "3", *small],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = runner.invoke(sciner_cli, ["export-tok2vec", str(tmp_path / "weak" / "model-last"), str(tmp_path / "t2v.bin")])
    assert result.exit_code == 0, result.output
    exported = (tmp_path / "t2v.bin").read_bytes()

    gold = spacy.blank("en")
    doc = gold.make_doc("mutant p53 inhibits kinase")
    doc.spans["sc"] = [doc.char_span(0, 10, "GENE")]
    config = load_config(CONFIGS / "sciner_spancat_cnn.cfg", overrides={
        "paths.init_tok2vec": str(tmp_path / "t2v.bin"), "components.tok2vec.model.encode.width": 16,
        "components.tok2vec.model.encode.depth": 1})
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    from spacy.training import Example

    nlp.initialize(lambda: [Example(nlp.make_doc(doc.text), doc)])
    assert nlp.get_pipe("tok2vec").model.to_bytes() == exported
    assert nlp.get_pipe("sciner_spancat").labels == ("GENE",)  # the head is new


def test_cli_errors_are_one_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(sciner_cli, ["weak-config", str(CONFIGS / "spacy_ner_cnn.cfg"), str(tmp_path / "x.cfg")])
    assert result.exit_code == 1 and "no sciner_spancat component" in result.output
    result = runner.invoke(sciner_cli, ["export-tok2vec", str(tmp_path), str(tmp_path / "t.bin")])
    assert result.exit_code == 1 and "not a spaCy pipeline folder" in result.output
    nlp = spacy.blank("en")
    nlp.to_disk(tmp_path / "blank")
    result = runner.invoke(sciner_cli, ["export-tok2vec", str(tmp_path / "blank"), str(tmp_path / "t.bin")])
    assert result.exit_code == 1 and "no component 'tok2vec'" in result.output
