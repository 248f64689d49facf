"""Convert one named data set (the project's assets or ../shared/data) to DocBins.

    python scripts/convert_dataset.py DATASET DATA_DIR OUTPUT_DIR

DATASET is one of the names in DATASETS below; OUTPUT_DIR receives train.spacy,
dev.spacy and test.spacy with gold spans in doc.spans["sc"] and flat gold in doc.ents.
Your own data: use `python -m spacy_sciner convert` directly (see README).
"""
import sys
from pathlib import Path


# name: (format, path pattern relative to DATA_DIR; {split} in train/dev/test).
# Patterns starting with "assets/" are the project's own files, relative to the project.
DATASETS = {
    "demo": ("brat", "assets/demo/{split}"),
    "scierc": ("scierc", "scierc/{split}.json"),
    "scierc_conll": ("conll", "scierc/conll/{split}.txt"),
    "bionlp13cg": ("conll", "BioNLP13CG/{split}.tsv"),
    "bionlp11id": ("conll", "BioNLP11ID/{split}.tsv"),
    "ncbi_disease": ("conll", "NCBI-disease/{split}.tsv"),
    "bc5cdr": ("conll", "BC5CDR/{split}.tsv"),
    "crossner_ai": ("conll", "crossner_ai/{split}.txt"),
    "crossner_science": ("conll", "crossner_science/{split}.txt"),
}


def main(dataset: str, data_dir: str, output_dir: str) -> None:
    from spacy_sciner.corpora import convert
    from spacy_sciner.corpora.common import CorpusFormatError

    if dataset not in DATASETS:
        sys.exit(f"error: unknown dataset '{dataset}'. Known: {', '.join(sorted(DATASETS))}")
    fmt, pattern = DATASETS[dataset]
    base = Path(".") if pattern.startswith("assets/") else Path(data_dir)
    paths = {split: base / pattern.format(split=split) for split in ("train", "dev", "test")}
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
            # One Doc per sentence everywhere (the demo's BRAT files hold one sentence per line).
            stats = convert(path, out / f"{split}.spacy", fmt, doc_unit="line" if fmt == "brat" else "sentence")
        except CorpusFormatError as err:
            sys.exit(f"error: {err}")
        print(f"{dataset}/{split}: {stats.docs} docs, {stats.entities} gold spans -> {out / f'{split}.spacy'}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
