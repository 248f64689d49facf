"""Feed the PFT trainer its masked micro-batches from DataLoader worker processes.

Micro-batch ``m`` is a pure function of ``(seed, m)``: its examples come from the epoch
permutation seeded by ``(seed, epoch)`` and its masking from a generator seeded by
``(seed, 1, m)``. ``MicroBatches`` is a map-style dataset indexed by micro-batch number, so
the DataLoader yields the same batches, in the same order, with any number of workers, and
a resumed run simply starts the dataset at ``step * grad_accum``.

Workers are started with ``forkserver`` (``spawn`` where there is none): a worker forked
from the trainer would inherit torch's OpenMP pool, the tokenizers' thread pool, tqdm's
monitor thread and CUDA's threads, and any lock one of them held at the fork stays locked
in the child (see ``spacy_sciner/multiprocess.py``). The fork server is a fresh,
single-threaded interpreter, so none of that is inherited and nothing can deadlock. The
price is that the dataset is pickled to each worker once per run; ``PackedExamples`` keeps
that to a copy of a few flat arrays (a list of 93k ``Example`` objects took 1.1 s to pickle
and 2.8 s to unpickle; the packed form is ~100x faster).
"""
import math
import multiprocessing
from dataclasses import fields
from typing import FrozenSet, Iterator, Optional, Sequence

import numpy as np
import torch

from .data import Example
from .masking import MaskedBatch, MaskVocab, mask_batch

__all__ = ["PackedExamples", "MicroBatches", "batch_indices", "default_workers", "micro_batches"]


def batch_indices(n_examples: int, batch_size: int, seed: int, micro: int, order: Optional[np.ndarray] = None) -> np.ndarray:
    """Examples of micro-batch ``micro``: a stateless function of the seed and the index.

    n_examples (int): Training examples.
    batch_size (int): Examples per micro-batch.
    seed (int): Run seed.
    micro (int): Micro-batch number (``step * grad_accum + k``).
    order (Optional[np.ndarray]): The permutation of ``micro``'s epoch when the caller
        already has it (``epoch_order``); computed otherwise.
    RETURNS (np.ndarray): Example indices.
    """
    epoch, offset = divmod(micro, math.ceil(n_examples / batch_size))
    if order is None:
        order = epoch_order(n_examples, seed, epoch)
    return order[offset * batch_size : (offset + 1) * batch_size]


def epoch_order(n_examples: int, seed: int, epoch: int) -> np.ndarray:
    """The data order of one epoch (a permutation seeded by ``(seed, epoch)``)."""
    return np.random.default_rng([seed, epoch]).permutation(n_examples)


class PackedExamples:
    """The training examples as a few flat int32 arrays, rebuilt into ``Example``s on access.

    Pickling them for a worker is a memory copy; a list of ``Example`` objects is pickled
    object by object (see the module docstring).

    examples (Sequence[Example]): The examples to pack.
    """

    def __init__(self, examples: Sequence[Example]):
        lengths = np.fromiter((len(ex.input_ids) for ex in examples), dtype=np.int64, count=len(examples))
        n_cands = np.fromiter((len(ex.candidates) for ex in examples), dtype=np.int64, count=len(examples))
        self.starts = np.concatenate([[0], np.cumsum(lengths)])
        self.cand_starts = np.concatenate([[0], np.cumsum(n_cands)])
        self.input_ids = np.fromiter((i for ex in examples for i in ex.input_ids), np.int32, int(lengths.sum()))
        self.word_ids = np.fromiter((w for ex in examples for w in ex.word_ids), np.int32, int(lengths.sum()))
        spans = np.fromiter((x for ex in examples for c in ex.candidates for x in c), np.int32, 2 * int(n_cands.sum()))
        self.candidates = spans.reshape(-1, 2)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: int) -> Example:
        a, b = self.starts[i], self.starts[i + 1]
        cands = self.candidates[self.cand_starts[i] : self.cand_starts[i + 1]].tolist()
        return Example(self.input_ids[a:b].tolist(), self.word_ids[a:b].tolist(), [tuple(c) for c in cands])


class MicroBatches(torch.utils.data.Dataset):
    """Item ``i`` is the masked micro-batch ``start + i`` (a pure function of the seed and that number).

    examples (Sequence[Example]): Training examples (``PackedExamples`` pickles fastest).
    objectives (FrozenSet[str]): From ``parse_objective``.
    vocab (MaskVocab): Token ids for masking.
    batch_size (int): Examples per micro-batch.
    seed (int): Run seed.
    mask_ratio (float): Prediction budget per sequence.
    start, stop (int): The micro-batches to serve, ``[start, stop)``.
    """

    def __init__(self, examples, objectives: FrozenSet[str], vocab: MaskVocab, batch_size: int, seed: int,
                 mask_ratio: float, start: int, stop: int):
        self.examples, self.objectives, self.vocab = examples, objectives, vocab
        self.batch_size, self.seed, self.mask_ratio = batch_size, seed, mask_ratio
        self.start, self.stop = start, stop
        self._epoch, self._order = -1, None  # one permutation per epoch, not one per batch

    def __len__(self) -> int:
        return max(self.stop - self.start, 0)

    def __getitem__(self, i: int) -> MaskedBatch:
        micro = self.start + i
        epoch = micro // math.ceil(len(self.examples) / self.batch_size)
        if epoch != self._epoch:
            self._epoch, self._order = epoch, epoch_order(len(self.examples), self.seed, epoch)
        idx = batch_indices(len(self.examples), self.batch_size, self.seed, micro, self._order)
        rng = np.random.default_rng([self.seed, 1, micro])
        return mask_batch([self.examples[j] for j in idx], self.objectives, rng, self.vocab, self.mask_ratio)


def default_workers(device: torch.device) -> int:
    """Loader workers when ``--workers`` is not given: 2 on CUDA, none on the CPU.

    On the CPU the model step takes ~1,000x longer than masking a batch (benchmarks/results/
    pft_speed.md), and the cores are better spent on the step; on a GPU the trainer's
    process should do nothing but launch kernels.
    """
    return 2 if device.type == "cuda" else 0


def _worker_init(_worker_id: int) -> None:
    # The DataLoader already does this; said again because a worker's masking is
    # sequential and a worker with torch's default pool would take cores from the trainer.
    torch.set_num_threads(1)


class WireBatch:
    """A ``MaskedBatch`` as numpy arrays: the form a worker sends to the trainer.

    A torch tensor crosses the process boundary as a shared-memory segment plus a file
    descriptor, which cost the receiving process ~0.3 ms per tensor (a batch has ~8): more
    than masking the batch itself. A small numpy array is pickled by value, in microseconds.

    batch (MaskedBatch): The batch to send.
    """

    def __init__(self, batch: MaskedBatch):
        self.arrays = {f.name: getattr(batch, f.name) for f in fields(batch) if f.name not in ("selection", "n_tokens")}
        self.arrays = {name: t.numpy() if t is not None else None for name, t in self.arrays.items()}
        self.selection = {name: t.numpy() for name, t in batch.selection.items()}
        self.n_tokens = batch.n_tokens

    def batch(self) -> MaskedBatch:
        """The ``MaskedBatch`` again (tensors sharing the arrays' memory)."""
        tensors = {name: torch.from_numpy(a) if a is not None else None for name, a in self.arrays.items()}
        selection = {name: torch.from_numpy(a) for name, a in self.selection.items()}
        return MaskedBatch(**tensors, selection=selection, n_tokens=self.n_tokens)

    def pin_memory(self) -> MaskedBatch:
        """Called by the DataLoader's pin-memory thread, so the conversion is off the training thread."""
        return self.batch().pin_memory()


def _to_wire(batch: MaskedBatch) -> WireBatch:
    return WireBatch(batch)  # runs in the worker (a module function: picklable)


def _as_is(batch: MaskedBatch) -> MaskedBatch:
    return batch  # items are whole micro-batches already


def worker_context():
    """``forkserver`` where the platform has it, else ``spawn`` (never ``fork``: see above).

    The fork server imports this module (and with it torch) once, so each worker starts as
    a fork of an interpreter that has torch already, not as a new one that imports it.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", __name__])  # "__main__": Python's default
    return context


def micro_batches(dataset: MicroBatches, workers: int, pin_memory: bool) -> Iterator[MaskedBatch]:
    """Iterate the dataset's micro-batches in order, masked by ``workers`` processes (0: inline).

    dataset (MicroBatches): The micro-batches of this run (segment).
    workers (int): Worker processes; 0 masks in the calling process.
    pin_memory (bool): Page-lock the batches (CUDA), so host->device copies are asynchronous.
    RETURNS (Iterator[MaskedBatch]): One batch per micro-batch number, in order.
    """
    extra = {"collate_fn": _as_is}
    if workers > 0:
        # 4 batches ahead per worker: a GPU step is ~10 ms, a worker start-up hiccup longer.
        extra = dict(multiprocessing_context=worker_context(), worker_init_fn=_worker_init, prefetch_factor=4,
                     collate_fn=_to_wire)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, shuffle=False, num_workers=workers,
                                         pin_memory=pin_memory, **extra)
    # Pinned, a WireBatch is already a MaskedBatch again (pin_memory above).
    return (item.batch() if isinstance(item, WireBatch) else item for item in loader)
