"""``sciner label-weak``: distant labels from gazetteers, training data and mined candidates.

    python -m spacy_sciner label-weak ../shared/data/aux/*/text.txt -o weak/aux.spacy \\
        --type-map configs/weak/bionlp13cg.tsv \\
        --gazetteer-dir ../shared/data/gazetteers/openbel --n-process 2
    python -m spacy_sciner label-weak --type-map configs/weak/ncbi_disease.tsv \\
        --gazetteer-dir ../shared/data/gazetteers/openbel --gold corpus/ncbi/test.spacy \\
        --report metrics/weak_noise.json

Every input is checked before the long work starts: the inputs exist, the outputs can be
written, the type map parses and names existing files, the gold DocBin reads.
"""
import json
from collections import Counter
from pathlib import Path
from typing import List, Optional

import typer

from ..cli import sciner_cli
from ..cli_util import fail
from ..outputs import atomic_outputs, check_output_path


def _read_docbin(path: Path, what: str):
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    if not path.is_file():
        fail(f"{what} {path}: not found")
    from .labeling import fast_msgpack

    try:
        with fast_msgpack():
            return list(DocBin().from_disk(path).get_docs(Vocab()))
    except Exception as err:  # msgpack/srsly raise many types for a corrupt file
        fail(f"{what} {path}: not a readable spaCy DocBin ({err})")


def _gold_spans(doc, spans_key: str):
    spans = doc.spans[spans_key] if spans_key in doc.spans else doc.ents
    return [(s.start, s.end, s.label_) for s in spans]


def _load_sources(type_map, gazetteer_dir, train, train_spans_key, candidates, case):
    """The typed dictionary, with per-source counts printed; fails on bad input."""
    from ..mining.candidates import CandidateTable
    from .sources import ENTITY, LabelSources, TypeMapError, read_type_map

    if type_map is None and train is None and candidates is None:
        fail("no label source: give --type-map, --train and/or --candidates")
    try:
        sources = LabelSources(case=case)
        rows = read_type_map(type_map, gazetteer_dir) if type_map is not None else []
        train_docs = _read_docbin(train, "--train") if train is not None else None
        table = None
        if candidates is not None:
            if not candidates.is_file():
                fail(f"--candidates {candidates}: not found")
            table = CandidateTable.read(str(candidates))
        if train_docs is not None:
            pairs = [(span.text, span.label_) for doc in train_docs for span in
                     (doc.spans[train_spans_key] if train_spans_key in doc.spans else doc.ents)]
            sources.add_training_entities(pairs, "train", f"--train {train}")
        sources.add_type_map(rows)
        if table is not None:
            sources.add_terms([row.text for row in table.sorted()], ENTITY, "mined")
    except (TypeMapError, ValueError) as err:
        fail(str(err))
    except OSError as err:
        fail(f"{getattr(err, 'filename', '')}: cannot read it ({err.strerror or err})")
    for name, counts in sources.loading.items():
        skipped = ", ".join(f"{counts.get(k, 0)} {k.replace('_', ' ')}" for k in
                            ("blank", "duplicate", "too_short", "stop_word", "no_letter",
                             "malformed"))
        where = f" (e.g. {counts['examples'][0]})" if counts.get("examples") else ""
        typer.echo(f"source {name}: {counts.get('added', 0)} terms added; skipped {skipped}"
                   f"{where}", err=True)
        if counts.get("first_column"):
            typer.echo(f"source {name}: {counts['first_column']} lines hold TAB-separated columns; "
                       f"their first column was taken as the term (for a 'term<TAB>label' list, "
                       f"give it label '*' in the type map)", err=True)
    n_conflicts, examples = sources.conflicting_terms()
    if n_conflicts:
        typer.echo(f"{n_conflicts} terms have several types (conflict rule applies), e.g. "
                   f"{'; '.join(examples[:3])}", err=True)
    if not len(sources.dictionary):
        fail("the label sources hold no usable term (see the skip counts above)")
    sources.loading["terms_with_several_types"] = {"count": n_conflicts, "examples": examples}
    return sources


@sciner_cli.command("label-weak")
def label_weak_cli(
    inputs: Optional[List[Path]] = typer.Argument(None, help="Text files (one sentence or document per line) or DocBins (.spacy)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Weakly labeled DocBin to write (.spacy)"),
    type_map: Optional[Path] = typer.Option(None, "--type-map", "-t", help="TSV 'file<TAB>label' (see configs/weak/)"),
    gazetteer_dir: Optional[Path] = typer.Option(None, "--gazetteer-dir", help="Folder of the type map's relative file names (default: the type map's folder)"),
    train: Optional[Path] = typer.Option(None, "--train", help="Labeled DocBin: its entities and labels become dictionary terms"),
    train_spans_key: str = typer.Option("sc", "--train-spans-key", help="Span key of --train (doc.ents when absent)"),
    candidates: Optional[Path] = typer.Option(None, "--candidates", "-c", help="Candidate table of `sciner mine` (label ENTITY)"),
    conflict: str = typer.Option("priority", "--conflict", help="A span with several types: 'priority' (type-map order) or 'ambiguous' (label AMBIGUOUS)"),
    abbreviations: bool = typer.Option(False, "--abbreviations/--no-abbreviations", help="Also label defined acronyms: 'LF ( SF )' with a labeled long form gives SF, and its other uses in the document, the long form's label"),
    case: str = typer.Option("smart", "--case", help="exact, lowercase or smart"),
    tokenizer: str = typer.Option("regex", "--tokenizer", help="Text inputs: regex or whitespace"),
    spans_key: str = typer.Option("weak", "--spans-key", help="Key of the weak span group"),
    gold: Optional[Path] = typer.Option(None, "--gold", help="Labeled DocBin: label its text and print the noise report"),
    gold_spans_key: str = typer.Option("sc", "--gold-spans-key", help="Span key of --gold (doc.ents when absent)"),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the run counts and the noise report as JSON"),
    n_process: int = typer.Option(1, "--n-process", help="Worker processes (text inputs); the output does not depend on it"),
    batch_lines: int = typer.Option(2000, "--batch-lines", help="Lines per batch"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Label text with typed dictionary matches (doc.spans[SPANS_KEY], source in kb_id)."""
    from .labeling import Labeler

    inputs = list(inputs or [])
    _check_paths(inputs, output, report, gold)
    gold_docs = _read_docbin(gold, "--gold") if gold is not None else None
    sources = _load_sources(type_map, gazetteer_dir, train, train_spans_key, candidates, case)
    try:
        labeler = Labeler(sources, conflict, abbreviations)
    except ValueError as err:
        fail(str(err))
    run = {"sources": sources.loading, "conflict": conflict, "abbreviations": abbreviations,
           "labels": sources.labels()}
    if inputs:
        run["labeling"] = _label_inputs(inputs, output, labeler, tokenizer, spans_key, n_process,
                                        batch_lines, progress)
    if gold_docs is not None:
        run["noise"] = _noise(labeler, gold_docs, gold, gold_spans_key)
    if report is not None:
        try:
            with atomic_outputs(report) as (tmp,), open(tmp, "w", encoding="utf8") as out:
                json.dump(run, out, indent=2, ensure_ascii=False, default=dict)
        except OSError as err:
            fail(f"cannot write {report}: {err.strerror or err}")


def _check_paths(inputs: List[Path], output: Optional[Path], report: Optional[Path], gold: Optional[Path]) -> None:
    """Fail at once on missing inputs or unwritable outputs, before anything is loaded."""
    if not inputs and gold is None:
        fail("nothing to label: give input files and --output, or --gold")
    if inputs and output is None:
        fail("--output is required with input files")
    for path in inputs:
        if str(path) != "-" and not path.is_file():
            fail(f"input file not found: {path}")
    if len({str(p).endswith(".spacy") for p in inputs}) > 1:
        fail("inputs mix text files and DocBins: label them in separate runs")
    if output is not None and not str(output).endswith(".spacy"):
        fail(f"--output must end in .spacy: {output}")
    for path in (output, report):
        if path is not None:
            try:
                check_output_path(path)
            except ValueError as err:
                fail(str(err))


def _label_inputs(inputs: List[Path], output: Path, labeler, tokenizer: str, spans_key: str, n_process: int,
                  batch_lines: int, progress: bool) -> dict:
    """Label the inputs, write the DocBin atomically and print the counts; RETURNS the counts."""
    from .labeling import label_docbins, label_texts

    conflict, abbreviations = labeler.conflict, labeler.abbreviations
    try:
        if str(inputs[0]).endswith(".spacy"):
            if n_process > 1:
                typer.echo("note: DocBin inputs are labeled in one process", err=True)
            docbin, counts = label_docbins([str(p) for p in inputs], labeler, spans_key)
        else:
            docbin, counts = label_texts([str(p) for p in inputs], labeler, tokenizer,
                                         spans_key, n_process, batch_lines, progress)
    except (OSError, ValueError, RuntimeError) as err:
        fail(str(err))
    read = counts.get("read", {})
    if not counts["docs"]:
        fail(f"empty corpus: no text in {', '.join(map(str, inputs))} "
             f"({read.get('lines', 0)} lines, {read.get('empty_lines_skipped', 0)} empty)")
    try:
        with atomic_outputs(output) as (tmp,):
            docbin.to_disk(tmp)
    except OSError as err:
        fail(f"cannot write {output}: {err.strerror or err}")
    if read:
        typer.echo(f"{read['lines']} lines ({read['empty_lines_skipped']} empty skipped, "
                   f"{read['lines_with_invalid_utf8_replaced']} with invalid UTF-8 repaired, "
                   f"{read['lines_with_control_chars_replaced']} with control characters "
                   f"repaired)")
    abbr = f" ({counts['abbreviation_spans']} of them short forms)" if abbreviations else ""
    typer.echo(f"{counts['docs']} docs, {counts['tokens']} tokens, {counts['spans']} weak "
               f"spans{abbr} {counts['labels']} in {counts['seconds']} s; type conflicts "
               f"{counts['type_conflicts'] or 'none'} (rule: {conflict}) -> {output}")
    if not counts["spans"]:
        typer.echo(f"warning: nothing matched in {counts['docs']} docs: check the "
                   f"type map, --case and --tokenizer", err=True)
    return counts


def _noise(labeler, gold_docs, gold: Path, gold_spans_key: str) -> dict:
    """Label the gold docs' text and print the noise report; RETURNS the report."""
    from .noise import format_report, noise_report

    counts: Counter = Counter()
    weak = labeler.label_tokens([[t.text for t in d] for d in gold_docs], counts)
    pairs = [([(s, e, label) for s, e, label, _ in spans], _gold_spans(doc, gold_spans_key))
             for spans, doc in zip(weak, gold_docs)]
    noise = noise_report(pairs)
    typer.echo(f"noise report: weak labels vs {gold} ({len(gold_docs)} docs)")
    for line in format_report(noise):
        typer.echo(line)
    return noise
