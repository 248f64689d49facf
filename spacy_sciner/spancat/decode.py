"""Turn span scores into annotations: a nested ``SpanGroup`` and flat ``doc.ents``.

Only spans that pass the decision rule become ``Span`` objects; everything before that
stays in numpy arrays.
"""
from typing import List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc, Span, SpanGroup
from thinc.types import Floats1d, Floats2d, Ints1d, Ints2d


def best_labels(probs: Floats2d, n_labels: int) -> Tuple[Ints1d, Floats1d]:
    """The most probable entity label of each span, ignoring the "no entity" column.

    probs (Floats2d): Class probabilities, shape (n_spans, n_labels + 1).
    n_labels (int): Number of entity labels.
    RETURNS (Tuple[Ints1d, Floats1d]): Label index and its probability per span.
    """
    if probs.shape[0] == 0 or n_labels == 0:
        return numpy.zeros(probs.shape[0], dtype="i"), numpy.zeros(probs.shape[0], dtype="f")
    label_probs = probs[:, :n_labels]
    labels = label_probs.argmax(axis=1).astype("i")
    return labels, label_probs[numpy.arange(len(labels)), labels]


def is_entity(probs: Floats2d, n_labels: int, threshold: Optional[float]) -> numpy.ndarray:
    """The decision rule: which spans are output as entities.

    With ``threshold`` None (the default), a span is an entity when the argmax over the
    labels plus "no entity" is a label (SEPT, Tri-Train §2.3.2, spaCy's
    ``spancat_singlelabel``); a tie with "no entity" is not an entity. With a float, a
    span is an entity when its best label's probability is >= ``threshold`` (a
    probability floor that ``calibrate`` may choose on dev instead).

    probs (Floats2d): Class probabilities, shape (n_spans, n_labels + 1).
    n_labels (int): Number of entity labels; column ``n_labels`` is "no entity".
    threshold (Optional[float]): None for argmax, else the probability floor.
    RETURNS (numpy.ndarray): One bool per span.
    """
    if probs.shape[0] == 0 or n_labels == 0:
        return numpy.zeros(probs.shape[0], dtype=bool)
    best = probs[:, :n_labels].max(axis=1)
    if threshold is None:
        return best > probs[:, n_labels]
    return best >= float(threshold)


def make_span_group(
    doc: Doc,
    key: str,
    spans: Ints2d,
    labels: Ints1d,
    scores: Floats1d,
    label_names: Sequence[str],
) -> SpanGroup:
    """A span group of the given (already thresholded) spans, with ``attrs["scores"]``.

    Spans are ordered by position (start, then end) so that output is deterministic.
    """
    order = numpy.lexsort((spans[:, 1], spans[:, 0])) if len(spans) else numpy.zeros(0, "i")
    group = SpanGroup(
        doc,
        name=key,
        spans=[
            Span(doc, int(spans[i, 0]), int(spans[i, 1]), label=label_names[labels[i]])
            for i in order
        ],
    )
    group.attrs["scores"] = numpy.asarray(scores, dtype="f")[order]
    return group


def greedy_decode(spans: Ints2d, scores: Floats1d, doc_length: int) -> List[int]:
    """Pick non-overlapping spans, highest score first.

    spans (Ints2d): (start, end) rows.
    scores (Floats1d): Score of each row.
    doc_length (int): Number of tokens, to size the occupancy mask.
    RETURNS (List[int]): Indices of the chosen rows, ordered by start.
    """
    taken = numpy.zeros(doc_length, dtype=bool)
    chosen = []
    # Stable sort so that ties keep position order (deterministic output).
    for i in numpy.argsort(-numpy.asarray(scores), kind="stable"):
        start, end = int(spans[i, 0]), int(spans[i, 1])
        if not taken[start:end].any():
            taken[start:end] = True
            chosen.append(int(i))
    return sorted(chosen, key=lambda i: int(spans[i, 0]))


def set_ents(doc: Doc, group: SpanGroup) -> None:
    """Write a non-overlapping, highest-score-first selection of ``group`` to doc.ents."""
    if len(group) == 0:
        doc.ents = []
        return
    rows = numpy.asarray([[span.start, span.end] for span in group], dtype="i")
    chosen = greedy_decode(rows, group.attrs["scores"], len(doc))
    doc.ents = [group[i] for i in chosen]
