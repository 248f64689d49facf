"""Streaming, optionally multi-process, passes over text files (used by mine and select).

``run_partitioned`` reads the input in batches of documents and folds each batch's result
into an accumulator. With ``n_process`` > 1, worker k (forked) reads the input itself,
processes batches k, k + n, ... into its own accumulator and sends it once at the end;
only a small progress message per batch crosses processes. (Sending every batch's result
to the main process, Pool-style, cost more than the work: the n-gram tables are large.)
So the result does not depend on ``n_process`` as long as merging accumulators is
order-independent, which holds for counts and for top-N heaps with deterministic keys.
"""
import multiprocessing
import queue as queue_module
from typing import Callable, Iterable, Iterator, List, Sequence, Tuple

from .text import ReadStats, read_documents

Doc = List[Tuple[str, int, str]]  # (path, line number, text) lines of one document


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


def _run_part(paths, doc_boundary, batch_lines, work, empty, part, n_parts, progress=None):
    stats = ReadStats()
    total = empty()
    for index, batch in enumerate(batched(read_documents(paths, doc_boundary, stats), batch_lines)):
        if index % n_parts != part:
            continue
        result = work(batch, index)
        total.merge(result)
        if progress is not None:
            progress.put((result.lines, result.occurrences))
    return total, stats


def _worker(results, progress, args):
    try:
        results.put(("ok", _run_part(*args, progress=progress)))
    except BaseException as err:  # report it, so that the main process does not wait forever
        results.put(("error", f"{type(err).__name__}: {err}"))


def run_partitioned(
    paths: Sequence[str],
    doc_boundary: str,
    batch_lines: int,
    work: Callable,
    empty: Callable,
    n_process: int = 1,
    bar=None,
) -> Tuple[object, ReadStats]:
    """Process text files batch by batch, in this process or in ``n_process`` workers.

    paths (Sequence[str]): Text files ("-": stdin, always read in this process).
    doc_boundary (str): "line" or "blank" (see ``text.read_documents``).
    batch_lines (int): Lines per batch.
    work (Callable[[List[Doc], int], R]): Processes a batch (with its index); R has
        ``lines`` and ``occurrences`` attributes (for the progress bar).
    empty (Callable[[], A]): A new accumulator; ``A.merge(R)`` and ``A.merge(A)`` fold.
    n_process (int): Worker processes.
    bar (Optional[tqdm]): Progress bar, updated with lines and a "candidates" postfix.
    RETURNS (Tuple[A, ReadStats]): The accumulated result and the reader's counts.
    """
    def show(lines, found):
        if bar is not None:
            show.found += found
            bar.update(lines)
            bar.set_postfix(candidates=show.found, refresh=False)
    show.found = 0

    if n_process <= 1 or "-" in paths:
        total, stats = empty(), ReadStats()
        for index, batch in enumerate(batched(read_documents(paths, doc_boundary, stats), batch_lines)):
            result = work(batch, index)
            total.merge(result)
            show(result.lines, result.occurrences)
        return total, stats
    ctx = multiprocessing.get_context("fork")
    results_queue, progress = ctx.Queue(), ctx.Queue()
    workers = [ctx.Process(target=_worker, daemon=True, args=(results_queue, progress, (
        list(paths), doc_boundary, batch_lines, work, empty, part, n_process)))
        for part in range(n_process)]
    for worker in workers:
        worker.start()
    results = []
    try:
        while len(results) < n_process:
            while not progress.empty():
                show(*progress.get())
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
    total, stats = results[0][1]  # every worker read every line: one ReadStats suffices
    for _, (part, _) in results[1:]:
        total.merge(part)
    return total, stats
