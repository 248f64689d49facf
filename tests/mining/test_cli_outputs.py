"""The mining commands' help, progress bar and output handling."""
import errno
import re

import pytest
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.mining import miner, select
from spacy_sciner.mining.candidates import CandidateTable

LINES = ["We train a support vector machine (SVM) on gene expression data.",
         "The random forest is compared with gene expression profiles.", ""] * 4


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "aux.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf8")
    return path


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "candidates.tsv"
    CandidateTable().write(str(path))
    return path


def invoke(*args):
    return CliRunner().invoke(sciner_cli, [str(a) for a in args])


def help_text(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0
    # One line of words: rich draws a box and wraps the help column.
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())


def assert_one_line_error(result, message):
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]


def test_help_shows_percent_signs_and_every_option_has_help():
    mine_help, build_help = help_text("mine"), help_text("build-corpus")
    assert "Keep the top l% most frequent candidates" in mine_help
    assert "Use the top l% most frequent candidates" in build_help
    assert "%%" not in mine_help + build_help
    assert "--seed <int> Seed of the phrase classifier" in mine_help
    assert "--seed <int> Seed of --mode random" in build_help
    assert "--min-tokens <int> Skip sentences with fewer tokens" in build_help
    assert "--max-tokens <int> Skip sentences with more tokens" in build_help


def test_mine_progress_bar_counts_lines_as_integers(corpus, tmp_path):
    result = invoke("mine", corpus, "-o", tmp_path / "c.tsv", "--min-count", "2")
    assert result.exit_code == 0, result.output
    assert "mining: 8 lines [" in result.stderr and "0.00" not in result.stderr


@pytest.mark.parametrize("command", ["mine", "build-corpus"])
def test_unwritable_output_fails_before_the_work(corpus, table, tmp_path, monkeypatch, command):
    def must_not_run(*args, **kwargs):
        raise AssertionError("the work started before the output path was checked")

    monkeypatch.setattr(miner, "mine", must_not_run)
    monkeypatch.setattr(select, "select_sentences", must_not_run)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    a_dir = tmp_path / "a_dir.jsonl"
    a_dir.mkdir()
    extra = ["-c", table] if command == "build-corpus" else []
    for output, message in [(a_file / "out.jsonl", f"{a_file} is not a directory"),
                            (a_dir, f"cannot write {a_dir}: it is a directory")]:
        result = invoke(command, corpus, "-o", output, *extra)
        assert_one_line_error(result, message)
    if command == "mine":
        result = invoke(command, corpus, "-o", tmp_path / "c.tsv", "--report", a_dir)
        assert_one_line_error(result, "it is a directory")
        result = invoke(command, corpus, "-o", tmp_path / "c.tsv", "--top-percent", "0")
        assert_one_line_error(result, "--top-percent must be in (0, 100]")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a_dir.jsonl", "a_file", "aux.txt", "candidates.tsv"]


def test_failed_write_leaves_no_partial_output(corpus, table, tmp_path, monkeypatch):
    def write_then_fail(self, path):
        with open(path, "w") as out:
            out.write("text\tsources\tfreq\tquality\npartial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(CandidateTable, "write", write_then_fail)
    result = invoke("mine", corpus, "-o", tmp_path / "new" / "deeper" / "c.tsv", "--no-progress")
    assert_one_line_error(result, "/c.tsv: No space left on device")
    monkeypatch.setattr(select, "write_corpus", lambda items, path: write_then_fail(None, path))
    result = invoke("build-corpus", corpus, "-c", table, "-o", tmp_path / "new" / "pft.spacy",
                    "--no-progress")
    assert_one_line_error(result, "pft.spacy: No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aux.txt", "candidates.tsv"]


def test_unreadable_input_fails_in_one_line(tmp_path):
    bad = tmp_path / "bad.spacy"
    bad.write_bytes(b"not a docbin")
    result = invoke("mine", bad, "-o", tmp_path / "c.tsv", "--no-progress")
    assert_one_line_error(result, f"{bad}: not a readable spaCy DocBin")
    result = invoke("mine", bad, "-o", tmp_path / "c.tsv", "--train", bad, "--no-progress")
    assert_one_line_error(result, f"--train {bad}: not a readable spaCy DocBin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.spacy"]
