"""Token vectors of a whole batch at inference, in one piece.

spacy-transformers' listener (``TransformerListener.v1``: a ``transformer-listener`` layer
chained with ``trfs2arrays``) aligns word pieces to tokens doc by doc: one host-to-device
copy of the alignment and one gather per doc. On a GPU, a batch of 256 sentences then
spends more time launching those small copies and kernels than the MLP spends on all of
its spans. ``predict_token_vectors`` does the same computation for the whole batch at
once: one concatenation of the docs' hidden states, one gather with the concatenated
alignment, one call of the listener's own pooling layer. The numbers are the ones
``trfs2arrays`` computes (the pooling sees the same rows, in the same order); any other
tok2vec, or a batch the fast path does not cover (a doc without transformer output, an
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
    if fast is not None:
        return fast
    vectors = [t for t in tok2vec.predict(docs) if len(t)]
    width = vectors[0].shape[1] if vectors else 0
    return tok2vec.ops.flatten(vectors) if vectors else tok2vec.ops.alloc2f(0, width)


def _listener_fast_path(tok2vec: Model, docs: List[Doc]) -> Optional[Floats2d]:
    """``trfs2arrays`` over the whole batch at once, or None where it does not apply."""
    layers = getattr(tok2vec, "layers", [])
    if len(layers) != 2 or layers[0].name != "transformer-listener" or layers[1].name != "trfs2arrays":
        return None
    if not docs or not Doc.has_extension("trf_data"):
        return None
    ops, pooling = tok2vec.ops, layers[1].layers[0]
    hidden, indices, lengths, offset = [], [], [], 0
    for doc in docs:
        data = doc._.trf_data
        output = getattr(data, "model_output", None)
        if output is None or "last_hidden_state" not in output or output.last_hidden_state.size == 0:
            return None
        align = data.align
        if len(doc) == 0 or int(align.lengths.sum()) == 0 or len(align.lengths) != len(doc):
            return None  # trfs2arrays' special cases: leave them to it
        src = ops.reshape2f(output.last_hidden_state, -1, data.width)
        hidden.append(src)
        # Host arrays in spacy-transformers; to_numpy also takes device ones.
        indices.append(ops.to_numpy(align.dataXd).astype("i") + offset)
        lengths.append(ops.to_numpy(align.lengths).astype("i"))
        offset += src.shape[0]
    src = ops.xp.concatenate(hidden, axis=0) if len(hidden) > 1 else hidden[0]
    gathered = src[ops.asarray1i(numpy.concatenate(indices))]
    return pooling.predict(Ragged(gathered, ops.asarray1i(numpy.concatenate(lengths))))
