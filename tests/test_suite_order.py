"""The suite's scheduling list (conftest.LONG_FILES) names test files that exist: a renamed
long file would silently fall back to collection order and run last, alone."""
from pathlib import Path

from conftest import LONG_FILES


def test_long_files_exist():
    names = {p.name for p in Path(__file__).resolve().parent.rglob("test_*.py")}
    assert len(set(LONG_FILES)) == len(LONG_FILES)
    assert set(LONG_FILES) <= names, set(LONG_FILES) - names
