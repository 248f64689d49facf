"""benchmarks/abbreviations.py: per-seed differences, the table, and a clear error without runs."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("abbreviations_bench", ROOT / "benchmarks" / "abbreviations.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def row(dev0, dev1, test0, test1):
    return {"dev_model": {"spans_f": dev0}, "dev_model_abbreviations": {"spans_f": dev1},
            "test_model": {"spans_f": test0}, "test_model_abbreviations": {"spans_f": test1}}


def test_summary_and_table():
    runs = {"ncbi_disease/500/minilm/seed0": row(0.70, 0.72, 0.71, 0.70),
            "ncbi_disease/500/minilm/seed1": row(0.60, 0.61, 0.65, 0.68)}
    summary = bench.summarize(runs)
    cell = summary["ncbi_disease/500/minilm"]
    assert cell["n"] == 2 and cell["dev"]["better_seeds"] == 2 and cell["test"]["better_seeds"] == 1
    assert cell["dev"]["delta"] == pytest.approx(0.015) and cell["test"]["f"] == pytest.approx(0.68)
    md = bench.markdown(summary)
    assert "| ncbi_disease | 500 | minilm | 2 | 65.0 | 66.5 | +1.5 (2/2) | 68.0 | 69.0 | +1.0 (1/2) |" in md


def test_no_runs_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no finished few-shot run under"):
        bench.main(["--work", str(tmp_path), "--results", str(tmp_path / "r")])
