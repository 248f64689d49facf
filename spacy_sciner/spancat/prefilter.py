"""Filter-first candidate enumeration: the filter's logits without the span vectors.

The high-recall filter is one linear unit over the span vector, and with the incremental
reducers (``model.INCREMENTAL_PARTS``) that vector concatenates parts read from token
rows: the running max over the span's tokens at its start, the first token's vector, the
last token's vector, and optionally a width embedding. A linear function of a
concatenation is the sum of one linear function per part, so the filter logit of every
span of width w is

    (running max over w tokens) @ W_max [start] + tokens @ W_first [start]
        + tokens @ W_last [start + w - 1] + E[w] @ W_emb + b

- one matrix-vector product over the token rows per width, and a gather of scalars.
``iter_span_vectors`` instead gathers every candidate's vector (the calibrated filters of
the benchmark runs prune 55-95% of the candidates) and the filter then reads them all;
here only the candidates the filter keeps are gathered, for the MLP. Same candidates and
decisions; the logits differ from ``Linear.predict`` on the gathered vectors only by
float32 rounding (a different summation order), far below the gap ``calibrate`` leaves
around its threshold on dev.

Used by ``inference.launch_spans`` on the CPU (where the filter compacts the chunk before
the MLP anyway); on a GPU the boolean compaction per width would be a synchronisation.
"""
from typing import Callable, Dict, Iterator, Optional, Tuple

import numpy
from thinc.api import Model
from thinc.types import Floats2d

from .model import INCREMENTAL_PARTS, SpanChunks
from .workspace import Workspace


def can_prefilter(encoder: Model, filter_head: Model, has_rows: bool) -> bool:
    """Whether ``iter_kept_span_vectors`` applies: enumerated candidates (no suggester's
    rows), an incremental reducer, and the architecture's plain linear filter."""
    return (
        not has_rows
        and encoder.attrs.get("reducer") in INCREMENTAL_PARTS
        and filter_head.name == "linear"
        and filter_head.get_dim("nO") == 1
    )


def iter_kept_span_vectors(
    encoder: Model,
    filter_head: Model,
    tokens: Floats2d,
    doc_lengths: numpy.ndarray,
    max_width: int,
    chunk_size: int,
    cut: float,
    *,
    keep: Optional[Callable[[numpy.ndarray], numpy.ndarray]] = None,
    counts: Optional[Dict[str, int]] = None,
    workspace: Optional[Workspace] = None,
) -> Iterator[Tuple[numpy.ndarray, Floats2d]]:
    """The candidates whose filter logit is >= ``cut`` and their span vectors, in
    chunks of at most ``chunk_size`` spans (width by width, by start within a width).

    encoder (Model): A span encoder with an incremental reducer (``can_prefilter``).
    filter_head (Model): The filter, ``Linear(nO=1)`` over the span vectors.
    tokens (Floats2d): Token vectors of all docs, concatenated.
    doc_lengths (numpy.ndarray): Number of tokens of each doc.
    max_width (int): L, the widest span.
    chunk_size (int): Most spans per yielded chunk.
    cut (float): The filter logit a span must reach (``inference.filter_cut``).
    keep (Optional[Callable]): Global (start, end) rows -> bool mask of the candidates
        (e.g. ``candidates.EdgeRule.mask``).
    counts (Optional[Dict[str, int]]): If given, "candidates" is set to the number of
        candidates enumerated (kept or not) once the generator is exhausted.
    workspace (Optional[Workspace]): Host buffers for the running maxima and the chunks;
        then each chunk is valid only until the next one is asked for.
    YIELDS (Tuple[numpy.ndarray, Floats2d]): Global (start, end) rows of kept spans and
        their span vectors (the same vectors as ``iter_span_vectors``).
    """
    xp = encoder.ops.xp
    parts = INCREMENTAL_PARTS[encoder.attrs["reducer"]]
    width_buckets = encoder.attrs["width_buckets"]
    embed = encoder.layers[1].get_param("E") if len(encoder.layers) > 1 else None
    weights = filter_head.get_param("W")[0]
    bias = filter_head.get_param("b")[0]
    dim = tokens.shape[1]
    # One projection per part: W's slices follow the concatenation order.
    w_part = {part: weights[i * dim : (i + 1) * dim] for i, part in enumerate(parts)}
    token_proj = {part: tokens @ w_part[part] for part in ("first", "last") if part in parts}
    width_proj = embed @ weights[len(parts) * dim :] if embed is not None else None
    n_tokens = int(doc_lengths.sum())
    remaining = numpy.repeat(numpy.cumsum(doc_lengths), doc_lengths) - numpy.arange(n_tokens)
    running = None
    if "max" in parts:  # the running max over 1 token: the tokens themselves
        running = workspace.empty("running", tokens.shape, tokens.dtype) if workspace is not None else xp.empty_like(tokens)
        running[...] = tokens
    # Only the kept spans are written to chunks: the bound (every candidate) shrinks by the dropped ones.
    chunks = SpanChunks(encoder, tokens, chunk_size, int(numpy.minimum(remaining, max_width).sum()), workspace)
    n_enumerated = 0
    for width in range(1, max_width + 1):
        if width > 1 and running is not None:
            head = running[: n_tokens - width + 1]
            xp.maximum(head, tokens[width - 1 :], out=head)
        starts = numpy.flatnonzero(remaining >= width)
        if len(starts) == 0:
            break
        n_starts = len(starts)
        if keep is not None:
            starts = starts[keep(numpy.stack([starts, starts + width], axis=1))]
        n_enumerated += len(starts)
        kept = starts
        if len(starts):  # (the edge rule may drop every span of a width)
            logits = _width_logits(running, token_proj, w_part, width_proj, bias, starts, width, width_buckets)
            kept = starts[logits.astype("float64") >= cut]
        chunks.discount(n_starts - len(kept))
        yield from chunks.add(running, kept, width)
    yield from chunks.rest()
    if counts is not None:
        counts["candidates"] = n_enumerated


def _width_logits(running, token_proj, w_part, width_proj, bias, starts, width: int, width_buckets: int):
    """The filter logits of the spans of one width at ``starts`` (float32); the bias is
    added last, as ``Linear`` adds it after the product."""
    logits = numpy.zeros(len(starts), dtype="float32")
    if "max" in w_part:
        # Rows past the last valid start are never read (they may hold cross-doc maxima).
        logits += (running[: int(starts[-1]) + 1] @ w_part["max"])[starts]
    if "first" in token_proj:
        logits += token_proj["first"][starts]
    if "last" in token_proj:
        logits += token_proj["last"][starts + width - 1]
    if width_proj is not None:
        logits += width_proj[min(width, width_buckets) - 1]
    return logits + bias
