"""Streaming candidate mining over text files, optionally on several processes.

One pass over the corpus, in batches of documents: read and clean lines
(``text.read_documents``), tokenize, match the dictionary, find acronym definitions and
count n-grams; batch counts are merged into running totals (the n-gram table capped, see
``phrases.NgramStats``); at the end the phrase-quality model is trained and the candidate
table built. Nothing but counts is kept, so memory does not grow with the number of lines.

The batches are dealt into ``n_parts`` parts, each with an n-gram table capped at
``max_ngrams / n_parts`` entries, and the parts are merged in order at the end; with
``n_process`` > 1 forked workers share the parts (``parallel``). The table is the same
whatever ``n_process`` and the timing of the workers, pruned or not; ``n_parts`` (and
``batch_lines``) decide where a pruned table loses counts, so they are settings of the run.
"""
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Dict, Optional, Sequence, Tuple

from .candidates import SOURCES, CandidateTable, annotate, candidate_key, tokenize_documents
from .dictionary import TermDictionary
from .phrases import NgramStats, score_phrases
from .parallel import LineBar, run_partitioned


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
    max_ngrams: int = 2_000_000  # in total: 1M per part, the table size before parts
    n_parts: int = 2
    threshold: float = 0.5
    neg_ratio: float = 2.0
    seed: int = 0

    def __post_init__(self):
        unknown = set(self.sources) - set(SOURCES)
        if unknown or not self.sources:
            raise ValueError(f"Unknown or no sources {sorted(unknown)}: choose from {SOURCES}")
        if self.n_parts < 1:
            raise ValueError(f"n_parts must be >= 1, got {self.n_parts}")


@dataclass
class BatchResult:
    """Counts of some documents; ``merge`` adds another result (in a worker or the main)."""

    lines: int = 0
    chars: int = 0
    tokens: int = 0
    occurrences: int = 0
    candidates: Counter = field(default_factory=Counter)  # (key, sources) -> count
    ngrams: Optional[NgramStats] = None

    def merge(self, other: "BatchResult") -> None:
        self.lines += other.lines
        self.chars += other.chars
        self.tokens += other.tokens
        self.occurrences += other.occurrences
        self.candidates.update(other.candidates)
        if other.ngrams is not None:
            if self.ngrams is None:
                self.ngrams = other.ngrams
            else:
                self.ngrams.merge(other.ngrams)


def process_batch(
    docs: Sequence[Sequence[Tuple[str, int, str]]],
    dictionary: Optional[TermDictionary],
    cfg: MinerConfig,
) -> BatchResult:
    """Mine one batch of documents (each a list of (path, line number, text) lines)."""
    result = BatchResult()
    use_phrases = "phrase" in cfg.sources
    if use_phrases:
        result.ngrams = NgramStats(cfg.max_n, max_entries=10 ** 12)
    texts = [[text for _, _, text in doc] for doc in docs]
    tokenized = tokenize_documents(texts, cfg.tokenizer, cfg.split_sentences, dictionary)
    for lines, (sentences, dict_matches, _) in zip(texts, tokenized):
        result.lines += len(lines)
        result.chars += sum(len(line) for line in lines)
        spans = annotate(sentences, None, acronyms="pattern" in cfg.sources, overlap="all",
                         dict_matches=dict_matches)
        for words, matches in zip(sentences, spans):
            result.tokens += len(words)
            result.occurrences += len(matches)
            for start, end, sources in matches:
                result.candidates[(candidate_key(words[start:end]), sources)] += 1
            if use_phrases:
                result.ngrams.add_sentence(words)
    return result


def add_phrases(table: CandidateTable, ngrams: NgramStats, cfg: MinerConfig) -> Dict[str, object]:
    """Score the frequent n-grams and add the good ones to the table as "phrase" rows.

    The dictionary and pattern rows are the classifier's positives; each row that is a
    frequent n-gram gets its quality, and the "phrase" tag above the threshold.

    table (CandidateTable): The dictionary and pattern candidates; updated in place.
    ngrams (NgramStats): The corpus n-gram counts.
    cfg (MinerConfig): Settings (min_count, min_n, neg_ratio, threshold, seed).
    RETURNS (Dict[str, object]): The phrase model's report.
    """
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
    return model


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
    n_process (int): Worker processes (1: work in this process; at most ``cfg.n_parts``).
        The result does not depend on it.
    batch_lines (int): Lines per batch; batch i goes to part i % ``cfg.n_parts``.
    progress (bool): Show a tqdm bar with lines/s and candidates found.
    RETURNS (Tuple[CandidateTable, Dict[str, object]]): The table and a run report.
    """
    cfg = cfg or MinerConfig()
    if "dict" not in cfg.sources:
        dictionary = None
    start_time = time.perf_counter()
    bar = LineBar("mining", enabled=progress)
    part_cap = max(1, cfg.max_ngrams // cfg.n_parts)
    parts, read_stats = run_partitioned(
        list(paths), cfg.doc_boundary, batch_lines, n_process=n_process, bar=bar,
        work=lambda batch, _: process_batch(batch, dictionary, cfg),
        empty=lambda: BatchResult(ngrams=NgramStats(cfg.max_n, part_cap)),
        n_parts=cfg.n_parts)
    bar.close()
    total = BatchResult(ngrams=NgramStats(cfg.max_n, cfg.max_ngrams))
    for part in parts:
        total.merge(part)
    scan_seconds = time.perf_counter() - start_time
    table = CandidateTable()
    # Sorted, so that rows differing in case only ("SVM", "svm") meet in a fixed order.
    for (key, sources), count in sorted(total.candidates.items()):
        table.add(key, sources, count)
    report: Dict[str, object] = {"config": asdict(cfg), "read": read_stats.as_dict()}
    if "phrase" in cfg.sources:
        report["phrase_model"] = add_phrases(table, total.ngrams, cfg)
        report["ngram_table"] = {"entries": len(total.ngrams.ngrams),
                                 "pruned_below": total.ngrams.floor}
    seconds = time.perf_counter() - start_time
    by_source = Counter(s for row in table.rows.values() for s in row.sources.split("|"))
    report.update(
        lines=total.lines, chars=total.chars, tokens=total.tokens,
        occurrences=total.occurrences, candidates=len(table), by_source=dict(by_source),
        n_process=n_process, scan_seconds=round(scan_seconds, 3), seconds=round(seconds, 3),
        lines_per_second=round(total.lines / max(scan_seconds, 1e-9), 1),
    )
    return table, report
