"""A DocBin corpus on the gold tokens that keeps span groups.

spaCy's ``spacy.Corpus.v1`` with ``gold_preproc = true`` builds each reference sentence
with ``Span.as_doc()``, which copies the entities but not ``doc.spans``: a spancat trained
that way sees no gold spans at all (spaCy stops with E143, "labels not initialized", or
trains on fewer spans when only some docs are single sentences). This reader does what
``gold_preproc`` promises for span groups too::

    [corpora.train]
    @readers = "spacy-sciner.GoldTokensCorpus.v1"
    path = ${paths.train}

Each Example's predicted Doc has the reference's words and spaces (the data set's own
tokenization, as in an academic benchmark); a reference with sentence boundaries becomes one
Example per sentence, its span groups and entities cut to the sentence. A span across a
sentence boundary cannot be cut: it is an error naming the file, the doc and the span's
characters, raised when the corpus is first read (``spacy train`` reads it at initialization,
before any update).
"""
import random
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from spacy.training.augment import dont_augment
from spacy.training.corpus import FILE_TYPE, walk_corpus

from .readers import make_predicted


class GoldTokensCorpus:
    """Iterate Examples on the gold tokens (and gold sentences) of DocBin files.

    path (Path): A .spacy file or a directory of them.
    limit (int): Stop after this many reference docs; 0 for no limit.
    augmenter (Callable): spaCy's augmenter signature, ``(nlp, example) -> Iterable[Example]``.
    shuffle (bool): Shuffle the reference docs (with Python's ``random``, seeded by spaCy).
    """

    def __init__(self, path: Union[str, Path], *, limit: int = 0, augmenter: Optional[Callable] = None,
                 shuffle: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.limit = limit
        self.augmenter = augmenter if augmenter is not None else dont_augment
        self.shuffle = shuffle

    def __call__(self, nlp: Language) -> Iterator[Example]:
        docs = self.read(nlp)
        if self.shuffle:
            docs = list(docs)
            random.shuffle(docs)
        for loc, i, reference in docs:
            for ref in split_sentences(reference, f"{loc}, doc {i}"):
                if len(ref):
                    yield from self.augmenter(nlp, Example(make_predicted(nlp, ref), ref))

    def read(self, nlp: Language) -> Iterator[tuple]:
        """(file, index in file, doc) of every non-empty doc, up to ``limit``."""
        if self.path is None or not self.path.exists():
            raise ValueError(f"spacy-sciner.GoldTokensCorpus.v1: corpus not found: {self.path}")
        count = 0
        for loc in walk_corpus(self.path, FILE_TYPE):
            for i, doc in enumerate(DocBin().from_disk(loc).get_docs(nlp.vocab)):
                if not len(doc):
                    continue
                yield loc, i, doc
                count += 1
                if self.limit and count >= self.limit:
                    return


def split_sentences(reference: Doc, where: str) -> Iterable[Doc]:
    """The reference's sentences as Docs with their spans (the doc itself when it has no
    sentence boundaries or only one sentence)."""
    if not reference.has_annotation("SENT_START"):
        return [reference]
    sents = list(reference.sents)
    if len(sents) == 1:
        return [reference]
    sent_of = [0] * len(reference)  # token -> its sentence's first token
    for s in sents:
        sent_of[s.start:s.end] = [s.start] * len(s)
    cut = {s.start: [] for s in sents}  # sentence start -> [(key, attrs, spans)]
    for key, group in reference.spans.items():
        per_sent = {start: [] for start in cut}
        for span in group:
            first, last = sent_of[min(span.start, len(reference) - 1)], sent_of[max(span.end - 1, 0)]
            if len(span) and first != last:
                raise ValueError(f"{where}: span {key!r} {span.label_} at characters {span.start_char}-{span.end_char} "
                                 f"({span.text!r}) crosses a sentence boundary; gold sentences cannot hold it "
                                 "(fix the sentence starts, or train with spaCy's tokenization)")
            per_sent[first].append(span)
        for start, spans in per_sent.items():
            cut[start].append((key, dict(group.attrs), spans))
    return [_sentence_doc(s, cut[s.start]) for s in sents]


def _sentence_doc(sent: Span, groups: list) -> Doc:
    doc = sent.as_doc()
    for key, attrs, spans in groups:
        doc.spans[key] = [Span(doc, s.start - sent.start, s.end - sent.start, label=s.label, kb_id=s.kb_id, span_id=s.id)
                          for s in spans]
        doc.spans[key].attrs.update(attrs)
    return doc


def create_gold_tokens_corpus(path: Optional[Path], limit: int = 0, augmenter: Optional[Callable] = None,
                              shuffle: bool = False) -> GoldTokensCorpus:
    """``spacy.Corpus.v1`` with ``gold_preproc = true`` that keeps ``doc.spans``."""
    return GoldTokensCorpus(path, limit=limit, augmenter=augmenter, shuffle=shuffle)
