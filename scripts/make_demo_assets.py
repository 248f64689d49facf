"""Build the embedded demo data set (BRAT standoff) from hand-written markup.

The source file ``assets/demo/annotated.txt`` holds one sentence per line with
inline entity markup ``[entity text](Label)``. This script parses it, checks it,
splits the sentences deterministically into train/dev/test, and writes BRAT
standoff documents (``docNN.txt`` + ``docNN.ann``) to ``assets/demo/<split>/``,
plus ``assets/demo/new_text.txt`` and ``assets/demo/README.md`` (with counts
computed here). Every written annotation is read back and checked against the
text it points into.

Usage:
    python scripts/make_demo_assets.py            # (re)write the assets
    python scripts/make_demo_assets.py --check    # exit 1 if files are stale
"""
import argparse
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, NamedTuple, Tuple

LABELS = ("Method", "Task", "Material", "Metric")
SEED = 13
# Dev and test each get 1/7 of the sentences (60 of 420), the rest is train.
HELDOUT_FRACTION = 1 / 7
SENTENCES_PER_DOC = 20
MIN_WORDS, MAX_WORDS = 10, 35
MAX_ENTS_PER_SENT = 4
SPLITS = ("train", "dev", "test")

# Unannotated sentences, never seen in training, for the demo's final step
# (run the packaged pipeline on new text).
NEW_TEXT = [
    "We fine-tune a graph attention network on ChEMBL bioactivity data and report the area under the ROC curve for each target family.",
    "Named entity recognition in materials science abstracts is evaluated with span-level F1 score on a newly annotated corpus.",
    "The proposed BiLSTM-CRF tagger is compared with SciBERT on the NCBI disease corpus and on clinical notes from MIMIC-III.",
    "Protein structure prediction with AlphaFold is followed by molecular docking to rank candidate inhibitors by binding affinity.",
    "Cells from the Human Cell Atlas are clustered with the Louvain algorithm, and cluster quality is measured with the adjusted Rand index.",
]

MARKUP = re.compile(r"\[([^\[\]()]+)\]\(([^()\[\]]*)\)")


class Entity(NamedTuple):
    start: int
    end: int
    label: str
    text: str


class Sentence(NamedTuple):
    line: int
    text: str
    ents: Tuple[Entity, ...]


class MarkupError(ValueError):
    pass


def parse_line(line: str, path: str, lineno: int) -> Sentence:
    """Turn one marked-up line into plain text plus character-offset entities.

    line (str): The source line without its newline.
    path (str): Source file name, used in error messages.
    lineno (int): 1-based line number, used in error messages.
    RETURNS (Sentence): The plain sentence and its entities.
    """
    where = f"{path}:{lineno}"
    out: List[str] = []
    ents: List[Entity] = []
    pos = 0
    offset = 0
    for m in MARKUP.finditer(line):
        out.append(line[pos : m.start()])
        offset += m.start() - pos
        ent_text, label = m.group(1), m.group(2)
        if label not in LABELS:
            raise MarkupError(f"{where}: unknown label {label!r} in {m.group(0)!r} (expected one of {', '.join(LABELS)})")
        if ent_text != ent_text.strip():
            raise MarkupError(f"{where}: entity text has leading/trailing whitespace in {m.group(0)!r}")
        ents.append(Entity(offset, offset + len(ent_text), label, ent_text))
        out.append(ent_text)
        offset += len(ent_text)
        pos = m.end()
    out.append(line[pos:])
    text = "".join(out)
    # Any bracket outside a well-formed match means broken, nested or unclosed
    # markup; the demo text deliberately contains no literal square brackets.
    masked = MARKUP.sub(lambda m: " " * len(m.group(0)), line)
    for col, ch in enumerate(masked, start=1):
        if ch in "[]":
            raise MarkupError(f"{where}: malformed markup: stray {ch!r} at column {col} "
                              f"(expected [entity text](Label), no nesting)")
    if re.search(r"\]\s+\(|\)\[", line):
        raise MarkupError(f"{where}: malformed markup: space between ] and ( or missing space before [")
    if text != text.strip() or "  " in text:
        raise MarkupError(f"{where}: sentence has leading/trailing or doubled spaces")
    n_words = len(text.split())
    if not MIN_WORDS <= n_words <= MAX_WORDS:
        raise MarkupError(f"{where}: sentence has {n_words} words (allowed {MIN_WORDS}-{MAX_WORDS})")
    if len(ents) > MAX_ENTS_PER_SENT:
        raise MarkupError(f"{where}: {len(ents)} entities (at most {MAX_ENTS_PER_SENT} per sentence)")
    return Sentence(lineno, text, tuple(ents))


def read_source(path: Path) -> List[Sentence]:
    """Read and validate the marked-up source file.

    path (Path): The annotated.txt file.
    RETURNS (List[Sentence]): Sentences in file order (comments/blank skipped).
    """
    sents: List[Sentence] = []
    seen: Dict[str, int] = {}
    errors: List[str] = []
    for lineno, raw in enumerate(path.read_text(encoding="utf8").splitlines(), start=1):
        line = raw.rstrip()
        if not line or line.lstrip().startswith("#"):
            continue
        try:
            sent = parse_line(line, str(path), lineno)
            if sent.text in seen:
                raise MarkupError(f"{path}:{lineno}: duplicate of the sentence on line {seen[sent.text]}")
        except MarkupError as err:
            # Report every bad line at once rather than one per run.
            errors.append(str(err))
            continue
        seen[sent.text] = lineno
        sents.append(sent)
    if errors:
        raise MarkupError(f"{len(errors)} bad line(s):\n" + "\n".join(errors))
    if not sents:
        raise MarkupError(f"{path}: no sentences found")
    return sents


def check_token_alignment(sents: List[Sentence], path: Path) -> None:
    """Fail if an entity does not start and end on spaCy token boundaries.

    Misaligned gold spans would be dropped or shifted when the BRAT files are
    converted to Doc objects, so catch them at the source.
    """
    import spacy

    nlp = spacy.blank("en")
    errors = []
    for sent in sents:
        doc = nlp.make_doc(sent.text)
        for ent in sent.ents:
            if doc.char_span(ent.start, ent.end, label=ent.label) is None:
                errors.append(f"{path}:{sent.line}: entity {ent.text!r} does not align with spaCy tokens "
                              f"{[t.text for t in doc]}")
    if errors:
        raise MarkupError(f"{len(errors)} misaligned entities:\n" + "\n".join(errors))


def split_sentences(sents: List[Sentence], seed: int = SEED) -> Dict[str, List[Sentence]]:
    """Deterministic shuffle, then dev and test get HELDOUT_FRACTION each."""
    order = list(range(len(sents)))
    random.Random(seed).shuffle(order)
    n_held = round(len(sents) * HELDOUT_FRACTION)
    dev_idx, test_idx, train_idx = order[:n_held], order[n_held : 2 * n_held], order[2 * n_held :]
    # Keep source order inside each split so documents read coherently.
    return {name: [sents[i] for i in sorted(idx)] for name, idx in
            (("train", train_idx), ("dev", dev_idx), ("test", test_idx))}


def to_brat(sents: List[Sentence]) -> Tuple[str, str]:
    """Render sentences as one BRAT document: (txt content, ann content)."""
    lines: List[str] = []
    ann: List[str] = []
    offset = 0
    for sent in sents:
        for ent in sent.ents:
            ann.append(f"T{len(ann) + 1}\t{ent.label} {offset + ent.start} {offset + ent.end}\t{ent.text}")
        lines.append(sent.text)
        offset += len(sent.text) + 1  # the newline
    return "\n".join(lines) + "\n", "\n".join(ann) + ("\n" if ann else "")


def verify_brat(txt: str, ann: str, name: str) -> int:
    """Check every .ann text equals the .txt substring; return entity count."""
    n = 0
    for i, line in enumerate(ann.splitlines(), start=1):
        tid, info, surface = line.split("\t")
        label, start, end = info.split(" ")
        start_i, end_i = int(start), int(end)
        if label not in LABELS or txt[start_i:end_i] != surface or "\n" in surface:
            raise AssertionError(f"{name}.ann:{i}: {surface!r} != txt[{start}:{end}]={txt[start_i:end_i]!r}")
        n += 1
    return n


def build(source: Path, seed: int = SEED) -> Tuple[Dict[str, str], Dict]:
    """Build every output file in memory.

    RETURNS (Tuple[Dict[str, str], Dict]): relative path -> content, and stats.
    """
    sents = read_source(source)
    check_token_alignment(sents, source)
    splits = split_sentences(sents, seed)
    files: Dict[str, str] = {}
    stats: Dict = {"sentences": {}, "docs": {}, "labels": {}, "empty": {}}
    for name in SPLITS:
        part = splits[name]
        chunks = [part[i : i + SENTENCES_PER_DOC] for i in range(0, len(part), SENTENCES_PER_DOC)]
        n_ents = 0
        for j, chunk in enumerate(chunks, start=1):
            txt, ann = to_brat(chunk)
            n_ents += verify_brat(txt, ann, f"{name}/doc{j:02d}")
            files[f"{name}/doc{j:02d}.txt"] = txt
            files[f"{name}/doc{j:02d}.ann"] = ann
        labels = Counter(e.label for s in part for e in s.ents)
        assert sum(labels.values()) == n_ents
        stats["sentences"][name] = len(part)
        stats["docs"][name] = len(chunks)
        stats["labels"][name] = labels
        stats["empty"][name] = sum(1 for s in part if not s.ents)
    train_surface = {(e.text.lower(), e.label) for s in splits["train"] for e in s.ents}
    stats["unseen"] = {}
    for name in ("dev", "test"):
        ents = [(e.text.lower(), e.label) for s in splits[name] for e in s.ents]
        stats["unseen"][name] = (sum(1 for e in ents if e not in train_surface), len(ents))
    stats["words"] = sum(len(s.text.split()) for s in sents)
    stats["distinct"] = len({(e.text.lower(), e.label) for s in sents for e in s.ents})
    files["new_text.txt"] = "\n".join(NEW_TEXT) + "\n"
    files["README.md"] = render_readme(stats, seed)
    return files, stats


def count_table(stats: Dict) -> str:
    rows = ["| split | docs | sentences | no-entity sentences | " + " | ".join(LABELS) + " | entities |",
            "|---|---|---|---|" + "---|" * len(LABELS) + "---|"]
    total = Counter()
    for name in SPLITS:
        lab = stats["labels"][name]
        vals = [stats["docs"][name], stats["sentences"][name], stats["empty"][name]] + [lab[label] for label in LABELS]
        vals.append(sum(lab.values()))
        total.update(dict(enumerate(vals)))
        rows.append(f"| {name} | " + " | ".join(str(v) for v in vals) + " |")
    rows.append("| **total** | " + " | ".join(str(total[i]) for i in range(len(LABELS) + 4)) + " |")
    return "\n".join(rows)


def render_readme(stats: Dict, seed: int) -> str:
    unseen = "; ".join(f"{name}: {u} of {n} entity mentions ({100 * u / n:.0f}%)"
                       for name, (u, n) in stats["unseen"].items())
    return f"""# Demo data set (embedded)

A small scientific NER data set written for spacy-sciner, used by the offline
`demo` workflow. All sentences are original, written by the project authors in
the style of machine-learning, NLP and computational-biology abstracts; none is
copied from an existing corpus or paper. Product and data-set names mentioned in
the text (e.g. SciERC, UniProt, AlphaFold) are only referred to.

**This directory is generated.** Edit `annotated.txt`, then run

    python scripts/make_demo_assets.py

(`--check` exits with status 1 if the generated files are out of date).

## Labels (SciERC-like guidelines)

| label | meaning | examples |
|---|---|---|
| Method | algorithms, models, techniques, tools | support vector machine, BiLSTM-CRF, BLAST |
| Task | problems addressed | named entity recognition, variant calling |
| Material | data sets, corpora, databases, resources | PubMed abstracts, SciERC, UniProt |
| Metric | evaluation measures | F1 score, BLEU, TM-score |

Acronyms defined in parentheses are annotated separately, e.g.
`[conditional random fields](Method) ([CRF](Method))`. Spans are flat (no
nesting) and align with spaCy's English tokenizer (checked by the script).

## Files

- `annotated.txt` — source: one sentence per line, inline markup
  `[entity text](Label)`, `#` comment lines.
- `train/`, `dev/`, `test/` — BRAT standoff: `docNN.txt` (one sentence per line)
  and `docNN.ann` (`T1<TAB>Label start end<TAB>text`, character offsets into the
  `.txt`, end exclusive), {SENTENCES_PER_DOC} sentences per document.
- `new_text.txt` — {len(NEW_TEXT)} unannotated sentences for running the packaged
  pipeline on new text.

## Counts

Split: sentences shuffled with `random.Random({seed})`; dev and test each get
1/7 of them, the rest is train (source order kept inside a split).
{stats['words']} words in total; {stats['distinct']} distinct (lower-cased text, label) entities.

{count_table(stats)}

Entity mentions whose (lower-cased text, label) never occurs in train — {unseen}.

## License

Written by the spacy-sciner authors and dedicated to the public domain under
CC0 1.0 (https://creativecommons.org/publicdomain/zero/1.0/); the surrounding
code is MIT-licensed like the rest of the project.
"""


def main(argv=None) -> int:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=root / "assets" / "demo" / "annotated.txt")
    parser.add_argument("--out", type=Path, default=root / "assets" / "demo")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--check", action="store_true", help="only verify the files on disk are up to date")
    args = parser.parse_args(argv)
    try:
        files, stats = build(args.source, args.seed)
    except MarkupError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(count_table(stats))
    print("unseen in train:", {k: f"{u}/{n}" for k, (u, n) in stats["unseen"].items()})
    if args.check:
        stale = [p for p, c in files.items() if not (args.out / p).exists()
                 or (args.out / p).read_text(encoding="utf8") != c]
        extra = [str(p.relative_to(args.out)) for s in SPLITS for p in (args.out / s).glob("doc*")
                 if str(p.relative_to(args.out)) not in files]
        if stale or extra:
            print(f"stale: {stale} extra: {extra}; rerun scripts/make_demo_assets.py", file=sys.stderr)
            return 1
        print("demo assets up to date")
        return 0
    for split in SPLITS:  # drop documents from an earlier, larger build
        for old in (args.out / split).glob("doc*.*") if (args.out / split).exists() else []:
            old.unlink()
    for rel, content in files.items():
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf8")
    # Read back from disk: the files must satisfy the offset check as written.
    for split in SPLITS:
        for txt_path in sorted((args.out / split).glob("doc*.txt")):
            verify_brat(txt_path.read_text(encoding="utf8"),
                        txt_path.with_suffix(".ann").read_text(encoding="utf8"), str(txt_path))
    print(f"wrote {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
