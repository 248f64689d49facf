"""Turn span scores into annotations: a nested ``SpanGroup`` and flat ``doc.ents``.

``best_labels`` and ``is_entity`` work on numpy or cupy arrays alike, so that
``predict`` decides on the device and copies only the output spans to the host. Only
spans that pass the decision rule become ``Span`` objects.
"""
from typing import List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc, Span
from thinc.types import Floats1d, Floats2d, Ints1d, Ints2d
from thinc.util import get_array_module


def best_labels(probs: Floats2d, n_labels: int) -> Tuple[Ints1d, Floats1d]:
    """The most probable entity label of each span, ignoring the "no entity" column.

    probs (Floats2d): Class probabilities, shape (n_spans, n_labels + 1).
    n_labels (int): Number of entity labels.
    RETURNS (Tuple[Ints1d, Floats1d]): Label index and its probability per span.
    """
    xp = get_array_module(probs)
    if probs.shape[0] == 0 or n_labels == 0:
        return xp.zeros(probs.shape[0], dtype="i"), xp.zeros(probs.shape[0], dtype="f")
    label_probs = probs[:, :n_labels]
    labels = label_probs.argmax(axis=1).astype("i")
    return labels, label_probs.max(axis=1)


def is_entity(probs: Floats2d, n_labels: int, threshold: Optional[float]) -> numpy.ndarray:
    """The decision rule: which spans are output as entities.

    With ``threshold`` None (the default), a span is an entity when the argmax over the
    labels plus "no entity" is a label (SEPT, Tri-Train §2.3.2, spaCy's
    ``spancat_singlelabel``); a tie with "no entity" is not an entity. With a float, a
    span is an entity when its best label's probability is >= ``threshold`` (a
    probability floor that ``calibrate`` may choose on dev instead). The floor is compared
    in float64, where ``calibrate`` chose it between two scores: in float32 it could round
    onto the highest score it must drop.

    probs (Floats2d): Class probabilities, shape (n_spans, n_labels + 1).
    n_labels (int): Number of entity labels; column ``n_labels`` is "no entity".
    threshold (Optional[float]): None for argmax, else the probability floor.
    RETURNS (numpy.ndarray): One bool per span (cupy for cupy input).
    """
    if probs.shape[0] == 0 or n_labels == 0:
        return get_array_module(probs).zeros(probs.shape[0], dtype=bool)
    best = probs[:, :n_labels].max(axis=1)
    if threshold is None:
        return best > probs[:, n_labels]
    return best.astype("float64") >= float(threshold)



def make_spans(doc: Doc, rows: List[Tuple[int, int]], labels: List[int], label_ids: Sequence[int]) -> List[Span]:
    """``Span`` objects of (already decided) spans.

    doc (Doc): The doc.
    rows (List[Tuple[int, int]]): Doc-local (start, end) pairs, as Python ints.
    labels (List[int]): Label index of each span.
    label_ids (Sequence[int]): String-store ids of the labels, by label index.
    RETURNS (List[Span]): The spans, in the order of ``rows``.
    """
    # Plain ints and label ids: Span() then does no string lookup and no numpy boxing.
    return [Span(doc, s, e, label=label_ids[lab]) for (s, e), lab in zip(rows, labels)]


def greedy_decode(spans: Ints2d, scores: Floats1d, doc_length: int) -> List[int]:
    """Pick non-overlapping spans, highest score first.

    spans (Ints2d): (start, end) rows (or a list of pairs).
    scores (Floats1d): Score of each row (or a list).
    doc_length (int): Number of tokens, to size the occupancy mask.
    RETURNS (List[int]): Indices of the chosen rows, ordered by start.
    """
    # Python lists, not numpy: a sentence has a handful of spans, where numpy's
    # per-element access costs more than the work.
    rows = spans.tolist() if isinstance(spans, numpy.ndarray) else list(spans)
    values = scores.tolist() if isinstance(scores, numpy.ndarray) else list(scores)
    if len(rows) < 2:
        return list(range(len(rows)))
    taken = bytearray(doc_length)
    chosen = []
    # A stable sort: ties keep position order (deterministic output).
    for i in sorted(range(len(rows)), key=lambda i: -values[i]):
        start, end = rows[i]
        if not any(taken[start:end]):
            taken[start:end] = b"\x01" * (end - start)
            chosen.append(i)
    return sorted(chosen, key=lambda i: rows[i][0])
