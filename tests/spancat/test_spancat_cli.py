"""`sciner calibrate MODEL_DIR DEV_DOCBIN OUTPUT_DIR`."""
import pytest
import spacy
from spacy.tokens import DocBin
from spancat_helpers import make_examples
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.spancat.component import SciNERSpanCategorizer


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


@pytest.fixture(scope="module")
def saved(trained_nlp, tmp_path_factory):
    """(model dir, dev DocBin), written once for the error tests."""
    root = tmp_path_factory.mktemp("calibrate-inputs")
    trained_nlp.to_disk(root / "model")
    return root / "model", write_dev(trained_nlp, root / "dev.spacy")


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the (long) calibration starts."""

    def calibrate(self, *args, **kwargs):
        raise AssertionError("calibrated although the arguments are unusable")

    monkeypatch.setattr(SciNERSpanCategorizer, "calibrate", calibrate)


def calibrate(*args):
    return CliRunner().invoke(sciner_cli, ["calibrate", *map(str, args)])


def test_calibrate_creates_missing_output_parents(saved, tmp_path):
    model, dev = saved
    out = tmp_path / "new" / "sub" / "calibrated"
    result = calibrate(model, dev, out)
    assert result.exit_code == 0, result.output
    assert spacy.load(out).get_pipe("sciner_spancat").cfg["filter_threshold"] is not None
    assert sorted(p.name for p in out.parent.iterdir()) == ["calibrated"]  # no temporary folders


def test_calibrate_replaces_an_earlier_output(saved, tmp_path):
    model, dev = saved
    out = tmp_path / "calibrated"
    out.mkdir()
    (out / "meta.json").write_text("{}")
    (out / "stale.txt").write_text("from an earlier run")
    result = calibrate(model, dev, out)
    assert result.exit_code == 0, result.output
    assert not (out / "stale.txt").exists() and (out / "config.cfg").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibrated"]


def parent_is_a_file(root):
    (root / "afile").write_text("x")
    return root / "afile" / "out"


def output_is_a_file(root):
    (root / "afile").write_text("x")
    return root / "afile"


def unrelated_folder(root):
    (root / "docs").mkdir()
    (root / "docs" / "notes.txt").write_text("x")
    return root / "docs"


@pytest.mark.parametrize(
    "make_out,fragments",
    [
        (parent_is_a_file, ["afile is not a directory"]),
        (output_is_a_file, ["it is a file"]),
        (unrelated_folder, ["refusing to replace it"]),
    ],
)
def test_calibrate_bad_output_fails_before_the_work(saved, tmp_path, no_work, assert_cli_error, tree, make_out, fragments):
    model, dev = saved
    out = make_out(tmp_path)
    before = tree(tmp_path)
    assert_cli_error(calibrate(model, dev, out), out, *fragments)
    assert tree(tmp_path) == before


def test_calibrate_bad_inputs(saved, tmp_path, no_work, assert_cli_error, tree):
    model, dev = saved
    out = tmp_path / "out"
    assert_cli_error(calibrate(tmp_path / "nope", dev, out), tmp_path / "nope", "not found")
    assert_cli_error(calibrate(model, tmp_path / "nope.spacy", out), tmp_path / "nope.spacy", "not found")
    (tmp_path / "notapipeline").mkdir()
    assert_cli_error(calibrate(tmp_path / "notapipeline", dev, out), tmp_path / "notapipeline", "cannot load the pipeline")
    (tmp_path / "bad.spacy").write_text("not a docbin")
    assert_cli_error(calibrate(model, tmp_path / "bad.spacy", out), tmp_path / "bad.spacy", "not a readable DocBin")
    assert_cli_error(calibrate(model, dev, out, "--target-recall", "1.5"), "--target-recall", "1.5")
    assert_cli_error(calibrate(model, dev, out, "--batch-size", "0"), "--batch-size")
    nlp = spacy.blank("en")
    DocBin(docs=[nlp("no gold spans here")]).to_disk(tmp_path / "nogold.spacy")
    assert_cli_error(calibrate(model, tmp_path / "nogold.spacy", out), tmp_path / "nogold.spacy", "no gold spans in doc.spans['sc']")
    assert not out.exists()


def test_calibrate_save_failure_leaves_nothing_behind(saved, tmp_path, monkeypatch, assert_cli_error, tree):
    model, dev = saved
    real_to_disk = spacy.Language.to_disk

    def to_disk(self, path, **kwargs):
        real_to_disk(self, path, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spacy.Language, "to_disk", to_disk)
    out = tmp_path / "new" / "out"
    assert_cli_error(calibrate(model, dev, out), out, "No space left on device")
    assert tree(tmp_path) == []


def test_render_a_sciner_pipeline_against_dev(saved, tmp_path):
    from spacy_sciner.render import label_colors

    model, dev = saved
    out = tmp_path / "dev.html"
    result = CliRunner().invoke(sciner_cli, ["render", str(model), str(dev), str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "3 docs; spans:" in result.output
    page = out.read_text(encoding="utf8")
    labels = spacy.load(model).get_pipe("sciner_spancat").labels
    assert all(color in page for color in label_colors(labels).values())
    assert page.count("<h3>gold</h3>") == 3 and "treebank" in page


def test_calibrate_also_keeps_the_checkpoint_best_on_dev(trained_nlp, tiny_bert_dir, tmp_path):
    """`spacy train` never scores its last updates: --also model-last lets dev decide."""
    from spancat_helpers import make_nlp

    trained_nlp.to_disk(tmp_path / "trained")
    untrained = make_nlp(tiny_bert_dir)
    untrained.initialize(lambda: make_examples(untrained))
    untrained.to_disk(tmp_path / "untrained")
    dev = write_dev(trained_nlp, tmp_path / "dev.spacy")
    for order in (["untrained", "trained"], ["trained", "untrained"]):
        first, second = (tmp_path / name for name in order)
        out = tmp_path / f"out-{order[0]}"
        result = calibrate(first, dev, out, "--also", second)
        assert result.exit_code == 0, result.output
        report = spacy.load(out).get_pipe("sciner_spancat").cfg["calibration"]
        assert report["selected_checkpoint"] == str(tmp_path / "trained")
        assert f"selected {tmp_path / 'trained'}" in result.output and report["dev_f"] > 0.5


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_calibrate_abbreviations_choice_is_saved(trained_nlp, tmp_path, mode):
    """--abbreviations: the saved pipeline has sciner_abbreviations exactly when the report says so."""
    trained_nlp.to_disk(tmp_path / "model")
    dev = write_dev(trained_nlp, tmp_path / "dev.spacy")
    result = calibrate(tmp_path / "model", dev, tmp_path / "out", "--abbreviations", mode)
    assert result.exit_code == 0, result.output
    loaded = spacy.load(tmp_path / "out")
    report = loaded.get_pipe("sciner_spancat").cfg["calibration"]["abbreviations"]
    assert report["mode"] == mode and f"sciner_abbreviations ({mode}): dev span F" in result.output
    assert report["added"] == (mode == "on" or report["dev_f_with"] > report["dev_f_without"])
    assert ("sciner_abbreviations" in loaded.pipe_names) == report["added"]
    if report["added"]:
        assert loaded.pipe_names.index("sciner_abbreviations") == loaded.pipe_names.index("sciner_spancat") + 1


def test_calibrate_unusable_gpu_id_is_one_line(saved, tmp_path, no_work, assert_cli_error, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same on a GPU machine
    model, dev = saved
    assert_cli_error(calibrate(model, dev, tmp_path / "out", "--gpu-id", "0"), "--gpu-id 0", "sees no CUDA device")
    assert not (tmp_path / "out").exists()


def test_calibrate_bad_abbreviations_mode(saved, tmp_path, no_work, assert_cli_error):
    model, dev = saved
    assert_cli_error(calibrate(model, dev, tmp_path / "out", "--abbreviations", "yes"), "--abbreviations", "yes")


def test_calibrate_gold_tokens_reads_dev_on_its_own_words(trained_nlp, tmp_path):
    """--gold-tokens: dev through GoldTokensCorpus.v1, the gold words as they are ("neural-nets"
    one token, where spaCy's tokenizer makes three): fewer candidate spans, the same gold."""
    from spacy.tokens import Doc, Span

    trained_nlp.to_disk(tmp_path / "model")
    # Known spaces: spaCy's Corpus would keep the words of a doc without them.
    ref = Doc(trained_nlp.vocab, words=["the", "support", "vector", "machine", "beats", "neural-nets"], spaces=[True] * 5 + [False])
    ref.spans["sc"] = [Span(ref, 1, 4, "Method"), Span(ref, 5, 6, "Method")]
    DocBin(docs=[ref, *write_docs(trained_nlp)]).to_disk(tmp_path / "dev.spacy")
    reports = {}
    for flag in ([], ["--gold-tokens"]):
        result = calibrate(tmp_path / "model", tmp_path / "dev.spacy", tmp_path / f"out{len(flag)}", *flag)
        assert result.exit_code == 0, result.output
        reports[bool(flag)] = spacy.load(tmp_path / f"out{len(flag)}").get_pipe("sciner_spancat").cfg["calibration"]
    assert (reports[True]["dev_tokens"], reports[False]["dev_tokens"]) == ("gold", "spacy")
    assert reports[True]["n_gold_spans"] == reports[False]["n_gold_spans"] == 9
    assert reports[True]["n_candidates"] < reports[False]["n_candidates"]


def write_docs(nlp):
    return [eg.reference for eg in make_examples(nlp)]
