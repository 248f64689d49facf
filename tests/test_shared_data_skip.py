"""Without ../shared/data the tests that need it are SKIPPED, visibly, not errors.

Runs pytest in a subprocess on a copy of tests/conftest.py placed where no data folder
sits beside it, then again with one.
"""
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = '''
def test_needs_data(shared_data):
    assert shared_data.endswith("data")


def test_without_data():
    pass
'''


def run_pytest(repo, *args):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, "tests"],
        cwd=repo, capture_output=True, text=True, timeout=300,
    )
    return result.returncode, result.stdout + result.stderr


def test_missing_shared_data_skips_with_reason(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "conftest.py", repo / "tests" / "conftest.py")
    (repo / "tests" / "test_data.py").write_text(TESTS)
    missing = tmp_path / "shared" / "data"

    rc, output = run_pytest(repo, "-q", "-rs")
    assert rc == 0, output
    assert "1 passed, 1 skipped" in output
    # -rs: the reason names the folder and where it was looked for
    assert "SKIPPED" in output and "../shared/data not found" in output and str(missing) in output
    assert "RuntimeError" not in output

    rc, output = run_pytest(repo, "-q")  # without -rs the summary still says why
    assert rc == 0 and f"1 test skipped: real data folder ../shared/data not found at {missing}" in output

    missing.mkdir(parents=True)
    rc, output = run_pytest(repo, "-q", "-rs")
    assert rc == 0 and "2 passed" in output and "skipped" not in output, output
