"""The SEPT span categorizer model: ``(docs, spans) -> scores``.

A span is represented by pooling the token vectors it covers (SEPT eq. 1: max pooling),
optionally concatenated with a learned span-width embedding (Tri-Train §2.3.1). Two heads
read that representation:

* the classifier, an MLP ending in a softmax over the labels plus a "no entity" class;
* the high-recall filter (SEPT §3.5), a linear entity-vs-not logit, cheap enough to run
  on every candidate span so that only the survivors reach the MLP.

Output layout (``Floats2d`` of shape ``(n_spans, n_labels + 2)``): columns
``0 .. n_labels - 1`` are label probabilities, column ``n_labels`` (``NONE`` below) is the
probability of "no entity", and the last column (``FILTER``) is the filter's raw logit.
Training both heads through one forward pass lets them share the gradient to the
transformer; at inference the component calls the refs ``tok2vec``, ``span_encoder``,
``filter`` and ``classifier`` separately, so that pruned spans never reach the MLP.
"""
import importlib
from typing import Callable, Iterator, List, Optional, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import (
    Embed,
    Linear,
    Model,
    Relu,
    Softmax_v2,
    chain,
    concatenate,
    list2ragged,
    reduce_first,
    reduce_last,
    reduce_max,
    reduce_mean,
    with_getitem,
)
from thinc.types import Floats2d, Ints1d, Ragged

from .sampling import enumerate_batch
from .util import chained_layers
from .workspace import Workspace

# thinc's Relu and Dropout forwards (the modules: thinc.layers exports the builders).
_RELU_FORWARD = importlib.import_module("thinc.layers.relu").forward
_DROPOUT_FORWARD = importlib.import_module("thinc.layers.dropout").forward

# Pooling recipes for the SEPT ablation: name -> (builder, width multiplier of nI).
REDUCERS = {
    "max": (lambda: reduce_max(), 1),
    "mean": (lambda: reduce_mean(), 1),
    "mean_max": (lambda: concatenate(reduce_mean(), reduce_max()), 2),
    "endpoints": (lambda: concatenate(reduce_first(), reduce_last()), 2),
    "max_endpoints": (lambda: concatenate(reduce_max(), reduce_first(), reduce_last()), 3),
}
# The reducers whose span vectors inference builds without gathering a span's tokens
# (iter_span_vectors): the parts REDUCERS concatenates, in its order.
INCREMENTAL_PARTS = {"max": ("max",), "endpoints": ("first", "last"), "max_endpoints": ("max", "first", "last")}


@registry.architectures("spacy-sciner.SpanCategorizer.v1")
def build_span_categorizer(
    tok2vec: Model[List[Doc], List[Floats2d]],
    hidden_width: int = 256,
    dropout: float = 0.1,
    reducer: str = "max",
    width_embedding: int = 0,
    width_buckets: int = 16,
    nO: Optional[int] = None,
) -> Model[Tuple[List[Doc], Ragged], Floats2d]:
    """Build the SEPT span categorizer.

    tok2vec (Model[List[Doc], List[Floats2d]]): Token vectors, usually a
        spacy-transformers TransformerListener.
    hidden_width (int): Width of the MLP's hidden layer.
    dropout (float): Dropout rate after the hidden layer.
    reducer (str): How to pool a span's token vectors: "max" (SEPT), "mean",
        "mean_max", "endpoints" (first + last token) or "max_endpoints".
    width_embedding (int): Width of a learned span-width embedding concatenated to the
        pooled vector; 0 (default) disables it.
    width_buckets (int): Number of width embeddings; longer spans share the last one.
    nO (Optional[int]): Number of classes, labels + 1 for "no entity". Usually set by
        the component's initialize().
    RETURNS (Model[Tuple[List[Doc], Ragged], Floats2d]): The model; see the module
        docstring for the output columns.
    """
    if reducer not in REDUCERS:
        raise ValueError(f"Unknown reducer '{reducer}' for {__name__}: pick one of {sorted(REDUCERS)}")
    if hidden_width < 1 or width_embedding < 0 or width_buckets < 1:
        raise ValueError(
            f"Invalid span categorizer sizes: hidden_width={hidden_width} (>= 1), "
            f"width_embedding={width_embedding} (>= 0), width_buckets={width_buckets} (>= 1)"
        )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    span_encoder = build_span_encoder(reducer, width_embedding, width_buckets)
    output_layer = Softmax_v2(nO=nO)
    classifier = chain(Relu(nO=hidden_width, dropout=dropout), output_layer)
    filter_head = Linear(nO=1)
    model = chain(
        with_getitem(0, chain(tok2vec, list2ragged())),
        span_encoder,
        concatenate(classifier, filter_head),
    )
    model.set_ref("tok2vec", tok2vec)
    model.set_ref("span_encoder", span_encoder)
    model.set_ref("classifier", classifier)
    model.set_ref("output_layer", output_layer)
    model.set_ref("filter", filter_head)
    return model


def build_span_encoder(
    reducer: str, width_embedding: int = 0, width_buckets: int = 16
) -> Model[Tuple[Ragged, Ragged], Floats2d]:
    """Pool token vectors over spans: ``(token vectors, spans) -> span vectors``.

    Like spaCy's ``extract_spans`` followed by a reducer, but the gather indices are
    built with numpy instead of a Python loop over spans (inference scores every span
    up to L, ~8 per token), and an optional width embedding is concatenated.

    reducer (str): A key of ``REDUCERS``.
    width_embedding (int): Width of the span-width embedding, 0 for none.
    width_buckets (int): Number of distinct widths embedded.
    RETURNS (Model[Tuple[Ragged, Ragged], Floats2d]): The encoder. Token vectors are
        one group per doc; spans are doc-local (start, end) rows, one group per doc.
    """
    build, multiplier = REDUCERS[reducer]
    layers = [build()]
    if width_embedding:
        layers.append(Embed(nO=width_embedding, nV=width_buckets))
    return Model(
        "sciner_span_encoder",
        span_encoder_forward,
        init=span_encoder_init,
        layers=layers,
        attrs={"reducer": reducer, "multiplier": multiplier, "width_buckets": width_buckets},
        dims={"nI": None, "nO": None},
    )


def span_encoder_init(model: Model, X=None, Y=None) -> None:
    if X is not None:
        model.set_dim("nI", X[0].dataXd.shape[1], force=True)
    for layer in model.layers[1:]:
        layer.initialize()
    if model.has_dim("nI"):
        width = model.layers[1].get_dim("nO") if len(model.layers) > 1 else 0
        model.set_dim("nO", model.get_dim("nI") * model.attrs["multiplier"] + width, force=True)


def span_encoder_forward(
    model: Model, inputs: Tuple[Ragged, Ragged], is_train: bool
) -> Tuple[Floats2d, Callable]:
    ops = model.ops
    X, spans = inputs
    indices, lengths = span_gather_indices(
        numpy.asarray(ops.to_numpy(spans.dataXd)).reshape(-1, 2),
        numpy.asarray(ops.to_numpy(spans.lengths)),
        numpy.asarray(ops.to_numpy(X.lengths)),
    )
    if len(lengths) == 0:
        width = X.dataXd.shape[1] * model.attrs["multiplier"]
        width += model.layers[1].get_dim("nO") if len(model.layers) > 1 else 0
        return ops.alloc2f(0, width), lambda dY: (ops.alloc2f(*X.dataXd.shape), spans)
    indices_xp = ops.asarray1i(indices)
    pooled, backprop_pool = model.layers[0](Ragged(X.dataXd[indices_xp], ops.asarray1i(lengths)), is_train)
    outputs, backprop_width = [pooled], None
    if len(model.layers) > 1:
        buckets = numpy.minimum(lengths, model.attrs["width_buckets"]) - 1
        widths, backprop_width = model.layers[1](ops.asarray1i(buckets), is_train)
        outputs.append(widths)
    Y = ops.xp.hstack(outputs) if len(outputs) > 1 else pooled
    n_pooled = pooled.shape[1]
    x_shape, x_lengths = X.dataXd.shape, X.lengths

    def backprop(dY: Floats2d) -> Tuple[Ragged, Ragged]:
        if backprop_width is not None:
            backprop_width(ops.xp.ascontiguousarray(dY[:, n_pooled:]))
        d_pieces = backprop_pool(ops.xp.ascontiguousarray(dY[:, :n_pooled]))
        dX = ops.alloc2f(*x_shape)
        ops.scatter_add(dX, indices_xp, d_pieces.dataXd)
        return Ragged(dX, x_lengths), spans

    return Y, backprop


def span_gather_indices(
    spans: numpy.ndarray, span_counts: numpy.ndarray, doc_lengths: numpy.ndarray
) -> Tuple[Ints1d, Ints1d]:
    """Flat token rows to gather for each span, e.g. spans (5, 9), (8, 10) of one doc
    -> [5, 6, 7, 8, 8, 9] and lengths [4, 2]. Vectorised version of spaCy's
    ``extract_spans._get_span_indices``.

    spans (numpy.ndarray): Doc-local (start, end) rows.
    span_counts (numpy.ndarray): Number of spans of each doc.
    doc_lengths (numpy.ndarray): Number of tokens of each doc.
    RETURNS (Tuple[Ints1d, Ints1d]): Gather indices into the concatenated token rows,
        and the length of each span.
    """
    if len(span_counts) != len(doc_lengths):
        raise ValueError(f"{len(span_counts)} span groups for {len(doc_lengths)} docs")
    doc_offsets = numpy.cumsum(doc_lengths) - doc_lengths
    starts = spans[:, 0] + numpy.repeat(doc_offsets, span_counts)
    lengths = (spans[:, 1] - spans[:, 0]).astype("i")
    if len(lengths) and (lengths.min() < 1 or (spans[:, 1] > numpy.repeat(doc_lengths, span_counts)).any()):
        bad = numpy.flatnonzero((lengths < 1) | (spans[:, 1] > numpy.repeat(doc_lengths, span_counts)))[0]
        raise ValueError(f"Invalid span {tuple(int(i) for i in spans[bad])} (row {bad}): spans need 0 <= start < end <= len(doc)")
    # For each gathered row: its span's global start plus its position inside the span.
    span_offsets = numpy.cumsum(lengths) - lengths
    indices = numpy.arange(lengths.sum(), dtype="i") + numpy.repeat(starts - span_offsets, lengths)
    return indices.astype("i"), lengths


def predict_classifier(classifier: Model, X: Floats2d, workspace: Optional[Workspace] = None) -> Floats2d:
    """``classifier.predict(X)`` with the hidden layer's ReLU applied in place.

    thinc's ``Relu`` layer writes ``max(X @ W.T + b, 0)`` into a second array the size of
    the hidden layer (20 MB for a chunk of 20,000 spans at width 256), keeping the
    pre-activation for its backward pass; at predict time nothing reads it again, so it is
    overwritten. The same ``ops.affine`` and ``ops.relu`` calls give the same numbers.
    A classifier that does not start with a ``Relu`` layer runs ``predict`` as it is.

    classifier (Model): The classifier ref of ``build_span_categorizer``.
    X (Floats2d): Span vectors.
    workspace (Optional[Workspace]): Host buffer for the hidden layer (role "hidden");
        None: a new array.
    RETURNS (Floats2d): The class probabilities.
    """
    layers = chained_layers(classifier)
    if layers[0]._func is not _RELU_FORWARD:
        return classifier.predict(X)
    relu = layers[0]
    W, b = relu.get_param("W"), relu.get_param("b")
    out = None
    if workspace is not None and isinstance(X, numpy.ndarray):
        out = workspace.empty("hidden", (len(X), W.shape[0]), X.dtype)
    # ops.affine's two steps (the product, then the bias), written into `out` if given
    Y = relu.ops.gemm(X, W, trans2=True, out=out)
    Y += b
    Y = relu.ops.relu(Y, inplace=True)
    for layer in layers[1:]:
        if layer._func is not _DROPOUT_FORWARD:  # identity at predict time
            Y = layer.predict(Y)
    return Y


def iter_span_vectors(
    encoder: Model,
    tokens: Floats2d,
    doc_lengths: numpy.ndarray,
    max_width: int,
    chunk_size: int,
    *,
    rows: Optional[numpy.ndarray] = None,
    keep: Optional[Callable[[numpy.ndarray], numpy.ndarray]] = None,
) -> Iterator[Tuple[numpy.ndarray, Floats2d]]:
    """Vectors of candidate spans, chunk by chunk, for inference.

    Without ``rows`` the candidates are every span of 1..max_width tokens that ``keep``
    accepts (e.g. ``candidates.EdgeRule.mask``). With the "max", "endpoints" and
    "max_endpoints" reducers they are built width by width (max over w tokens = max(max
    over the first w - 1, the w-th token); the boundary tokens are two rows), so no span's
    tokens are gathered: ~4x less memory traffic than ``encoder.predict``, same numbers.
    Given ``rows`` (a suggester's spans) or a pooling reducer ("mean", "mean_max"),
    ``encoder.predict`` runs on chunks of gathered spans. Chunks hold
    ``chunk_size`` spans (the last one fewer), of one or several widths.

    encoder (Model): A span encoder from ``build_span_encoder``.
    tokens (Floats2d): Token vectors of all docs, concatenated.
    doc_lengths (numpy.ndarray): Number of tokens of each doc.
    max_width (int): L, the widest span.
    chunk_size (int): Most spans per yielded chunk (bounds memory on long docs).
    rows (Optional[numpy.ndarray]): Global (start, end) rows to score instead.
    keep (Optional[Callable]): Global (start, end) rows -> bool mask of the rows to
        score; ignored with ``rows``.
    YIELDS (Tuple[numpy.ndarray, Floats2d]): Global (start, end) rows into ``tokens``
        (never crossing a doc boundary) and their span vectors.
    """
    ops = encoder.ops
    n_tokens = int(doc_lengths.sum())
    if rows is not None or encoder.attrs["reducer"] not in INCREMENTAL_PARTS:
        yield from _gathered_span_vectors(encoder, tokens, doc_lengths, max_width, chunk_size, rows, keep)
        return
    # Tokens left in the doc from each position: a span of width w may start at g only
    # if remaining[g] >= w (rows of `running` past that hold cross-doc garbage, unused).
    remaining = numpy.repeat(numpy.cumsum(doc_lengths), doc_lengths) - numpy.arange(n_tokens)
    parts = INCREMENTAL_PARTS[encoder.attrs["reducer"]]
    # The running max over each width (only where the reducer pools by max).
    running = ops.xp.array(tokens, copy=True) if "max" in parts else None
    # Chunks are filled across widths: the filter and the MLP then run a few times per
    # batch, not once per width (on a GPU each run is a dozen kernel launches).
    chunks = SpanChunks(encoder, tokens, chunk_size, int(numpy.minimum(remaining, max_width).sum()))
    for width in range(1, max_width + 1):
        if width > 1 and running is not None:
            head = running[: n_tokens - width + 1]
            ops.xp.maximum(head, tokens[width - 1 :], out=head)
        starts = numpy.flatnonzero(remaining >= width)
        if len(starts) == 0:
            break
        if keep is not None:
            kept = keep(numpy.stack([starts, starts + width], axis=1))
            chunks.discount(len(starts) - int(kept.sum()))
            starts = starts[kept]
        yield from chunks.add(running, starts, width)
    yield from chunks.rest()


def _gathered_span_vectors(
    encoder: Model,
    tokens: Floats2d,
    doc_lengths: numpy.ndarray,
    max_width: int,
    chunk_size: int,
    rows: Optional[numpy.ndarray],
    keep: Optional[Callable[[numpy.ndarray], numpy.ndarray]],
) -> Iterator[Tuple[numpy.ndarray, Floats2d]]:
    """``iter_span_vectors`` by ``encoder.predict`` on chunks of gathered spans: for a
    suggester's rows or a pooling reducer. Same arguments and chunks."""
    ops = encoder.ops
    if rows is None:
        candidates = enumerate_batch(doc_lengths, max_width)
        offsets = numpy.repeat(numpy.cumsum(doc_lengths) - doc_lengths, candidates.lengths)
        rows = (candidates.dataXd + offsets[:, None]).astype("i")
        rows = rows[keep(rows)] if keep is not None and len(rows) else rows
    all_tokens = Ragged(tokens, ops.asarray1i([int(doc_lengths.sum())]))
    for i in range(0, len(rows), chunk_size):
        chunk = rows[i : i + chunk_size]
        yield chunk, encoder.predict((all_tokens, Ragged(ops.asarray2i(chunk), ops.asarray1i([len(chunk)]))))


class SpanChunks:
    """Span vectors written width by width straight into chunks of ``chunk_size`` rows
    (the last one fewer): each output vector is one gather from the token rows, with no
    per-width pieces joined afterwards (a second copy of every vector, ~50 MB per 1,000
    SciERC sentences).

    encoder (Model): A span encoder with an incremental reducer (``INCREMENTAL_PARTS``).
    tokens (Floats2d): Token vectors of all docs, concatenated.
    chunk_size (int): Most spans per chunk.
    bound (int): At least the number of spans still to be added: a buffer holds no more
        rows than can come (``discount`` lowers it for candidates dropped before ``add``).
    workspace (Optional[Workspace]): Host buffers to write the chunks into (role "chunk"):
        then a chunk is valid only until the next one is asked for. None: a new array
        per chunk.
    """

    def __init__(self, encoder: Model, tokens: Floats2d, chunk_size: int, bound: int,
                 workspace: Optional[Workspace] = None) -> None:
        self.ops, self.tokens, self.size, self.bound = encoder.ops, tokens, chunk_size, bound
        self.workspace = workspace
        self.parts = INCREMENTAL_PARTS[encoder.attrs["reducer"]]
        self.embed = encoder.layers[1].get_param("E") if len(encoder.layers) > 1 else None
        self.width_buckets = encoder.attrs["width_buckets"]
        extra = self.embed.shape[1] if self.embed is not None else 0
        self.n_columns = tokens.shape[1] * len(self.parts) + extra
        self.rows: List[numpy.ndarray] = []
        self.buffer: Optional[Floats2d] = None
        self.held = 0

    def discount(self, n: int) -> None:
        """``n`` of the spans counted in ``bound`` will never be added."""
        self.bound -= n

    def add(self, running: Optional[Floats2d], starts: numpy.ndarray, width: int) -> Iterator[Tuple[numpy.ndarray, Floats2d]]:
        """Add the spans of one width at global ``starts`` (``running``: the running max
        over ``width`` tokens, or None); yields each chunk that fills up."""
        while len(starts):
            if self.buffer is None:
                n_rows = max(1, min(self.size, self.bound))
                if self.workspace is not None:
                    self.buffer = self.workspace.empty("chunk", (n_rows, self.n_columns), self.tokens.dtype)
                else:
                    self.buffer = self.ops.alloc2f(n_rows, self.n_columns, dtype=self.tokens.dtype, zeros=False)
            part, starts = starts[: len(self.buffer) - self.held], starts[len(self.buffer) - self.held :]
            self._write(self.buffer[self.held : self.held + len(part)], running, part, width)
            self.rows.append(numpy.stack([part, part + width], axis=1).astype("i"))
            self.held += len(part)
            self.bound -= len(part)
            if self.held == len(self.buffer):
                yield self._flush()

    def rest(self) -> Iterator[Tuple[numpy.ndarray, Floats2d]]:
        """The last, partly filled chunk, if any."""
        if self.held:
            yield self._flush()

    def _flush(self) -> Tuple[numpy.ndarray, Floats2d]:
        chunk = (numpy.concatenate(self.rows), self.buffer[: self.held])
        self.rows, self.buffer, self.held = [], None, 0
        return chunk

    def _write(self, out: Floats2d, running: Optional[Floats2d], starts: numpy.ndarray, width: int) -> None:
        """The vectors of the spans of one width at ``starts`` into ``out``: the parts ("max":
        rows of ``running``; "first"/"last": the boundary tokens' rows), then the width
        embedding if there is one."""
        xp, dim = self.ops.xp, self.tokens.shape[1]
        at = self.ops.asarray1i(starts)
        sources = {"max": running, "first": self.tokens, "last": self.tokens[width - 1 :]}
        for i, part in enumerate(self.parts):
            target = out[:, i * dim : (i + 1) * dim]
            if xp is numpy:  # gathered into place ("clip": no bounds-checking copy; starts are valid)
                numpy.take(sources[part], at, axis=0, out=target, mode="clip")
            else:
                target[...] = sources[part][at]
        if self.embed is not None:
            out[:, len(self.parts) * dim :] = self.embed[min(width, self.width_buckets) - 1]
