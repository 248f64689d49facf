"""Character-offset JSON lines (Prodigy, spaCy's ``spans`` JSONL, doccano) to spaCy Docs.

One text per line, its mentions as character offsets (end exclusive)::

    {"text": "BRCA1 mutations cause breast cancer.",
     "spans": [{"start": 0, "end": 5, "label": "Gene"}, {"start": 22, "end": 35, "label": "Disease"}]}

The mentions are read from the first of these keys a record has:

- ``spans``: dicts with ``start``, ``end``, ``label`` (Prodigy's ``ner.manual`` and
  ``spans.manual`` output, ``prodigy db-out``);
- ``entities``: dicts with ``start_offset``, ``end_offset``, ``label`` (doccano 1.x) or
  ``start``/``end``/``label``;
- ``label``: ``[start, end, label]`` lists (doccano's older export).

A record without any of them has no mentions (all its spans are negatives). Tokens:
a record's own ``tokens`` (Prodigy's: ``text`` and ``ws``, the whitespace after the token)
when present, so that the words the annotator saw are kept; otherwise the given tokenizer.
A mention whose offsets do not fall on token boundaries is expanded to the tokens it
touches, counted in ``ConversionStats.misaligned`` and noted. Records answered ``reject``
or ``ignore`` (Prodigy's ``answer``) are skipped and counted in ``ignored_lines``.

Bad input (invalid JSON, no ``text``, offsets outside the text or with end <= start, a
mention without a label, tokens that do not spell the text) is an error naming the file
and line. Each Doc carries ``doc.user_data["doc_key"]``: the record's ``id`` or
``meta.id``, else ``line<N>``.
"""
import json
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from .common import (
    DEFAULT_SPANS_KEY, ConversionStats, CorpusFormatError, align_char_span, read_lines, set_gold_spans,
    warn_summary,
)

# Prodigy answers whose records are skipped (counted in ignored_lines as "answer=reject", ...).
SKIPPED_ANSWERS = ("reject", "ignore")


def read_jsonl(
    path: Union[str, Path],
    nlp_or_tokenizer: Union[Language, Callable[[str], Doc]],
    *,
    spans_key: str = DEFAULT_SPANS_KEY,
    stats: Optional[ConversionStats] = None,
) -> Iterator[Doc]:
    """Read a character-offset JSON-lines file (one Doc per record).

    path (Union[str, Path]): The ``.jsonl`` file.
    nlp_or_tokenizer (Union[Language, Callable[[str], Doc]]): Tokenizes records that do
        not bring their own ``tokens``.
    spans_key (str): Span group receiving all gold mentions.
    stats (Optional[ConversionStats]): Receives misaligned, duplicate and skipped counts.
    YIELDS (Doc): Docs with gold ``doc.spans[spans_key]`` and ``doc.ents``.
    RAISES (CorpusFormatError): See the module docstring; the message names file and line.
    """
    tokenizer = getattr(nlp_or_tokenizer, "tokenizer", nlp_or_tokenizer)
    vocab = getattr(nlp_or_tokenizer, "vocab", None) or tokenizer.vocab
    stats = stats if stats is not None else ConversionStats()
    misaligned_before = stats.misaligned
    path = Path(path)
    for line_no, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        record = _parse(line, path, line_no)
        if record.get("answer") in SKIPPED_ANSWERS:
            stats.ignored_lines[f"answer={record['answer']}"] += 1
            continue
        text = record["text"]
        doc = _tokens_doc(record, text, vocab, path, line_no) or tokenizer(text)
        spans = [
            align_char_span(doc, start, end, label, path, line_no, f"span {i}", stats)
            for i, (start, end, label) in enumerate(_mentions(record, len(text), path, line_no))
        ]
        meta = record.get("meta") if isinstance(record.get("meta"), dict) else {}
        doc.user_data["doc_key"] = str(record.get("id", meta.get("id", f"line{line_no}")))
        yield set_gold_spans(doc, spans, spans_key, stats)
    warn_summary(stats, path, "mentions expanded to token boundaries", stats.misaligned - misaligned_before)


def _parse(line: str, path: Path, line_no: int) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise CorpusFormatError(path, f"invalid JSON: {err.msg} (column {err.colno})", line=line_no) from None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        raise CorpusFormatError(path, "expected a JSON object with a string 'text'", line=line_no)
    if not record["text"].strip():
        raise CorpusFormatError(path, "empty 'text'", line=line_no)
    return record


def _mentions(record: dict, length: int, path: Path, line_no: int) -> List[Tuple[int, int, str]]:
    """(start, end, label) of each mention, from the first mention key the record has."""
    key = next((k for k in ("spans", "entities", "label") if k in record), None)
    if key is None:
        return []
    items = record[key]
    if not isinstance(items, list):
        raise CorpusFormatError(path, f"'{key}' must be a list", line=line_no)
    mentions = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            start = item.get("start", item.get("start_offset"))
            end = item.get("end", item.get("end_offset"))
            label = item.get("label")
        elif isinstance(item, (list, tuple)) and len(item) == 3:
            start, end, label = item
        else:
            start = end = label = None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)):
            raise CorpusFormatError(path, f"{key}[{i}] {item!r}: expected integer start and end offsets", line=line_no)
        if not isinstance(label, str) or not label.strip():
            raise CorpusFormatError(path, f"{key}[{i}] {item!r}: no label", line=line_no)
        if not 0 <= start < end <= length:
            raise CorpusFormatError(
                path, f"{key}[{i}] {item!r}: offsets outside the text (0..{length}) or end <= start", line=line_no
            )
        mentions.append((start, end, label))
    return mentions


def _tokens_doc(record: dict, text: str, vocab, path: Path, line_no: int) -> Optional[Doc]:
    """A Doc over the record's own ``tokens`` (Prodigy's), or None when it has none."""
    tokens = record.get("tokens")
    if not tokens:
        return None
    if not isinstance(tokens, list) or not all(isinstance(t, dict) and isinstance(t.get("text"), str) for t in tokens):
        raise CorpusFormatError(path, "'tokens' must be a list of objects with a string 'text'", line=line_no)
    words = [t["text"] for t in tokens]
    spaces = [bool(t.get("ws", True)) for t in tokens]
    spaces[-1] = spaces[-1] and text.endswith(" ")
    doc = Doc(vocab, words=words, spaces=spaces)
    if doc.text != text:
        raise CorpusFormatError(
            path, f"the tokens spell {doc.text[:60]!r}, not the record's text {text[:60]!r}", line=line_no
        )
    return doc
