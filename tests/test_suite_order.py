"""The suite's scheduling list (conftest.LONG_FILES) names test files that exist: a renamed
long file would silently fall back to collection order and run last, alone."""
import importlib.util
from pathlib import Path

# By path: "conftest" alone may name a sub-folder's conftest.py (tests/spancat/ has one).
_spec = importlib.util.spec_from_file_location("sciner_tests_conftest", Path(__file__).resolve().parent / "conftest.py")
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
LONG_FILES = _conftest.LONG_FILES


def test_long_files_exist():
    names = {p.name for p in Path(__file__).resolve().parent.rglob("test_*.py")}
    assert len(set(LONG_FILES)) == len(LONG_FILES)
    assert set(LONG_FILES) <= names, set(LONG_FILES) - names
