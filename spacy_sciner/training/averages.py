"""The optimizer's parameter averages (``use_averages = true``), for the transformer too.

thinc's optimizer averages every parameter it updates, a PyTorch model's included: a
``PyTorchShim`` updates each torch parameter under the key ``(shim.id, name)``. But the shim's
``use_params`` looks for keys ``"pytorch_<shim.id>_<name>"``, which no optimizer writes, so
``nlp.use_params(optimizer.averages)`` swaps in the averages of spaCy's own layers (the CNN
tok2vec, the span scorer) and leaves the transformer at its last weights: with
``use_averages = true`` spaCy evaluates and saves a mix of averaged heads and a raw encoder.
``use_averages`` swaps in both.
"""
import contextlib
from typing import Dict, Iterator, List, Optional, Tuple

import torch
from thinc.api import Model
from thinc.shims import PyTorchShim
from thinc.util import xp2torch


def torch_shims(nlp) -> List[PyTorchShim]:
    """The PyTorch shims of the pipeline's models, each once (a shared transformer too)."""
    shims: List[PyTorchShim] = []
    for _, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if not isinstance(model, Model):
            continue
        for node in model.walk():
            shims.extend(s for s in node.shims if isinstance(s, PyTorchShim) and s not in shims)
    return shims


@contextlib.contextmanager
def use_averages(nlp, averages: Optional[Dict[Tuple[int, str], object]]) -> Iterator[None]:
    """Run the block with the optimizer's averages in place of every averaged weight, those of
    PyTorch models included, and restore the trained weights after it.

    nlp (Language): The pipeline.
    averages (Optional[dict]): ``optimizer.averages``; None or empty: the weights as they are.
    """
    if not averages:
        yield
        return
    with contextlib.ExitStack() as stack:
        for shim in torch_shims(nlp):
            stack.enter_context(_swap_torch_weights(shim, averages))
        stack.enter_context(nlp.use_params(averages))  # spaCy's and thinc's own layers
        yield


@contextlib.contextmanager
def _swap_torch_weights(shim: PyTorchShim, averages: Dict[Tuple[int, str], object]) -> Iterator[None]:
    """The shim's torch parameters replaced in place by their averages (those the optimizer
    has; a frozen parameter has none and stays), and put back after the block."""
    params = {name: p for name, p in shim._model.named_parameters() if (shim.id, name) in averages}
    backup = {name: p.detach().clone() for name, p in params.items()}
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(xp2torch(averages[(shim.id, name)], device=p.device))
    try:
        yield
    finally:
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(backup[name])
