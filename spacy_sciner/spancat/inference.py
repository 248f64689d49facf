"""Inference over every candidate span: enumerate, pool, filter, classify - in chunks.

The gold annotation never reaches this code: it sees only the docs (and the token
vectors the upstream transformer put on them).
"""
from typing import List, NamedTuple, Optional

import numpy
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Ragged

from .candidates import EdgeRule, Suggester, doc_candidates
from .filter import sigmoid
from .model import iter_span_vectors


class CandidateScores(NamedTuple):
    """Scores of all candidate spans of a batch, grouped per doc."""

    spans: Ragged  # doc-local (start, end) of every candidate, per doc (width, then start)
    filter_probs: numpy.ndarray  # filter probability of every candidate
    keep: numpy.ndarray  # whether the candidate passed the filter
    probs: Floats2d  # class probabilities of the kept candidates only, numpy


def score_all_spans(
    model: Model,
    docs: List[Doc],
    *,
    n_classes: int,
    max_span_length: int,
    chunk_size: int,
    filter_threshold: Optional[float] = None,
    suggester: Optional[Suggester] = None,
    allow_punct_edges: bool = False,
) -> CandidateScores:
    """Score every candidate span of the docs (see ``candidates``).

    model (Model): A ``spacy-sciner.SpanCategorizer.v1`` model (its refs are used).
    docs (List[Doc]): The docs, processed by the upstream transformer.
    n_classes (int): Labels + 1 ("no entity").
    max_span_length (int): L.
    chunk_size (int): Most spans pooled and scored at once.
    filter_threshold (Optional[float]): Prune spans whose filter probability is below
        it, before the MLP; None keeps every span.
    suggester (Optional[Suggester]): Proposes the candidates; None: all spans of
        1..max_span_length tokens.
    allow_punct_edges (bool): Let punctuation-only tokens start or end a candidate.
    RETURNS (CandidateScores): All candidates, their filter scores and the class
        probabilities of those kept.
    """
    ops = model.ops
    lengths = numpy.asarray([len(doc) for doc in docs], dtype="i")
    nothing = Ragged(numpy.zeros((0, 2), dtype="i"), numpy.zeros(len(docs), dtype="i"))
    nothing = CandidateScores(nothing, numpy.zeros(0, "f"), numpy.zeros(0, bool), numpy.zeros((0, n_classes), "f"))
    if lengths.sum() == 0:
        return nothing
    tokvecs = model.get_ref("tok2vec").predict(docs)
    # All docs as one token sequence: a chunk may hold spans of several docs.
    tokens = ops.flatten([t for t in tokvecs if len(t)])
    rows, filter_probs, keep, probs = [], [], [], []
    encoder, given = model.get_ref("span_encoder"), None
    if suggester is not None:
        offsets = numpy.cumsum(lengths) - lengths
        per_doc = doc_candidates(docs, max_span_length, suggester, allow_punct_edges)
        given = numpy.concatenate([r + offsets[i] for i, r in enumerate(per_doc)]).astype("i")
    # A suggester's rows were edge-filtered per doc above; otherwise filter while enumerating.
    edges = EdgeRule(docs, allow_punct_edges).mask if given is None else None
    chunks = iter_span_vectors(encoder, tokens, lengths, max_span_length, chunk_size, rows=given, keep=edges)
    for chunk, reps in chunks:
        f_probs = sigmoid(ops.to_numpy(model.get_ref("filter").predict(reps))[:, 0])
        mask = f_probs >= filter_threshold if filter_threshold is not None else numpy.ones(len(chunk), bool)
        if mask.any():
            selected = reps if mask.all() else reps[ops.asarray1i(numpy.flatnonzero(mask))]
            probs.append(ops.to_numpy(model.get_ref("classifier").predict(selected)))
        rows.append(chunk)
        filter_probs.append(f_probs)
        keep.append(mask)
    if not rows:
        return nothing
    rows_all, f_all, keep_all = numpy.concatenate(rows), numpy.concatenate(filter_probs), numpy.concatenate(keep)
    probs_all = numpy.concatenate(probs) if probs else numpy.zeros((0, n_classes), "f")
    # Regroup per doc, by width then start within a doc (enumerate_batch's order); the
    # max-pooling fast path yields spans width by width across the whole batch.
    ends = numpy.cumsum(lengths)
    doc_ids = numpy.searchsorted(ends, rows_all[:, 0], side="right")
    order = numpy.lexsort((rows_all[:, 0], rows_all[:, 1] - rows_all[:, 0], doc_ids))
    kept_rank = numpy.cumsum(keep_all) - 1  # row of probs_all for each kept span
    probs_all = probs_all[kept_rank[order][keep_all[order]]]
    local = rows_all[order] - (ends - lengths)[doc_ids[order]][:, None]
    spans = Ragged(local.astype("i"), numpy.bincount(doc_ids, minlength=len(docs)).astype("i"))
    return CandidateScores(spans, f_all[order], keep_all[order], probs_all)
