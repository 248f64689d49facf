"""spacy-sciner.JSONLLogger.v1: spaCy's console table plus one JSON line per evaluation."""
import json
import math
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span

from spacy_sciner.training.loggers import info_record

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = [
    ("the support vector machine beats neural nets", [(1, 4, "Method"), (5, 7, "Method")]),
    ("we use the penn treebank corpus", [(3, 6, "Material")]),
    ("bleu measures translation quality", [(0, 1, "Metric"), (2, 3, "Task")]),
]


def make_logger(**config):
    return spacy.util.registry.resolve({"logger": {"@loggers": "spacy-sciner.JSONLLogger.v1", **config}})["logger"]


@pytest.fixture
def corpus(tmp_path):
    nlp = spacy.blank("en")
    db = DocBin()
    for text, spans in DATA * 4:
        doc = Doc(nlp.vocab, words=text.split())
        doc.spans["sc"] = [Span(doc, s, e, label=label) for s, e, label in spans]
        db.add(doc)
    db.to_disk(tmp_path / "train.spacy")
    return tmp_path / "train.spacy"


def test_spacy_train_writes_json_lines(corpus, tmp_path, capsys):
    """A short `spacy train` (CNN config, small widths): one valid line per evaluation."""
    from spacy.cli.train import train

    log = tmp_path / "new" / "folder" / "log.jsonl"  # folders created by the logger
    overrides = {
        "paths.train": str(corpus), "paths.dev": str(corpus), "training.max_steps": 9,
        "training.eval_frequency": 3, "training.logger.path": str(log),
        "components.tok2vec.model.encode.width": 32, "components.tok2vec.model.encode.depth": 2,
        "components.sciner_spancat.model.hidden_width": 16,
    }
    train(ROOT / "configs" / "sciner_spancat_cnn.cfg", tmp_path / "out", overrides=overrides)
    assert "SPANS_SC_F" in capsys.readouterr().out  # spaCy's console table is still printed
    records = [json.loads(line) for line in log.read_text(encoding="utf8").splitlines()]
    assert [r["step"] for r in records] == [0, 3, 6, 9]
    seconds = [r["seconds"] for r in records]
    assert seconds == sorted(seconds) and seconds[-1] > seconds[0] >= 0
    words = [r["words"] for r in records]
    assert words == sorted(words) and words[-1] > words[0]
    for record in records:
        assert set(record) == {"step", "epoch", "seconds", "score", "words", "scores", "losses"}
        assert 0.0 <= record["scores"]["spans_sc_f"] <= 1.0 and record["score"] == record["scores"]["spans_sc_f"]
        assert set(record["losses"]) == {"tok2vec", "sciner_spancat"}
        assert all(isinstance(v, (float, type(None))) for v in record["scores"].values())
    # A second run starts the file afresh.
    train(ROOT / "configs" / "sciner_spancat_cnn.cfg", tmp_path / "out2", overrides={**overrides, "training.max_steps": 3})
    assert [json.loads(line)["step"] for line in log.read_text(encoding="utf8").splitlines()] == [0, 3]


def test_unwritable_path_fails_at_resolve(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for path in (blocker / "log.jsonl", tmp_path):
        with pytest.raises(ValueError, match=f"JSONLLogger.v1: cannot write {path}: "):
            make_logger(path=str(path))


def test_unwritable_path_fails_before_spacy_train(tmp_path):
    """`spacy train` stops with the logger's message before initializing anything."""
    import subprocess

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cmd = [sys.executable, "-m", "spacy", "train", "configs/sciner_spancat_cnn.cfg", "--output", str(tmp_path / "out"),
           "--paths.train", "x.spacy", "--paths.dev", "x.spacy", "--training.logger.path", str(blocker / "log.jsonl")]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert f"cannot write {blocker / 'log.jsonl'}: {blocker} is not a directory" in result.stdout + result.stderr
    assert not (tmp_path / "out" / "model-last").exists()


def test_console_only_without_path(tmp_path):
    setup = make_logger(progress_bar=True)
    nlp = spacy.util.load_model_from_config(spacy.util.load_config(ROOT / "configs" / "sciner_spancat_cnn.cfg"))
    log_step, finalize = setup(nlp)
    log_step(None)
    finalize()
    assert list(tmp_path.iterdir()) == []


def test_info_record_is_flat_json():
    info = {
        "epoch": 2, "step": 400, "score": numpy.float32(0.25), "words": 12345, "seconds": 7,
        "other_scores": {"spans_sc_f": 0.25, "speed": 1000.0, "ents_f": math.nan,
                         "spans_sc_per_type": {"Method": {"p": 0.5, "r": 0.25, "f": 1 / 3}}},
        "losses": {"sciner_spancat": numpy.float64(12.5)}, "checkpoints": [(0.25, 400)],
    }
    record = info_record(info, seconds=7.123456)
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert record == {
        "step": 400, "epoch": 2, "seconds": 7.123, "score": 0.25, "words": 12345,
        "scores": {"spans_sc_f": 0.25, "speed": 1000.0, "ents_f": None, "spans_sc_per_type.Method.p": 0.5,
                   "spans_sc_per_type.Method.r": 0.25, "spans_sc_per_type.Method.f": 1 / 3},
        "losses": {"sciner_spancat": 12.5},
    }
