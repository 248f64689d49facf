"""Streaming, optionally multi-process, passes over text files (used by mine and select).

``run_partitioned`` reads the input in batches of documents and deals them round-robin
into ``n_parts`` parts: batch i belongs to part i % n_parts. Each part folds its batches, in
input order, into an accumulator of its own, and the parts come back in part order. What a
part holds is thus a function of the input and ``n_parts`` only, never of ``n_process`` or
of timing, so even a lossy (memory-capped) accumulator gives the same result on one
process or several. With ``n_process`` > 1, worker k (forked) reads the input itself, folds
parts k, k + n_process, ... and sends them once at the end; only a small progress message
per batch crosses processes. (Sending every batch's result to the main process,
Pool-style, cost more than the work: the n-gram tables are large.)
"""
import multiprocessing
import queue as queue_module
import warnings
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from tqdm import tqdm

from .text import ReadStats, read_documents

Doc = List[Tuple[str, int, str]]  # (path, line number, text) lines of one document


class LineBar(tqdm):
    """A progress bar counting lines as integers: "mining: 12,000 lines [00:03, 4,000 lines/s]".

    tqdm's ``unit_scale`` shows "0.00 lines" and its plain rate has two decimals; neither
    means anything for a count of lines.
    """

    FORMAT = "{desc}: {n:,} lines [{elapsed}, {rate_int} lines/s{postfix}]"

    def __init__(self, desc: str, enabled: bool = True):
        super().__init__(desc=desc, disable=not enabled, bar_format=self.FORMAT)

    @property
    def format_dict(self):
        values = super().format_dict
        rate = values["rate"]
        if rate is None and values["elapsed"]:
            rate = values["n"] / values["elapsed"]
        values["rate_int"] = f"{rate:,.0f}" if rate else "?"
        return values


def batched(docs: Iterable[Doc], batch_lines: int) -> Iterator[List[Doc]]:
    """Group documents into batches of about ``batch_lines`` lines."""
    batch, n_lines = [], 0
    for doc in docs:
        batch.append(doc)
        n_lines += len(doc)
        if n_lines >= batch_lines:
            yield batch
            batch, n_lines = [], 0
    if batch:
        yield batch


def fork_available() -> bool:
    """Whether worker processes can be forked (not on Windows; macOS allows it)."""
    return "fork" in multiprocessing.get_all_start_methods()


def usable_processes(n_process: int, n_parts: int, paths: Sequence[str]) -> int:
    """The number of processes that can work, with a warning when it is below ``n_process``.

    Workers are forked because the work function is a closure (not picklable); they own
    whole parts, so more than ``n_parts`` would idle; stdin can be read only once.
    """
    if n_process <= 1:
        return 1
    reason = None
    if "-" in paths:
        reason = "the input includes stdin, which only one process can read"
    elif not fork_available():
        reason = "the 'fork' start method is not available on this platform"
    if reason is not None:
        warnings.warn(f"n_process={n_process}: using one process, {reason}", RuntimeWarning,
                      stacklevel=3)
        return 1
    if n_process > n_parts:
        warnings.warn(f"n_process={n_process}: using {n_parts} processes, one per part "
                      f"of the input (n_parts={n_parts})", RuntimeWarning, stacklevel=3)
    return min(n_process, n_parts)


def _fold_parts(paths, doc_boundary, batch_lines, work, empty, parts, n_parts, on_batch):
    """Fold the batches of the wanted parts into one accumulator per part, in input order."""
    stats = ReadStats()
    totals = {part: empty() for part in parts}
    for index, batch in enumerate(batched(read_documents(paths, doc_boundary, stats), batch_lines)):
        total = totals.get(index % n_parts)
        if total is None:
            continue
        result = work(batch, index)
        total.merge(result)
        on_batch((result.lines, result.occurrences))
    return totals, stats


def _worker(results, progress, args):
    try:
        results.put(("ok", _fold_parts(*args, on_batch=progress.put)))
    except BaseException as err:  # report it, so that the main process does not wait forever
        results.put(("error", f"{type(err).__name__}: {err}"))


def _run_workers(args, n_parts, n_process, show) -> Tuple[Dict[int, object], ReadStats]:
    ctx = multiprocessing.get_context("fork")
    results_queue, progress = ctx.Queue(), ctx.Queue()
    workers = [ctx.Process(target=_worker, daemon=True, args=(
        results_queue, progress, (*args, range(k, n_parts, n_process), n_parts)))
        for k in range(n_process)]
    for worker in workers:
        worker.start()
    results = []
    try:
        while len(results) < n_process:
            while not progress.empty():
                show(progress.get())
            try:
                results.append(results_queue.get(timeout=0.2))
            except queue_module.Empty:
                if not any(w.is_alive() for w in workers) and results_queue.empty():
                    raise RuntimeError("a worker process died without a result")
    finally:
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.terminate()
    errors = [payload for status, payload in results if status == "error"]
    if errors:
        raise RuntimeError(f"worker process failed: {errors[0]}")
    totals = {}
    for _, (parts, _) in results:
        totals.update(parts)
    return totals, results[0][1][1]  # every worker read every line: one ReadStats suffices


def run_partitioned(
    paths: Sequence[str],
    doc_boundary: str,
    batch_lines: int,
    work: Callable,
    empty: Callable,
    n_process: int = 1,
    bar: Optional[tqdm] = None,
    n_parts: Optional[int] = None,
) -> Tuple[List[object], ReadStats]:
    """Process text files batch by batch, in this process or in ``n_process`` workers.

    paths (Sequence[str]): Text files ("-": stdin, always read in this process).
    doc_boundary (str): "line" or "blank" (see ``text.read_documents``).
    batch_lines (int): Lines per batch.
    work (Callable[[List[Doc], int], R]): Processes a batch (with its index); R has
        ``lines`` and ``occurrences`` attributes (for the progress bar).
    empty (Callable[[], A]): A new accumulator of a part; ``A.merge(R)`` folds a batch.
    n_process (int): Worker processes (at most ``n_parts`` are used).
    bar (Optional[tqdm]): Progress bar, updated with lines and a "candidates" postfix.
    n_parts (Optional[int]): Parts of the input; the result depends on it, never on
        ``n_process``. None: one per process, for accumulators whose merge is exact.
    RETURNS (Tuple[List[A], ReadStats]): The accumulators of the parts, in part order,
        and the reader's counts.
    """
    n_parts = max(1, n_parts or n_process)
    found = 0

    def show(counts: Tuple[int, int]) -> None:
        nonlocal found
        if bar is not None:
            found += counts[1]
            bar.update(counts[0])
            bar.set_postfix_str(f"candidates={found:,}", refresh=False)

    n_process = usable_processes(n_process, n_parts, paths)
    args = (list(paths), doc_boundary, batch_lines, work, empty)
    if n_process == 1:
        totals, stats = _fold_parts(*args, range(n_parts), n_parts, show)
    else:
        totals, stats = _run_workers(args, n_parts, n_process, show)
    return [totals[part] for part in range(n_parts)], stats
