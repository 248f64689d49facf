"""benchmarks/readme_tables.py: README result tables come from the results files."""
import importlib.util
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def load():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "benchmarks" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_marked_sections_are_replaced_by_the_results_file(tmp_path):
    module = load()
    (tmp_path / "bench.md").write_text("# Title\n\nProtocol.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    readme = "intro\n<!-- results:bench -->\nstale | 0 |\n<!-- /results:bench -->\noutro\n"
    new = module.update(readme, tmp_path)
    assert new == "intro\n<!-- results:bench -->\nProtocol.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n<!-- /results:bench -->\noutro\n"
    assert module.update(new, tmp_path) == new


def test_the_readme_is_up_to_date():
    module = load()
    readme = (ROOT / "README.md").read_text()
    assert "<!-- results:" in readme
    assert module.update(readme, ROOT / "benchmarks" / "results") == readme, "run python benchmarks/readme_tables.py"
