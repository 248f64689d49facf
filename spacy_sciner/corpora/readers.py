"""Registered corpus readers, usable in a training config like ``spacy.Corpus.v1``::

    [corpora.train]
    @readers = "spacy-sciner.SciERCReader.v1"
    path = ${paths.train}
    doc_unit = "sentence"

Each reader returns a callable ``(nlp) -> Iterator[Example]`` that re-reads the file on
every call (spaCy calls the train corpus once per epoch). ``Example.reference`` holds the
gold annotation; ``Example.predicted`` is a fresh Doc with the same words and spaces and
nothing else, so gold never reaches a component's input.
"""
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from .common import DEFAULT_SPANS_KEY, ConversionStats
from .convert import read_docs

Reader = Callable[[Language], Iterable[Example]]


class GoldCorpus:
    """Read a corpus file into Examples with the tokens of the gold Docs.

    path (Path): The corpus file or (BRAT) directory.
    fmt (str): "scierc", "conll", "brat" or "jsonl".
    limit (int): Stop after this many Examples; 0 for no limit.
    options: Reader options passed to ``convert.read_docs``.
    """

    def __init__(self, path: Path, fmt: str, *, limit: int = 0, **options) -> None:
        self.path = Path(path)
        self.fmt = fmt
        self.limit = limit
        self.options = options

    def __call__(self, nlp: Language) -> Iterator[Example]:
        docs = read_docs(self.path, self.fmt, nlp, stats=ConversionStats(), **self.options)
        for i, reference in enumerate(docs):
            if self.limit and i >= self.limit:
                break
            yield Example(make_predicted(nlp, reference), reference)


def make_predicted(nlp: Language, reference: Doc) -> Doc:
    """A blank Doc over `reference`'s tokens: words and spaces only."""
    words = [token.text for token in reference]
    spaces = [bool(token.whitespace_) for token in reference]
    return Doc(nlp.vocab, words=words, spaces=spaces)


def create_scierc_reader(
    path: Path, doc_unit: str = "sentence", spans_key: str = DEFAULT_SPANS_KEY, limit: int = 0
) -> Reader:
    """SciERC JSON lines (see ``spacy_sciner.corpora.scierc``)."""
    return GoldCorpus(path, "scierc", limit=limit, doc_unit=doc_unit, spans_key=spans_key)


def create_conll_reader(
    path: Path, scheme: str = "auto", spans_key: str = DEFAULT_SPANS_KEY, repair: bool = False, limit: int = 0
) -> Reader:
    """CoNLL token/tag files (see ``spacy_sciner.corpora.conll``)."""
    return GoldCorpus(path, "conll", limit=limit, scheme=scheme, spans_key=spans_key, repair=repair)


def create_brat_reader(
    path: Path,
    spans_key: str = DEFAULT_SPANS_KEY,
    discontinuous: str = "merge",
    limit: int = 0,
    doc_unit: str = "document",
) -> Reader:
    """BRAT standoff (see ``spacy_sciner.corpora.brat``), tokenized by the nlp's tokenizer;
    ``doc_unit`` "document" (one Example per file) or "line" (one per text line)."""
    return GoldCorpus(
        path, "brat", limit=limit, spans_key=spans_key, discontinuous=discontinuous, doc_unit=doc_unit
    )


def create_jsonl_reader(path: Path, spans_key: str = DEFAULT_SPANS_KEY, limit: int = 0) -> Reader:
    """Character-offset JSON lines, Prodigy or doccano (see ``spacy_sciner.corpora.jsonl``),
    tokenized by the nlp's tokenizer unless a record brings its own ``tokens``."""
    return GoldCorpus(path, "jsonl", limit=limit, spans_key=spans_key)


class TextLines:
    """Unlabeled text, one sentence or document per line, as Examples for ``spacy pretrain``.

    Like spaCy's ``JsonlCorpus`` but over the plain text files ``mine`` and ``train-vectors``
    read, so the domain's aux text needs no conversion. Lines are cleaned as ``mine`` cleans
    them (invalid UTF-8 and control characters replaced; empty lines skipped).

    path (Path): A text file.
    min_length (int): Skip docs with fewer tokens; 0 for no limit.
    max_length (int): Skip docs with more tokens; 0 for no limit.
    limit (int): Stop after this many docs; 0 for no limit.
    """

    def __init__(self, path: Optional[Path], *, min_length: int = 0, max_length: int = 0, limit: int = 0) -> None:
        self.path = Path(path) if path is not None else None
        self.min_length = min_length
        self.max_length = max_length
        self.limit = limit

    def __call__(self, nlp: Language) -> Iterator[Example]:
        from ..mining.text import read_documents

        if self.path is None or not self.path.is_file():
            raise ValueError(f"spacy-sciner.TextLines.v1: text file not found: {self.path} (set paths.raw_text)")
        texts = (text for lines in read_documents([str(self.path)]) for _, _, text in lines)
        count = 0
        for doc in nlp.tokenizer.pipe(texts, batch_size=1000):
            if self.min_length and len(doc) < self.min_length:
                continue
            if self.max_length and len(doc) > self.max_length:
                continue
            yield Example(doc, doc)
            count += 1
            if self.limit and count >= self.limit:
                break


def create_text_lines_reader(
    path: Optional[Path], min_length: int = 5, max_length: int = 500, limit: int = 0
) -> Reader:
    """Plain text lines for ``spacy pretrain`` (``[corpora.pretrain]``); the token-length
    bounds default to ``spacy.JsonlCorpus.v1``'s. ``path`` may be null (``paths.raw_text``
    unset) for ``spacy train``, which resolves every corpus but never reads this one."""
    return TextLines(path, min_length=min_length, max_length=max_length, limit=limit)
