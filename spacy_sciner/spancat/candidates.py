"""Which spans ``sciner_spancat`` may consider: a suggester's spans, minus bad edges.

A span is never a candidate when its first or last token is whitespace (spaCy keeps
double spaces and newlines as tokens, and an entity ``' named entity recognition'`` is
never right). Unless ``allow_punct_edges``, a punctuation-only edge token excludes it
too (``'BERT ,'``, ``'. We'``), except a bracket or quote whose partner lies inside the
span: ``'support vector machine ( SVM )'`` stays a candidate (1.9% of SciERC's and 0.4%
of BioNLP13CG's train+dev gold spans end in a closing bracket), ``'( SVM'`` does not.
A candidate never crosses a sentence boundary set on the doc (one Doc per abstract with
sentence starts, or a pipeline with a parser or senter before the component): no entity of
the data sets here does, and a doc of several sentences then has the candidates of its
sentences alone, with the context of all of them. Gold spans are still trained on and still count in recall whatever their edges: only
the candidate set shrinks (train+dev gold spans no candidate can reach: SciERC 0.03%,
BioNLP13CG 0.24%, CrossNER AI 0.05%, NCBI-disease 0.02%).

Without a suggester every span of ``1..max_span_length`` tokens is a candidate; inference
then takes the incremental fast path of ``model.iter_span_vectors`` (reducers "max",
"endpoints", "max_endpoints") and applies
``EdgeRule.mask`` to its rows.
"""
from typing import Callable, Iterable, List, Optional

import numpy
from spacy.attrs import IS_PUNCT, IS_SPACE, ORTH, SENT_START
from spacy.strings import get_string_id
from spacy.tokens import Doc
from thinc.api import NumpyOps
from thinc.types import Ints2d, Ragged

from .sampling import enumerate_spans

Suggester = Callable[..., Ragged]
OPENING = {"(", "[", "{", "\"", "'", "`", "``", "\u201c", "\u2018", "<"}
CLOSING = {")", "]", "}", "\"", "'", "''", "\u201d", "\u2019", ">"}
OPENING_IDS = numpy.asarray(sorted(get_string_id(s) for s in OPENING), dtype="uint64")
CLOSING_IDS = numpy.asarray(sorted(get_string_id(s) for s in CLOSING), dtype="uint64")


class EdgeRule:
    """Which (start, end) rows over a token sequence have acceptable edge tokens."""

    def __init__(self, docs: Iterable[Doc], allow_punct_edges: bool) -> None:
        """Collect token flags of ``docs``, concatenated (rows may index any of them).

        docs (Iterable[Doc]): The docs, in the order their tokens are concatenated.
        allow_punct_edges (bool): Let any punctuation-only token start or end a span.
        """
        # Token attributes as arrays (no Python per token: a batch of 256 sentences has ~6k).
        docs = list(docs)
        flags = [doc.to_array([IS_SPACE, IS_PUNCT, ORTH]).reshape(-1, 3) for doc in docs if len(doc)]
        flags = numpy.concatenate(flags) if flags else numpy.zeros((0, 3), dtype="uint64")
        # Sentence number of each token: SENT_START is 1 at a start, -1 inside, 0 unset (a
        # doc without sentence boundaries is one sentence).
        starts = [doc.to_array([SENT_START]).reshape(-1).astype("int64") == 1 for doc in docs if len(doc)]
        self.sent = numpy.cumsum(numpy.concatenate(starts)) if starts else numpy.zeros(0, dtype="int64")
        self.space = flags[:, 0].astype(bool)
        punct = flags[:, 1].astype(bool) & (not allow_punct_edges)
        self.opening = punct & numpy.isin(flags[:, 2], OPENING_IDS)
        self.closing = punct & numpy.isin(flags[:, 2], CLOSING_IDS)
        self.punct = punct & ~self.opening & ~self.closing
        # Prefix counts: brackets between two positions in O(1) per row.
        self._opened = numpy.concatenate([[0], numpy.cumsum(self.opening)])
        self._closed = numpy.concatenate([[0], numpy.cumsum(self.closing)])

    def mask(self, rows: Ints2d) -> numpy.ndarray:
        """Whether each (start, end) row may be a candidate.

        rows (Ints2d): (start, end) rows into the concatenated tokens.
        RETURNS (numpy.ndarray): One bool per row.
        """
        if len(rows) == 0:
            return numpy.zeros(0, dtype=bool)
        start, end = rows[:, 0], rows[:, 1]
        last = end - 1
        ok = ~(self.space[start] | self.space[last] | self.punct[start] | self.punct[last])
        # An opening bracket at the start needs a closing one after it, inside the span;
        # a closing one at the end needs an opening one before it. The other way round
        # (") x", "x (") never (quotes are both, and follow the first two rules).
        ok &= ~(self.closing[start] & ~self.opening[start]) & ~(self.opening[last] & ~self.closing[last])
        ok &= ~self.opening[start] | (self._closed[end] - self._closed[start + 1] > 0)
        ok &= ~self.closing[last] | (self._opened[last] - self._opened[start] > 0)
        ok &= self.sent[start] == self.sent[last]
        return ok


def doc_candidates(
    docs: List[Doc],
    max_span_length: int,
    suggester: Optional[Suggester],
    allow_punct_edges: bool,
) -> List[Ints2d]:
    """The candidate (start, end) rows of each doc.

    docs (List[Doc]): The docs.
    max_span_length (int): L, used when there is no suggester.
    suggester (Optional[Suggester]): spaCy-style suggester, ``(docs, *, ops) -> Ragged``;
        None enumerates every span of 1..L tokens.
    allow_punct_edges (bool): Keep spans with punctuation-only edge tokens.
    RETURNS (List[Ints2d]): Doc-local rows per doc, in the suggester's order.
    """
    if suggester is None:
        per_doc = [enumerate_spans(len(doc), max_span_length) for doc in docs]
    else:
        per_doc = split_ragged(suggester(docs, ops=NumpyOps()), docs)
    return [rows[EdgeRule([doc], allow_punct_edges).mask(rows)] for rows, doc in zip(per_doc, docs)]


def split_ragged(suggested: Ragged, docs: Iterable[Doc]) -> List[Ints2d]:
    """A suggester's Ragged as one validated (n, 2) int array per doc."""
    docs = list(docs)
    lengths = numpy.asarray(suggested.lengths).astype("i")
    if len(lengths) != len(docs):
        raise ValueError(f"The suggester returned {len(lengths)} span groups for {len(docs)} docs")
    data = numpy.asarray(suggested.dataXd).reshape(-1, 2).astype("i") if lengths.sum() else numpy.zeros((0, 2), "i")
    out, offset = [], 0
    for doc, count in zip(docs, lengths.tolist()):
        rows = data[offset : offset + count]
        bad = (rows[:, 0] < 0) | (rows[:, 1] > len(doc)) | (rows[:, 1] <= rows[:, 0])
        if bad.any():
            start, end = (int(x) for x in rows[numpy.flatnonzero(bad)[0]])
            raise ValueError(
                f"The suggester proposed span ({start}, {end}) for a doc of {len(doc)} tokens "
                f"('{doc.text[:40]}...'): spans need 0 <= start < end <= len(doc)"
            )
        out.append(rows)
        offset += count
    return out
