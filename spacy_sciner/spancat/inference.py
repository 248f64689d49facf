"""Inference over every candidate span: enumerate, pool, filter, classify - in chunks.

Two entry points share the enumeration:

* ``launch_spans`` + ``collect_spans`` (``predict``, the hot path) keep everything on the
  model's device - token vectors, pooling, the filter, the MLP and the decision rule -
  and copy only the output spans' indices, labels and scores to the host, once per
  batch, in ``collect_spans``. On a GPU a copy or a boolean compaction is a
  synchronisation, so the MLP there runs on every candidate of a chunk and the filter's
  verdict is a mask (the MLP costs less than the wait); on the CPU the filter runs
  first, on projections of the token rows (``prefilter``), so that only its survivors
  get span vectors and reach the MLP. The split lets ``pipe`` queue a
  batch's work before waiting for the previous batch's results.
* ``score_all_spans`` (calibration) returns every candidate's filter probability and the
  kept ones' class probabilities on the host.

The gold annotation never reaches this code: it sees only the docs (and the token
vectors the upstream transformer put on them).
"""
import math
from typing import Any, Callable, Iterable, Iterator, List, NamedTuple, Optional, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import minibatch
from thinc.api import Model, NumpyOps
from thinc.types import Floats2d, Ragged

from .candidates import EdgeRule, Suggester, doc_candidates
from .decode import best_labels, is_entity
from .filter import sigmoid
from .model import iter_span_vectors, predict_classifier
from .prefilter import can_prefilter, iter_kept_span_vectors
from .tokvecs import predict_token_vectors
from .workspace import Workspace


class SpanPredictions(NamedTuple):
    """What ``predict`` returns: the output spans of a batch, decided on the device."""

    spans: Ragged  # doc-local (start, end) rows, one group per doc, by start then end
    labels: numpy.ndarray  # label index of each span
    scores: numpy.ndarray  # its best label's probability
    n_candidates: int  # spans enumerated
    n_scored: int  # candidates that passed the filter and reached the classifier
    # With an ents floor (``launch_spans``' ents_threshold): whether each span is output in
    # doc.spans (False: only doc.ents may take it); None: every span is.
    in_spans: Optional[numpy.ndarray] = None


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
    rows, filter_probs, keep, probs = [], [], [], []
    for chunk, reps in candidate_vectors(model, docs, lengths, max_span_length, chunk_size, suggester, allow_punct_edges):
        f_probs = sigmoid(ops.to_numpy(model.get_ref("filter").predict(reps))[:, 0])
        mask = f_probs >= filter_threshold if filter_threshold is not None else numpy.ones(len(chunk), bool)
        if mask.any():
            selected = reps if mask.all() else reps[ops.asarray1i(numpy.flatnonzero(mask))]
            probs.append(ops.to_numpy(predict_classifier(model.get_ref("classifier"), selected)))
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


def predict_spans(model: Model, docs: List[Doc], **settings) -> SpanPredictions:
    """The output spans of the docs (``launch_spans``, then ``collect_spans``).

    model (Model): A ``spacy-sciner.SpanCategorizer.v1`` model.
    docs (List[Doc]): The docs, processed by the upstream transformer.
    settings: The keyword arguments of ``launch_spans``.
    RETURNS (SpanPredictions): The spans, their labels and scores, on the host.
    """
    return collect_spans(launch_spans(model, docs, **settings))


def _decide(classifier: Model, reps: Floats2d, kept, n_labels: int, threshold: Optional[float], compact: bool,
            workspace: Optional[Workspace] = None):
    """One chunk's decisions, on the device: (is entity, best label, its probability).

    kept: The filter's bool mask of the chunk (None: no filter); a pruned span is no entity.
    compact (bool): Run the classifier on the kept spans only (else on all, masked after).
    """
    xp = classifier.ops.xp
    if kept is not None and compact:
        index = xp.flatnonzero(kept)
        probs = predict_classifier(classifier, reps[index]) if len(index) else xp.zeros((0, n_labels + 1), "f")
        ent, label, score = xp.zeros(len(reps), bool), xp.zeros(len(reps), "i"), xp.zeros(len(reps), "f")
        ent[index] = is_entity(probs, n_labels, threshold)
        label[index], score[index] = best_labels(probs, n_labels)
        return ent, label, score
    probs = predict_classifier(classifier, reps, workspace)
    ent = is_entity(probs, n_labels, threshold)
    label, score = best_labels(probs, n_labels)
    return (ent if kept is None else ent & kept), label, score


def launch_spans(
    model: Model,
    docs: List[Doc],
    *,
    n_labels: int,
    max_span_length: int,
    chunk_size: int,
    threshold: Optional[float],
    filter_threshold: Optional[float] = None,
    suggester: Optional[Suggester] = None,
    allow_punct_edges: bool = False,
    compact: Optional[bool] = None,
    ents_threshold: Optional[float] = None,
    workspace: Optional[Workspace] = None,
) -> "LaunchedSpans":
    """Queue the scoring of the docs' candidates on the model's device: which ones the
    filter keeps (``filter_threshold``) and the decision rule (``threshold``, see
    ``decode.is_entity``) accepts.

    model (Model): A ``spacy-sciner.SpanCategorizer.v1`` model (its refs are used).
    docs (List[Doc]): The docs, processed by the upstream transformer.
    n_labels (int): Number of entity labels ("no entity" is class ``n_labels``).
    max_span_length (int): L.
    chunk_size (int): Most spans pooled and scored at once.
    threshold (Optional[float]): None for argmax, else the probability floor.
    filter_threshold (Optional[float]): Filter probability below which a candidate is
        dropped; None keeps every candidate.
    suggester (Optional[Suggester]): Proposes the candidates; None: all spans 1..L.
    allow_punct_edges (bool): Let punctuation-only tokens start or end a candidate.
    compact (Optional[bool]): Run the MLP only on the filter's survivors (True) or on
        every candidate, masking afterwards (False); None: True on the CPU, False on a
        GPU. The output is the same.
    ents_threshold (Optional[float]): Also return the kept spans whose best label's
        probability is >= it (doc.ents' own floor), marked as not in doc.spans unless
        the decision rule accepts them too; None: only the decision rule's spans.
    workspace (Optional[Workspace]): Host buffers reused across batches by the CPU's
        filter-first path (nothing in the result refers to them); None: new arrays.
    RETURNS (LaunchedSpans): The batch, its device work queued (on a GPU nothing here
        waits for the device); ``collect_spans`` gets the results.
    """
    ops = model.ops
    xp = ops.xp
    compact = isinstance(ops, NumpyOps) if compact is None else compact
    lengths = numpy.asarray([len(doc) for doc in docs], dtype="i")
    if lengths.sum() == 0 or n_labels == 0:
        return LaunchedSpans(ops, lengths, None, None, None, None, None)
    cut = filter_cut(filter_threshold)
    classifier, filter_head = model.get_ref("classifier"), model.get_ref("filter")
    if compact and cut is not None and can_prefilter(model.get_ref("span_encoder"), filter_head, suggester is not None):
        return _launch_prefiltered(model, docs, lengths, max_span_length, chunk_size, cut, n_labels, threshold,
                                   allow_punct_edges, ents_threshold, workspace if isinstance(ops, NumpyOps) else None)
    rows, passed, entity, labels, scores, in_spans = [], [], [], [], [], []
    for chunk, reps in candidate_vectors(model, docs, lengths, max_span_length, chunk_size, suggester, allow_punct_edges):
        kept = None if cut is None else filter_head.predict(reps)[:, 0].astype("float64") >= cut
        ent, label, score = _decide(classifier, reps, kept, n_labels, threshold, compact)
        ent, spans_ent = _with_ents_floor(ent, score, kept, ents_threshold)
        rows.append(chunk)
        passed.append(kept)
        in_spans.append(spans_ent)
        entity.append(ent)
        labels.append(label)
        scores.append(score)
    if not rows:
        return LaunchedSpans(ops, lengths, None, None, None, None, None)
    # Queued on the device, not waited for: collect_spans copies the results.
    passed = None if cut is None else xp.concatenate(passed)
    in_spans = None if ents_threshold is None else xp.concatenate(in_spans)
    return LaunchedSpans(ops, lengths, numpy.concatenate(rows), passed, xp.concatenate(entity),
                         xp.concatenate(labels), xp.concatenate(scores), None, in_spans)


def _with_ents_floor(ent, score, kept, ents_threshold: Optional[float]):
    """(output, in doc.spans): the decision rule's spans plus, with an ents floor, the kept
    spans that reach it (doc.ents' candidates); ``in doc.spans`` is None without a floor."""
    if ents_threshold is None:
        return ent, None
    for_ents = score.astype("float64") >= float(ents_threshold)
    if kept is not None:
        for_ents &= kept
    return ent | for_ents, ent


def _launch_prefiltered(model, docs, lengths, max_span_length, chunk_size, cut, n_labels, threshold,
                        allow_punct_edges, ents_threshold=None, workspace=None) -> "LaunchedSpans":
    """``launch_spans`` on the CPU with the filter run first (``prefilter``): only the
    candidates it keeps get span vectors and reach the MLP."""
    counts = {}
    chunks = iter_kept_span_vectors(
        model.get_ref("span_encoder"), model.get_ref("filter"),
        predict_token_vectors(model.get_ref("tok2vec"), docs, workspace), lengths, max_span_length, chunk_size, cut,
        keep=EdgeRule(docs, allow_punct_edges).mask, counts=counts, workspace=workspace,
    )
    rows, entity, labels, scores = [numpy.zeros((0, 2), "i")], [numpy.zeros(0, bool)], [numpy.zeros(0, "i")], [numpy.zeros(0, "f")]
    in_spans = [numpy.zeros(0, bool)]
    for chunk, reps in chunks:
        ent, label, score = _decide(model.get_ref("classifier"), reps, None, n_labels, threshold, True, workspace)
        ent, spans_ent = _with_ents_floor(ent, score, None, ents_threshold)
        in_spans.append(spans_ent)
        rows.append(chunk)
        entity.append(ent)
        labels.append(label)
        scores.append(score)
    return LaunchedSpans(model.ops, lengths, numpy.concatenate(rows), None, numpy.concatenate(entity),
                         numpy.concatenate(labels), numpy.concatenate(scores), counts["candidates"],
                         None if ents_threshold is None else numpy.concatenate(in_spans))


def collect_spans(launched: "LaunchedSpans") -> SpanPredictions:
    """Wait for the device work of ``launch_spans`` and copy the output spans to the host:
    which candidates are output, their labels and scores (a few per sentence), and the
    filter's count - the only device-to-host copies of a batch.

    launched (LaunchedSpans): What ``launch_spans`` returned.
    RETURNS (SpanPredictions): The spans grouped per doc, their labels and scores.
    """
    ops, lengths, rows = launched.ops, launched.lengths, launched.rows
    if rows is None:
        return _no_spans(len(lengths))
    xp = ops.xp
    chosen = xp.flatnonzero(launched.entity)
    out_labels = ops.to_numpy(launched.labels[chosen])
    out_scores = ops.to_numpy(launched.scores[chosen]).astype("f")
    in_spans = None if launched.in_spans is None else ops.to_numpy(launched.in_spans[chosen])
    chosen = ops.to_numpy(chosen)
    n_scored = len(rows) if launched.passed is None else int(launched.passed.sum())
    n_candidates = len(rows) if launched.n_candidates is None else launched.n_candidates
    return _group_by_doc(rows[chosen], out_labels, out_scores, lengths, n_candidates, n_scored, in_spans)


class LaunchedSpans(NamedTuple):
    """A batch whose span scoring is queued on the device (``launch_spans``)."""

    ops: Any
    lengths: numpy.ndarray  # tokens per doc
    rows: Optional[numpy.ndarray]  # global (start, end) of every candidate (None: none)
    passed: Any  # device bool per candidate: kept by the filter (None: no filter)
    entity: Any  # device bool per candidate: output
    labels: Any  # device label index per candidate
    scores: Any  # device best-label probability per candidate
    # Candidates enumerated, where ``rows`` holds only the filter's survivors
    # (``prefilter``); None: ``rows`` holds them all.
    n_candidates: Optional[int] = None
    in_spans: Any = None  # device bool per candidate: output in doc.spans (None: all outputs)


def pipe_one_batch_ahead(
    stream: Iterable[Doc],
    batch_size: int,
    launch: Callable[[List[Doc]], "LaunchedSpans"],
    finish: Callable[[List[Doc], "LaunchedSpans"], None],
    on_error: Callable[[List[Doc], Exception], None],
) -> Iterator[Doc]:
    """Annotate batches with ``launch`` (queue the device work) and ``finish`` (wait for it,
    annotate), finishing batch i only after batch i + 1 is launched: reading batch i + 1
    from ``stream`` runs the upstream components on it (the transformer's forward pass is
    queued too), so the host's work on one batch overlaps the device's work on the next.
    Docs come out in order; a batch whose launch or finish raises goes to ``on_error``
    and is not yielded (spaCy's error handler: raise by default).

    stream (Iterable[Doc]): The docs.
    batch_size (int): Docs per batch.
    launch (Callable): docs -> launched work.
    finish (Callable): (docs, launched work) -> None, annotating the docs.
    on_error (Callable): (docs, exception) -> None.
    YIELDS (Doc): The annotated docs.
    """
    queued = None  # (docs, launched) of the previous batch
    for docs in minibatch(stream, size=batch_size):
        try:
            launched = (docs, launch(docs))
        except Exception as err:
            on_error(docs, err)
            launched = None
        if queued is not None:
            yield from _finished(*queued, finish, on_error)
        queued = launched
    if queued is not None:
        yield from _finished(*queued, finish, on_error)


def _finished(docs, launched, finish, on_error) -> List[Doc]:
    try:
        finish(docs, launched)
    except Exception as err:
        on_error(docs, err)
        return []
    return docs


def filter_cut(filter_threshold: Optional[float]) -> Optional[float]:
    """The filter logit at ``filter_threshold``: ``sigmoid(x) >= t`` iff ``x >= logit(t)``.

    Compared in float64, this keeps what ``calibrate`` counted with probabilities: the
    threshold it saves lies >= 1e-12 away from every dev score (``separating_threshold``),
    far beyond the float64 rounding of either form.

    filter_threshold (Optional[float]): A probability, or None (keep everything).
    RETURNS (Optional[float]): The logit cut, or None.
    """
    if filter_threshold is None:
        return None
    t = float(filter_threshold)
    if t <= 0.0:
        return -math.inf
    if t >= 1.0:
        return math.inf
    return math.log(t) - math.log1p(-t)


def candidate_vectors(
    model: Model,
    docs: List[Doc],
    lengths: numpy.ndarray,
    max_span_length: int,
    chunk_size: int,
    suggester: Optional[Suggester],
    allow_punct_edges: bool,
) -> Iterator[Tuple[numpy.ndarray, Floats2d]]:
    """Candidate spans of the docs and their vectors, chunk by chunk.

    All docs form one token sequence, so a chunk may hold spans of several docs; rows
    are global (start, end) on the host, vectors are on the model's device.
    """
    tokens = predict_token_vectors(model.get_ref("tok2vec"), docs)
    given = None
    if suggester is not None:
        offsets = numpy.cumsum(lengths) - lengths
        per_doc = doc_candidates(docs, max_span_length, suggester, allow_punct_edges)
        given = numpy.concatenate([r + offsets[i] for i, r in enumerate(per_doc)]).astype("i")
    # A suggester's rows were edge-filtered per doc above; otherwise filter while enumerating.
    edges = EdgeRule(docs, allow_punct_edges).mask if given is None else None
    encoder = model.get_ref("span_encoder")
    return iter_span_vectors(encoder, tokens, lengths, max_span_length, chunk_size, rows=given, keep=edges)


def _group_by_doc(
    rows: numpy.ndarray, labels: numpy.ndarray, scores: numpy.ndarray, lengths: numpy.ndarray,
    n_candidates: int, n_scored: int, in_spans: Optional[numpy.ndarray] = None,
) -> SpanPredictions:
    """Global rows -> doc-local rows grouped per doc, by start then end."""
    ends = numpy.cumsum(lengths)
    doc_ids = numpy.searchsorted(ends, rows[:, 0], side="right")
    order = numpy.lexsort((rows[:, 1], rows[:, 0], doc_ids))
    local = (rows[order] - (ends - lengths)[doc_ids[order]][:, None]).astype("i")
    spans = Ragged(local, numpy.bincount(doc_ids, minlength=len(lengths)).astype("i"))
    return SpanPredictions(spans, labels[order].astype("i"), scores[order], n_candidates, n_scored,
                           None if in_spans is None else in_spans[order].astype(bool))


def _no_spans(n_docs: int) -> SpanPredictions:
    spans = Ragged(numpy.zeros((0, 2), dtype="i"), numpy.zeros(n_docs, dtype="i"))
    return SpanPredictions(spans, numpy.zeros(0, "i"), numpy.zeros(0, "f"), 0, 0)
