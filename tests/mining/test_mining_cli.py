import json
import subprocess
import sys

import spacy
from spacy.tokens import DocBin, Span

from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.mining.candidates import CandidateTable

LINES = ["We train a support vector machine (SVM) on gene expression data.",
         "The random forest is compared with gene expression profiles.",
         "", "Gene expression of a random forest.", "Deep nets learn gene expression."] * 3


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=120)


def test_mine_and_build_corpus_cli(tmp_path):
    corpus = tmp_path / "aux.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf8")
    gazetteer = tmp_path / "g.txt"
    gazetteer.write_text("deep nets\n\ndeep nets\nx\n", encoding="utf8")
    nlp = spacy.blank("en")
    doc = nlp("The random forest works.")
    doc.spans["sc"] = [Span(doc, 1, 3, label="Method")]
    DocBin(docs=[doc]).to_disk(tmp_path / "train.spacy")
    table = tmp_path / "out" / "candidates.tsv"
    result = run("spacy_sciner", "mine", str(corpus), "-o", str(table), "--train",
                 str(tmp_path / "train.spacy"), "-g", str(gazetteer), "--min-count", "3",
                 "--threshold", "0.0", "--n-process", "2", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert f"{gazetteer}: 1 terms added, skipped 1 blank, 1 duplicate, 1 too short, 0 stop words, 0 without a letter" in result.stderr
    assert "12 lines (3 empty skipped" in result.stdout
    rows = CandidateTable.read(str(table)).rows
    assert rows["random forest"].sources.startswith("dict") and rows["deep nets"].freq == 3
    assert rows["SVM"].sources == "pattern" and "phrase" in rows["gene expression"].sources
    report = json.loads((tmp_path / "out" / "candidates.tsv.report.json").read_text())
    assert report["n_process"] == 2 and report["read"]["empty_lines_skipped"] == 3
    output = tmp_path / "out" / "pft.jsonl"
    result = run("spacy", "sciner", "build-corpus", str(corpus), "-c", str(table), "-o",
                 str(output), "--n", "4", "--weight", "entity", "--train",
                 str(tmp_path / "train.spacy"), "--no-progress")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(records) == 4 and all(r["candidates"] for r in records)
    assert records[0]["tokens"][:4] == ["We", "train", "a", "support"]


def test_cli_errors_name_the_problem(tmp_path):
    runner = CliRunner()
    result = runner.invoke(sciner_cli, ["mine", str(tmp_path / "missing.txt"), "-o", "c.tsv"])
    assert result.exit_code == 1 and f"input file not found: {tmp_path}/missing.txt" in result.stderr
    corpus = tmp_path / "aux.txt"
    corpus.write_text("a line\n")
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tsources\tfreq\tquality\nSVM\tpattern\tmany\t\n")
    result = runner.invoke(sciner_cli, ["build-corpus", str(corpus), "-c", str(bad), "-o",
                                        str(tmp_path / "x.spacy"), "--no-progress"])
    assert result.exit_code == 1 and f"{bad}:2: bad candidate row" in result.stderr
    result = runner.invoke(sciner_cli, ["mine", str(corpus), "-o", "c.tsv", "--sources", "dict,web"])
    assert result.exit_code == 1 and "unknown ['web']" in result.stderr
