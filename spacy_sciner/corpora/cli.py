"""``sciner convert``: a corpus file (or BRAT directory) to a spaCy DocBin."""
from enum import Enum
from pathlib import Path

import typer

from ..cli import sciner_cli
from ..cli_util import check_input, check_output_file, fail
from .common import CorpusFormatError


class Format(str, Enum):
    auto = "auto"
    scierc = "scierc"
    conll = "conll"
    brat = "brat"
    jsonl = "jsonl"
    docbin = "docbin"


class Scheme(str, Enum):
    auto = "auto"
    iob1 = "iob1"
    iob2 = "iob2"
    iobes = "iobes"


class DocUnit(str, Enum):
    sentence = "sentence"
    document = "document"
    line = "line"


class Discontinuous(str, Enum):
    merge = "merge"
    fragments = "fragments"
    error = "error"


@sciner_cli.command("convert")
def convert_cli(
    input_path: Path = typer.Argument(..., help="SciERC .json, CoNLL file, BRAT .txt/.ann file or directory, Prodigy/doccano .jsonl, or .spacy DocBin"),
    output_path: Path = typer.Argument(..., help="Output .spacy (DocBin) file"),
    fmt: Format = typer.Option(Format.auto, "--format", "-f", help="Input format (auto: from the suffix; .json/.jsonl by the first record; .txt with an .ann beside it: brat)"),
    scheme: Scheme = typer.Option(Scheme.auto, "--scheme", help="CoNLL tag scheme (auto: detected per file)"),
    spans_key: str = typer.Option("sc", "--spans-key", help="doc.spans key for all gold mentions (docbin: also the group read)"),
    doc_unit: DocUnit = typer.Option(DocUnit.sentence, "--doc-unit", help="SciERC: one Doc per sentence or per abstract; BRAT: 'line' = one Doc per text line"),
    repair: bool = typer.Option(False, "--repair", help="CoNLL: fix inconsistent tag sequences (counted) instead of failing"),
    discontinuous: Discontinuous = typer.Option(Discontinuous.merge, "--discontinuous", help="BRAT: discontinuous mentions"),
    lang: str = typer.Option("en", "--lang", help="BRAT, JSONL: language of the tokenizer"),
) -> None:
    """Convert SciERC JSON lines, CoNLL token/tag files, BRAT standoff, character-offset
    JSONL (Prodigy, doccano) or a DocBin of your own to the project's DocBin.

    All gold mentions go to doc.spans[SPANS_KEY] (nested allowed); the non-overlapping
    ones (longest first) also to doc.ents. Prints the counts.
    """
    from .convert import convert, detect_format

    check_input(input_path)
    check_output_file(output_path)  # before reading: fail fast
    try:
        fmt_name = detect_format(input_path) if fmt == Format.auto else fmt.value
        if fmt == Format.auto:
            typer.echo(f"format: {fmt_name} (detected; --format to choose)")
        stats = convert(
            input_path, output_path, fmt_name, scheme=scheme.value, spans_key=spans_key,
            doc_unit=doc_unit.value, repair=repair, discontinuous=discontinuous.value, lang=lang,
        )
    except CorpusFormatError as err:
        fail(str(err))
    except OSError as err:  # writing the output (disk full, ...): nothing is left behind
        fail(f"{output_path}: cannot write it ({err.strerror or err})")
    typer.echo(f"wrote {output_path}")
    rows = [
        ("docs", stats.docs),
        ("sentences", stats.sentences),
        ("docs without sentence boundaries", stats.unsplit_docs),
        ("tokens", stats.tokens),
        ("entities (doc.spans)", stats.entities),
        ("nested pairs", stats.nested_pairs),
        ("dropped from doc.ents (overlap)", stats.ents_dropped),
        ("duplicates removed", stats.duplicates),
        ("repairs", stats.repairs),
        ("misaligned (expanded)", stats.misaligned),
        ("discontinuous", stats.discontinuous),
    ]
    rows += [(f"scheme of {Path(name).name}", scheme) for name, scheme in stats.schemes.items()]
    rows += [(f"ignored {kind} lines", n) for kind, n in sorted(stats.ignored_lines.items())]
    for name, value in rows:
        typer.echo(f"{name:<34}{value:>8}")
    for label, n in sorted(stats.labels.items()):
        typer.echo(f"  {label:<32}{n:>8}")
    for note in stats.notes[:20]:
        typer.echo(f"note: {note}")
    if len(stats.notes) > 20:
        typer.echo(f"note: ... {len(stats.notes) - 20} more")
