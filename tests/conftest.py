import os

import pytest

# Keep tests predictable on the 2-core machines; torch would otherwise oversubscribe.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The suite runs in two pytest-xdist workers (README, .ci/run), one per core: the `spacy train`
# and `sciner` subprocesses the tests start inherit one thread each, so the two workers do
# not oversubscribe the cores (a test that needs the default threads removes these).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

try:
    import torch

    # Tiny test models gain nothing from threads; on a busy 2-core machine extra threads
    # only oversubscribe the cores (measured ~50x slower tiny-BERT updates under load).
    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a dependency
    pass

SHARED_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
# Start of the skip reason of every test that needs the real data (counted below).
NO_SHARED_DATA = "real data folder ../shared/data not found"
# The aux text of the demo's (computer science) domain, see scripts/aux.py.
CS_AUX = ("CSAbstruct-text", "ACL-ARC-citations-text", "SciCite-text")


# The longest test files (each several minutes on 2 cores: whole workflows, benchmark smoke
# runs), longest first. Collected first, so that the two xdist workers start on them and the
# short files fill the gaps at the end (longest-first scheduling), instead of one long file
# starting last and running alone.
LONG_FILES = (
    "test_project_demo.py", "test_fewshot.py", "test_convergence.py", "test_project_cnn.py",
    "test_project_pft.py", "test_project_weak.py", "test_gpu_check.py",
)


def pytest_collection_modifyitems(items):
    """Long files first (see LONG_FILES); the order within a file is kept."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A tiny random BERT checkpoint directory (see spacy_sciner.testing)."""
    from spacy_sciner.testing import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data beside the repository (real benchmark data; read only).

    Without it the tests that need it are skipped (not failed): the rest of the suite
    runs on a fresh checkout.
    """
    path = os.path.abspath(SHARED_DATA)
    if not os.path.isdir(path):
        pytest.skip(f"{NO_SHARED_DATA} (looked for {path}): put the data beside the repository")
    return path


def pytest_terminal_summary(terminalreporter):
    """Say how many tests were skipped for want of the data, even without ``-rs``."""
    skipped = [
        report for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and NO_SHARED_DATA in str(report.longrepr[-1])
    ]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} test{'s' if len(skipped) != 1 else ''} skipped: {NO_SHARED_DATA} at {os.path.abspath(SHARED_DATA)}",
            yellow=True,
        )


def _assert_cli_error(result, *fragments, exit_code=1):
    """A CliRunner result that failed cleanly: exit status 1, no traceback, and one line
    ``error: ...`` holding every fragment (file names, line numbers)."""
    output = result.output
    assert result.exit_code == exit_code, output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, output
    for fragment in fragments:
        assert str(fragment) in errors[0], (fragment, errors[0])
    return errors[0]


@pytest.fixture
def assert_cli_error():
    """The check that a ``sciner`` command failed with one clear error line (see above)."""
    return _assert_cli_error


def list_tree(path):
    """Every file and folder under `path`, relative, sorted (to show nothing was left)."""
    from pathlib import Path

    return sorted(str(p.relative_to(path)) for p in Path(path).rglob("*"))


@pytest.fixture
def tree():
    return list_tree


@pytest.fixture
def project_with_aux(tmp_path, shared_data):
    """A copy of the project (project.yml, configs, scripts, assets) in ``tmp_path/project``
    and a data folder whose aux text is the first ``n_lines`` lines of each CS aux file
    (the demo's domain), for running workflows on a small scale. Call it with ``n_lines``;
    returns ``(project, data_dir)``."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent

    def make(n_lines: int):
        project = tmp_path / "project"
        project.mkdir()
        for name in ("project.yml", "configs", "scripts", "assets"):
            src = root / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
        data_dir = tmp_path / "data"
        for name in CS_AUX:
            lines = (Path(shared_data) / "aux" / name / "text.txt").read_text(encoding="utf8").splitlines()[:n_lines]
            (data_dir / "aux" / name).mkdir(parents=True)
            (data_dir / "aux" / name / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf8")
        return project, data_dir

    return make
