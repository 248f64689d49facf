"""``sciner mine`` and ``sciner build-corpus`` (also ``python -m spacy sciner ...``).

    python -m spacy_sciner mine ../shared/data/aux/CSAbstruct-text/text.txt \\
        --output mining/cs/candidates.tsv --train corpus/scierc/train.spacy --n-process 2
    python -m spacy_sciner build-corpus ../shared/data/aux/CSAbstruct-text/text.txt \\
        --candidates mining/cs/candidates.tsv --output mining/cs/pft.spacy --n 30000
"""
import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import typer

from ..cli import sciner_cli
from .candidates import SOURCES, CandidateTable
from .dictionary import TermDictionary
from ..outputs import atomic_outputs, check_output_path


def _fail(message: str) -> None:
    """Exit with a plain one-line error (typer's boxes would wrap file names)."""
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(1)


def _check_inputs(paths: List[Path]) -> List[str]:
    for path in paths:
        if str(path) != "-" and not path.is_file():
            _fail(f"input file not found: {path}")
    return [str(p) for p in paths]


def _check_outputs(*paths: Path) -> None:
    """Fail now, not after a long run, if an output cannot be written."""
    for path in paths:
        try:
            check_output_path(path)
        except ValueError as err:
            _fail(str(err))


def _write_outputs(output: Path, report: Path, write: Callable[[str], None],
                   run: Dict[str, object]) -> None:
    """Write an output and its run report together, atomically; fail in one line."""
    try:
        with atomic_outputs(output, report) as (output_tmp, report_tmp):
            write(output_tmp)
            with open(report_tmp, "w", encoding="utf8") as out:
                json.dump(run, out, indent=2, ensure_ascii=False)
    except OSError as err:
        _fail(f"cannot write {output}: {err.strerror or err}")


def read_training_data(path: Path, spans_key: str) -> Tuple[List[str], List[List[str]]]:
    """Gold entity texts and token lists of a DocBin (``doc.spans[spans_key]`` or ents)."""
    import spacy
    from spacy.tokens import DocBin

    if not path.is_file():
        _fail(f"--train file not found: {path}")
    nlp = spacy.blank("en")
    entities, sentences = [], []
    try:
        docbin = DocBin().from_disk(path)
    except Exception as err:  # msgpack/srsly raise many types for a corrupt file
        _fail(f"--train {path}: not a readable spaCy DocBin ({err})")
    for doc in docbin.get_docs(nlp.vocab):
        spans = doc.spans[spans_key] if spans_key in doc.spans else doc.ents
        entities.extend(span.text for span in spans)
        sentences.append([t.text for t in doc])
    return entities, sentences


def _sources(value: str) -> Tuple[str, ...]:
    sources = tuple(s.strip() for s in value.split(",") if s.strip())
    unknown = set(sources) - set(SOURCES)
    if unknown or not sources:
        _fail(f"--sources: unknown {sorted(unknown)}; choose from {SOURCES}")
    return sources


@sciner_cli.command("mine")
def mine_cli(
    inputs: List[Path] = typer.Argument(..., help="Text files (one sentence or document per line) or DocBins (.spacy)"),
    output: Path = typer.Option(..., "--output", "-o", help="Candidate table to write (.tsv)"),
    train: Optional[Path] = typer.Option(None, "--train", help="DocBin of labeled training data: its entities become dictionary terms"),
    gazetteer: Optional[List[Path]] = typer.Option(None, "--gazetteer", "-g", help="Gazetteer file (one term per line, the first TAB column of a line that has several, or BEL name|code); repeatable"),
    spans_key: str = typer.Option("sc", "--spans-key", help="Gold span key in --train docs"),
    sources: str = typer.Option("dict,pattern,phrase", "--sources", help="Comma-separated sources"),
    tokenizer: str = typer.Option("regex", "--tokenizer", help="regex or whitespace"),
    doc_boundary: str = typer.Option("line", "--doc-boundary", help="line or blank (blank lines separate documents)"),
    case: str = typer.Option("smart", "--case", help="exact, lowercase or smart"),
    max_n: int = typer.Option(8, "--max-n", help="Longest phrase in words"),
    min_n: int = typer.Option(2, "--min-n", help="Shortest phrase in words"),
    min_count: int = typer.Option(5, "--min-count", help="Minimum frequency of a phrase"),
    threshold: float = typer.Option(0.5, "--threshold", help="Phrase quality threshold"),
    max_ngrams: int = typer.Option(2_000_000, "--max-ngrams", help="Cap of the n-gram tables in total (memory): each part holds at most max-ngrams / n-parts"),
    n_parts: int = typer.Option(2, "--n-parts", help="Parts the input is dealt into, each counted on its own: the output depends on it, never on --n-process (at most n-parts processes work)"),
    top_percent: float = typer.Option(100.0, "--top-percent", help="Keep the top l% most frequent candidates"),
    n_process: int = typer.Option(1, "--n-process", help="Worker processes"),
    batch_lines: int = typer.Option(1000, "--batch-lines", help="Lines per batch; batches are dealt to the parts in turn"),
    seed: int = typer.Option(0, "--seed", help="Seed of the phrase classifier's random negative sample"),
    report: Optional[Path] = typer.Option(None, "--report", help="Run report JSON (default: OUTPUT.report.json)"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Mine entity candidates (dictionary, acronym patterns, phrases) from text files."""
    from .miner import MinerConfig, mine

    paths = _check_inputs(inputs)
    if not 0 < top_percent <= 100:  # checked before the dictionaries load
        _fail(f"--top-percent must be in (0, 100], got {top_percent}")
    report = report or Path(f"{output}.report.json")
    _check_outputs(output, report)
    try:
        cfg = MinerConfig(tokenizer=tokenizer, doc_boundary=doc_boundary, case=case,
                          sources=_sources(sources), max_n=max_n, min_n=min_n,
                          min_count=min_count, threshold=threshold, max_ngrams=max_ngrams,
                          n_parts=n_parts, seed=seed)
        dictionary = TermDictionary(case=case)
    except ValueError as err:
        _fail(str(err))
    loading: Dict[str, object] = {}
    if train is not None:
        entities, _ = read_training_data(train, spans_key)
        loading[str(train)] = dictionary.add_many(entities, "dict").as_dict()
    for path in gazetteer or []:
        if not path.is_file():
            _fail(f"gazetteer not found: {path}")
        try:
            loading[str(path)] = dictionary.load_gazetteer(str(path)).as_dict()
        except ValueError as err:
            _fail(str(err))
    for name, counts in loading.items():
        typer.echo(f"dictionary {name}: {counts['added']} terms added, skipped "
                   f"{counts['blank']} blank, {counts['duplicate']} duplicate, "
                   f"{counts['too_short']} too short, {counts['stop_word']} stop words, "
                   f"{counts['no_letter']} without a letter, "
                   f"{counts['malformed']} malformed", err=True)
        if counts.get("first_column"):
            typer.echo(f"dictionary {name}: {counts['first_column']} lines hold TAB-separated "
                       f"columns; their first column was taken as the term", err=True)
    try:
        table, run = mine(paths, dictionary, cfg, n_process=n_process,
                          batch_lines=batch_lines, progress=progress)
    except (OSError, ValueError, RuntimeError) as err:
        _fail(str(err))
    if top_percent < 100:
        table = table.top_percent(top_percent)
    run["dictionary"] = loading
    run["written"] = len(table)
    _write_outputs(output, report, table.write, run)
    read = run["read"]
    typer.echo(
        f"{run['lines']} lines ({read['empty_lines_skipped']} empty skipped, "
        f"{read['lines_with_invalid_utf8_replaced']} with invalid UTF-8 repaired, "
        f"{read['lines_with_control_chars_replaced']} with control characters repaired), "
        f"{run['tokens']} tokens in {run['seconds']} s; {len(table)} candidates "
        f"{run['by_source']} -> {output}"
    )


@sciner_cli.command("build-corpus")
def build_corpus_cli(
    inputs: List[Path] = typer.Argument(..., help="Text files (one sentence or document per line) or DocBins (.spacy)"),
    candidates: Optional[Path] = typer.Option(None, "--candidates", "-c", help="Candidate table from `mine`"),
    output: Path = typer.Option(..., "--output", "-o", help="Output .spacy (DocBin) or .jsonl"),
    n: int = typer.Option(30000, "--n", help="Number of sentences to select"),
    mode: str = typer.Option("top", "--mode", help="top, bottom or random"),
    weight: str = typer.Option("none", "--weight", help="Relevance weighting: none, entity or tfidf"),
    relevance_weight: float = typer.Option(1.0, "--relevance-weight", help="Lambda in n_cand * (1 + lambda * relevance)"),
    train: Optional[Path] = typer.Option(None, "--train", help="DocBin of labeled training data (entities are 'dict' candidates; relevance)"),
    spans_key: str = typer.Option("sc", "--spans-key", help="Gold span key in --train docs"),
    sources: str = typer.Option("dict,pattern,phrase", "--sources", help="Comma-separated sources"),
    min_quality: float = typer.Option(0.0, "--min-quality", help="Drop phrase-only candidates below this quality"),
    top_percent: float = typer.Option(100.0, "--top-percent", help="Use the top l% most frequent candidates"),
    tokenizer: str = typer.Option("regex", "--tokenizer", help="regex or whitespace"),
    doc_boundary: str = typer.Option("line", "--doc-boundary", help="line or blank"),
    case: str = typer.Option("smart", "--case", help="exact, lowercase or smart"),
    overlap: str = typer.Option("longest", "--overlap", help="longest or all"),
    min_tokens: int = typer.Option(3, "--min-tokens", help="Skip sentences with fewer tokens (counted in the report)"),
    max_tokens: int = typer.Option(200, "--max-tokens", help="Skip sentences with more tokens, which an encoder would truncate (counted)"),
    seed: int = typer.Option(0, "--seed", help="Seed of --mode random and of the order of equal scores"),
    n_process: int = typer.Option(1, "--n-process", help="Worker processes"),
    batch_lines: int = typer.Option(1000, "--batch-lines", help="Lines per worker batch"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Select N sentences (top/bottom/random by candidates) as a pre-fine-tuning corpus."""
    from .select import Relevance, select_sentences, write_corpus

    paths = _check_inputs(inputs)
    if not str(output).endswith((".spacy", ".jsonl")):
        _fail(f"--output must end in .spacy or .jsonl: {output}")
    report = Path(f"{output}.report.json")
    _check_outputs(output, report)
    wanted = _sources(sources)
    try:
        dictionary = TermDictionary(case=case)
        if candidates is not None:
            table = CandidateTable.read(str(candidates))
            if top_percent < 100:
                table = table.top_percent(top_percent)
            dictionary = table.to_dictionary(case, wanted, min_quality)
        entities, sentences = read_training_data(train, spans_key) if train else ([], [])
        if entities and "dict" in wanted:
            dictionary.add_many(entities, "dict")
        relevance = Relevance(weight, entities, sentences)
        items, run = select_sentences(
            paths, dictionary, n=n, mode=mode, relevance=relevance,
            relevance_weight=relevance_weight, tokenizer=tokenizer, doc_boundary=doc_boundary,
            acronyms="pattern" in wanted, overlap=overlap, min_tokens=min_tokens,
            max_tokens=max_tokens, seed=seed, n_process=n_process, batch_lines=batch_lines,
            progress=progress)
    except (OSError, ValueError, RuntimeError) as err:
        _fail(str(err))
    run["dictionary_terms"] = len(dictionary)
    _write_outputs(output, report, lambda path: write_corpus(items, path), run)
    read = run["read"]
    typer.echo(
        f"{read['lines']} lines ({read['empty_lines_skipped']} empty skipped, "
        f"{read['lines_with_invalid_utf8_replaced']} with invalid UTF-8 repaired, "
        f"{read['lines_with_control_chars_replaced']} with control characters repaired); "
        f"{run['sentences_seen']} sentences seen ({run['skipped_too_short']} too short, "
        f"{run['skipped_too_long']} too long skipped); {run['selected']} selected ({mode}, "
        f"weight {weight}) with {run['candidates_in_selection']} candidates -> {output}"
    )
