"""Pieces shared by the corpus readers: the error type, conversion counts and the way
gold spans are written onto a Doc.

Gold-annotation policy (the same for every format):

- ``doc.spans[spans_key]`` holds *every* gold mention, nested ones included, sorted by
  (start, end, label). Exact duplicates (same start, end and label) are kept once and
  counted in ``ConversionStats.duplicates``.
- ``doc.ents`` holds the subset that does not overlap, chosen by
  ``spacy.util.filter_spans``: the longest span wins, ties go to the span that starts
  first. So for nested mentions the *outer* mention is the entity; the inner one stays
  in ``doc.spans`` only and is counted in ``ConversionStats.ents_dropped``.
"""
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc, Span
from spacy.util import filter_spans

DEFAULT_SPANS_KEY = "sc"


class CorpusFormatError(ValueError):
    """Malformed or inconsistent corpus input.

    The message always starts with the location: ``path:line`` and, where the format
    has one, the document key, so that the offending line can be opened directly.

    path (Union[str, Path]): The file being read.
    message (str): What is wrong.
    line (Optional[int]): 1-based line number in the file, if known.
    doc_key (Optional[str]): Document id (SciERC ``doc_key``, BRAT annotation id, ...).
    """

    def __init__(
        self,
        path: Union[str, Path],
        message: str,
        *,
        line: Optional[int] = None,
        doc_key: Optional[str] = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.doc_key = doc_key
        self.detail = message
        where = self.path if line is None else f"{self.path}:{line}"
        if doc_key is not None:
            where += f" (doc {doc_key})"
        super().__init__(f"{where}: {message}")


@dataclass
class ConversionStats:
    """Counts gathered while converting, printed by ``sciner convert``.

    Readers fill in what only they can see (repairs, misaligned offsets, skipped
    standoff lines, ...); ``count_docs`` fills in the rest from the Docs produced.
    """

    docs: int = 0
    sentences: int = 0
    # BRAT docs come without sentence boundaries (tokenizer only): counted here.
    unsplit_docs: int = 0
    tokens: int = 0
    entities: int = 0
    nested_pairs: int = 0
    ents_dropped: int = 0
    duplicates: int = 0
    repairs: int = 0
    misaligned: int = 0
    discontinuous: int = 0
    # CoNLL: the tag scheme used (detected or chosen) per file.
    schemes: Dict[str, str] = field(default_factory=dict)
    labels: Counter = field(default_factory=Counter)
    ignored_lines: Counter = field(default_factory=Counter)
    # Human-readable notes on each repair / expansion: "path:line: what happened".
    notes: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, object]:
        """Plain-dict view (for JSON output and tests)."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "notes"}
        data["labels"] = dict(self.labels)
        data["ignored_lines"] = dict(self.ignored_lines)
        data["schemes"] = dict(self.schemes)
        return data


def set_gold_spans(
    doc: Doc,
    spans: Iterable[Span],
    spans_key: str,
    stats: Optional[ConversionStats] = None,
) -> Doc:
    """Write gold mentions to ``doc.spans[spans_key]`` (all) and ``doc.ents`` (the
    non-overlapping subset chosen by ``filter_spans``, longest first).

    doc (Doc): The document, tokenized, without entities.
    spans (Iterable[Span]): Gold mentions on `doc`, in any order, overlaps allowed.
    spans_key (str): Key of the span group.
    stats (Optional[ConversionStats]): Receives the number of exact duplicates removed.
    RETURNS (Doc): The same doc.
    """
    unique: Dict[Tuple[int, int, str], Span] = {}
    for span in spans:
        key = (span.start, span.end, span.label_)
        if key in unique and stats is not None:
            stats.duplicates += 1
        unique.setdefault(key, span)
    ordered = [unique[k] for k in sorted(unique)]
    doc.spans[spans_key] = ordered
    doc.ents = filter_spans(ordered)
    return doc


def align_char_span(
    doc: Doc, start: int, end: int, label: str, path: Union[str, Path], line_no: int, what: str,
    stats: ConversionStats,
) -> Span:
    """The Span for characters start..end of `doc`, expanded to the tokens it touches when
    the offsets do not fall on token boundaries (counted in ``stats.misaligned`` and noted).

    what (str): Names the mention in messages (a BRAT id, "span 3").
    RAISES (CorpusFormatError): The characters cover no token (whitespace only).
    """
    span = doc.char_span(start, end, label=label)
    if span is not None:
        return span
    span = doc.char_span(start, end, label=label, alignment_mode="expand")
    if span is None or not span.text.strip():
        raise CorpusFormatError(path, f"{what}: characters {start}..{end} cover no token", line=line_no)
    stats.misaligned += 1
    stats.notes.append(f"{path}:{line_no}: {what} {doc.text[start:end]!r} expanded to {span.text!r}")
    return span


def count_nested_pairs(spans: Iterable[Span]) -> int:
    """Number of ordered (outer, inner) pairs where `inner` lies inside `outer` and the
    two differ in extent. Same-extent spans with different labels do not count."""
    bounds = sorted({(s.start, s.end) for s in spans})
    # Quadratic, but a doc holds tens of mentions at most.
    pairs = 0
    for start, end in bounds:
        for inner_start, inner_end in bounds:
            if start <= inner_start and inner_end <= end and (start, end) != (inner_start, inner_end):
                pairs += 1
    return pairs


def count_docs(
    docs: Iterable[Doc], spans_key: str, stats: ConversionStats
) -> Iterator[Doc]:
    """Pass `docs` through, adding their counts to `stats`.

    Sentences are counted from the docs' sentence boundaries; docs without any (BRAT)
    are counted in ``unsplit_docs`` instead.
    """
    for doc in docs:
        spans = doc.spans[spans_key] if spans_key in doc.spans else []
        stats.docs += 1
        stats.tokens += len(doc)
        if doc.has_annotation("SENT_START"):
            stats.sentences += sum(1 for _ in doc.sents)
        else:
            stats.unsplit_docs += 1
        stats.entities += len(spans)
        stats.labels.update(span.label_ for span in spans)
        stats.nested_pairs += count_nested_pairs(spans)
        stats.ents_dropped += len(spans) - len(doc.ents)
        yield doc


def warn_summary(stats: ConversionStats, path: Union[str, Path], what: str, count: int) -> None:
    """Emit one warning for lossy fixes made while reading `path`, so that a training
    run (which does not print conversion counts) still surfaces them."""
    if count:
        first = "; ".join(stats.notes[:3])
        warnings.warn(f"{path}: {count} {what} (first: {first})", stacklevel=3)


def read_text(path: Union[str, Path], newline: Optional[str] = None) -> str:
    """The whole of a UTF-8 text file. Raises CorpusFormatError (naming the file, and the
    line of the first bad byte) if it is missing, a directory, unreadable or not UTF-8.

    newline (Optional[str]): As for ``open``: None translates line ends, "" keeps them
        (character offsets into the file then stay exact, as BRAT needs).
    """
    path = Path(path)
    if path.is_dir():
        raise CorpusFormatError(path, "is a directory, expected a file")
    if not path.is_file():
        raise CorpusFormatError(path, "file not found")
    try:
        with path.open(encoding="utf8", newline=newline) as file_:
            return file_.read()
    except UnicodeDecodeError as err:
        line = text_line_of_offset(path.read_bytes(), err.start)
        raise CorpusFormatError(path, f"not valid UTF-8 ({err.reason} at byte {err.start})", line=line) from None
    except OSError as err:
        raise CorpusFormatError(path, f"cannot read it ({err.strerror or err})") from None


def read_lines(path: Union[str, Path]) -> List[str]:
    """The lines of a UTF-8 text file, without line ends. Raises CorpusFormatError if
    the file is missing, not UTF-8, or contains nothing but whitespace."""
    text = read_text(path)
    if not text.strip():
        raise CorpusFormatError(path, "empty file (no data)")
    # Not str.splitlines(): it also breaks at U+2028, form feeds etc., which would
    # shift the line numbers that errors report.
    return [line.rstrip("\r") for line in text.split("\n")]


def text_line_of_offset(data: Union[str, bytes], offset: int) -> int:
    """1-based line number of a character (or byte) offset."""
    newline = b"\n" if isinstance(data, bytes) else "\n"
    return data.count(newline, 0, offset) + 1
