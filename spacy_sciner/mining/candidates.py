"""The candidate table and the annotation of tokenized documents with candidates.

The table is what ``sciner mine`` writes: one row per candidate text with its source tags,
corpus frequency and phrase-quality score, sorted by frequency (most frequent first) so that
"keep the top l% most frequent candidates" (Tri-Train §4.4.6) is a prefix of the file.
File format: UTF-8 TSV with the header ``text  sources  freq  quality``; ``quality`` is
empty when the candidate was not frequent enough to be scored.
"""
import bisect
import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .acronyms import find_acronym_candidates
from .dictionary import Match, TermDictionary, is_acronym, resolve_overlaps
from ..outputs import atomic_outputs
from .text import sentence_starts, tokenize

SOURCES = ("dict", "pattern", "phrase")
HEADER = ("text", "sources", "freq", "quality")


def candidate_key(words: Sequence[str]) -> str:
    """Table key of a candidate: its tokens joined by spaces, lower-cased unless acronym."""
    text = " ".join(words)
    return text if is_acronym(text) else text.lower()


def join_sources(*groups: Iterable[str]) -> str:
    """Merge source tags into the sorted "a|b" form used in span labels and the table."""
    merged: Set[str] = set()
    for group in groups:
        for item in group:
            merged.update(s for s in item.split("|") if s)
    return "|".join(sorted(merged))


@dataclass
class Candidate:
    text: str
    sources: str
    freq: int
    quality: Optional[float] = None


class CandidateTable:
    """Mined candidates: text, source(s), corpus frequency, quality score."""

    def __init__(self, rows: Iterable[Candidate] = ()):
        self.rows: Dict[str, Candidate] = {}
        for row in rows:
            self.add(row.text, row.sources, row.freq, row.quality)

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, text: str, sources: str, freq: int = 1, quality: Optional[float] = None):
        """Add occurrences of a candidate, merging source tags and keeping the best score."""
        row = self.rows.get(text)
        if row is None:
            self.rows[text] = Candidate(text, join_sources([sources]), freq, quality)
            return
        row.sources = join_sources([row.sources, sources])
        row.freq += freq
        if quality is not None:
            row.quality = quality if row.quality is None else max(row.quality, quality)

    def sorted(self) -> List[Candidate]:
        """Rows by decreasing frequency, ties by text."""
        return sorted(self.rows.values(), key=lambda r: (-r.freq, r.text))

    def top_percent(self, percent: float) -> "CandidateTable":
        """The ``percent`` % most frequent candidates (at least one if any)."""
        if not 0 < percent <= 100:
            raise ValueError(f"top_percent must be in (0, 100], got {percent}")
        rows = self.sorted()
        keep = max(1, math.ceil(len(rows) * percent / 100)) if rows else 0
        return CandidateTable(rows[:keep])

    def to_dictionary(
        self, case: str = "smart", sources: Sequence[str] = SOURCES, min_quality: float = 0.0
    ) -> TermDictionary:
        """A TermDictionary of the rows with the wanted sources.

        Phrase-only rows below ``min_quality`` are left out; dictionary and pattern rows
        are kept whatever their score.
        """
        dictionary = TermDictionary(case=case)
        for row in self.rows.values():
            tags = [s for s in row.sources.split("|") if s in sources]
            if tags == ["phrase"] and (row.quality or 0.0) < min_quality:
                continue
            for tag in tags:
                # Phrase rows are lower-cased n-grams, so they match in any case.
                dictionary.add(row.text, tag, case_sensitive=False if tag == "phrase" else None)
        return dictionary

    def write(self, path: str) -> None:
        """Write the TSV atomically (temporary file, then os.replace)."""
        with atomic_outputs(path) as (tmp,), open(tmp, "w", encoding="utf8") as out:
            out.write("\t".join(HEADER) + "\n")
            for row in self.sorted():
                quality = "" if row.quality is None else f"{row.quality:.4f}"
                out.write(f"{row.text}\t{row.sources}\t{row.freq}\t{quality}\n")

    @classmethod
    def read(cls, path: str) -> "CandidateTable":
        """Read a table written by ``write``; a bad row raises naming file and line."""
        table = cls()
        with open(path, encoding="utf8") as handle:
            header = handle.readline().rstrip("\n").split("\t")
            if tuple(header) != HEADER:
                raise ValueError(f"{path}:1: expected header {HEADER}, got {tuple(header)}")
            for line_no, line in enumerate(handle, start=2):
                fields = line.rstrip("\n").split("\t")
                try:
                    text, sources, freq, quality = fields
                    table.add(text, sources, int(freq), float(quality) if quality else None)
                except ValueError as err:
                    raise ValueError(f"{path}:{line_no}: bad candidate row {line!r}: {err}")
        return table


def annotate(
    sentences: Sequence[Sequence[str]],
    dictionary: Optional[TermDictionary],
    acronyms: bool = True,
    overlap: str = "longest",
    dict_matches: Optional[Sequence[Sequence[Match]]] = None,
) -> List[List[Match]]:
    """Candidate spans of a document from the dictionary and the acronym patterns.

    sentences (Sequence[Sequence[str]]): Token lists of one document.
    dictionary (Optional[TermDictionary]): Terms with sources (dict / pattern / phrase).
    acronyms (bool): Add acronym definitions and their uses in the document ("pattern").
    overlap (str): "longest" or "all" (see ``resolve_overlaps``), applied after the
        sources of the same span are merged.
    dict_matches (Optional[Sequence[Sequence[Match]]]): Dictionary matches per sentence,
        already computed (the miner's fast path); replaces the dictionary lookup.
    RETURNS (List[List[Match]]): Per sentence, (start, end, "source|source") spans.
    """
    per_sentence: List[Dict[Tuple[int, int], List[str]]] = [{} for _ in sentences]
    if dict_matches is None and dictionary is not None and len(dictionary):
        dict_matches = [dictionary.match(words, overlap="all") for words in sentences]
    for s, matches in enumerate(dict_matches or []):
        for start, end, sources in matches:
            per_sentence[s].setdefault((start, end), []).append(sources)
    if acronyms:
        for s, start, end in find_acronym_candidates(sentences)[0]:
            per_sentence[s].setdefault((start, end), []).append("pattern")
    result = []
    for spans in per_sentence:
        matches = [(s, e, join_sources(tags)) for (s, e), tags in spans.items()]
        result.append(resolve_overlaps(matches, overlap))
    return result


def tokenize_documents(
    docs: Sequence[Sequence[str]],
    tokenizer: str = "regex",
    split: bool = True,
    dictionary: Optional[TermDictionary] = None,
) -> List[Tuple[List[List[str]], List[List[Match]], List[int]]]:
    """Tokenize documents into sentences and match the dictionary over all their lines.

    The dictionary runs once over the whole batch of lines (``TermDictionary.match_many``);
    its matches are then assigned to sentences. A match across a sentence split (rare:
    "e.g. X") is not a candidate.

    docs (Sequence[Sequence[str]]): Documents as lists of lines.
    tokenizer (str): "regex" or "whitespace".
    split (bool): Split lines into sentences (``text.sentence_starts``).
    dictionary (Optional[TermDictionary]): Terms to match.
    RETURNS (List[Tuple]): Per document: its sentences (token lists), the dictionary matches
        per sentence (sentence token offsets), and the index of the line of each sentence.
    """
    tokens = [[tokenize(line, tokenizer) for line in lines] for lines in docs]
    flat = [words for doc in tokens for words in doc]
    use_dict = dictionary is not None and len(dictionary) > 0
    line_matches = iter(dictionary.match_many(flat, clean=True) if use_dict else [[] for _ in flat])
    result = []
    for doc in tokens:
        sentences: List[List[str]] = []
        matches: List[List[Match]] = []
        line_of: List[int] = []
        for k, words in enumerate(doc):
            found = next(line_matches)
            if not words:
                continue
            starts = sentence_starts(words) if split else [0]
            ends = starts[1:] + [len(words)]
            per_sentence: List[List[Match]] = [[] for _ in starts]
            for start, end, sources in found:
                i = bisect.bisect_right(starts, start) - 1
                if end <= ends[i]:
                    per_sentence[i].append((start - starts[i], end - starts[i], sources))
            for i, (a, b) in enumerate(zip(starts, ends)):
                sentences.append(words[a:b])
                matches.append(per_sentence[i])
                line_of.append(k)
        result.append((sentences, matches, line_of))
    return result
