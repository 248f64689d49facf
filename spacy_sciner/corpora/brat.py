"""BRAT standoff (``.txt`` + ``.ann``, the native BioNLP shared-task format) to spaCy Docs,
one Doc per document (``doc_unit="document"``) or one Doc per non-empty line of the
``.txt`` (``doc_unit="line"``, for one-sentence-per-line files; a mention that crosses a
line break is then an error naming the file and line).

Entity lines (``T1<TAB>Type start end[;start end...]<TAB>text``) become gold mentions;
events, relations, attributes, modifications, normalizations and notes (lines starting
with ``E``, ``R``, ``A``, ``M``, ``N``, ``#``, ``*``) are not converted and are counted in
``ConversionStats.ignored_lines``. Any other line is an error.

Checks: offsets must lie inside the ``.txt`` with start < end, and the text field must
equal the ``.txt`` substring (fragments joined by one space, as brat writes them;
whitespace runs are compared as single spaces) -- otherwise CorpusFormatError names
the file, line and annotation id. The ``.txt`` is read without newline translation so
that ``\\r\\n`` files keep their character offsets.

Tokenization: the given nlp's tokenizer. A mention whose offsets do not fall on token
boundaries is expanded to the tokens it touches (``alignment_mode="expand"``), counted
in ``ConversionStats.misaligned``, listed in ``ConversionStats.notes`` and summarised in
one warning per directory/file.

Discontinuous mentions (``T3<TAB>Cancer 0 6;19 25<TAB>breast cancer``) -- the
``discontinuous`` option, all counted in ``ConversionStats.discontinuous``:

- "merge" (default): one span from the first fragment's start to the last fragment's
  end ("breast and ovarian cancer"). It keeps one mention per annotation with the right
  extent for span classifiers; the words in the gap are included.
- "fragments": one span per fragment, each with the mention's label ("breast",
  "cancer").
- "error": raise CorpusFormatError.
"""
import re
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from .common import (
    DEFAULT_SPANS_KEY, ConversionStats, CorpusFormatError, align_char_span, read_text, set_gold_spans,
    warn_summary,
)

DISCONTINUOUS = ("merge", "fragments", "error")
DOC_UNITS = ("document", "line")
IGNORED_PREFIXES = {
    "E": "events",
    "R": "relations",
    "A": "attributes",
    "M": "modifications",
    "N": "normalizations",
    "#": "notes",
    "*": "equivalences",
}
_WHITESPACE = re.compile(r"\s+")


def read_brat(
    path: Union[str, Path],
    nlp_or_tokenizer: Union[Language, Callable[[str], Doc]],
    *,
    spans_key: str = DEFAULT_SPANS_KEY,
    discontinuous: str = "merge",
    doc_unit: str = "document",
    stats: Optional[ConversionStats] = None,
) -> Iterator[Doc]:
    """Read BRAT standoff documents.

    path (Union[str, Path]): A ``.txt`` or ``.ann`` file (its partner is found by name)
        or a directory searched recursively for ``*.txt`` files, each with an ``.ann``.
    nlp_or_tokenizer (Union[Language, Callable[[str], Doc]]): An nlp object (its
        tokenizer is used, no other component runs) or a tokenizer.
    spans_key (str): Span group receiving all gold mentions.
    discontinuous (str): "merge" (default), "fragments" or "error"; see module doc.
    doc_unit (str): "document" (default) or "line" (one Doc per non-empty text line).
    stats (Optional[ConversionStats]): Receives misaligned/discontinuous/ignored counts.
    YIELDS (Doc): One Doc per document (or line), ``doc.user_data["doc_key"]`` = file
        stem relative to `path` (plus ``#L<line>`` for line docs).
    RAISES (CorpusFormatError): Missing partner file, malformed line, bad offsets, text
        mismatch, empty ``.txt``, directory without ``.txt`` files.
    """
    if discontinuous not in DISCONTINUOUS:
        raise ValueError(f"discontinuous must be one of {DISCONTINUOUS}, got {discontinuous!r}")
    if doc_unit not in DOC_UNITS:
        raise ValueError(f"doc_unit must be one of {DOC_UNITS}, got {doc_unit!r}")
    tokenizer = getattr(nlp_or_tokenizer, "tokenizer", nlp_or_tokenizer)
    stats = stats if stats is not None else ConversionStats()
    misaligned_before = stats.misaligned
    path = Path(path)
    for txt_path, root in _find_documents(path):
        text = _read_text(txt_path)
        ann_path = txt_path.with_suffix(".ann")
        if not ann_path.is_file():
            raise CorpusFormatError(txt_path, f"no annotation file {ann_path.name} beside it")
        mentions = _mentions(ann_path, text, stats, discontinuous)
        doc_key = txt_path.relative_to(root).with_suffix("").as_posix()
        units = [(0, text, doc_key)] if doc_unit == "document" else _text_lines(text, doc_key)
        for offset, unit_text, key in units:
            doc = tokenizer(unit_text)
            spans = _unit_spans(doc, mentions, offset, len(unit_text), ann_path, stats)
            doc.user_data["doc_key"] = key
            yield set_gold_spans(doc, spans, spans_key, stats)
    warn_summary(stats, path, "mentions expanded to token boundaries", stats.misaligned - misaligned_before)


def _mentions(ann_path: Path, text: str, stats: ConversionStats, discontinuous: str) -> List[Tuple]:
    """The ``.ann`` file's entity mentions as (start, end, label, line_no, ann_id), one per
    fragment kept under the ``discontinuous`` rule."""
    mentions = []
    for line_no, ann_id, label, fragments in _read_entities(ann_path, text, stats):
        if len(fragments) > 1:
            stats.discontinuous += 1
            if discontinuous == "error":
                raise CorpusFormatError(
                    ann_path,
                    f"{ann_id} is discontinuous {fragments}; choose discontinuous='merge' or 'fragments'",
                    line=line_no,
                )
            if discontinuous == "merge":
                fragments = [(fragments[0][0], fragments[-1][1])]
        mentions.extend((start, end, label, line_no, ann_id) for start, end in fragments)
    return mentions


def _unit_spans(doc: Doc, mentions: List[Tuple], offset: int, length: int, ann_path: Path,
                stats: ConversionStats) -> List:
    """The mentions inside one doc unit (``length`` characters from ``offset`` of the file),
    aligned to its tokens; a mention across the unit's edge is an error."""
    spans = []
    unit_end = offset + length
    for start, end, label, line_no, ann_id in mentions:
        if start >= unit_end or end <= offset:
            continue
        if start < offset or end > unit_end:
            raise CorpusFormatError(
                ann_path, f"{ann_id}: mention {start}..{end} crosses a line break (doc_unit='line')", line=line_no
            )
        spans.append(align_char_span(doc, start - offset, end - offset, label, ann_path, line_no, ann_id, stats))
    return spans


def _text_lines(text: str, doc_key: str) -> List[Tuple[int, str, str]]:
    """(character offset, line text, doc key) of each non-empty line of `text`."""
    units, offset = [], 0
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.rstrip("\r")
        if stripped.strip():
            units.append((offset, stripped, f"{doc_key}#L{number}"))
        offset += len(line) + 1
    return units


def _find_documents(path: Path) -> List[Tuple[Path, Path]]:
    """(txt path, root for the doc_key) of each document under `path`."""
    if path.is_dir():
        found = sorted(path.rglob("*.txt"))
        if not found:
            raise CorpusFormatError(path, "directory holds no .txt files (expected BRAT .txt/.ann pairs)")
        return [(txt, path) for txt in found]
    if path.suffix in (".txt", ".ann"):
        txt = path.with_suffix(".txt")
        if not txt.is_file():
            raise CorpusFormatError(path, f"no text file {txt.name} beside it")
        return [(txt, txt.parent)]
    raise CorpusFormatError(path, "expected a directory, a .txt or an .ann file")


def _read_text(path: Path) -> str:
    text = read_text(path, newline="")
    if not text.strip():
        raise CorpusFormatError(path, "empty text file")
    return text


def _read_entities(
    ann_path: Path, text: str, stats: ConversionStats
) -> Iterator[Tuple[int, str, str, List[Tuple[int, int]]]]:
    """(line, id, label, fragments) of each text-bound annotation, checked against `text`."""
    lines = read_text(ann_path, newline="").split("\n")
    for line_no, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        if line[0] in IGNORED_PREFIXES:
            stats.ignored_lines[IGNORED_PREFIXES[line[0]]] += 1
            continue
        fields = line.split("\t", 2)
        if line[0] != "T" or len(fields) != 3:
            raise CorpusFormatError(
                ann_path, f"malformed line {line!r}: expected 'T<id><TAB>Type start end<TAB>text'", line=line_no
            )
        ann_id, type_and_offsets, ann_text = fields
        label, _, offsets = type_and_offsets.partition(" ")
        fragments = _parse_offsets(offsets, ann_path, line_no, ann_id)
        if not label or not fragments:
            raise CorpusFormatError(ann_path, f"{ann_id}: no type or no offsets in {type_and_offsets!r}", line=line_no)
        for start, end in fragments:
            if not 0 <= start < end <= len(text):
                raise CorpusFormatError(
                    ann_path,
                    f"{ann_id}: offsets {start} {end} outside the text (0..{len(text)}) or end <= start",
                    line=line_no,
                )
        expected = " ".join(text[s:e] for s, e in fragments)
        if expected != ann_text and _WHITESPACE.sub(" ", expected) != _WHITESPACE.sub(" ", ann_text):
            raise CorpusFormatError(
                ann_path,
                f"{ann_id}: annotated text {ann_text!r} differs from the .txt at {offsets}: {expected!r}",
                line=line_no,
            )
        yield line_no, ann_id, label, fragments


def _parse_offsets(offsets: str, ann_path: Path, line_no: int, ann_id: str) -> List[Tuple[int, int]]:
    fragments = []
    for fragment in offsets.split(";"):
        parts = fragment.split()
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise CorpusFormatError(ann_path, f"{ann_id}: bad offsets {offsets!r} (expected 'start end[;start end]')", line=line_no)
        fragments.append((int(parts[0]), int(parts[1])))
    return sorted(fragments)
