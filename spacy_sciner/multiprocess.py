"""Make ``nlp.pipe(texts, n_process=N)`` safe with a torch pipeline on Linux.

spaCy starts its worker processes with ``fork`` (the default start method on Linux up to
Python 3.13). Two things inherited across that fork go wrong with a transformer pipeline:

* **torch's OpenMP thread pool.** Once the parent has run a parallel torch op (any
  prediction with the default thread settings does, e.g. the embedding lookup), the
  child inherits libgomp's bookkeeping of a pool whose threads do not exist in the child.
  Its first parallel op then waits forever for them: both workers block in libgomp and
  the parent waits for the workers. A child that calls ``torch.set_num_threads(1)``
  before its first op runs every op inline and never touches the stale pool (tested with
  the pool already started in the parent, ``tests/spancat/test_spancat_multiprocess.py``).
  One thread per worker is also the right setting: spaCy already spreads the work over
  the processes.
* **the Hugging Face tokenizers' thread pool.** The Rust library notices the fork in its
  own ``pthread_atfork`` child handler and disables its parallelism, printing "The
  current process just got forked, after parallelism has already been used..." once per
  worker, unless ``TOKENIZERS_PARALLELISM`` is set. That handler runs inside ``fork()``,
  before any Python code in the child, so the variable must already be set when the
  parent forks; setting it only around the fork keeps the parent's own batch tokenization
  parallel.

A worker also limits numpy's BLAS to one thread (``threadpoolctl``): its pool is fork-safe,
but N workers with a thread per core each would oversubscribe the cores.

``install_fork_guard()`` registers these fixes once per process; the sciner transformer
architecture (``spacy-sciner.TransformerModel.v1``) calls it whenever a model is built,
which includes ``spacy.load``, and so does ``ops.use_numpy_blas``. With the ``spawn``/``forkserver`` start methods the workers
are fresh interpreters and none of this applies.
"""
import os
import threading

TOKENIZERS_ENV = "TOKENIZERS_PARALLELISM"

_lock = threading.Lock()
_installed = False
# True while the before-fork hook has set TOKENIZERS_PARALLELISM (it was unset before).
_env_set_for_fork = False


def _before_fork() -> None:
    global _env_set_for_fork
    # Only when unset: a user's explicit choice (true or false) is left alone.
    if TOKENIZERS_ENV not in os.environ:
        os.environ[TOKENIZERS_ENV] = "false"
        _env_set_for_fork = True


def _after_fork_in_parent() -> None:
    global _env_set_for_fork
    if _env_set_for_fork:
        os.environ.pop(TOKENIZERS_ENV, None)
        _env_set_for_fork = False


def _after_fork_in_child() -> None:
    global _env_set_for_fork
    # The child keeps TOKENIZERS_PARALLELISM=false: after a fork the tokenizers library
    # runs single-threaded anyway (that is what it warns about).
    _env_set_for_fork = False
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return
    # Before any torch op in the child: see the module docstring.
    torch.set_num_threads(1)
    # numpy's BLAS (sciner_spancat's matrix products, ops.py) would start as many threads
    # as cores in every worker: one each too.
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def install_fork_guard() -> bool:
    """Register the fork hooks (idempotent).

    RETURNS (bool): True if this call registered them, False if already registered or
        the platform has no ``os.register_at_fork`` (Windows: no fork at all).
    """
    global _installed
    if not hasattr(os, "register_at_fork"):  # pragma: no cover - Windows
        return False
    with _lock:
        if _installed:
            return False
        os.register_at_fork(
            before=_before_fork,
            after_in_parent=_after_fork_in_parent,
            after_in_child=_after_fork_in_child,
        )
        _installed = True
        return True
