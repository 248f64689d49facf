"""Convert one named data set (the project's assets or ../shared/data) to DocBins.

    python scripts/convert_dataset.py DATASET DATA_DIR OUTPUT_DIR

DATASET is one of the names in DATASETS below, or your own data set: a folder
DATA_DIR/DATASET holding train, dev and test in one format, told apart by their names
(train.spacy a DocBin; train.json/.jsonl JSON lines, SciERC's or character offsets (Prodigy,
doccano), told apart by the first record; train.tsv/.txt/.conll/.iob/.bio CoNLL, the tag
scheme detected, or BRAT where train.ann lies beside train.txt; train/ a BRAT folder, or a
folder of DocBins). OUTPUT_DIR receives train.spacy, dev.spacy and
test.spacy with gold spans in doc.spans["sc"] and flat gold in doc.ents. Other layouts:
`python -m spacy_sciner convert` file by file (see README).
"""
import re
import sys
from pathlib import Path


# name: (format, path pattern relative to DATA_DIR; {split} in train/dev/test).
# Patterns starting with "assets/" are the project's own files, relative to the project.
DATASETS = {
    "demo": ("brat", "assets/demo/{split}"),
    "scierc": ("scierc", "scierc/{split}.json"),
    "scierc_conll": ("conll", "scierc/conll/{split}.txt"),
    # The same abstracts, one Doc per abstract (sentence starts kept): the encoder reads each
    # sentence with its neighbours (cross-sentence context, as PURE does for SciERC).
    "scierc_doc": ("scierc", "scierc/{split}.json"),
    "bionlp13cg": ("conll", "BioNLP13CG/{split}.tsv"),
    "bionlp11id": ("conll", "BioNLP11ID/{split}.tsv"),
    "ncbi_disease": ("conll", "NCBI-disease/{split}.tsv"),
    "bc5cdr": ("conll", "BC5CDR/{split}.tsv"),
    "crossner_ai": ("conll", "crossner_ai/{split}.txt"),
    "crossner_science": ("conll", "crossner_science/{split}.txt"),
}
# Your own data set (a name not in DATASETS): DATA_DIR/NAME/{split}<suffix>, the first suffix of
# convert.SUFFIX_FORMATS whose train file exists (then a folder train/: BRAT, or DocBins) decides
# the format, told by convert.detect_format as `sciner convert` tells it; dev and test must then
# have the same suffix.
SPLITS = ("train", "dev", "test")
# Doc unit of a data set where it is not "sentence" (the demo's BRAT files: one sentence a line).
DOC_UNIT = {"demo": "line", "scierc_doc": "document"}


def own_dataset(dataset: str, data_dir: str):
    """(format, {split: path}) of a data set of your own under DATA_DIR/DATASET; exits with
    one line naming what was looked for where the folder or its train split is missing."""
    known = f"Known data sets: {', '.join(sorted(DATASETS))}"
    if not re.fullmatch(r"[A-Za-z0-9_]+", dataset):
        sys.exit(f"error: unknown dataset '{dataset}'. {known}; your own: letters, digits and _ only "
                 f"(it names the package)")
    folder = Path(data_dir) / dataset
    if not folder.is_dir():
        sys.exit(f"error: unknown dataset '{dataset}' and no folder {folder} for your own data. {known}; "
                 f"your own: put train/dev/test files in {folder} (README, 'Your own data')")
    from spacy_sciner.corpora.convert import SUFFIX_FORMATS, detect_format

    suffixes = [suffix for suffix in SUFFIX_FORMATS if suffix != ".ann"] + [""]  # "": train/
    for suffix in suffixes:
        train = folder / f"train{suffix}"
        if train.is_file() if suffix else train.is_dir():
            return detect_format(train), {split: folder / f"{split}{suffix}" for split in SPLITS}
    tried = ", ".join(f"train{suffix or '/'}" for suffix in suffixes)
    sys.exit(f"error: {folder}: no training data found (looked for {tried})")


def main(dataset: str, data_dir: str, output_dir: str) -> None:
    from spacy_sciner.corpora import convert
    from spacy_sciner.corpora.common import CorpusFormatError

    if dataset in DATASETS:
        fmt, pattern = DATASETS[dataset]
        base = Path(".") if pattern.startswith("assets/") else Path(data_dir)
        paths = {split: base / pattern.format(split=split) for split in SPLITS}
    else:
        fmt, paths = own_dataset(dataset, data_dir)
        base = Path(data_dir)
    # Every input is checked before any conversion: one line, not a traceback mid-way.
    if not base.is_dir():
        sys.exit(
            f"error: data folder {base} not found. The real data sets are not in the repository: "
            f"put them at ../shared/data beside it (sources and licenses: README, 'Data') or pass --vars.data_dir"
        )
    missing = [str(path) for path in paths.values() if not path.exists()]
    if missing:
        sys.exit(f"error: {dataset}: missing {', '.join(missing)}")
    out = Path(output_dir)
    for split, path in paths.items():
        try:
            # One Doc per sentence unless DOC_UNIT says otherwise; BRAT of your own: one Doc
            # per file, so that no entity is cut at a line break.
            stats = convert(path, out / f"{split}.spacy", fmt, doc_unit=DOC_UNIT.get(dataset, "sentence"))
        except CorpusFormatError as err:
            sys.exit(f"error: {err}")
        print(f"{dataset}/{split}: {stats.docs} docs, {stats.entities} gold spans -> {out / f'{split}.spacy'}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
