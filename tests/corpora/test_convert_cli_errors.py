"""`sciner convert` with bad input or output paths: one clear error line naming the file
(and line), exit status 1, no traceback, nothing left behind, and output paths checked
before any input is read."""
import importlib

import pytest
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli

# The module, not the function of the same name that spacy_sciner.corpora exports.
convert_module = importlib.import_module("spacy_sciner.corpora.convert")

CONLL = "a\tB-X\nb\tI-X\n"


def run(*args):
    return CliRunner().invoke(sciner_cli, ["convert", *map(str, args)])


@pytest.fixture
def conll(tmp_path):
    path = tmp_path / "in.tsv"
    path.write_text(CONLL, encoding="utf8")
    return path


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the conversion itself starts."""

    def convert(*args, **kwargs):
        raise AssertionError("converted although the output path is unusable")

    monkeypatch.setattr(convert_module, "convert", convert)


def test_output_is_a_directory(conll, tmp_path, no_work, assert_cli_error, tree):
    (tmp_path / "out").mkdir()
    before = tree(tmp_path)
    assert_cli_error(run(conll, tmp_path / "out", "--format", "conll"), tmp_path / "out", "it is a directory")
    assert tree(tmp_path) == before


def test_output_parent_is_a_file(conll, tmp_path, no_work, assert_cli_error, tree):
    (tmp_path / "afile").write_text("x")
    before = tree(tmp_path)
    target = tmp_path / "afile" / "sub" / "out.spacy"
    assert_cli_error(run(conll, target, "--format", "conll"), target, f"{tmp_path / 'afile'} is not a directory")
    assert tree(tmp_path) == before


def test_missing_output_parents_are_created(conll, tmp_path, tree):
    result = run(conll, tmp_path / "new" / "sub" / "out.spacy", "--format", "conll")
    assert result.exit_code == 0, result.output
    assert tree(tmp_path) == ["in.tsv", "new", "new/sub", "new/sub/out.spacy"]


def test_missing_input(tmp_path, assert_cli_error):
    assert_cli_error(run(tmp_path / "nope.tsv", tmp_path / "o.spacy", "--format", "conll"), tmp_path / "nope.tsv", "not found")


def test_directory_given_for_a_file_format(tmp_path, assert_cli_error):
    (tmp_path / "d").mkdir()
    assert_cli_error(run(tmp_path / "d", tmp_path / "o.spacy", "--format", "scierc"), tmp_path / "d", "is a directory")
    assert not (tmp_path / "o.spacy").exists()


def test_bad_input_leaves_nothing_behind(tmp_path, assert_cli_error, tree):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tB-X\nb\tQ-X\n", encoding="utf8")
    before = tree(tmp_path)
    # the output's parent folders are not created for a conversion that fails
    assert_cli_error(run(bad, tmp_path / "new" / "o.spacy", "--format", "conll"), f"{bad}:2:", "unknown tag")
    assert tree(tmp_path) == before


def test_brat_ann_not_utf8_names_file_and_line(tmp_path, assert_cli_error, tree):
    (tmp_path / "d.txt").write_text("hello world\n", encoding="utf8")
    (tmp_path / "d.ann").write_bytes(b"T1\tX 0 5\thello\nT2\tX 6 11\twor\xffld\n")
    before = tree(tmp_path)
    assert_cli_error(run(tmp_path / "d.txt", tmp_path / "o.spacy", "--format", "brat"), f"{tmp_path / 'd.ann'}:2:", "not valid UTF-8")
    assert tree(tmp_path) == before


def test_write_failure_leaves_nothing_behind(conll, tmp_path, monkeypatch, assert_cli_error, tree):
    from spacy.tokens import DocBin

    def to_disk(self, path):
        path.write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(DocBin, "to_disk", to_disk)
    before = tree(tmp_path)
    assert_cli_error(run(conll, tmp_path / "o.spacy", "--format", "conll"), tmp_path / "o.spacy", "No space left")
    assert tree(tmp_path) == before


def test_unknown_suffix_without_format_names_the_known_ones(tmp_path, assert_cli_error):
    path = tmp_path / "data.xml"
    path.write_text("<doc/>", encoding="utf8")
    assert_cli_error(run(path, tmp_path / "o.spacy"), path, "cannot tell the format from the suffix '.xml'")
    assert not (tmp_path / "o.spacy").exists()
