"""predict_cnn_flat: spaCy's CNN tok2vec over a whole batch at once, the same numbers."""
import numpy
import pytest
import spacy
from spacy.ml.models.tok2vec import MaxoutWindowEncoder, MultiHashEmbed, build_Tok2Vec_model
from thinc.api import Relu, chain, list2array

from spacy_sciner.spancat.tokvecs import predict_cnn_flat

TEXTS = ["PD-L1 binds PD-1 on T cells .", "We train a BiLSTM-CRF tagger .", "x", "Tumour growth was slowed in mice ."]


def cnn(window_size: int = 1, depth: int = 2):
    embed = MultiHashEmbed(width=16, attrs=["NORM", "PREFIX", "SUFFIX", "SHAPE"], rows=[50, 20, 20, 20],
                           include_static_vectors=False)
    model = build_Tok2Vec_model(embed, MaxoutWindowEncoder(width=16, depth=depth, window_size=window_size, maxout_pieces=2))
    return model


@pytest.mark.parametrize("window_size,depth", [(1, 2), (2, 3)])
@pytest.mark.parametrize("texts", [TEXTS, ["", TEXTS[0], "", "", TEXTS[2], TEXTS[1], ""]])
def test_cnn_flat_equals_predict(texts, window_size, depth):
    """Exactly the rows of cnn.predict, doc after doc, empty docs between (no padding for
    them in thinc's flatten) included; windows wider than 1 still never cross docs."""
    nlp = spacy.blank("en")
    docs = [nlp.make_doc(text) for text in texts]
    model = cnn(window_size, depth)
    model.initialize(X=[d for d in docs if len(d)])
    expected = numpy.concatenate([v for v in model.predict(docs) if len(v)])
    flat = predict_cnn_flat(model, docs)
    assert flat.shape == (sum(len(d) for d in docs), 16)
    numpy.testing.assert_array_equal(flat, expected)
    # Each doc's rows depend on that doc only: alone it gives the same rows.
    alone = predict_cnn_flat(model, [docs[-2] if len(docs[-2]) else docs[1]])
    start = sum(len(d) for d in docs[: (len(docs) - 2 if len(docs[-2]) else 1)])
    numpy.testing.assert_array_equal(flat[start:start + len(alone)], alone)


def test_cnn_flat_declines_other_models_and_empty_batches():
    """None (the caller falls back to predict) for a batch without tokens and for any
    model that is not extract_features >> list2ragged >> with_array... >> ragged2list
    >> with_array..."""
    nlp = spacy.blank("en")
    model = cnn()
    model.initialize(X=[nlp.make_doc(TEXTS[0])])
    assert predict_cnn_flat(model, [nlp.make_doc(""), nlp.make_doc("")]) is None
    other = chain(model, list2array(), Relu(4))
    assert predict_cnn_flat(other, [nlp.make_doc(TEXTS[0])]) is None
    # The embedding alone (nothing after ragged2list) is covered too.
    docs = [nlp.make_doc(text) for text in TEXTS]
    numpy.testing.assert_array_equal(predict_cnn_flat(model.layers[0], docs),
                                     numpy.concatenate(model.layers[0].predict(docs)))
