"""A spancat suggester proposing the mined candidates (``doc.spans["candidates"]``).

Registered as ``spacy-sciner.candidate_suggester.v1`` (entry point, ``spacy_misc``). It
returns the same structure as ``spacy.ngram_suggester.v1``: a Ragged whose data is an
int32 array of shape (n_spans, 2) with (start, end) rows and whose lengths (int32) give
the number of spans of each doc; a batch without any span gives a (0, 0) array, as there.
"""
from functools import partial
from typing import Iterable, List, Optional

from spacy.tokens import Doc
from thinc.api import Ops, get_current_ops
from thinc.types import Ragged


def candidate_suggester(
    docs: Iterable[Doc],
    spans_key: str = "candidates",
    sizes: Optional[List[int]] = None,
    *,
    ops: Optional[Ops] = None,
) -> Ragged:
    """Suggest the spans in ``doc.spans[spans_key]``, unioned with n-grams of ``sizes``.

    docs (Iterable[Doc]): The docs (annotated by ``sciner_candidate_miner`` upstream).
    spans_key (str): Key of the candidate spans; a doc without that key gets none.
    sizes (Optional[List[int]]): N-gram lengths to add (e.g. [1, 2, 3]); None or [] adds none.
    ops (Optional[Ops]): Thinc ops of the output arrays.
    RETURNS (Ragged): Unique (start, end) rows per doc, sorted, int32.
    """
    if ops is None:
        ops = get_current_ops()
    rows: List[List[int]] = []
    lengths: List[int] = []
    for doc in docs:
        spans = set()
        if spans_key in doc.spans:
            spans.update((span.start, span.end) for span in doc.spans[spans_key])
        for size in sizes or []:
            spans.update((i, i + size) for i in range(len(doc) - size + 1))
        rows.extend([start, end] for start, end in sorted(spans))
        lengths.append(len(spans))
    lengths_array = ops.asarray1i(lengths)
    if rows:
        return Ragged(ops.asarray2i(rows), lengths_array)
    return Ragged(ops.xp.zeros((0, 0), dtype="i"), lengths_array)


def build_candidate_suggester(spans_key: str = "candidates", sizes: Optional[List[int]] = None):
    """Registered builder: ``@misc = "spacy-sciner.candidate_suggester.v1"``.

    spans_key (str): Key of the candidate spans set by the miner component.
    sizes (Optional[List[int]]): N-gram lengths unioned with the candidates.
    RETURNS (Callable[[Iterable[Doc], Optional[Ops]], Ragged]): The suggester.
    """
    if sizes is not None and any(int(s) < 1 for s in sizes):
        raise ValueError(f"n-gram sizes must be >= 1, got {sizes}")
    return partial(candidate_suggester, spans_key=spans_key, sizes=list(sizes or []))
