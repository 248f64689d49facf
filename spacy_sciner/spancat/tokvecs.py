"""Token vectors of a whole batch at inference, in one piece.

spacy-transformers' listener (``TransformerListener.v1``: a ``transformer-listener`` layer
chained with ``trfs2arrays``) aligns word pieces to tokens doc by doc: one host-to-device
copy of the alignment and one gather per doc. On a GPU, a batch of 256 sentences then
spends more time launching those small copies and kernels than the MLP spends on all of
its spans. ``predict_token_vectors`` does the same computation for the whole batch at
once: one concatenation of the docs' hidden states, one gather with the concatenated
alignment, one call of the listener's own pooling layer. The numbers are the ones
``trfs2arrays`` computes (the pooling sees the same rows, in the same order). On the CPU
the default mean pooling skips the gather (``mean_of_pieces``: the same bits as thinc's
kernel) and can write into a reused buffer (``workspace.py``). A
``spacy-sciner.HybridTok2Vec.v1`` gets its transformer side this way and is joined with
its CNN's vectors once per batch, not per doc; its CNN (spaCy's ``Tok2Vec.v2`` of
``MultiHashEmbed`` + a window encoder) runs on the whole batch too (``predict_cnn_flat``):
one host-to-device copy of the features instead of one per doc, and the encoder's
zero padding between docs written by one scatter instead of a concatenation of 2 x docs
pieces. Any other tok2vec, or a batch the fast paths do not cover (a doc without
transformer output, an empty alignment), goes through ``tok2vec.predict``.
"""
from typing import List, Optional

import numpy
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Ragged

from .util import chained_layers
from .workspace import Workspace


def predict_token_vectors(tok2vec: Model, docs: List[Doc], workspace: Optional[Workspace] = None) -> Floats2d:
    """The token vectors of all docs, concatenated in doc order.

    tok2vec (Model): The component's tok2vec sub-model.
    docs (List[Doc]): The docs (processed by the upstream transformer, for a listener).
    workspace (Optional[Workspace]): Where the fast paths write host results (role
        "tokens"); None: new arrays.
    RETURNS (Floats2d): One row per token of the batch.
    """
    fast = _listener_fast_path(tok2vec, docs, workspace)
    if fast is None:
        fast = _hybrid_fast_path(tok2vec, docs, workspace)
    if fast is not None:
        return fast
    vectors = [t for t in tok2vec.predict(docs) if len(t)]
    width = vectors[0].shape[1] if vectors else 0
    return tok2vec.ops.flatten(vectors) if vectors else tok2vec.ops.alloc2f(0, width)


def _hybrid_fast_path(tok2vec: Model, docs: List[Doc], workspace: Optional[Workspace] = None) -> Optional[Floats2d]:
    """``spacy-sciner.HybridTok2Vec.v1``: the transformer's side through the listener's
    fast path and one join with the CNN's vectors, instead of a join per doc."""
    if tok2vec.name != "sciner_hybrid_tok2vec":
        return None
    transformer = _listener_fast_path(tok2vec.get_ref("transformer"), docs)
    if transformer is None:
        return None
    cnn = predict_cnn_flat(tok2vec.get_ref("cnn"), docs)
    if cnn is None:
        cnn = tok2vec.ops.flatten(tok2vec.get_ref("cnn").predict(docs))
    if workspace is None or not isinstance(transformer, numpy.ndarray):
        return tok2vec.ops.xp.hstack([transformer, cnn])
    out = workspace.empty("tokens", (len(transformer), transformer.shape[1] + cnn.shape[1]), transformer.dtype)
    return numpy.concatenate([transformer, cnn], axis=1, out=out)


def predict_cnn_flat(cnn: Model, docs: List[Doc]) -> Optional[Floats2d]:
    """The vectors of a spaCy CNN tok2vec for a whole batch, concatenated in doc order:
    the numbers of ``cnn.predict(docs)`` with no per-doc array operation.

    cnn (Model): A chain of ``extract_features``, ``list2ragged``, ``with_array``
        layers, ``ragged2list`` and ``with_array`` layers (spacy.Tok2Vec.v2 with
        spacy.MultiHashEmbed.v2 and a window encoder).
    docs (List[Doc]): The docs.
    RETURNS (Optional[Floats2d]): One row per token; None for another model or a batch
        without tokens (left to ``cnn.predict``).
    """
    layers = chained_layers(cnn)
    names = [layer.name for layer in layers]
    if names[:2] != ["extract_features", "list2ragged"] or "ragged2list" not in names:
        return None
    split = names.index("ragged2list")
    arrays = layers[2:split] + layers[split + 1:]
    if not arrays or not all(name.startswith("with_array(") for name in names[2:split] + names[split + 1:]):
        return None
    columns = layers[0].attrs["columns"]
    features = [doc.to_array(columns).reshape(len(doc), -1) for doc in docs if len(doc)]
    lengths = numpy.array([len(doc) for doc in docs], dtype="i")
    if not features:
        return None
    X = cnn.ops.asarray2i(numpy.concatenate(features), dtype="uint64")
    for layer in layers[2:split]:  # with_array over a Ragged: the inner layer on its data
        X = layer.layers[0].predict(X)
    for layer in layers[split + 1:]:
        X = _predict_padded(layer.layers[0], X, lengths, layer.attrs.get("pad", 0))
    return X


def _predict_padded(layer: Model, X: Floats2d, lengths: numpy.ndarray, pad: int) -> Floats2d:
    """``with_array(layer, pad)`` over the docs of `X`: thinc's ``ops.flatten`` puts `pad`
    zero rows before each non-empty doc and after the last, so windows never cross docs.
    The same array, built by one scatter, and the rows of the docs read back by one gather."""
    if pad <= 0:
        return layer.predict(X)
    ops = layer.ops
    # The rank of each row's doc among the non-empty docs (empty docs get no padding).
    rank = numpy.repeat(numpy.cumsum(lengths > 0), lengths)
    rows = ops.asarray1i(numpy.arange(len(X), dtype="i") + pad * rank)
    padded = ops.alloc2f(len(X) + pad * (int((lengths > 0).sum()) + 1), X.shape[1], dtype=X.dtype)
    padded[rows] = X
    return layer.predict(padded)[rows]


def _listener_fast_path(tok2vec: Model, docs: List[Doc], workspace: Optional[Workspace] = None) -> Optional[Floats2d]:
    """``trfs2arrays`` over the whole batch at once, or None where it does not apply."""
    layers = getattr(tok2vec, "layers", [])
    if len(layers) != 2 or layers[0].name != "transformer-listener" or layers[1].name != "trfs2arrays":
        return None
    if not docs or not Doc.has_extension("trf_data"):
        return None
    ops, pooling = tok2vec.ops, layers[1].layers[0]
    # Per doc only attribute reads and checks; the arrays are joined once per batch (on a
    # GPU each array operation is a kernel launch or a host-side call of several us).
    hidden, indices, lengths, n_rows = [], [], [], []
    for doc in docs:
        data = doc._.trf_data
        output = getattr(data, "model_output", None)
        if output is None or "last_hidden_state" not in output or output.last_hidden_state.size == 0:
            return None
        align = data.align
        if len(doc) == 0 or len(align.lengths) != len(doc):
            return None  # trfs2arrays' special cases: leave them to it
        state = output.last_hidden_state
        hidden.append(state)
        n_rows.append(state.size // data.width)
        # Host arrays in spacy-transformers; to_numpy also takes device ones.
        indices.append(ops.to_numpy(align.dataXd))
        lengths.append(ops.to_numpy(align.lengths))
    all_lengths = numpy.concatenate(lengths).astype("i")
    per_doc = numpy.add.reduceat(all_lengths, numpy.cumsum([0] + [len(doc) for doc in docs[:-1]]))
    if (per_doc == 0).any():
        return None  # a doc aligned to no word piece: trfs2arrays' special case
    width = docs[0]._.trf_data.width
    src, starts = _rows_in_place(hidden, width)
    if src is None:
        shapes = {state.shape[1:] for state in hidden}
        if len(shapes) == 1:  # one batch of the transformer: same padded shape throughout
            src = (ops.xp.concatenate(hidden, axis=0) if len(hidden) > 1 else hidden[0]).reshape(-1, width)
        else:
            src = ops.xp.concatenate([state.reshape(-1, width) for state in hidden], axis=0)
        starts = numpy.cumsum(n_rows) - n_rows
    offsets = numpy.repeat(starts, [len(i) for i in indices])
    rows = numpy.concatenate(indices).astype("i") + offsets
    if pooling.name == "reduce_mean" and isinstance(src, numpy.ndarray):
        out = None if workspace is None else workspace.empty("tokens", (len(all_lengths), width), src.dtype)
        return mean_of_pieces(src, rows, all_lengths, out=out)
    return pooling.predict(Ragged(src[ops.asarray1i(rows)], ops.asarray1i(all_lengths)))


def mean_of_pieces(
    src: numpy.ndarray, rows: numpy.ndarray, lengths: numpy.ndarray, *, out: Optional[numpy.ndarray] = None
) -> numpy.ndarray:
    """thinc's CPU ``reduce_mean`` of ``Ragged(src[rows], lengths)``, bit for bit, without
    gathering every piece first: most tokens are one word piece, so the first piece of
    each token is read straight into the output and only the longer tokens add the rest.
    The arithmetic is thinc's kernel's (``mean += (1 / n) * piece``, pieces in order), in
    one vectorised pass per piece position instead of a scalar loop per token.

    src (numpy.ndarray): The hidden states, one row per word piece.
    rows (numpy.ndarray): The rows of `src` of each token's pieces, token after token.
    lengths (numpy.ndarray): The number of pieces of each token (0 gives a zero row).
    out (Optional[numpy.ndarray]): Where to write the result (C-contiguous, one row per
        token); None: a new array.
    RETURNS (numpy.ndarray): One row per token.
    """
    lengths = numpy.asarray(lengths, dtype="i")
    if out is None:
        out = numpy.empty((len(lengths), src.shape[1]), dtype=src.dtype)
    first = numpy.cumsum(lengths) - lengths
    if len(rows):  # ("clip": no bounds-checked copy; the clipped rows are zeroed below)
        numpy.take(src, rows[numpy.minimum(first, len(rows) - 1)], axis=0, out=out, mode="clip")
    out[lengths == 0] = 0
    multi = numpy.flatnonzero(lengths > 1)
    if multi.size:
        n = lengths[multi]
        # thinc computes the scale in double and stores it as the array's type
        scale = (1.0 / n).astype(src.dtype)[:, None]
        acc = out[multi] * scale
        for k in range(1, int(n.max())):
            live = numpy.flatnonzero(n > k)
            acc[live] += scale[live] * src.take(rows[first[multi[live]] + k], axis=0)
        out[multi] = acc
    return out


def _rows_in_place(hidden: List, width: int):
    """The hidden states' rows read where they are: spacy-transformers hands each doc a
    slice of its batch's output, so on the CPU the states are usually views of one numpy
    array, and joining them would copy the whole padded batch (~40 MB for 256 sentences of
    MiniLM) only to gather a part of it. Returns (the array as rows of `width`, the row at
    which each state starts), or (None, None) where the states are not such views (other
    batches, device arrays: those are joined as before).
    """
    base = hidden[0].base
    if not isinstance(base, numpy.ndarray) or not base.flags.c_contiguous or base.shape[-1:] != (width,):
        return None, None
    origin = base.__array_interface__["data"][0]
    row_bytes = width * base.itemsize
    starts = []
    for state in hidden:
        if state.base is not base or not state.flags.c_contiguous or state.dtype != base.dtype:
            return None, None
        offset = state.__array_interface__["data"][0] - origin
        if offset % row_bytes:
            return None, None
        starts.append(offset // row_bytes)
    return base.reshape(-1, width), numpy.asarray(starts)
