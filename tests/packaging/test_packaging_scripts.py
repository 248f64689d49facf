"""scripts/packaging: the model card written into the packaged meta.json, and the package
step's handling of stale metrics and of build-tool output (quiet unless a step fails).
The end-to-end run (real training, wheels, a fresh venv) is tests/test_project_demo.py."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "packaging"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"sciner_packaging_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


model_card = _load("model_card")
package = _load("package")

CONFIG = """
[nlp]
lang = "en"
pipeline = ["transformer","sciner_spancat"]

[components]

[components.transformer]
factory = "transformer"

[components.transformer.model]
@architectures = "spacy-sciner.TransformerModel.v1"
name = "sciner-minilm"

[components.sciner_spancat]
factory = "sciner_spancat"
"""

CALIBRATION = {"target_recall": 0.99, "filter_threshold": 0.01, "threshold": 0.2, "decision": "floor", "dev_f": 0.5}


def _metrics(f):
    return {
        "token_acc": 1.0, "spans_sc_p": f - 0.1, "spans_sc_r": f + 0.1, "spans_sc_f": f,
        "ents_p": f - 0.05, "ents_r": f + 0.05, "ents_f": f - 0.01,
        "spans_sc_per_type": {"Task": {"p": f, "r": f, "f": f}}, "speed": 1234.5,
    }


def _model_dir(tmp_path, calibrated=True):
    model = tmp_path / "model-calibrated"
    (model / "sciner_spancat").mkdir(parents=True)
    (model / "config.cfg").write_text(CONFIG)
    training_meta = {
        "lang": "en", "name": "pipeline", "version": "0.0.0", "license": "", "description": "",
        "pipeline": ["transformer", "sciner_spancat"],
        # what `spacy train` leaves: uncalibrated dev scores and losses
        "performance": {"spans_sc_f": 0.0, "ents_f": 0.0, "transformer_loss": 1010.2},
    }
    (model / "meta.json").write_text(json.dumps(training_meta))
    cfg = {"threshold": 0.2, **({"calibration": CALIBRATION} if calibrated else {})}
    (model / "sciner_spancat" / "cfg").write_text(json.dumps(cfg))
    return model


def test_model_card_records_calibrated_dev_and_test_scores(tmp_path):
    meta = model_card.build_meta(_model_dir(tmp_path), "bionlp13cg", _metrics(0.6), _metrics(0.7))
    # The accuracy table (performance) is test, calibrated; training-time numbers are gone.
    assert meta["performance"]["spans_sc_f"] == 0.6
    assert meta["performance"]["ents_f"] == pytest.approx(0.59)
    assert "transformer_loss" not in meta["performance"]
    assert meta["sciner"]["scores"]["dev"]["spans_sc_f"] == 0.7
    assert meta["sciner"]["scores"]["test"]["spans_sc_per_type"]["Task"]["f"] == 0.6
    assert meta["sciner"]["dataset"] == "bionlp13cg"
    assert meta["sciner"]["encoder"] == "sciner-minilm"
    assert meta["sciner"]["calibrated"] and meta["sciner"]["calibration"] == CALIBRATION
    assert meta["license"] == "CC BY-SA 3.0"
    assert "BioNLP13CG" in meta["description"] and "sciner-minilm" in meta["description"]
    names = " ".join(s["name"] for s in meta["sources"])
    assert "BioNLP13CG" in names and "all-MiniLM-L6-v2" in names and "Apache-2.0" in names
    # The notes table (rendered into the package README) shows both splits.
    assert "| dev | 60.0 | 80.0 | 70.0 |" in meta["notes"]
    assert "| test | 50.0 | 70.0 | 60.0 |" in meta["notes"]
    assert "filter threshold 0.01" in meta["notes"]


def test_model_card_states_the_abbreviations_choice(tmp_path):
    model = _model_dir(tmp_path)
    choice = {"mode": "auto", "dev_f_without": 0.61, "dev_f_with": 0.64, "spans_added": 12, "added": True}
    cfg = {"threshold": 0.2, "calibration": {**CALIBRATION, "abbreviations": choice}}
    (model / "sciner_spancat" / "cfg").write_text(json.dumps(cfg))
    notes = model_card.build_meta(model, "ncbi_disease", _metrics(0.6), _metrics(0.7))["notes"]
    assert "`sciner_abbreviations` (auto): dev span F 61.0 without, 64.0 with: in the pipeline." in notes
    # Without the choice (calibrate's default --abbreviations off) the card says nothing of it.
    assert "sciner_abbreviations" not in model_card.build_meta(
        _model_dir(tmp_path / "plain"), "ncbi_disease", _metrics(0.6), _metrics(0.7))["notes"]


def test_model_card_of_a_cnn_pipeline_names_no_encoder(tmp_path):
    model = _model_dir(tmp_path)
    (model / "config.cfg").write_text(
        '[nlp]\nlang = "en"\npipeline = ["tok2vec","sciner_spancat"]\n\n[components]\n\n'
        '[components.tok2vec]\nfactory = "tok2vec"\n\n[components.sciner_spancat]\nfactory = "sciner_spancat"\n')
    meta = model_card.build_meta(model, "bionlp13cg", _metrics(0.6), _metrics(0.7))
    assert "CNN tok2vec" in meta["description"] and "transformer encoder" not in meta["description"]
    assert meta["sciner"]["encoder"] is None and len(meta["sources"]) == 1
    assert "No pretrained encoder." in meta["notes"]


def test_model_card_of_a_hybrid_pipeline_names_encoder_and_cnn(tmp_path):
    model = _model_dir(tmp_path)
    (model / "config.cfg").write_text(CONFIG + '\n[components.sciner_spancat.model]\n\n'
                                      '[components.sciner_spancat.model.tok2vec]\n'
                                      '@architectures = "spacy-sciner.HybridTok2Vec.v1"\n')
    meta = model_card.build_meta(model, "bionlp13cg", _metrics(0.6), _metrics(0.7))
    assert "transformer encoder (sciner-minilm) whose vectors are concatenated with spaCy's CNN tok2vec" in meta["description"]
    assert meta["sciner"]["encoder"] == "sciner-minilm"
    # the plain transformer config's card does not claim a CNN
    plain = model_card.build_meta(_model_dir(tmp_path / "plain"), "bionlp13cg", _metrics(0.6), _metrics(0.7))
    assert "CNN" not in plain["description"]


def test_model_card_says_when_the_pipeline_was_not_calibrated(tmp_path):
    meta = model_card.build_meta(_model_dir(tmp_path, calibrated=False), "demo", _metrics(0.6), _metrics(0.7))
    assert meta["sciner"]["calibrated"] is False
    assert "Not calibrated" in meta["notes"]
    assert meta["license"] == "MIT"


def test_model_card_rejects_metrics_without_span_scores(tmp_path):
    with pytest.raises(ValueError, match="spans_sc_f"):
        model_card.build_meta(_model_dir(tmp_path), "demo", {"ents_f": 0.5}, _metrics(0.7))


def test_model_card_validates_against_spacys_meta_schema(tmp_path):
    from spacy.schemas import ModelMetaSchema, validate

    meta = model_card.build_meta(_model_dir(tmp_path), "scierc", _metrics(0.6), _metrics(0.7))
    assert validate(ModelMetaSchema, meta) == []


def test_package_refuses_test_metrics_older_than_the_model(tmp_path):
    model = _model_dir(tmp_path)
    test_metrics = tmp_path / "test.json"
    test_metrics.write_text(json.dumps(_metrics(0.6)))
    import os

    old = model.joinpath("meta.json").stat().st_mtime - 100
    os.utime(test_metrics, (old, old))
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "package.py"), str(model), str(tmp_path / "packages"),
         "--name", "x", "--version", "0.1.0", "--dataset", "demo", "--test-metrics", str(test_metrics),
         "--dev-metrics", str(tmp_path / "dev.json"), "--dev-data", str(tmp_path / "dev.spacy")],
        capture_output=True, text=True,
    )
    assert proc.returncode != 0
    assert "older than" in proc.stderr and "evaluate" in proc.stderr


def test_build_output_is_hidden_on_success_and_shown_on_failure(capsys):
    out = package.run_quiet([sys.executable, "-c", "print('copying lots of files')"], "noisy step")
    assert "copying lots of files" in out
    assert capsys.readouterr().out == ""
    with pytest.raises(SystemExit) as exc:
        package.run_quiet(
            [sys.executable, "-c", "import sys; print('setuptools says: bad thing'); sys.exit(3)"], "failing step"
        )
    assert "failing step failed (exit 3)" in str(exc.value)
    assert "setuptools says: bad thing" in capsys.readouterr().err
