"""DocBins of your own (``spacy convert``, ``prodigy data-to-spacy``, an annotation tool's
export) read as a source format, like the text formats: the gold mentions of each doc are
taken from one place and written back by the project's gold policy (``common``).
"""
from pathlib import Path
from typing import Iterator, Optional, Union

from spacy.tokens import Doc, DocBin, Span

from .common import DEFAULT_SPANS_KEY, ConversionStats, CorpusFormatError, set_gold_spans


def read_docbin(
    path: Union[str, Path], vocab, *, spans_key: str = DEFAULT_SPANS_KEY, stats: Optional[ConversionStats] = None
) -> Iterator[Doc]:
    """Read gold mentions from DocBin files: ``doc.spans[spans_key]`` where any doc of a file
    has that group (spancat data), else ``doc.ents`` (NER data, as ``spacy convert`` writes).

    Tokens, whitespace and sentence starts are kept; every other annotation (tags, parses,
    other span groups) is left behind, and the mentions are written back by the gold
    policy of ``common.set_gold_spans`` (all in the span group, non-overlapping in ents).

    path (Union[str, Path]): A ``.spacy`` file or a directory searched for them.
    vocab (Vocab): Vocab for the Docs.
    spans_key (str): Span group read, and written.
    stats (Optional[ConversionStats]): Receives duplicate counts.
    YIELDS (Doc): Docs with gold ``doc.spans[spans_key]`` and ``doc.ents``; ``doc_key`` in
        ``user_data`` kept, else ``<file>#<index>``.
    RAISES (CorpusFormatError): Not a DocBin, no docs, or a file with neither the span group
        nor entities but other span groups (the message names them).
    """
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.rglob("*.spacy")) if path.is_dir() else []
    if not files:
        raise CorpusFormatError(path, "no .spacy file found")
    count = 0
    for loc in files:
        try:
            docs = list(DocBin().from_disk(loc).get_docs(vocab))
        except Exception as err:  # msgpack/zlib errors: a truncated or foreign file
            raise CorpusFormatError(loc, f"not a spaCy DocBin ({type(err).__name__}: {err})") from None
        source = _gold_source(loc, docs, spans_key)
        for i, doc in enumerate(docs):
            mentions = list(doc.spans[spans_key]) if source == "spans" and spans_key in doc.spans else list(doc.ents)
            sent_starts = [t.is_sent_start for t in doc] if doc.has_annotation("SENT_START") else None
            new = Doc(vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc],
                      sent_starts=sent_starts)
            new.user_data["doc_key"] = str(doc.user_data.get("doc_key", f"{Path(loc).name}#{i}"))
            spans = [Span(new, s.start, s.end, label=s.label_) for s in mentions]
            count += 1
            yield set_gold_spans(new, spans, spans_key, stats)
    if not count:
        raise CorpusFormatError(path, "no docs in the DocBin")


def _gold_source(loc: Path, docs: list, spans_key: str) -> str:
    """"spans" or "ents": where a file's gold mentions are."""
    if any(spans_key in doc.spans and len(doc.spans[spans_key]) for doc in docs):
        return "spans"
    if any(doc.ents for doc in docs):
        return "ents"
    others = sorted({key for doc in docs for key, group in doc.spans.items() if len(group)})
    if others:
        raise CorpusFormatError(
            loc, f"no span group {spans_key!r} and no doc.ents, but span groups {others}: "
                 f"pass the one holding the gold mentions as the spans key (--spans-key)"
        )
    return "ents"
