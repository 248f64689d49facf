"""Host arrays reused from one batch to the next at inference on the CPU.

glibc serves an allocation above its mmap threshold (at most 32 MB, lowered again when the
heap is trimmed) from a fresh mapping and hands it back to the OS when it is freed, and
numpy asks for transparent huge pages for large arrays. Each batch's large temporaries -
the token vectors, the running maxima over span widths, the chunks of span vectors and the
MLP's hidden layer - were therefore faulted in again, page by page, batch after batch:
on SciERC batches of 256 sentences ~3,500 minor page faults and about a quarter of the
span component's CPU predict time (``benchmarks/results/workspace_cpu``). A ``Workspace``
keeps the largest array each role has needed and hands out views of it.

A view is valid until the same role is asked for again in the same thread, so only code
that is done with the previous view may ask (``inference._launch_prefiltered`` decides each
chunk before the next is written, and keeps no view in its result). Each thread gets its
own arrays. The memory held is the largest batch's temporaries (tens of MB at the default
``chunk_size`` of 20,000 spans), until the component is deleted or ``clear`` is called.
"""
import math
import threading
from typing import Sequence

import numpy


class Workspace:
    """Scratch arrays, one per role and thread, grown to the largest size asked for."""

    def __init__(self) -> None:
        self._local = threading.local()

    def empty(self, role: str, shape: Sequence[int], dtype="float32") -> numpy.ndarray:
        """An uninitialised C-contiguous array of ``shape``, a view of ``role``'s buffer.

        role (str): What the array is for; a later call with the same role reuses it.
        shape (Sequence[int]): The array's shape.
        dtype: The array's dtype.
        RETURNS (numpy.ndarray): The view (valid until ``role`` is asked for again).
        """
        arrays = self._arrays()
        dtype = numpy.dtype(dtype)
        size = math.prod(shape)
        base = arrays.get(role)
        if base is None or base.dtype != dtype or base.size < size:
            base = arrays[role] = numpy.empty(size, dtype=dtype)
        return base[:size].reshape(shape)

    def clear(self) -> None:
        """Release this thread's arrays."""
        self._arrays().clear()

    def nbytes(self) -> int:
        """Bytes held by this thread's arrays."""
        return sum(array.nbytes for array in self._arrays().values())

    def _arrays(self) -> dict:
        if not hasattr(self._local, "arrays"):
            self._local.arrays = {}
        return self._local.arrays

    def __reduce__(self):
        # Pickled or deep-copied (a pipeline sent to a spawned process): an empty workspace.
        return (Workspace, ())
