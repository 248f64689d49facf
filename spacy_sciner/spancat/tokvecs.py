"""Token vectors of a whole batch at inference, in one piece.

spacy-transformers' listener (``TransformerListener.v1``: a ``transformer-listener`` layer
chained with ``trfs2arrays``) aligns word pieces to tokens doc by doc: one host-to-device
copy of the alignment and one gather per doc. On a GPU, a batch of 256 sentences then
spends more time launching those small copies and kernels than the MLP spends on all of
its spans. ``predict_token_vectors`` does the same computation for the whole batch at
once: one concatenation of the docs' hidden states, one gather with the concatenated
alignment, one call of the listener's own pooling layer. The numbers are the ones
``trfs2arrays`` computes (the pooling sees the same rows, in the same order). A
``spacy-sciner.HybridTok2Vec.v1`` gets its transformer side this way and is joined with
its CNN's vectors once per batch, not per doc. Any other tok2vec, or a batch the fast path does not cover (a doc without transformer output, an
empty alignment), goes through ``tok2vec.predict``.
"""
from typing import List, Optional

import numpy
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Ragged


def predict_token_vectors(tok2vec: Model, docs: List[Doc]) -> Floats2d:
    """The token vectors of all docs, concatenated in doc order.

    tok2vec (Model): The component's tok2vec sub-model.
    docs (List[Doc]): The docs (processed by the upstream transformer, for a listener).
    RETURNS (Floats2d): One row per token of the batch.
    """
    fast = _listener_fast_path(tok2vec, docs)
    if fast is None:
        fast = _hybrid_fast_path(tok2vec, docs)
    if fast is not None:
        return fast
    vectors = [t for t in tok2vec.predict(docs) if len(t)]
    width = vectors[0].shape[1] if vectors else 0
    return tok2vec.ops.flatten(vectors) if vectors else tok2vec.ops.alloc2f(0, width)


def _hybrid_fast_path(tok2vec: Model, docs: List[Doc]) -> Optional[Floats2d]:
    """``spacy-sciner.HybridTok2Vec.v1``: the transformer's side through the listener's
    fast path and one join with the CNN's vectors, instead of a join per doc."""
    if tok2vec.name != "sciner_hybrid_tok2vec":
        return None
    transformer = _listener_fast_path(tok2vec.get_ref("transformer"), docs)
    if transformer is None:
        return None
    cnn = tok2vec.get_ref("cnn").predict(docs)
    return tok2vec.ops.xp.hstack([transformer, tok2vec.ops.flatten(cnn)])


def _listener_fast_path(tok2vec: Model, docs: List[Doc]) -> Optional[Floats2d]:
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
    shapes = {state.shape[1:] for state in hidden}
    if len(shapes) == 1:  # one batch of the transformer: same padded shape throughout
        src = (ops.xp.concatenate(hidden, axis=0) if len(hidden) > 1 else hidden[0]).reshape(-1, width)
    else:
        src = ops.xp.concatenate([state.reshape(-1, width) for state in hidden], axis=0)
    offsets = numpy.repeat(numpy.cumsum(n_rows) - n_rows, [len(i) for i in indices])
    gathered = src[ops.asarray1i(numpy.concatenate(indices).astype("i") + offsets)]
    return pooling.predict(Ragged(gathered, ops.asarray1i(all_lengths)))
