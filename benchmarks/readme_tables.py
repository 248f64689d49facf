"""Copy the benchmark scripts' Markdown tables into README.md and docs/*.md, so that their
numbers are never typed by hand.

Each file marks each place with ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``;
everything between is replaced by ``benchmarks/results/NAME.md`` (the file the benchmark
script wrote) without its title.

    python benchmarks/readme_tables.py            # after a benchmark run
    python benchmarks/readme_tables.py --check    # exit 1 if any file is out of date
"""
import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)


def body(markdown: str, images: str = "benchmarks/results") -> str:
    """A results file without its title line(s): what the README shows. Images beside the
    results file are linked through `images`, the results folder as seen from the page."""
    lines = [line for line in markdown.splitlines() if not line.startswith("# ")]
    text = re.sub(r"\]\((?![a-z]+://|/)([^)/]+\.png)\)", rf"]({images}/\1)", "\n".join(lines))
    return text.strip() + "\n"


def update(readme: str, results: Path, images: str = "benchmarks/results", name: str = "README.md") -> str:
    def replace(match: re.Match) -> str:
        path = results / f"{match['name']}.md"
        if not path.exists():
            sys.exit(f"error: {name} names results '{match['name']}' but {path} does not exist")
        return f"{match.group(1)}{body(path.read_text(), images)}{match.group(4)}"

    return MARKER.sub(replace, readme)


def pages(root: Path = ROOT) -> list:
    """The pages that carry result tables: the README and the docs beside it."""
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def image_prefix(page: Path, root: Path = ROOT) -> str:
    """benchmarks/results as a link from `page` (README: from the root; docs/x.md: ../)."""
    return Path(os.path.relpath(root / "benchmarks" / "results", page.parent)).as_posix()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="Only check that README.md and docs/*.md are up to date")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = p.parse_args()
    stale = []
    for page in pages():
        old = page.read_text()
        new = update(old, args.results, image_prefix(page), page.relative_to(ROOT).as_posix())
        if new != old:
            stale.append(page.relative_to(ROOT).as_posix())
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        sys.exit(f"error: {', '.join(stale)} out of date: run python benchmarks/readme_tables.py")


if __name__ == "__main__":
    main()
