"""Distant (weak) labels: typed dictionary matches as ``doc.spans["weak"]``.

Matching is the miner's: one token-aligned Aho-Corasick pass (``TermDictionary``; a term
never matches inside a word), case policy "smart" by default. Conflict rules, in order:

1. **Longest match wins** (``resolve_overlaps(..., "longest")``): of overlapping matches
   the longest is kept, ties to the earlier start, whatever their labels or sources
   ("breast cancer cells" from one list beats "breast cancer" from another).
2. **One span, several types**: ``conflict="priority"`` (default) keeps the label of the
   entry with the highest priority (see ``sources``: training data, then the type-map rows
   in order, then mined candidates); ``conflict="ambiguous"`` labels the span
   ``AMBIGUOUS`` instead. Either way each such span is counted per label set
   (``type_conflicts``, e.g. ``"Chemical/Disease": 12``).
3. The untyped label ``ENTITY`` (mined candidates) is used only for a span no typed
   source matches; a typed label beside it is not a conflict.
4. With ``abbreviations=True``, after rules 1-3: the short form of an acronym definition
   whose long form ends with a labeled span gets that span's label, and so do the other uses
   of the short form in the same document ("familial [adenomatous polyposis] ( FAP )", later
   "FAP"; ``mining.acronyms.abbreviation_spans``). Dictionaries rarely hold abbreviations,
   so without this rule a model pretrained on weak labels learns them as negatives. Matches
   of rules 1-3 win over a short form; its source reads ``abbreviation:<long form source>``.

Output: one Doc per input line (or the input Docs of a DocBin) with ``doc.spans["weak"]``
holding one label per span. **Which source produced a span is its ``span.kb_id_``**: the
source names that gave the kept label, joined by ``|`` (a gazetteer's file name such as
``mesh-diseases.belns``, ``train`` for ``--train``, ``mined`` for ``--candidates``); for
an ``AMBIGUOUS`` span, the ``label:source`` pairs of every candidate type. ``kb_id`` is
serialized with the span group in a DocBin and read back as is.

Text inputs stream through the miner's ``run_partitioned``: each batch of lines becomes a
DocBin of its own (in a worker with ``n_process`` > 1), and the batches are merged in
input order, so the output is byte-identical for any ``n_process``.
"""
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Sequence, Tuple

from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab

from ..mining.acronyms import abbreviation_spans
from ..mining.dictionary import Match, resolve_overlaps
from ..mining.parallel import LineBar, run_partitioned
from ..mining.text import tokenize_with_spaces
from .sources import ENTITY, LabelSources

AMBIGUOUS = "AMBIGUOUS"
CONFLICT_POLICIES = ("priority", "ambiguous")
WeakSpan = Tuple[int, int, str, str]  # (start, end, label, kb_id: the source(s))


class Labeler:
    """Turns dictionary matches into labeled spans by the conflict rules above.

    sources (LabelSources): The typed dictionary.
    conflict (str): "priority" or "ambiguous".
    abbreviations (bool): Label the short forms of defined acronyms (rule 4).
    """

    def __init__(self, sources: LabelSources, conflict: str = "priority",
                 abbreviations: bool = False):
        if conflict not in CONFLICT_POLICIES:
            raise ValueError(f"Unknown conflict policy '{conflict}': expected one of "
                             f"{CONFLICT_POLICIES}")
        self.sources = sources
        self.conflict = conflict
        self.abbreviations = abbreviations
        # Built once, before workers fork, so that they share it.
        self.sources.dictionary.automaton

    def resolve(self, matches: Sequence[Match], counts: Counter) -> List[WeakSpan]:
        """Labeled spans of one token sequence's matches (counts: conflicts, labels)."""
        spans = []
        for start, end, tags in resolve_overlaps(list(matches), "longest"):
            entries = self.sources.entries_of(tags)
            typed = [(label, src) for label, src in entries if label != ENTITY] or entries
            labels = list(dict.fromkeys(label for label, _ in typed))
            if len(labels) > 1:
                counts["conflict:" + "/".join(sorted(labels))] += 1
            if len(labels) > 1 and self.conflict == "ambiguous":
                label = AMBIGUOUS
                kb_id = "|".join(f"{lab}:{src}" for lab, src in typed)
            else:
                label = labels[0]
                kb_id = "|".join(dict.fromkeys(src for lab, src in typed if lab == label))
            counts["label:" + label] += 1
            spans.append((start, end, label, kb_id))
        return spans

    def label_tokens(self, token_lists: Sequence[Sequence[str]], counts: Counter,
                     clean: bool = False) -> List[List[WeakSpan]]:
        """Labeled spans of many token sequences (one dictionary pass for all)."""
        matches = self.sources.dictionary.match_many(token_lists, clean=clean)
        labeled = [self.resolve(found, counts) for found in matches]
        if self.abbreviations:
            for words, spans in zip(token_lists, labeled):
                extra = abbreviation_spans(words, spans)
                counts["abbreviation_spans"] += len(extra)
                counts.update("label:" + label for _, _, label, _ in extra)
                spans.extend(extra)
                spans.sort()
        return labeled


@contextlib.contextmanager
def fast_msgpack():
    """Let srsly's msgpack find its encoders once, not once per serialized span group.

    ``DocBin.add`` packs each doc's span groups with fresh msgpack Packers, and each looks
    its encoders up in catalogue's global registry (``get_all`` scans every entry of every
    spaCy registry, ~0.5 ms): 60% of the labeling time at 94k lines. During the block
    ``get_all`` returns a snapshot taken once; entry points are part of the snapshot.
    """
    from srsly.msgpack import msgpack_decoders, msgpack_encoders

    registries = (msgpack_encoders, msgpack_decoders)
    for registry in registries:
        registry.get_all = (lambda found: lambda: dict(found))(registry.get_all())
    try:
        yield
    finally:
        for registry in registries:
            del registry.get_all  # the instance attribute: the class method is back


def set_weak_spans(doc: Doc, spans: Iterable[WeakSpan], spans_key: str = "weak") -> Doc:
    doc.spans[spans_key] = [Span(doc, s, e, label=label, kb_id=kb_id)
                            for s, e, label, kb_id in spans]
    return doc


@dataclass
class BatchResult:
    """One batch of labeled lines as DocBin bytes (what a worker sends back)."""

    index: int
    data: bytes
    lines: int
    occurrences: int
    counts: Counter


@dataclass
class Labeled:
    """The accumulator of a part: its batches and counts."""

    batches: List[Tuple[int, bytes]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def merge(self, result: BatchResult) -> None:
        self.batches.append((result.index, result.data))
        self.counts.update(result.counts)


def label_batch(batch, index: int, labeler: Labeler, tokenizer: str, spans_key: str,
                vocab: Vocab) -> BatchResult:
    """Tokenize, match and serialize one batch of documents (lists of lines)."""
    lines = [text for doc in batch for _, _, text in doc]
    tokenized = [tokenize_with_spaces(text, tokenizer) for text in lines]
    counts: Counter = Counter()
    labeled = labeler.label_tokens([words for words, _ in tokenized], counts, clean=True)
    docbin = DocBin(attrs=["ORTH"], store_user_data=False)
    with fast_msgpack():
        for (words, spaces), spans in zip(tokenized, labeled):
            counts["docs"] += 1
            counts["tokens"] += len(words)
            docbin.add(set_weak_spans(Doc(vocab, words=words, spaces=spaces), spans, spans_key))
    n_spans = sum(map(len, labeled))
    counts["spans"] += n_spans
    return BatchResult(index, docbin.to_bytes(), len(lines), n_spans, counts)


def label_texts(
    paths: Sequence[str],
    labeler: Labeler,
    tokenizer: str = "regex",
    spans_key: str = "weak",
    n_process: int = 1,
    batch_lines: int = 2000,
    progress: bool = True,
) -> Tuple[DocBin, Dict[str, object]]:
    """Label text files (one document per line), streaming, in ``n_process`` processes.

    paths (Sequence[str]): Text files ("-": stdin).
    labeler (Labeler): Dictionary and conflict rule.
    tokenizer (str): "regex" or "whitespace" (see ``mining.text``).
    spans_key (str): Key of the weak span group.
    n_process (int): Worker processes; the output does not depend on it.
    batch_lines (int): Lines per batch.
    progress (bool): Show a progress bar.
    RETURNS (Tuple[DocBin, Dict[str, object]]): The labeled Docs and a run report.
    """
    start = time.perf_counter()
    vocab = Vocab()

    def work(batch, index):
        return label_batch(batch, index, labeler, tokenizer, spans_key, vocab)

    bar = LineBar("label-weak", enabled=progress)
    parts, stats = run_partitioned(list(paths), "line", batch_lines, work, Labeled,
                                   n_process, bar)
    bar.close()
    batches = sorted(b for part in parts for b in part.batches)
    counts: Counter = Counter()
    for part in parts:
        counts.update(part.counts)
    docbin = DocBin(attrs=["ORTH"], store_user_data=False)
    for _, data in batches:
        docbin.merge(DocBin(attrs=["ORTH"], store_user_data=False).from_bytes(data))
    report = run_report(counts, time.perf_counter() - start)
    report["read"] = stats.as_dict()
    report["n_process"] = n_process
    return docbin, report


def label_docbins(paths: Sequence[str], labeler: Labeler, spans_key: str = "weak",
                  batch_docs: int = 1000) -> Tuple[DocBin, Dict[str, object]]:
    """Label the Docs of DocBins on their own tokens (other annotations are kept)."""
    start = time.perf_counter()
    counts: Counter = Counter()
    out = DocBin(store_user_data=False)
    for path in paths:
        try:
            with fast_msgpack():
                docs = list(DocBin().from_disk(path).get_docs(Vocab()))
        except Exception as err:  # msgpack/srsly raise many types for a corrupt file
            raise ValueError(f"{path}: not a readable spaCy DocBin ({err})") from err
        for i in range(0, len(docs), batch_docs):
            chunk = docs[i:i + batch_docs]
            labeled = labeler.label_tokens([[t.text for t in d] for d in chunk], counts)
            with fast_msgpack():
                for doc, spans in zip(chunk, labeled):
                    counts["docs"] += 1
                    counts["tokens"] += len(doc)
                    counts["spans"] += len(spans)
                    out.add(set_weak_spans(doc, spans, spans_key))
    return out, run_report(counts, time.perf_counter() - start)


def run_report(counts: Counter, seconds: float) -> Dict[str, object]:
    """Counts of a run as JSON-ready numbers: docs, spans per label, type conflicts."""
    return {
        "docs": counts["docs"], "tokens": counts["tokens"], "spans": counts["spans"],
        "seconds": round(seconds, 2), "abbreviation_spans": counts["abbreviation_spans"],
        "labels": {k[6:]: v for k, v in sorted(counts.items()) if k.startswith("label:")},
        "type_conflicts": {k[9:]: v for k, v in sorted(counts.items())
                           if k.startswith("conflict:")},
    }
