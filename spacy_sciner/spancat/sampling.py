"""Span enumeration and negative sampling for the SEPT span categorizer.

Everything here works on numpy arrays of ``(start, end)`` token offsets (end exclusive,
as in spaCy), without creating ``Span`` objects: a 5,000-token document has 40,000
candidate spans of width <= 8, and a Python loop over them would dominate inference.
"""
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.attrs import SENT_START
from spacy.tokens import Doc
from spacy.training import Example
from thinc.types import Ints1d, Ints2d, Ragged


def enumerate_spans(length: int, max_span_length: int) -> Ints2d:
    """All spans of ``1..max_span_length`` tokens in a sequence of ``length`` tokens.

    length (int): Number of tokens.
    max_span_length (int): The longest span (L) to enumerate.
    RETURNS (Ints2d): Array of shape (n_spans, 2) with (start, end) rows, sorted by
        width first, then by start (the same order as spaCy's ngram suggester).
    """
    if length <= 0:
        return numpy.zeros((0, 2), dtype="i")
    widths = numpy.arange(1, min(max_span_length, length) + 1, dtype="i")
    # Spans of width w start at 0 .. length - w; build them all in one shot.
    counts = length - widths + 1
    starts = numpy.arange(counts.sum(), dtype="i") - numpy.repeat(
        numpy.cumsum(counts) - counts, counts
    ).astype("i")
    ends = starts + numpy.repeat(widths, counts)
    return numpy.stack([starts, ends], axis=1).astype("i")


def enumerate_batch(lengths: Sequence[int], max_span_length: int) -> Ragged:
    """Candidate spans for a batch of docs, as spaCy's suggesters return them.

    lengths (Sequence[int]): Number of tokens of each doc.
    max_span_length (int): The longest span (L) to enumerate.
    RETURNS (Ragged): Doc-local (start, end) rows, one group per doc.
    """
    spans = [enumerate_spans(int(n), max_span_length) for n in lengths]
    counts = numpy.asarray([len(s) for s in spans], dtype="i")
    data = numpy.concatenate(spans) if spans else numpy.zeros((0, 2), dtype="i")
    return Ragged(data.astype("i"), counts)


def span_keys(spans: Ints2d, doc_length: int) -> Ints1d:
    """Encode (start, end) rows as single integers, to compare span sets with numpy."""
    return spans[:, 0].astype("int64") * (doc_length + 1) + spans[:, 1]


def gold_spans(
    eg: Example, spans_key: str, label_map: Dict[str, int], unknown: Optional[int] = None
) -> Tuple[Ints2d, Ints1d]:
    """The reference spans of an example, aligned to the predicted doc's tokens.

    Nested and overlapping spans are all kept. When one (start, end) carries several
    labels (the softmax can only learn one), the first one wins.

    eg (Example): The example.
    spans_key (str): Key of ``doc.spans`` holding the gold spans.
    label_map (Dict[str, int]): Label to class index.
    unknown (Optional[int]): Class index for labels outside ``label_map`` (evaluation data
        may hold labels that training never saw: they stay gold, and are never predicted);
        None raises a ValueError instead (training).
    RETURNS (Tuple[Ints2d, Ints1d]): (start, end) rows and their class indices.
    """
    if spans_key not in eg.reference.spans:
        return numpy.zeros((0, 2), dtype="i"), numpy.zeros((0,), dtype="i")
    aligned = eg.get_aligned_spans_y2x(eg.reference.spans[spans_key], allow_overlap=True)
    rows: Dict[Tuple[int, int], int] = {}
    for span in aligned:
        if span.label_ not in label_map:
            if unknown is not None:
                rows.setdefault((span.start, span.end), unknown)
                continue
            raise ValueError(
                f"Gold span '{span.text}' (tokens {span.start}-{span.end}) in doc "
                f"'{eg.reference.text[:40]}...' has label '{span.label_}', which the "
                f"component does not know. Known labels: {sorted(label_map)}. Add it "
                "with add_label() or initialize() on data that contains it."
            )
        key = (span.start, span.end)
        if key not in rows or (unknown is not None and rows[key] == unknown):
            rows[key] = label_map[span.label_]  # a known label wins over an unknown one
    if not rows:
        return numpy.zeros((0, 2), dtype="i"), numpy.zeros((0,), dtype="i")
    spans = numpy.asarray(list(rows.keys()), dtype="i")
    return spans, numpy.asarray(list(rows.values()), dtype="i")


def sample_training_spans(
    examples: Iterable[Example],
    spans_key: str,
    label_map: Dict[str, int],
    max_span_length: int,
    negatives_per_doc: int,
    rng: numpy.random.Generator,
    candidates: Optional[Sequence[Ints2d]] = None,
    avoid: Optional[Sequence[Ints2d]] = None,
) -> Tuple[Ragged, Ints1d]:
    """All gold spans plus a random sample of negative spans, per doc: ``negatives_per_doc``
    for each sentence of the doc (one Doc per abstract draws as many as its sentences would
    as separate Docs). Sentences are counted on the gold doc and on the predicted one (a
    sentencizer upstream), the larger count; a doc without sentence boundaries is one.

    Gold spans longer than ``max_span_length`` are kept too: they are known at
    training time and still teach the classifier. Negatives are drawn uniformly
    without replacement from the non-gold candidates (``negative_pool``): ``candidates``
    (what inference will score, see ``candidates.doc_candidates``) or every span of width
    <= ``max_span_length``, minus those overlapping a span of ``avoid``.

    examples (Iterable[Example]): The batch.
    spans_key (str): Key of ``doc.spans`` holding the gold spans.
    label_map (Dict[str, int]): Label to class index; the none class is
        ``len(label_map)``.
    max_span_length (int): L, the longest negative span.
    negatives_per_doc (int): How many negatives to sample per doc of one sentence (all if
        fewer), times the sentences of a doc with sentence boundaries.
    rng (numpy.random.Generator): Source of randomness, owned by the component.
    candidates (Optional[Sequence[Ints2d]]): Doc-local candidate rows per example.
    avoid (Optional[Sequence[Ints2d]]): Doc-local spans per example that no negative may
        overlap (partially annotated data: weak labels, mined candidates).
    RETURNS (Tuple[Ragged, Ints1d]): Doc-local spans grouped per doc, and the target
        class of every span (gold label, or the none class for negatives).
    """
    none_class = len(label_map)
    all_spans: List[Ints2d] = []
    all_targets: List[Ints1d] = []
    counts: List[int] = []
    for i, eg in enumerate(examples):
        n = len(eg.predicted)
        gold, gold_targets = gold_spans(eg, spans_key, label_map)
        pool = enumerate_spans(n, max_span_length) if candidates is None else numpy.asarray(candidates[i])
        negatives = negative_pool(pool, gold, n, None if avoid is None else avoid[i])
        quota = negatives_per_doc * max(n_sentences(eg.predicted), n_sentences(eg.reference))
        if len(negatives) > quota:
            chosen = rng.choice(len(negatives), size=quota, replace=False)
            negatives = negatives[numpy.sort(chosen)]
        all_spans.extend([gold, negatives])
        all_targets.extend([gold_targets, numpy.full(len(negatives), none_class, dtype="i")])
        counts.append(len(gold) + len(negatives))
    data = numpy.concatenate(all_spans).astype("i") if all_spans else numpy.zeros((0, 2), "i")
    targets = numpy.concatenate(all_targets).astype("i") if all_targets else numpy.zeros(0, "i")
    return Ragged(data, numpy.asarray(counts, dtype="i")), targets


def n_sentences(doc: Doc) -> int:
    """Sentence starts set on ``doc`` (at least 1): SENT_START is 1 at a start."""
    if len(doc) == 0:
        return 1
    return max(1, int((doc.to_array([SENT_START]).reshape(-1) == 1).sum()))


def negative_pool(pool: Ints2d, gold: Ints2d, doc_length: int, avoid: Optional[Ints2d] = None) -> Ints2d:
    """The candidates a negative may be drawn from: not gold, and (with ``avoid``)
    sharing no token with any span of ``avoid``.

    pool (Ints2d): Candidate (start, end) rows.
    gold (Ints2d): Gold (start, end) rows.
    doc_length (int): Number of tokens.
    avoid (Optional[Ints2d]): Spans no negative may overlap.
    RETURNS (Ints2d): The rows of ``pool`` that qualify, in order.
    """
    keep = ~numpy.isin(span_keys(pool, doc_length), span_keys(gold, doc_length))
    if avoid is not None and len(avoid) and len(pool):
        # Two spans overlap iff they share a token: count covered tokens inside each row.
        covered = numpy.zeros(doc_length + 1, dtype="i")
        numpy.add.at(covered, avoid[:, 0], 1)
        numpy.add.at(covered, avoid[:, 1], -1)
        inside = numpy.concatenate([[0], numpy.cumsum(numpy.cumsum(covered)[:doc_length] > 0)])
        keep &= inside[pool[:, 1]] - inside[pool[:, 0]] == 0
    return pool[keep]


def reference_spans(eg: Example, keys: Sequence[str]) -> Ints2d:
    """The reference doc's spans under ``keys`` (missing keys: none), aligned to the
    predicted doc's tokens, as (start, end) rows."""
    rows = [
        (span.start, span.end)
        for key in keys if key in eg.reference.spans
        for span in eg.get_aligned_spans_y2x(eg.reference.spans[key], allow_overlap=True)
    ]
    return numpy.asarray(rows, dtype="i").reshape(-1, 2)


def span_targets(
    examples: Sequence[Example], spans: Ragged, spans_key: str, label_map: Dict[str, int]
) -> Ints1d:
    """The target class of given spans: the gold label where the span is gold, else none.

    examples (Sequence[Example]): The batch, one example per group of ``spans``.
    spans (Ragged): Doc-local (start, end) rows, one group per example.
    spans_key (str): Key of ``doc.spans`` holding the gold spans.
    label_map (Dict[str, int]): Label to class index; none is ``len(label_map)``.
    RETURNS (Ints1d): One class index per span row.
    """
    targets = numpy.full(spans.dataXd.shape[0], len(label_map), dtype="i")
    offset = 0
    for eg, count in zip(examples, numpy.asarray(spans.lengths).tolist()):
        rows = numpy.asarray(spans.dataXd[offset : offset + count])
        gold, gold_targets = gold_spans(eg, spans_key, label_map)
        if len(gold) and count:
            n = max(len(eg.predicted), int(rows.max()), int(gold.max()))
            gold_keys = span_keys(gold, n)
            order = numpy.argsort(gold_keys)
            keys = span_keys(rows, n)
            pos = numpy.searchsorted(gold_keys[order], keys).clip(0, len(gold) - 1)
            hit = gold_keys[order][pos] == keys
            targets[offset : offset + count][hit] = gold_targets[order][pos[hit]]
        offset += count
    return targets


def doc_lengths(docs: Iterable[Doc]) -> List[int]:
    """Number of tokens of each doc."""
    return [len(doc) for doc in docs]
