"""Streaming candidate mining over text files, optionally on several processes.

One pass over the corpus: the main process reads and cleans lines (``text.read_documents``)
and hands batches of documents to workers, which tokenize, match the dictionary, find
acronym definitions and count n-grams; the main process merges the batch counts (with the
n-gram table capped, see ``phrases.NgramStats``) and at the end trains the phrase-quality
model and writes the candidate table. Nothing but counts is kept, so memory does not grow
with the number of lines; at most ``2 * n_process`` batches are in flight.
"""
import multiprocessing
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from tqdm import tqdm

from .candidates import SOURCES, CandidateTable, annotate, candidate_key
from .dictionary import TermDictionary
from .phrases import NgramStats, score_phrases
from .text import ReadStats, read_documents, split_sentences, tokenize


@dataclass
class MinerConfig:
    """Settings of a mining run (all have CLI options of the same name)."""

    tokenizer: str = "regex"
    doc_boundary: str = "line"
    split_sentences: bool = True
    case: str = "smart"
    sources: Tuple[str, ...] = SOURCES
    max_n: int = 8
    min_n: int = 2
    min_count: int = 5
    max_ngrams: int = 1_000_000
    threshold: float = 0.5
    neg_ratio: float = 2.0
    seed: int = 0

    def __post_init__(self):
        unknown = set(self.sources) - set(SOURCES)
        if unknown or not self.sources:
            raise ValueError(f"Unknown or no sources {sorted(unknown)}: choose from {SOURCES}")


def document_sentences(lines: Sequence[str], tokenizer: str, split: bool) -> List[List[str]]:
    """Tokenize the lines of one document into sentences."""
    sentences = []
    for line in lines:
        words = tokenize(line, tokenizer)
        if words:
            sentences.extend(split_sentences(words) if split else [words])
    return sentences


@dataclass
class BatchResult:
    lines: int = 0
    chars: int = 0
    tokens: int = 0
    occurrences: int = 0
    candidates: Counter = field(default_factory=Counter)  # (key, sources) -> count
    ngrams: Optional[NgramStats] = None


def process_batch(
    docs: Sequence[Sequence[str]], dictionary: Optional[TermDictionary], cfg: MinerConfig
) -> BatchResult:
    """Mine one batch of documents (each a list of lines)."""
    result = BatchResult()
    use_phrases = "phrase" in cfg.sources
    if use_phrases:
        result.ngrams = NgramStats(cfg.max_n, max_entries=10 ** 12)
    for lines in docs:
        result.lines += len(lines)
        result.chars += sum(len(line) for line in lines)
        sentences = document_sentences(lines, cfg.tokenizer, cfg.split_sentences)
        spans = annotate(sentences, dictionary, acronyms="pattern" in cfg.sources, overlap="all")
        for words, matches in zip(sentences, spans):
            result.tokens += len(words)
            result.occurrences += len(matches)
            for start, end, sources in matches:
                result.candidates[(candidate_key(words[start:end]), sources)] += 1
            if use_phrases:
                result.ngrams.add_sentence(words)
    return result


_WORKER: Dict[str, object] = {}


def _init_worker(dictionary: Optional[TermDictionary], cfg: MinerConfig) -> None:
    _WORKER["dictionary"] = dictionary
    _WORKER["cfg"] = cfg


def _work(docs):
    return process_batch(docs, _WORKER["dictionary"], _WORKER["cfg"])


def batched(docs: Iterable, batch_lines: int) -> Iterator[List[List[str]]]:
    """Group documents (lists of (path, line, text)) into batches of about batch_lines."""
    batch, n_lines = [], 0
    for doc in docs:
        batch.append([text for _, _, text in doc])
        n_lines += len(doc)
        if n_lines >= batch_lines:
            yield batch
            batch, n_lines = [], 0
    if batch:
        yield batch


def run_batches(
    batches: Iterator, dictionary: Optional[TermDictionary], cfg: MinerConfig, n_process: int
) -> Iterator[BatchResult]:
    """Process batches in order, in this process or a bounded pool of workers."""
    if n_process <= 1:
        for batch in batches:
            yield process_batch(batch, dictionary, cfg)
        return
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(n_process, initializer=_init_worker, initargs=(dictionary, cfg)) as pool:
        pending: deque = deque()
        for batch in batches:
            pending.append(pool.apply_async(_work, (batch,)))
            # Bounded look-ahead keeps memory flat (Pool.imap would read the whole input).
            if len(pending) >= 2 * n_process:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def mine(
    paths: Sequence[str],
    dictionary: Optional[TermDictionary] = None,
    cfg: Optional[MinerConfig] = None,
    n_process: int = 1,
    batch_lines: int = 1000,
    progress: bool = True,
) -> Tuple[CandidateTable, Dict[str, object]]:
    """Mine candidates from text files.

    paths (Sequence[str]): Text files, one sentence or document per line.
    dictionary (Optional[TermDictionary]): Known terms (training entities, gazetteers).
    cfg (Optional[MinerConfig]): Settings.
    n_process (int): Worker processes (1: work in this process).
    batch_lines (int): Lines per batch handed to a worker.
    progress (bool): Show a tqdm bar with lines/s and candidates found.
    RETURNS (Tuple[CandidateTable, Dict[str, object]]): The table and a run report.
    """
    cfg = cfg or MinerConfig()
    if "dict" not in cfg.sources:
        dictionary = None
    read_stats = ReadStats()
    docs = read_documents(paths, cfg.doc_boundary, read_stats)
    totals = Counter()
    candidates: Counter = Counter()
    ngrams = NgramStats(cfg.max_n, cfg.max_ngrams)
    start_time = time.perf_counter()
    bar = tqdm(unit=" lines", unit_scale=True, disable=not progress, desc="mining")
    for result in run_batches(batched(docs, batch_lines), dictionary, cfg, n_process):
        totals.update(lines=result.lines, chars=result.chars, tokens=result.tokens,
                      occurrences=result.occurrences)
        candidates.update(result.candidates)
        if result.ngrams is not None:
            ngrams.merge(result.ngrams)
        bar.update(result.lines)
        bar.set_postfix(candidates=totals["occurrences"], refresh=False)
    bar.close()
    scan_seconds = time.perf_counter() - start_time
    table = CandidateTable()
    for (key, sources), count in candidates.items():
        table.add(key, sources, count)
    report: Dict[str, object] = {"config": asdict(cfg), "read": read_stats.as_dict()}
    if "phrase" in cfg.sources:
        positives = {row.text.lower() for row in table.rows.values()}
        scores, model = score_phrases(ngrams, positives, cfg.min_count, cfg.min_n,
                                      cfg.neg_ratio, seed=cfg.seed)
        lowered = {row.text.lower(): row for row in table.rows.values()}
        for key, quality in scores.items():
            row = lowered.get(key)
            if row is not None:
                row.quality = quality
                if quality >= cfg.threshold:
                    row.sources = "|".join(sorted(set(row.sources.split("|")) | {"phrase"}))
                    row.freq = max(row.freq, ngrams.ngrams[key])
            elif quality >= cfg.threshold:
                table.add(key, "phrase", ngrams.ngrams[key], quality)
        report["phrase_model"] = model
        report["ngram_table"] = {"entries": len(ngrams.ngrams), "pruned_below": ngrams.floor}
    seconds = time.perf_counter() - start_time
    by_source = Counter(s for row in table.rows.values() for s in row.sources.split("|"))
    report.update(
        lines=totals["lines"], chars=totals["chars"], tokens=totals["tokens"],
        occurrences=totals["occurrences"], candidates=len(table), by_source=dict(by_source),
        n_process=n_process, scan_seconds=round(scan_seconds, 3), seconds=round(seconds, 3),
        lines_per_second=round(totals["lines"] / max(scan_seconds, 1e-9), 1),
    )
    return table, report
