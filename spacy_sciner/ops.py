"""CPU matrix products through numpy's BLAS instead of thinc's ``blis``.

thinc's ``NumpyOps`` multiplies matrices with the ``blis`` package (one thread, and on
some CPUs without a kernel tuned for them); ``NumpyOps(use_blis=False)`` hands the same
products to numpy, whose OpenBLAS is tuned per CPU at run time. On the 2-core AMD EPYC
this project is measured on, numpy's ``gemm`` ran 5-8x faster than blis's at the shapes of
the CNN tok2vec and the span MLP, and the CNN recipe's ``nlp.pipe`` 3.1x, its training
2.4x (``benchmarks/blas_ops.py``, ``benchmarks/results/blas_ops_*``). The layers,
weights and results are the same; only the rounding of the float32 sums may differ in the
last bits.

``sciner_spancat`` runs its own model this way on the CPU. ``spacy-sciner.numpy_blas.v1``
(a ``[nlp.after_pipeline_creation]`` callback) does it for every component of a pipeline,
e.g. the separate ``tok2vec`` of ``configs/sciner_spancat_cnn.cfg``; it works for any spaCy
pipeline. GPU ops (``CupyOps``) and models without blis are left alone; a model moved with
``to_cpu()`` gets thinc's default ops back.

The same ops also compute ``relu`` with numpy's vectorised ``maximum``:
thinc's element loop took 26 ms where ``numpy.maximum`` took 1.6 ms on a 30,000 x 150
float32 array (the span MLP's hidden layer over a batch's kept spans), on this machine.
Same values, NaN kept as thinc keeps it; its gradient is thinc's.

That BLAS runs a thread per core, and its threads keep spinning for a while after each
call. Beside a PyTorch transformer, whose own thread pool computes the next batch right
after, the two pools then fight for the cores: ``blas_threads`` holds numpy's BLAS to one
thread around a block, and ``sciner_spancat`` does so for its inference and updates when
it reads a transformer (``benchmarks/blas_threads.py``; ``benchmarks/results/blas_threads_plain``
and ``blas_threads_hybrid``).
"""
import contextlib
import functools
from typing import Callable, ContextManager, Optional

import numpy
from spacy.language import Language
from thinc.api import Model, NumpyOps

from .multiprocess import install_fork_guard


class NumpyBlasOps(NumpyOps):
    """``NumpyOps(use_blis=False)`` whose ``relu`` is numpy's vectorised ``maximum``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(use_blis=False, **kwargs)

    def relu(self, X, inplace: bool = False):
        if not isinstance(X, numpy.ndarray):
            return super().relu(X, inplace=inplace)
        # max(x, 0): negatives to 0, NaN stays NaN, as in thinc's loop. (The gradient stays
        # thinc's: a product with the mask would turn an infinite upstream gradient into NaN.)
        return numpy.maximum(X, X.dtype.type(0), out=X if inplace else None)


def use_numpy_blas(model: Model) -> int:
    """Give every node of the model that multiplies through blis numpy's BLAS instead.

    model (Model): A thinc model (its whole tree is walked).
    RETURNS (int): How many nodes were switched.
    """
    # nlp.pipe(n_process=N) workers then use one BLAS thread each (multiprocess.py).
    install_fork_guard()
    numpy_ops = None
    switched = 0
    for node in model.walk():
        ops = node.ops
        # Exactly NumpyOps: subclasses (AppleOps, BigEndianOps) choose their own kernels.
        if type(ops) is NumpyOps and ops.use_blis:
            numpy_ops = numpy_ops or NumpyBlasOps()
            node.ops = numpy_ops
            switched += 1
    return switched


def make_numpy_blas_callback() -> Callable[[Language], Language]:
    """``spacy-sciner.numpy_blas.v1``: an ``[nlp.after_pipeline_creation]`` callback
    that applies ``use_numpy_blas`` to the model of every component.

    RETURNS (Callable[[Language], Language]): The callback.
    """

    def numpy_blas(nlp: Language) -> Language:
        for _, component in nlp.pipeline:
            model = getattr(component, "model", None)
            if isinstance(model, Model):
                use_numpy_blas(model)
        return nlp

    return numpy_blas


@functools.lru_cache(maxsize=1)
def _threadpool_controller():
    from threadpoolctl import ThreadpoolController

    # One scan of the process for its BLAS libraries (~3 ms; the limit itself then ~30 us),
    # at the first call: numpy's own BLAS, loaded with numpy, is among them.
    return ThreadpoolController()


def blas_threads(limit: Optional[int]) -> ContextManager:
    """Hold numpy's BLAS to ``limit`` threads inside a ``with`` block, and restore it after:
    numpy's and every other BLAS library loaded at the first call (one loaded later is left
    alone). The setting is per process: other threads' BLAS calls during the block get it too.

    limit (Optional[int]): Threads; None leaves the BLAS as it is.
    RETURNS (ContextManager): The block's context.
    """
    if limit is None:
        return contextlib.nullcontext()
    return _threadpool_controller().limit(limits=limit, user_api="blas")
