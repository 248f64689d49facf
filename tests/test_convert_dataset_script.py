"""scripts/convert_dataset.py (the project's convert step) without the real data: one line."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def convert(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_dataset.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize("layout", ["no folder", "missing split"])
def test_missing_data_is_one_clear_line(tmp_path, layout):
    data = tmp_path / "data"
    if layout == "missing split":
        (data / "BioNLP13CG").mkdir(parents=True)
        (data / "BioNLP13CG" / "train.tsv").write_text("IL-2\tB-Gene_or_gene_product\n")
    result = convert("bionlp13cg", data, tmp_path / "corpus")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.stderr
    assert ("../shared/data" in lines[0]) if layout == "no folder" else ("dev.tsv" in lines[0] and "test.tsv" in lines[0])
    assert not (tmp_path / "corpus").exists()  # checked before any conversion


def test_unknown_dataset(tmp_path):
    result = convert("imagenet", tmp_path, tmp_path / "corpus")
    assert result.returncode != 0 and "unknown dataset 'imagenet'" in result.stderr and "Traceback" not in result.stderr
