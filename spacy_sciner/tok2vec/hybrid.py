"""``spacy-sciner.HybridTok2Vec.v1``: transformer vectors + character-aware CNN vectors.

A WordPiece transformer sees a rare domain term ("PD-L1", "BiLSTM-CRF") as pieces it may
never have been tuned on; a hash-embedding CNN over NORM, PREFIX, SUFFIX and SHAPE sees
its spelling. The hybrid concatenates both, token by token, and the span head pools the
concatenation. Both parts are trained jointly by the span categorizer's gradient:

* ``transformer``: usually a ``spacy-transformers.TransformerListener.v1`` (the shared
  ``transformer`` component does the work and its own update);
* ``cnn``: usually an inline ``spacy.Tok2Vec.v2`` (``MultiHashEmbed.v2`` +
  ``MaxoutWindowEncoder.v2``), so the component owns it; a ``spacy.Tok2VecListener.v1``
  of a ``tok2vec`` component works too.

The CNN is marked ``attrs["sciner_from_scratch"] = True``: it starts from random weights
like the span head, unlike the pretrained transformer, so a component may train it at
the head's learning rate rather than the transformer's.
"""
from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, concatenate
from thinc.types import Floats2d

FROM_SCRATCH_ATTR = "sciner_from_scratch"


@registry.architectures("spacy-sciner.HybridTok2Vec.v1")
def build_hybrid_tok2vec(
    transformer: Model[List[Doc], List[Floats2d]],
    cnn: Model[List[Doc], List[Floats2d]],
) -> Model[List[Doc], List[Floats2d]]:
    """Concatenate, per token, a transformer's vectors with a character-aware CNN's.

    transformer (Model[List[Doc], List[Floats2d]]): Token vectors of a transformer,
        e.g. a spacy-transformers TransformerListener.
    cnn (Model[List[Doc], List[Floats2d]]): Token vectors of a CNN tok2vec, e.g.
        spacy.Tok2Vec.v2 with spacy.MultiHashEmbed.v2; its encoder width sets its share.
    RETURNS (Model[List[Doc], List[Floats2d]]): One array per doc of width
        transformer width + CNN width (the dimension nO, known after initialization).
    """
    cnn.attrs[FROM_SCRATCH_ATTR] = True
    model: Model[List[Doc], List[Floats2d]] = Model(
        "sciner_hybrid_tok2vec",
        hybrid_forward,
        init=hybrid_init,
        layers=[concatenate(with_empty_doc_width(transformer), cnn)],
        dims={"nO": None},
    )
    model.set_ref("transformer", transformer)
    model.set_ref("cnn", cnn)
    return model


def hybrid_forward(model: Model, docs: List[Doc], is_train: bool):
    return model.layers[0](docs, is_train)


def hybrid_init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    model.layers[0].initialize(X=X, Y=Y)
    widths = [output_width(model.get_ref(name)) for name in ("transformer", "cnn")]
    if None not in widths:
        model.set_dim("nO", sum(widths), force=True)


def with_empty_doc_width(layer: Model[List[Doc], List[Floats2d]]) -> Model[List[Doc], List[Floats2d]]:
    """Give the vectors of empty docs the layer's width: spacy-transformers' pooling returns
    (0, 0) arrays for them, which cannot be concatenated with the CNN's (0, width) ones.

    layer (Model[List[Doc], List[Floats2d]]): A tok2vec, e.g. a TransformerListener.
    RETURNS (Model[List[Doc], List[Floats2d]]): The same vectors, empty docs (0, width).
    """
    return Model(f"with_empty_doc_width({layer.name})", empty_doc_width_forward, layers=[layer])


def empty_doc_width_forward(model: Model, docs: List[Doc], is_train: bool):
    vectors, backprop = model.layers[0](docs, is_train)
    width = max((v.shape[1] for v in vectors), default=0) or output_width(model.layers[0]) or 0
    vectors = [v if v.shape[1] == width else model.ops.alloc2f(0, width) for v in vectors]
    # The gradients of empty docs are (0, width): still empty, as the layer expects.
    return vectors, backprop


def output_width(layer: Model) -> Optional[int]:
    """The width of a tok2vec's vectors, if known: its nO, or that of a listener it wraps
    (spacy-transformers' TransformerListener.v1 pools a listener whose nO the upstream
    transformer sets).

    layer (Model): A tok2vec model.
    RETURNS (Optional[int]): The width, None while unknown.
    """
    for node in (layer, layer.get_ref("listener") if layer.has_ref("listener") else None):
        if node is not None and node.has_dim("nO") is True:
            return node.get_dim("nO")
    return None
