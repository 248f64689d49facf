"""Small helpers of ``sciner_spancat``: settings checks, ragged counts, a scaled optimizer."""
import numpy
from thinc.api import Optimizer


class ScaledOptimizer:
    """Calls an optimizer with its learning rate scaled (thinc's ``lr_scale``)."""

    def __init__(self, sgd: Optimizer, scale: float) -> None:
        self.sgd = sgd
        self.scale = scale

    def __call__(self, key, weights, gradient, *, lr_scale: float = 1.0):
        return self.sgd(key, weights, gradient, lr_scale=lr_scale * self.scale)


def group_counts(lengths, keep: numpy.ndarray) -> numpy.ndarray:
    """How many kept rows each group of a ragged array has."""
    lengths = numpy.asarray(lengths)
    if len(keep) == 0:
        return numpy.zeros(len(lengths), dtype="i")
    group = numpy.repeat(numpy.arange(len(lengths)), lengths)
    return numpy.bincount(group, weights=keep, minlength=len(lengths)).astype("i")


def check_settings(max_span_length, negatives_per_doc, threshold, filter_threshold, chunk_size) -> None:
    """Fail early, with the setting's name, instead of deep inside numpy or torch."""
    problems = []
    if not isinstance(max_span_length, int) or max_span_length < 1:
        problems.append(f"max_span_length must be an integer >= 1, got {max_span_length!r}")
    if not isinstance(negatives_per_doc, int) or negatives_per_doc < 0:
        problems.append(f"negatives_per_doc must be an integer >= 0, got {negatives_per_doc!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        problems.append(f"threshold must be in [0, 1], got {threshold!r}")
    if filter_threshold is not None and not 0.0 <= float(filter_threshold) <= 1.0:
        problems.append(f"filter_threshold must be None or in [0, 1], got {filter_threshold!r}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        problems.append(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if problems:
        raise ValueError("Invalid sciner_spancat settings: " + "; ".join(problems))
