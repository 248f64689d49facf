"""``sciner render`` (displaCy page of predictions vs gold) and ``sciner debug-data``
(span statistics of a DocBin): what ``spacy evaluate --displacy-path`` and ``spacy
debug data`` do for spaCy's own components, for any span group."""
import json
from pathlib import Path
from typing import List, Optional

import typer

from .cli import sciner_cli
from .cli_util import atomic_output_file, check_input, check_output_file, fail, load_docbin


@sciner_cli.command("debug-data")
def debug_data_cli(
    docbin_path: Path = typer.Argument(..., help="DocBin (.spacy) with spans, e.g. from `sciner convert`"),
    spans_key: str = typer.Option("sc", "--spans-key", help="doc.spans key to look at"),
    max_span_length: int = typer.Option(8, "--max-span-length", "-L", help="sciner_spancat's max_span_length: longer spans are counted"),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the statistics as JSON here"),
) -> None:
    """Span statistics of a DocBin per label and per length.

    Counts, a length histogram, nested and crossing spans, spans longer than
    max_span_length, empty or whitespace/punctuation-edged spans (with examples).
    """
    import spacy

    from .debug import format_statistics, span_statistics

    check_input(docbin_path)
    if json_path is not None:
        check_output_file(json_path)
    if max_span_length < 1:
        fail(f"--max-span-length must be >= 1, got {max_span_length}")
    docs = load_docbin(docbin_path, spacy.blank("xx").vocab)
    if not docs:
        fail(f"{docbin_path}: holds no docs")
    stats = span_statistics(docs, spans_key=spans_key, max_span_length=max_span_length)
    if stats["docs_without_key"] == stats["docs"]:
        keys = sorted({key for doc in docs for key in doc.spans})
        fail(f"{docbin_path}: no doc has doc.spans[{spans_key!r}] (span keys found: {keys}); use --spans-key")
    for line in format_statistics(stats):
        typer.echo(line)
    if json_path is not None:
        with atomic_output_file(json_path) as tmp:
            tmp.write_text(json.dumps(stats, indent=2), encoding="utf8")
        typer.echo(f"wrote {json_path}")


@sciner_cli.command("render")
def render_cli(
    model_or_docbin: str = typer.Argument(..., help="Pipeline (directory or package name) to run, or a DocBin (.spacy) of its predictions"),
    input_path: Path = typer.Argument(..., help="Gold DocBin (.spacy) on the same tokens, or a text file (one text per line: predictions only)"),
    output_path: Path = typer.Argument(..., help="HTML file to write"),
    spans_key: Optional[str] = typer.Option(None, "--spans-key", help="Span group of the predictions (default: the pipeline's sciner_spancat key, else 'sc')"),
    gold_key: str = typer.Option("sc", "--gold-key", help="Span group of the gold spans in INPUT"),
    limit: int = typer.Option(200, "--limit", help="Render at most this many docs (0: all)"),
    only_errors: bool = typer.Option(False, "--only-errors", help="Only docs whose predictions differ from the gold"),
    batch_size: int = typer.Option(32, "--batch-size", help="Docs per batch when running a pipeline"),
) -> None:
    """Write an HTML page of predicted vs gold spans, one colour per label.

    displaCy's span style: per doc the gold spans, the predicted spans (nested ones
    stacked) and the missed/spurious ones. Without gold (a text file), predictions only.
    """
    import spacy

    from .render import render_comparison, retokenized_copies

    check_input(input_path)
    check_output_file(output_path)
    if limit < 0:
        fail(f"--limit must be >= 0, got {limit}")
    gold_is_docbin = input_path.suffix == ".spacy"
    source = Path(model_or_docbin)
    if source.is_file():
        nlp = None
        if not gold_is_docbin:
            fail(f"{input_path}: a DocBin of predictions needs a gold DocBin (.spacy) to compare with")
    else:
        try:
            nlp = spacy.load(model_or_docbin)
        except (OSError, ValueError) as err:
            fail(f"{model_or_docbin}: cannot load the pipeline ({(str(err).splitlines() or [''])[0][:300]})")
    vocab = nlp.vocab if nlp is not None else spacy.blank("xx").vocab
    end = limit or None
    gold: Optional[List] = None
    if gold_is_docbin:
        gold = load_docbin(input_path, vocab)
        if not gold:
            fail(f"{input_path}: holds no docs")
    labels: List[str] = []
    if nlp is not None:
        spans_key = spans_key or _pipeline_spans_key(nlp)
        labels = [label for _, proc in nlp.pipeline if _cfg(proc).get("spans_key") == spans_key
                  for label in getattr(proc, "labels", ())]
        gold = gold[:end] if gold is not None else None
        inputs = retokenized_copies(gold, nlp.vocab) if gold is not None else _read_texts(input_path)[:end]
        predicted = list(nlp.pipe(inputs, batch_size=batch_size))
    else:
        spans_key = spans_key or "sc"
        predicted = load_docbin(source, vocab)
        _check_same_docs(source, predicted, input_path, gold)
        predicted, gold = predicted[:end], gold[:end]
    page, counts = render_comparison(
        predicted, gold, labels, spans_key=spans_key, gold_key=gold_key,
        title=f"{model_or_docbin} on {input_path.name}", only_errors=only_errors,
    )
    with atomic_output_file(output_path) as tmp:
        tmp.write_text(page, encoding="utf8")
    message = f"wrote {output_path}: {counts['docs']} docs"
    if gold is not None:
        message += f"; spans: {counts['tp']} correct, {counts['fn']} missed, {counts['fp']} spurious"
    typer.echo(message)


def _cfg(proc) -> dict:
    cfg = getattr(proc, "cfg", None)
    return cfg if isinstance(cfg, dict) else {}


def _pipeline_spans_key(nlp) -> str:
    """The spans_key of the first component that has one (sciner_spancat, spancat)."""
    for _, proc in nlp.pipeline:
        if _cfg(proc).get("spans_key"):
            return _cfg(proc)["spans_key"]
    return "sc"


def _read_texts(path: Path) -> List[str]:
    from .corpora.common import CorpusFormatError, read_lines

    try:
        return [line for line in read_lines(path) if line.strip()]
    except CorpusFormatError as err:
        fail(str(err))


def _check_same_docs(pred_path: Path, predicted, gold_path: Path, gold) -> None:
    if len(predicted) != len(gold):
        fail(f"{pred_path}: {len(predicted)} docs, but {gold_path} has {len(gold)}: expected the same docs")
    for i, (pred, ref) in enumerate(zip(predicted, gold)):
        if [t.text for t in pred] != [t.text for t in ref]:
            fail(f"{pred_path}: doc {i} has other tokens than doc {i} of {gold_path} ({pred.text[:60]!r})")
