"""Threshold selection for the high-recall filter (SEPT §3.5) and the decision threshold.

Both thresholds are chosen on dev data only. The functions take plain score arrays so
that they can be tested without a model.
"""
import math
from typing import Dict

import numpy
from thinc.types import Floats1d

ROUNDING = 1e6


def recall_threshold(gold_scores: Floats1d, target_recall: float) -> float:
    """The highest threshold that keeps at least ``target_recall`` of the gold spans.

    gold_scores (Floats1d): Filter probability of every gold span the enumeration
        reaches (width <= L); spans longer than L are outside the filter's reach.
    target_recall (float): Fraction of those gold spans to keep, in (0, 1].
    RETURNS (float): Keep a span when its filter probability is >= this value.
        0.0 (keep everything) when there is no gold span to calibrate on.
    """
    if not 0.0 < target_recall <= 1.0:
        raise ValueError(f"target_recall must be in (0, 1], got {target_recall}")
    if len(gold_scores) == 0:
        return 0.0
    ranked = numpy.sort(numpy.asarray(gold_scores, dtype="f8"))[::-1]
    # The k-th best gold score keeps k gold spans (ties keep more, never fewer).
    k = max(1, math.ceil(target_recall * len(ranked) - 1e-9))
    return floor_threshold(ranked[k - 1])


def best_f1_threshold(scores: Floats1d, correct: numpy.ndarray, n_gold: int) -> Dict[str, float]:
    """The decision threshold that maximizes micro F1 on dev.

    scores (Floats1d): Best-label probability of every candidate that reached the
        classifier.
    correct (numpy.ndarray): Whether that candidate's best label is a gold (span, label).
    n_gold (int): Number of gold (span, label) pairs, including those no candidate can
        reach (long or filtered spans), so recall stays honest.
    RETURNS (Dict[str, float]): "threshold", "p", "r", "f" at the best cutoff.
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
    return {"threshold": floor_threshold(ranked[best]), "p": float(p[best]), "r": float(r[best]), "f": float(f[best])}


def floor_threshold(value: float) -> float:
    """Round a threshold down to 6 decimals. The component's cfg is saved as JSON with
    10 significant decimals; a threshold rounded *up* on save could drop a span that sat
    exactly on it, so it is rounded down (keeping at least the same spans) before saving."""
    return math.floor(float(value) * ROUNDING) / ROUNDING


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

