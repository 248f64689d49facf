"""Small helpers of ``sciner_spancat``: settings checks, ragged counts, a scaled optimizer,
prior biases."""
import importlib
from typing import Callable, Dict, Iterable, List, Tuple

import numpy
from spacy.training import Example
from thinc.api import Model, Optimizer
from thinc.types import Floats2d, Ints1d

from .filter import sigmoid

# thinc's chain forward (the module, not the `chain` function thinc.layers exports).
_CHAIN_FORWARD = importlib.import_module("thinc.layers.chain").forward


class ScaledOptimizer:
    """Calls an optimizer with its learning rate scaled (thinc's ``lr_scale``)."""

    def __init__(self, sgd: Optimizer, scale: float) -> None:
        self.sgd = sgd
        self.scale = scale

    def __call__(self, key, weights, gradient, *, lr_scale: float = 1.0):
        return self.sgd(key, weights, gradient, lr_scale=lr_scale * self.scale)


def finish_update_scaled(model: Model, sgd: Optimizer, scale: float, base_rate_part: Model) -> None:
    """``Model.finish_update`` with the learning rate scaled by ``scale``, except for the
    nodes of ``base_rate_part`` (e.g. an inline transformer: pretrained weights must not
    learn at the head's rate). A listener has no weights, so then this changes nothing.
    Sub-models of ``base_rate_part`` marked ``attrs["sciner_from_scratch"] = True`` (the
    CNN of ``spacy-sciner.HybridTok2Vec.v1``) start from random weights like the head and
    learn at its rate.

    model (Model): The model to update.
    sgd (Optimizer): The optimizer.
    scale (float): Learning-rate multiplier of every other node.
    base_rate_part (Model): A sub-model updated at the base rate.
    """
    base_ids = {node.id for node in base_rate_part.walk()}
    for node in base_rate_part.walk():
        if node.attrs.get("sciner_from_scratch"):
            base_ids.difference_update(part.id for part in node.walk())
    scaled = sgd if scale == 1.0 else ScaledOptimizer(sgd, scale)
    nodes = list(model.walk())
    # Same order as thinc's Model.finish_update: every shim first, then thinc params.
    for node in nodes:
        for shim in node.shims:
            shim.finish_update(sgd if node.id in base_ids else scaled)
    for node in nodes:
        optimizer = sgd if node.id in base_ids else scaled
        for name in node.param_names:
            if node.has_grad(name):
                param, _ = optimizer((node.id, name), node.get_param(name), node.get_grad(name))
                node.set_param(name, param)


def class_prior_biases(counts: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Output biases that make an untrained model predict the class prior.

    counts (numpy.ndarray): Sampled spans per class, the "no entity" class last.
    RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): log p(class) for the softmax, and the
        log-odds of "entity" for the filter's one logit (add-one smoothed).
    """
    prior = (numpy.asarray(counts, dtype="f8") + 1.0) / (numpy.sum(counts) + len(counts))
    p_entity = float(prior[:-1].sum())
    return numpy.log(prior).astype("f"), numpy.asarray([numpy.log(p_entity / (1.0 - p_entity))], dtype="f")


def sampled_class_counts(
    examples: Iterable[Example],
    spans_key: str,
    label_map: Dict[str, int],
    negatives_per_doc: int,
    n_negatives: Callable[[Example], int],
) -> numpy.ndarray:
    """How many spans of each class ``update`` samples in one pass over ``examples``:
    every gold span by label, and ``negatives_per_doc`` negatives per doc (fewer if the
    doc has fewer, ``n_negatives``). The "no entity" count comes last.
    """
    counts = numpy.zeros(len(label_map) + 1, dtype="f8")
    for eg in examples:
        gold = [label_map[s.label_] for s in eg.reference.spans.get(spans_key, []) if s.label_ in label_map]
        numpy.add.at(counts, numpy.asarray(gold, dtype="i"), 1)
        counts[-1] += min(negatives_per_doc, n_negatives(eg))
    return counts


def classifier_and_filter_loss(out: Floats2d, targets: Ints1d, n_classes: int) -> Tuple[float, Floats2d]:
    """Summed cross-entropy of the softmax plus binary cross-entropy of the filter logit.

    out (Floats2d): The model's output: n_classes probabilities, then the filter logit.
    targets (Ints1d): Class index of each span ("no entity" is n_classes - 1).
    n_classes (int): Labels + 1.
    RETURNS (Tuple[float, Floats2d]): The loss and d(loss)/d(out), numpy.
    """
    rows = numpy.arange(len(targets))
    truth = numpy.zeros((len(targets), n_classes), dtype="f")
    truth[rows, targets] = 1.0
    # Softmax_v2's backprop expects d(loss)/d(logits) = probs - truth.
    d_probs = out[:, :n_classes] - truth
    is_entity = (targets != n_classes - 1).astype("f")
    p_entity = sigmoid(out[:, n_classes])
    cross_entropy = -numpy.log(numpy.clip(out[rows, targets], 1e-9, 1.0)).sum()
    p_clipped = numpy.clip(p_entity, 1e-9, 1 - 1e-9)
    bce = -(is_entity * numpy.log(p_clipped) + (1 - is_entity) * numpy.log(1 - p_clipped)).sum()
    d_scores = numpy.hstack([d_probs, (p_entity - is_entity)[:, None]]).astype("f")
    return float(cross_entropy + bce), d_scores


def check_settings(max_span_length, negatives_per_doc, threshold, filter_threshold, chunk_size,
                   ents_threshold=None) -> None:
    """Fail early, with the setting's name, instead of deep inside numpy or torch."""
    problems = []
    if not isinstance(max_span_length, int) or max_span_length < 1:
        problems.append(f"max_span_length must be an integer >= 1, got {max_span_length!r}")
    if not isinstance(negatives_per_doc, int) or negatives_per_doc < 0:
        problems.append(f"negatives_per_doc must be an integer >= 0, got {negatives_per_doc!r}")
    if threshold is not None and not 0.0 <= float(threshold) <= 1.0:
        problems.append(f"threshold must be None (argmax) or in [0, 1], got {threshold!r}")
    if ents_threshold is not None and not 0.0 <= float(ents_threshold) <= 1.0:
        problems.append(f"ents_threshold must be None (doc.ents from doc.spans) or in [0, 1], got {ents_threshold!r}")
    if filter_threshold is not None and not 0.0 <= float(filter_threshold) <= 1.0:
        problems.append(f"filter_threshold must be None or in [0, 1], got {filter_threshold!r}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        problems.append(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if problems:
        raise ValueError("Invalid sciner_spancat settings: " + "; ".join(problems))


def chained_layers(model: Model) -> List[Model]:
    """The layers of nested chains, in the order they run; [model] for any other layer."""
    if model._func is not _CHAIN_FORWARD:
        return [model]
    return [leaf for layer in model.layers for leaf in chained_layers(layer)]
