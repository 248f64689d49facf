"""benchmarks/checkpoint_cost.py: seconds and disk of `sciner train`'s checkpoints."""
import json
import sys
from pathlib import Path

import pytest
from spacy.tokens import DocBin

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "spancat"))
sys.path.insert(0, str(ROOT / "tests" / "tok2vec"))
import checkpoint_cost  # noqa: E402
from spancat_helpers import make_examples, train  # noqa: E402
from tok2vec_helpers import make_hybrid_nlp  # noqa: E402


def test_measures_writes_saves_and_resume(tiny_bert_dir, tmp_path):
    nlp = make_hybrid_nlp(tiny_bert_dir)
    examples = make_examples(nlp)
    train(nlp, examples, steps=2)
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in examples] * 4).to_disk(tmp_path / "train.spacy")
    out = tmp_path / "out"
    assert checkpoint_cost.main(["--model", str(tmp_path / "model"), "--train", str(tmp_path / "train.spacy"),
                                 "--updates", "2", "--batch", "2", "--rounds", "2", "--out", str(out)]) == 0
    result = json.loads((out / "checkpoint_cost.json").read_text())
    assert len(result["checkpoint_write_s"]) == len(result["model_last_save_s"]) == 2
    assert all(s > 0 for s in result["checkpoint_write_s"] + result["model_last_save_s"])
    # The checkpoint holds the weights and, besides, Adam's two moments: more than model-last.
    assert result["checkpoint_mb"] > result["model_last_mb"] > 0 and result["state_pkl_mb"] > 0
    assert "| checkpoint write" in (out / "checkpoint_cost.md").read_text()


def test_refuses_too_little_training_data(tiny_bert_dir, tmp_path):
    nlp = make_hybrid_nlp(tiny_bert_dir)
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in make_examples(nlp)][:1]).to_disk(tmp_path / "train.spacy")
    with pytest.raises(SystemExit, match="fewer than --updates x --batch"):
        checkpoint_cost.main(["--model", str(tmp_path / "model"), "--train", str(tmp_path / "train.spacy"), "--out", str(tmp_path / "o")])
