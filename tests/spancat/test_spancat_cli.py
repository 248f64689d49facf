"""`sciner calibrate MODEL_DIR DEV_DOCBIN OUTPUT_DIR`."""
import spacy
from spacy.tokens import DocBin
from spancat_helpers import make_examples
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli


def write_dev(nlp, path, with_docs=True):
    docs = [eg.reference for eg in make_examples(nlp)] if with_docs else []
    DocBin(docs=docs).to_disk(path)
    return path


def test_calibrate_cli_saves_thresholds(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "model")
    dev = write_dev(trained_nlp, tmp_path / "dev.spacy")
    result = CliRunner().invoke(
        sciner_cli, ["calibrate", str(tmp_path / "model"), str(dev), str(tmp_path / "out"), "--target-recall", "0.9"]
    )
    assert result.exit_code == 0, result.output
    assert "filter threshold" in result.output and "prunes" in result.output and "decision rule" in result.output
    pipe = spacy.load(tmp_path / "out").get_pipe("sciner_spancat")
    report = pipe.cfg["calibration"]
    assert report["target_recall"] == 0.9 and report["filter_recall"] >= 0.9
    assert pipe.cfg["filter_threshold"] is not None and pipe.cfg["threshold"] == report["threshold"]
    assert spacy.load(tmp_path / "model").get_pipe("sciner_spancat").cfg["filter_threshold"] is None


def test_calibrate_cli_errors(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "model")
    spacy.blank("en").to_disk(tmp_path / "blank")
    dev = write_dev(trained_nlp, tmp_path / "dev.spacy")
    runner = CliRunner()
    result = runner.invoke(sciner_cli, ["calibrate", str(tmp_path / "blank"), str(dev), str(tmp_path / "o1")])
    assert result.exit_code != 0 and "Need exactly one sciner_spancat" in result.output
    empty = write_dev(trained_nlp, tmp_path / "empty.spacy", with_docs=False)
    result = runner.invoke(sciner_cli, ["calibrate", str(tmp_path / "model"), str(empty), str(tmp_path / "o2")])
    assert result.exit_code != 0 and "holds no docs" in result.output
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
