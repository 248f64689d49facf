"""benchmarks/readme_tables.py: README and docs/ result tables come from the results files."""
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


def test_images_are_linked_from_the_page_that_shows_them(tmp_path):
    module = load()
    (tmp_path / "bench.md").write_text("# Title\n\n![curve](bench.png)\n")
    readme = "<!-- results:bench -->\n<!-- /results:bench -->\n"
    assert "](benchmarks/results/bench.png)" in module.update(readme, tmp_path)
    assert module.image_prefix(ROOT / "README.md") == "benchmarks/results"
    assert module.image_prefix(ROOT / "docs" / "benchmarks.md") == "../benchmarks/results"
    assert "](../benchmarks/results/bench.png)" in module.update(readme, tmp_path, "../benchmarks/results")


def test_the_readme_and_docs_are_up_to_date():
    module = load()
    pages = module.pages()
    assert ROOT / "README.md" in pages and ROOT / "docs" / "benchmarks.md" in pages
    names = set()
    for page in pages:
        text = page.read_text()
        names.update(module.MARKER.findall(text))
        new = module.update(text, ROOT / "benchmarks" / "results", module.image_prefix(page))
        assert new == text, f"{page.name}: run python benchmarks/readme_tables.py"
    assert names, "no page carries a results table"


def test_relative_links_between_pages_resolve():
    """Every [text](file#anchor) link of the README and docs/ names a file that exists and a
    heading that file has (GitHub's anchor rule: lower case, punctuation dropped, spaces to -)."""
    import re
    module = load()

    def anchors(page):
        out, fence = set(), False
        for line in page.read_text().splitlines():
            fence = fence != line.startswith("```")
            if not fence and re.match(r"#+ ", line):
                title = line.lstrip("#").strip().lower()
                out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
        return out

    for page in module.pages():
        for target, anchor in re.findall(r"\]\((?![a-z]+://)([^)#\s]*)(?:#([^)\s]+))?\)", page.read_text()):
            path = (page.parent / target).resolve() if target else page
            assert path.exists(), f"{page.name}: link to missing {target}"
            if anchor and path.suffix == ".md":
                assert anchor in anchors(path), f"{page.name}: no heading #{anchor} in {path.name}"
