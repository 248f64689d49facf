"""Threshold selection for the high-recall filter (SEPT §3.5) and the decision rule.

The filter threshold and the decision rule (argmax, or a probability floor when that is
better on dev) are chosen on dev data only. The functions take plain score arrays so
that they can be tested without a model.
"""
import math
from typing import TYPE_CHECKING, Any, Dict, Iterable, NamedTuple, Optional

import numpy
from spacy.language import Language
from spacy.training import Example
from spacy.util import minibatch
from thinc.types import Floats1d

from .decode import best_labels, greedy_decode, is_entity
from .sampling import gold_spans, span_keys

if TYPE_CHECKING:
    from .component import SciNERSpanCategorizer

DECIMALS = 10  # srsly writes JSON floats with 10 decimals
TOLERANCE = 1e-12  # far above the last bit srsly's parser may change on scores in [0, 1]


def recall_threshold(gold_scores: Floats1d, target_recall: float) -> float:
    """The highest threshold that keeps at least ``target_recall`` of the gold spans.

    gold_scores (Floats1d): Filter probability of every gold span the enumeration
        reaches (width <= L); spans longer than L are outside the filter's reach.
    target_recall (float): Fraction of those gold spans to keep, in (0, 1].
    RETURNS (float): The exact cut: keep a span when its filter probability is >= it.
        0.0 (keep everything) when there is no gold span to calibrate on. The value
        saved is ``separating_threshold`` of it (see ``choose_thresholds``).
    """
    if not 0.0 < target_recall <= 1.0:
        raise ValueError(f"target_recall must be in (0, 1], got {target_recall}")
    if len(gold_scores) == 0:
        return 0.0
    ranked = numpy.sort(numpy.asarray(gold_scores, dtype="f8"))[::-1]
    # The k-th best gold score keeps k gold spans (ties keep more, never fewer).
    k = max(1, math.ceil(target_recall * len(ranked) - 1e-9))
    return float(ranked[k - 1])


def best_f1_threshold(scores: Floats1d, correct: numpy.ndarray, n_gold: int) -> Dict[str, float]:
    """The decision threshold that maximizes micro F1 on dev.

    scores (Floats1d): Best-label probability of every candidate that reached the
        classifier.
    correct (numpy.ndarray): Whether that candidate's best label is a gold (span, label).
    n_gold (int): Number of gold (span, label) pairs, including those no candidate can
        reach (long or filtered spans), so recall stays honest.
    RETURNS (Dict[str, float]): "threshold", "p", "r", "f" at the best cutoff; the
        threshold keeps exactly the candidates counted, also after a JSON round trip.
    """
    if len(scores) == 0 or n_gold == 0:
        return {"threshold": 0.5, "p": 0.0, "r": 0.0, "f": 0.0}
    order = numpy.argsort(-numpy.asarray(scores, dtype="f8"), kind="stable")
    ranked = numpy.asarray(scores, dtype="f8")[order]
    tp = numpy.cumsum(numpy.asarray(correct, dtype="f8")[order])
    kept = numpy.arange(1, len(ranked) + 1)
    # A cutoff can only sit where the score changes: equal scores are kept together.
    last_of_tie = numpy.append(ranked[1:] < ranked[:-1], True)
    p, r = tp / kept, tp / n_gold
    f = numpy.where(p + r > 0, 2 * p * r / numpy.maximum(p + r, 1e-12), 0.0)
    f = numpy.where(last_of_tie, f, -1.0)
    best = int(f.argmax())
    below = float(ranked[best + 1]) if best + 1 < len(ranked) else None
    return {"threshold": separating_threshold(ranked[best], below), "p": float(p[best]), "r": float(r[best]), "f": float(f[best])}


class CalibrationData(NamedTuple):
    """Dev statistics of every candidate span, collected without any pruning."""

    gold_filter_probs: numpy.ndarray  # filter probability of each reachable gold span
    filter_probs: numpy.ndarray  # filter probability of every candidate span
    best_scores: numpy.ndarray  # best-label probability of every candidate span
    correct: numpy.ndarray  # whether that best label is a gold (span, label)
    is_argmax: numpy.ndarray  # whether the argmax over labels + "no entity" is a label
    n_gold_pairs: int  # gold (span, label) pairs, reachable or not
    n_gold_spans: int  # distinct gold spans, reachable or not
    n_gold_long: int  # distinct gold spans longer than max_span_length
    # For doc.ents' own floor (``choose_ents_threshold``): each candidate's doc-local
    # (start, end), candidates per doc, tokens per doc, whether its best label makes a
    # gold entity (reference doc.ents), and the number of gold entities.
    rows: Optional[numpy.ndarray] = None
    doc_counts: Optional[numpy.ndarray] = None
    doc_lengths: Optional[numpy.ndarray] = None
    ent_correct: Optional[numpy.ndarray] = None
    n_gold_ents: int = 0


def collect_calibration_data(
    pipe: "SciNERSpanCategorizer",
    examples: Iterable[Example],
    *,
    nlp: Optional[Language] = None,
    batch_size: int = 64,
) -> CalibrationData:
    """Score every candidate span of the dev examples and match them against gold.

    pipe (SciNERSpanCategorizer): The trained component.
    examples (Iterable[Example]): Dev examples.
    nlp (Optional[Language]): If given, its components before ``pipe`` are run first.
    batch_size (int): Docs per batch.
    RETURNS (CalibrationData): The statistics the thresholds are chosen from.
    """
    label_map, max_length = pipe._label_map, int(pipe.cfg["max_span_length"])
    gold_probs, all_probs, best, correct, argmax = [], [], [], [], []
    all_rows, counts, doc_lengths, ent_correct = [], [], [], []
    n_pairs = n_spans = n_long = n_ents = 0
    for batch in minibatch(examples, batch_size):
        docs = [eg.predicted for eg in batch]
        for _, proc in nlp.pipeline if nlp is not None else []:
            if proc is pipe:
                break
            docs = list(proc.pipe(docs))
        spans, f_probs, _, probs = pipe.score_candidates(docs, prune=False)
        labels, scores = best_labels(probs, len(label_map))
        argmax.append(is_entity(probs, len(label_map), None))
        offset = 0
        for eg, doc, count in zip(batch, docs, numpy.asarray(spans.lengths).tolist()):
            rows, window = spans.dataXd[offset : offset + count], slice(offset, offset + count)
            reference = eg.reference.spans.get(pipe.key, [])
            n_pairs += len({(s.label_, s.start, s.end) for s in reference})
            n_spans += len({(s.start, s.end) for s in reference})
            n_long += len({(s.start, s.end) for s in reference if len(s) > max_length})
            # A dev label the model never saw is gold it cannot get right: it counts for the
            # filter's recall and as a miss for the decision threshold, never as an error.
            gold, gold_labels = gold_spans(eg, pipe.key, label_map, unknown=len(label_map))
            size = len(doc) + 1
            # (span, label) pairs encoded as integers, to match them with numpy.
            gold_pairs = span_keys(gold, size) * (len(label_map) + 1) + gold_labels
            cand_pairs = span_keys(rows, size) * (len(label_map) + 1) + labels[window]
            gold_probs.append(f_probs[window][numpy.isin(span_keys(rows, size), span_keys(gold, size))])
            correct.append(numpy.isin(cand_pairs, gold_pairs))
            ents, ent_labels = gold_ents(eg, label_map)
            n_ents += len(eg.reference.ents)
            ent_correct.append(numpy.isin(cand_pairs, span_keys(ents, size) * (len(label_map) + 1) + ent_labels))
            all_rows.append(numpy.asarray(rows, dtype="i").reshape(-1, 2))
            counts.append(count)
            doc_lengths.append(len(doc))
            offset += count
        all_probs.append(f_probs)
        best.append(scores)

    def join(parts, dtype):
        return numpy.concatenate(parts) if parts else numpy.zeros(0, dtype=dtype)

    return CalibrationData(
        join(gold_probs, "f"), join(all_probs, "f"), join(best, "f"), join(correct, bool), join(argmax, bool),
        n_pairs, n_spans, n_long, numpy.concatenate(all_rows) if all_rows else numpy.zeros((0, 2), "i"),
        numpy.asarray(counts, dtype="i"), numpy.asarray(doc_lengths, dtype="i"), join(ent_correct, bool), n_ents,
    )


def gold_ents(eg: Example, label_map: Dict[str, int]):
    """The reference ``doc.ents`` aligned to the predicted tokens: (start, end) rows and
    class indices (``len(label_map)`` for a label the model does not know)."""
    aligned = eg.get_aligned_spans_y2x(eg.reference.ents)
    rows = numpy.asarray([(span.start, span.end) for span in aligned], dtype="i").reshape(-1, 2)
    labels = numpy.asarray([label_map.get(span.label_, len(label_map)) for span in aligned], dtype="i")
    return rows, labels


def argmax_scores(correct: numpy.ndarray, is_argmax: numpy.ndarray, n_gold: int) -> Dict[str, float]:
    """Micro P/R/F of the argmax rule over the given candidates.

    correct (numpy.ndarray): Whether each candidate's best label is a gold (span, label).
    is_argmax (numpy.ndarray): Whether the argmax rule outputs the candidate.
    n_gold (int): Gold (span, label) pairs, reachable or not.
    RETURNS (Dict[str, float]): "p", "r", "f".
    """
    tp, n_pred = float((correct & is_argmax).sum()), int(is_argmax.sum())
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return {"p": p, "r": r, "f": 2 * p * r / (p + r) if p + r else 0.0}


def choose_thresholds(
    data: CalibrationData, *, target_recall: float, tune_threshold: bool = True, tune_ents: bool = False
) -> Dict[str, Any]:
    """The filter threshold for ``target_recall`` and, optionally, the decision rule:
    argmax, unless a probability floor reaches a higher micro F1 on the dev spans the
    filter keeps; with a report of what they achieve.

    data (CalibrationData): Dev statistics from ``collect_calibration_data``.
    target_recall (float): Fraction of reachable gold spans the filter must keep.
    tune_threshold (bool): Also choose the decision rule.
    tune_ents (bool): With ``tune_threshold``, also choose doc.ents' own floor
        (``choose_ents_threshold``; ``data`` must hold gold doc.ents).
    RETURNS (Dict[str, Any]): filter_threshold, filter_recall (of gold spans up to
        max_span_length), candidate_recall (of all gold spans), filtration_rate (pruned
        fraction of candidates), counts, and with ``tune_threshold``: threshold (None =
        argmax), decision, dev_p/r/f of the chosen rule, argmax_dev_f, floor_dev_f and
        floor_threshold (the best floor, whether chosen or not).
    """
    cut = recall_threshold(data.gold_filter_probs, target_recall)
    lower = data.filter_probs[data.filter_probs < cut]
    threshold = separating_threshold(cut, float(lower.max()) if len(lower) else None)
    kept = data.filter_probs >= threshold
    n_kept_gold = int((data.gold_filter_probs >= threshold).sum())
    report: Dict[str, Any] = {
        "target_recall": float(target_recall),
        "filter_threshold": threshold,
        "filter_recall": n_kept_gold / len(data.gold_filter_probs) if len(data.gold_filter_probs) else 1.0,
        "candidate_recall": n_kept_gold / data.n_gold_spans if data.n_gold_spans else 1.0,
        "filtration_rate": float(1.0 - kept.mean()) if len(kept) else 0.0,
        "n_candidates": int(len(kept)),
        "n_gold_spans": int(data.n_gold_spans),
        "n_gold_longer_than_max": int(data.n_gold_long),
    }
    if tune_threshold:
        floor = best_f1_threshold(data.best_scores[kept], data.correct[kept], data.n_gold_pairs)
        argmax = argmax_scores(data.correct[kept], data.is_argmax[kept], data.n_gold_pairs)
        # Argmax is the default rule; a floor must earn its place on dev (ties: argmax).
        chosen, value = (floor, floor["threshold"]) if floor["f"] > argmax["f"] else (argmax, None)
        report.update({
            "threshold": value, "decision": "argmax" if value is None else "floor",
            "dev_p": chosen["p"], "dev_r": chosen["r"], "dev_f": chosen["f"],
            "argmax_dev_f": argmax["f"], "floor_dev_f": floor["f"], "floor_threshold": floor["threshold"],
        })
        if tune_ents:
            spans_rule = kept & (data.is_argmax if value is None else data.best_scores.astype("float64") >= value)
            report.update(choose_ents_threshold(data, kept, spans_rule))
    return report


def choose_ents_threshold(data: CalibrationData, kept: numpy.ndarray, spans_rule: numpy.ndarray) -> Dict[str, Any]:
    """doc.ents' own probability floor, where it beats decoding the doc.spans output.

    doc.ents is the greedy non-overlapping decode (highest score first) of its
    candidates. Output as doc.spans, an overlapping span costs precision; decoded into
    doc.ents it is a runner-up that a better span blocks, so the floor that is best for
    doc.ents F is often lower than doc.spans' (with few training sentences, much lower).
    Greedy decoding with a floor keeps exactly the spans that the decode of all kept
    candidates chooses and that reach the floor (the spans below it come last in the
    decode's order), so one decode per doc rates every floor.

    data (CalibrationData): Dev statistics, with gold ``doc.ents``.
    kept (numpy.ndarray): The candidates the filter keeps.
    spans_rule (numpy.ndarray): The candidates the chosen decision rule outputs.
    RETURNS (Dict[str, Any]): ents_threshold (None: decode doc.spans), ents_dev_p/r/f of
        the chosen way, ents_dev_f_from_spans (decoding doc.spans) and ents_floor_dev_f.
    """
    scores = data.best_scores.astype("float64")
    from_spans = _decode_per_doc(data, spans_rule, scores)
    spans_way = argmax_scores(data.ent_correct, from_spans, data.n_gold_ents)
    decoded = _decode_per_doc(data, kept, scores)
    floor = best_f1_threshold(scores[decoded], data.ent_correct[decoded], data.n_gold_ents)
    # The floor must earn its place on dev (ties: decode doc.spans, as before calibration).
    chosen, value = (floor, floor["threshold"]) if floor["f"] > spans_way["f"] else (spans_way, None)
    return {"ents_threshold": value, "ents_dev_p": chosen["p"], "ents_dev_r": chosen["r"], "ents_dev_f": chosen["f"],
            "ents_dev_f_from_spans": spans_way["f"], "ents_floor_dev_f": floor["f"]}


def _decode_per_doc(data: CalibrationData, candidates: numpy.ndarray, scores: numpy.ndarray) -> numpy.ndarray:
    """Bool mask of the candidates the greedy decode chooses, doc by doc, among ``candidates``."""
    chosen = numpy.zeros(len(candidates), dtype=bool)
    offset = 0
    for count, length in zip(data.doc_counts.tolist(), data.doc_lengths.tolist()):
        index = numpy.flatnonzero(candidates[offset : offset + count]) + offset
        picked = greedy_decode(data.rows[index], scores[index], length)
        chosen[index[picked]] = True
        offset += count
    return chosen


def separating_threshold(cut: float, below: Optional[float]) -> float:
    """A short decimal ``t`` with ``below < t < cut`` (by a margin of ``TOLERANCE``): it keeps
    exactly the scores >= ``cut`` and still does after the pipeline's cfg is written as JSON
    (10 decimals) and read back (srsly's parser may move the last bit). A value rounded to
    fixed decimals instead let in scores just below the cut, so the saved pipeline did not
    score what calibration had measured.

    cut (float): The lowest score to keep.
    below (Optional[float]): The highest score to drop (None: nothing below the cut).
    RETURNS (float): The threshold, >= 0; when no 10-decimal value fits between two scores
        closer than ~1e-10, they are kept together.
    """
    top = float(cut) - TOLERANCE
    for decimals in range(1, DECIMALS + 1):
        value = max(0.0, float(f"{math.floor(top * 10**decimals) / 10**decimals:.{decimals}f}"))
        if below is None or value > below + TOLERANCE:
            return value
    return max(0.0, float(f"{math.floor(top * 10**DECIMALS) / 10**DECIMALS:.{DECIMALS}f}"))


def sigmoid(logits: numpy.ndarray) -> numpy.ndarray:
    """Numerically stable logistic function; predict() and calibrate() both use it, so a
    threshold chosen on dev compares exactly the same numbers at inference."""
    logits = numpy.asarray(logits, dtype="f8")
    out = numpy.empty_like(logits)
    pos = logits >= 0
    out[pos] = 1.0 / (1.0 + numpy.exp(-logits[pos]))
    exp = numpy.exp(logits[~pos])
    out[~pos] = exp / (1.0 + exp)
    return out

