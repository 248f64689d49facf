"""Write the unlabeled aux text of a data set's domain into one file, one line per sentence.

    python scripts/aux_text.py DATASET DATA_DIR OUTPUT [--limit N] [--domain auto|bio|cs]

The files are those `scripts/aux.py` picks for the data set (CS text for SciERC and CrossNER,
biomedical text for the biomedical sets; `--domain` for a data set of your own). Lines are cleaned as `sciner mine` cleans them
(invalid UTF-8 and control characters replaced, empty lines dropped) and written atomically.
`spacy pretrain` reads the result through `spacy-sciner.TextLines.v1` (--paths.raw_text).
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aux import domain_of  # noqa: E402

from spacy_sciner.mining.text import ReadStats, read_documents  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--limit", type=int, default=0, help="first N lines in all (0 = all)")
    parser.add_argument("--domain", default="auto", help="auto (from DATASET), bio or cs")
    args = parser.parse_args()
    files = [args.data_dir / "aux" / name / "text.txt" for name in domain_of(args.dataset, args.domain)]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        sys.exit(f"aux text not found: {', '.join(missing)}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(f".{args.output.name}.tmp{os.getpid()}")
    stats, written = ReadStats(), 0
    with open(tmp, "w", encoding="utf8") as out:
        for doc in read_documents([str(f) for f in files], stats=stats):
            for _, _, text in doc:
                out.write(text + "\n")
                written += 1
            if args.limit and written >= args.limit:
                break
    os.replace(tmp, args.output)
    print(f"aux text ({args.dataset}): {len(files)} files, {written} lines "
          f"({stats.empty} empty skipped, {stats.decode_errors} with invalid UTF-8 repaired) -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
