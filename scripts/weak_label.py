"""Weakly label the first N aux lines of a data set's domain (project.yml: `label-weak`).

    python scripts/aux.py DATASET DATA_DIR -- python scripts/weak_label.py DATASET \\
        --type-map auto --gazetteer-dir DATA_DIR/gazetteers/openbel \\
        --train corpus/DATASET/train.spacy --lines 30000 --text corpus/DATASET/weak_text.txt \\
        --output corpus/DATASET/weak.spacy --report corpus/DATASET/weak_label.json {AUX}

1. Takes N lines of the aux text files (round robin over the files, so that every source of
   the domain is in the corpus; empty lines are not counted; N = 0: all) and writes them to
   `--text`: what was labeled stays readable, and its size is the `weak_lines` variable.
2. Runs `python -m spacy_sciner label-weak` on that file with the data set's label sources.
   `--type-map auto` picks them by data set:
   * ncbi_disease, bc5cdr, bionlp13cg: `configs/weak/<dataset>.tsv` (their shipped type maps)
     over the OpenBEL gazetteers in `--gazetteer-dir`;
   * other biomedical sets (bionlp11id): `configs/weak/openbel_fine.tsv` (one fine type per
     OpenBEL file: NER-BERT-style many-type pretraining; none of its types is the target's);
   * CS sets and the demo (no gazetteer of the domain): the entities of the data set's own
     training DocBin (`--train`), with their labels.
   `--type-map train` forces the training dictionary, a TSV path uses that type map.

Only aux text is labeled: the aux corpora are filtered against the evaluation sets (their
READMEs), and the only labeled DocBin read is `--train`; dev and test are never read.
"""
import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = {"ncbi_disease", "bc5cdr", "bionlp13cg"}
BIO_OTHER = {"bionlp11id"}


def take_lines(files, n):
    """The first `n` non-empty lines, round robin over `files` (all with n = 0)."""
    handles = [open(f, encoding="utf8", errors="replace") for f in files]
    out = []
    try:
        while handles and (n == 0 or len(out) < n):
            for handle in list(handles):
                line = handle.readline()
                if not line:
                    handles.remove(handle)
                    handle.close()
                elif line.strip():
                    out.append(line.rstrip("\n"))
                    if n and len(out) >= n:
                        break
    finally:
        for handle in handles:
            handle.close()
    return out


def truth(value: str) -> bool:
    """A flag value written by a project variable ("True", "false", "1", ...)."""
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    if value.lower() in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got '{value}'")


def sources(dataset, type_map, gazetteer_dir, train):
    """label-weak's label source options for the data set."""
    if type_map == "auto":
        if dataset in SHIPPED:
            type_map = str(ROOT / "configs" / "weak" / f"{dataset}.tsv")
        elif dataset in BIO_OTHER:
            type_map = str(ROOT / "configs" / "weak" / "openbel_fine.tsv")
        else:
            type_map = "train"
    if type_map == "train":
        return ["--train", str(train)]
    return ["--type-map", type_map, "--gazetteer-dir", str(gazetteer_dir)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("aux", nargs="+", type=Path, help="Aux text files (aux.py's {AUX})")
    parser.add_argument("--type-map", default="auto", help="auto, train, or a type-map TSV")
    parser.add_argument("--gazetteer-dir", type=Path, required=True)
    parser.add_argument("--train", type=Path, required=True, help="The data set's training DocBin")
    parser.add_argument("--lines", type=int, default=30000, help="Aux lines to label (0: all)")
    parser.add_argument("--text", type=Path, required=True, help="Where the selected lines go")
    parser.add_argument("--output", type=Path, required=True, help="Weak DocBin (.spacy)")
    parser.add_argument("--report", type=Path, default=None)
    parser.add_argument("--n-process", type=int, default=1)
    parser.add_argument("--abbreviations", nargs="?", const=True, default=False, type=truth,
                        help="label-weak --abbreviations: short forms of labeled long forms too "
                             "(alone, or true/false: project.yml's weak_abbreviations)")
    args = parser.parse_args(argv)
    if args.lines < 0:
        sys.exit(f"--lines must be 0 (all) or more, got {args.lines}")
    lines = take_lines(args.aux, args.lines)
    if not lines:
        sys.exit(f"no aux text in {', '.join(map(str, args.aux))}")
    args.text.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.text.with_name(args.text.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf8")
    tmp.replace(args.text)
    print(f"weak corpus text: {len(lines)} aux lines from {len(args.aux)} files -> {args.text}", flush=True)
    cmd = [sys.executable, "-m", "spacy_sciner", "label-weak", str(args.text), "--output", str(args.output),
           *sources(args.dataset, args.type_map, args.gazetteer_dir, args.train),
           "--n-process", str(args.n_process), "--no-progress",
           *(["--abbreviations"] if args.abbreviations else [])]
    if args.report is not None:
        cmd += ["--report", str(args.report)]
    print(" ".join(cmd[1:]), flush=True)
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
