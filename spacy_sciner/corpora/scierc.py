"""SciERC JSON lines (the "processed" format of SciIE / DyGIE / PURE) to spaCy Docs.

One abstract per line::

    {"doc_key": "P05-3001", "sentences": [["English", "is", ...], ...],
     "ner": [[[0, 0, "Material"], [17, 20, "OtherScientificTerm"]], ...],
     "relations": [...], "clusters": [...]}

``ner`` has one list per sentence of ``[start, end, label]`` with **document-level**
token offsets and an **inclusive** end. Nested mentions are kept (all in
``doc.spans``; see ``common`` for which ones become ``doc.ents``). ``relations`` and
``clusters`` are not converted. PTB escapes in the tokens (``-LRB-``, ``-RRB-``,
``-LSB-``, ``-RSB-``, ``-LCB-``, ``-RCB-``, ````` ``, ``''``) are turned back into the
characters they stand for, so that a tokenizer or transformer sees ordinary text.

Each Doc carries ``doc.user_data["doc_key"]`` (and ``"sent_index"`` for sentence docs),
which ``DocBin(store_user_data=True)`` keeps.
"""
import json
from pathlib import Path
from typing import Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from .common import DEFAULT_SPANS_KEY, ConversionStats, CorpusFormatError, read_lines, set_gold_spans

PTB_UNESCAPE = {
    "-LRB-": "(",
    "-RRB-": ")",
    "-LSB-": "[",
    "-RSB-": "]",
    "-LCB-": "{",
    "-RCB-": "}",
    "``": '"',
    "''": '"',
}
DOC_UNITS = ("sentence", "document")


def unescape_ptb(token: str) -> str:
    """The character a PTB escape stands for, or the token unchanged."""
    return PTB_UNESCAPE.get(token, token)


def read_scierc(
    path: Union[str, Path],
    vocab: Vocab,
    *,
    doc_unit: str = "sentence",
    spans_key: str = DEFAULT_SPANS_KEY,
    stats: Optional[ConversionStats] = None,
) -> Iterator[Doc]:
    """Read a SciERC JSON-lines file.

    path (Union[str, Path]): The ``.json`` file (one abstract per line).
    vocab (Vocab): Vocab for the Docs (``nlp.vocab``).
    doc_unit (str): "sentence" (one Doc per sentence, default) or "document" (one Doc
        per abstract). Sentence starts are set either way.
    spans_key (str): Span group receiving all gold mentions.
    stats (Optional[ConversionStats]): Receives duplicate counts.
    YIELDS (Doc): Docs with gold ``doc.spans[spans_key]`` and ``doc.ents``.
    RAISES (CorpusFormatError): Invalid JSON, missing/ill-typed fields, offsets outside
        their sentence or with end < start, an empty file. The message names the file,
        line and doc_key.
    """
    if doc_unit not in DOC_UNITS:
        raise ValueError(f"doc_unit must be one of {DOC_UNITS}, got {doc_unit!r}")
    path = Path(path)
    for line_no, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusFormatError(path, f"invalid JSON: {err.msg} (column {err.colno})", line=line_no) from None
        sentences, ner, doc_key = _validate(record, path, line_no)
        if doc_unit == "document":
            yield _document_doc(vocab, sentences, ner, doc_key, spans_key, stats)
        else:
            offset = 0
            for i, (words, mentions) in enumerate(zip(sentences, ner)):
                local = [(m[0] - offset, m[1] - offset, m[2]) for m in mentions]
                doc, spans = _make_doc(vocab, words, local, sent_starts=[True] + [False] * (len(words) - 1))
                doc.user_data["doc_key"] = doc_key
                doc.user_data["sent_index"] = i
                set_gold_spans(doc, spans, spans_key, stats)
                offset += len(words)
                yield doc


def _validate(record: object, path: Path, line_no: int):
    """Check one abstract's structure and offsets; return (sentences, ner, doc_key)."""
    if not isinstance(record, dict):
        raise CorpusFormatError(path, "expected a JSON object per line", line=line_no)
    doc_key = str(record.get("doc_key", f"line{line_no}"))

    def fail(message: str) -> CorpusFormatError:
        return CorpusFormatError(path, message, line=line_no, doc_key=doc_key)

    sentences = record.get("sentences")
    if not isinstance(sentences, list) or not sentences:
        raise fail("'sentences' must be a non-empty list of token lists")
    for i, words in enumerate(sentences):
        if not isinstance(words, list) or not words or not all(isinstance(w, str) and w for w in words):
            raise fail(f"sentence {i} must be a non-empty list of non-empty strings")
    ner = record.get("ner", [[] for _ in sentences])
    if not isinstance(ner, list) or len(ner) != len(sentences):
        raise fail(f"'ner' must be a list with one entry per sentence ({len(sentences)})")
    offset = 0
    for i, (words, mentions) in enumerate(zip(sentences, ner)):
        end_of_sentence = offset + len(words) - 1
        if not isinstance(mentions, list):
            raise fail(f"'ner' entry of sentence {i} must be a list")
        for mention in mentions:
            if (
                not isinstance(mention, list)
                or len(mention) < 3
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in mention[:2])
                or not isinstance(mention[2], str)
                or not mention[2]
            ):
                raise fail(f"sentence {i}: mention {mention!r} is not [start, end, label]")
            start, end = mention[0], mention[1]
            if end < start:
                raise fail(f"sentence {i}: mention {mention!r} has end < start")
            if start < offset or end > end_of_sentence:
                raise fail(
                    f"sentence {i}: mention {mention!r} lies outside the sentence's "
                    f"tokens {offset}..{end_of_sentence} (document-level, end inclusive)"
                )
        offset += len(words)
    return sentences, ner, doc_key


def _make_doc(vocab: Vocab, words: List[str], mentions, sent_starts=None) -> Tuple[Doc, List[Span]]:
    """A Doc over the unescaped words, and the inclusive-end `mentions` as its Spans."""
    words = [unescape_ptb(w) for w in words]
    spaces = [True] * (len(words) - 1) + [False]
    doc = Doc(vocab, words=words, spaces=spaces, sent_starts=sent_starts)
    return doc, [Span(doc, m[0], m[1] + 1, label=m[2]) for m in mentions]


def _document_doc(vocab, sentences, ner, doc_key, spans_key, stats) -> Doc:
    words = [w for sentence in sentences for w in sentence]
    sent_starts = [j == 0 for sentence in sentences for j in range(len(sentence))]
    mentions = [m for sentence_mentions in ner for m in sentence_mentions]
    doc, spans = _make_doc(vocab, words, mentions, sent_starts=sent_starts)
    doc.user_data["doc_key"] = doc_key
    return set_gold_spans(doc, spans, spans_key, stats)
