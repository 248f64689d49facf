"""Run a command with the unlabeled auxiliary text files that fit a data set's domain.

    python scripts/aux.py DATASET DATA_DIR [--domain auto|bio|cs] -- COMMAND ... {AUX} ...

`{AUX}` in COMMAND is replaced by the aux text files of the data set's domain (computer
science text for SciERC and CrossNER, biomedical text for the BioNLP and other biomedical
sets), all under DATA_DIR/aux/; `{GAZ}` by `-g FILE` for each gazetteer of the domain
(the OpenBEL name lists under DATA_DIR/gazetteers/openbel/ for biomedical sets, none for CS).
project.yml uses it so that `mine` and `build-corpus` read the right corpus for
`--vars.dataset`. `--domain` (project variable `domain`) names the domain of a data set of
your own; `auto` (the default) takes it from DATASET's name. A leading `python` in COMMAND
means this script's own interpreter.
"""
import subprocess
import sys
from pathlib import Path

CS = ["CSAbstruct-text", "ACL-ARC-citations-text", "SciCite-text"]
BIO = ["AnatEM-text", "BC2GM-text", "linnaeus-text", "Ex-PTM-text", "CRAFT-text", "JNLPBA-text"]
DOMAIN = {
    "demo": CS, "scierc": CS, "scierc_conll": CS, "scierc_doc": CS, "crossner_ai": CS, "crossner_science": CS,
    "bionlp13cg": BIO, "bionlp11id": BIO, "ncbi_disease": BIO, "bc5cdr": BIO,
}


DOMAINS = {"bio": BIO, "cs": CS}


def domain_of(dataset: str, domain: str) -> list:
    """The aux text folders of ``domain`` ("bio", "cs"), or of DATASET's domain for "auto"."""
    if domain in DOMAINS:
        return DOMAINS[domain]
    if domain != "auto":
        sys.exit(f"--domain must be auto, bio or cs, got '{domain}'")
    if dataset not in DOMAIN:
        sys.exit(f"No aux domain for dataset '{dataset}' (known: {', '.join(sorted(DOMAIN))}); "
                 f"for a data set of your own pass --vars.domain bio or cs")
    return DOMAIN[dataset]


def main(argv) -> int:
    domain = "auto"
    if len(argv) > 3 and argv[2] == "--domain":
        domain, argv = argv[3], argv[:2] + argv[4:]
    if len(argv) < 4 or argv[2] != "--":
        sys.exit(__doc__)
    dataset, data_dir, command = argv[0], argv[1], argv[3:]
    names = domain_of(dataset, domain)
    files = [str(Path(data_dir) / "aux" / name / "text.txt") for name in names]
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        sys.exit(f"Aux text not found: {', '.join(missing)}")
    gazetteers = []
    if names is BIO:
        gaz_dir = Path(data_dir) / "gazetteers" / "openbel"
        for path in sorted(gaz_dir.glob("*.bel*")):
            gazetteers += ["-g", str(path)]
    expanded = []
    for arg in command:
        expanded.extend(files if arg == "{AUX}" else gazetteers if arg == "{GAZ}" else [arg])
    print(f"aux ({dataset}): {len(files)} text files, {len(gazetteers) // 2} gazetteers", flush=True)
    return subprocess.call(with_this_python(expanded))


def with_this_python(command):
    """Run a ``python ...`` command with this interpreter, not the first ``python`` on PATH.

    `spacy project run` starts this script with its own interpreter (the venv's, even when
    the venv is not activated); the command after `--` must use the same one, or it runs
    without the installed packages.
    """
    if command and command[0] in ("python", "python3"):
        return [sys.executable, *command[1:]]
    return list(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
