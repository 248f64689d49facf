"""Copy the benchmark scripts' Markdown tables into README.md, so that its numbers are never
typed by hand.

README.md marks each place with ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``;
everything between is replaced by ``benchmarks/results/NAME.md`` (the file the benchmark
script wrote) without its title.

    python benchmarks/readme_tables.py            # after a benchmark run
    python benchmarks/readme_tables.py --check    # exit 1 if README.md is out of date
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)


def body(markdown: str) -> str:
    """A results file without its title line(s): what the README shows."""
    lines = [line for line in markdown.splitlines() if not line.startswith("# ")]
    # Images beside the results file: the README links them from the repository root.
    text = re.sub(r"\]\((?![a-z]+://|/)([^)/]+\.png)\)", r"](benchmarks/results/\1)", "\n".join(lines))
    return text.strip() + "\n"


def update(readme: str, results: Path) -> str:
    def replace(match: re.Match) -> str:
        path = results / f"{match['name']}.md"
        if not path.exists():
            sys.exit(f"error: README.md names results '{match['name']}' but {path} does not exist")
        return f"{match.group(1)}{body(path.read_text())}{match.group(4)}"

    return MARKER.sub(replace, readme)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="Only check that README.md is up to date")
    p.add_argument("--readme", type=Path, default=ROOT / "README.md")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = p.parse_args()
    old = args.readme.read_text()
    new = update(old, args.results)
    if args.check:
        sys.exit(0 if new == old else f"error: {args.readme} is out of date: run python benchmarks/readme_tables.py")
    args.readme.write_text(new)


if __name__ == "__main__":
    main()
