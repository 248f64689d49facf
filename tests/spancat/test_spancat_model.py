"""The thinc model: forward/backprop shapes, span pooling against spaCy's extract_spans."""
import numpy
import pytest
import spacy
from spacy.ml.extract_spans import _get_span_indices
from thinc.api import NumpyOps, Ragged, reduce_max

from spacy_sciner.spancat.model import (
    REDUCERS,
    build_span_categorizer,
    build_span_encoder,
    iter_span_vectors,
    span_gather_indices,
)
from spacy_sciner.spancat.sampling import enumerate_batch

OPS = NumpyOps()


def tok2vec(width=12):
    """A cheap spaCy tok2vec (no transformer) for shape tests."""
    return spacy.registry.resolve(
        {"t": {"@architectures": "spacy.HashEmbedCNN.v2", "width": width, "depth": 1, "embed_size": 50,
               "window_size": 1, "maxout_pieces": 2, "subword_features": False, "pretrained_vectors": None}}
    )["t"]


def docs():
    nlp = spacy.blank("en")
    return [nlp("a b c d e"), nlp("f g"), nlp("h i j")]


@pytest.mark.parametrize("reducer", sorted(REDUCERS))
@pytest.mark.parametrize("width_embedding", [0, 4])
def test_forward_backprop_shapes(reducer, width_embedding):
    model = build_span_categorizer(tok2vec(), hidden_width=8, reducer=reducer, width_embedding=width_embedding, nO=3)
    batch = docs()
    spans = enumerate_batch([len(d) for d in batch], 3)
    model.initialize(X=(batch, spans))
    scores, backprop = model.begin_update((batch, spans))
    assert scores.shape == (spans.dataXd.shape[0], 3 + 1)  # 3 classes + filter logit
    numpy.testing.assert_allclose(scores[:, :3].sum(axis=1), 1.0, rtol=1e-5)
    backprop(OPS.alloc2f(*scores.shape) + 0.1)
    # The gradient reaches both heads and, through the pooling, the token vectors.
    for ref in ("output_layer", "filter", "tok2vec"):
        grads = [abs(n.get_grad(p)).sum() for n in model.get_ref(ref).walk() for p in n.param_names if n.has_grad(p)]
        assert grads and max(grads) > 0, ref
    encoder = model.get_ref("span_encoder")
    assert encoder.get_dim("nO") == 12 * REDUCERS[reducer][1] + width_embedding


def test_gather_indices_match_spacy_extract_spans():
    spans = Ragged(numpy.asarray([[5, 9], [8, 10], [0, 1], [1, 3]], dtype="i"), numpy.asarray([2, 2], dtype="i"))
    doc_lengths = numpy.asarray([10, 4], dtype="i")
    indices, lengths = span_gather_indices(spans.dataXd, spans.lengths, doc_lengths)
    assert indices.tolist() == _get_span_indices(OPS, spans, doc_lengths).tolist()
    assert lengths.tolist() == [4, 2, 1, 2]


def test_max_pooling_is_sept_eq1():
    X = Ragged(numpy.random.default_rng(0).normal(size=(7, 5)).astype("f"), numpy.asarray([4, 3], dtype="i"))
    spans = Ragged(numpy.asarray([[1, 4], [0, 2]], dtype="i"), numpy.asarray([1, 1], dtype="i"))
    encoder = build_span_encoder("max")
    encoder.initialize(X=(X, spans))
    Y, backprop = encoder((X, spans), is_train=True)
    numpy.testing.assert_allclose(Y[0], X.dataXd[1:4].max(axis=0))
    numpy.testing.assert_allclose(Y[1], X.dataXd[4:6].max(axis=0))
    dX, _ = backprop(numpy.ones_like(Y))
    # Gradient flows only to the argmax token of each dimension: one per span and column.
    assert dX.dataXd.sum() == pytest.approx(2 * 5)
    assert dX.dataXd[0].sum() == 0  # token 0 of doc 1 is outside both spans


def test_endpoints_and_width_embedding():
    X = Ragged(numpy.arange(12, dtype="f").reshape(6, 2), numpy.asarray([6], dtype="i"))
    spans = Ragged(numpy.asarray([[1, 4], [2, 3], [0, 6]], dtype="i"), numpy.asarray([3], dtype="i"))
    encoder = build_span_encoder("max_endpoints", width_embedding=3, width_buckets=4)
    encoder.initialize(X=(X, spans))
    Y = encoder.predict((X, spans))
    assert Y.shape == (3, 2 * 3 + 3)
    numpy.testing.assert_allclose(Y[0, :6], [6, 7, 2, 3, 6, 7])  # max, first, last
    E = encoder.layers[1].get_param("E")
    numpy.testing.assert_allclose(Y[:, 6:], E[[2, 0, 3]])  # widths 3, 1, 6 -> bucket 2, 0, last


def test_invalid_spans_are_reported():
    with pytest.raises(ValueError, match=r"Invalid span \(3, 3\)"):
        span_gather_indices(numpy.asarray([[0, 2], [3, 3]]), numpy.asarray([2]), numpy.asarray([5]))
    with pytest.raises(ValueError, match=r"Invalid span \(4, 6\)"):
        span_gather_indices(numpy.asarray([[4, 6]]), numpy.asarray([1]), numpy.asarray([5]))


def test_reduce_max_layer_is_thincs():
    assert build_span_encoder("max").layers[0].name == reduce_max().name


@pytest.mark.parametrize("kwargs", [{"hidden_width": 0}, {"width_embedding": -1}, {"width_buckets": 0}])
def test_bad_sizes(kwargs):
    with pytest.raises(ValueError, match="Invalid span categorizer sizes"):
        build_span_categorizer(tok2vec(), **kwargs)


@pytest.mark.parametrize(
    "reducer,width_embedding",
    [("max", 0), ("max", 3), ("mean", 0), ("endpoints", 0), ("max_endpoints", 0), ("max_endpoints", 3), ("mean_max", 2)],
)
def test_inference_pooling_matches_the_training_encoder(reducer, width_embedding):
    lengths = numpy.asarray([5, 0, 1, 9, 3], dtype="i")
    X = Ragged(numpy.random.default_rng(1).normal(size=(lengths.sum(), 4)).astype("f"), lengths)
    candidates = enumerate_batch(lengths, 4)
    encoder = build_span_encoder(reducer, width_embedding=width_embedding, width_buckets=3)
    encoder.initialize(X=(X, candidates))
    expected = encoder.predict((X, candidates))
    offsets = numpy.repeat(numpy.cumsum(lengths) - lengths, candidates.lengths)
    wanted = {(int(s), int(e)): i for i, (s, e) in enumerate(candidates.dataXd + offsets[:, None])}
    seen = set()
    for rows, vectors in iter_span_vectors(encoder, X.dataXd, lengths, 4, chunk_size=5):
        assert len(rows) <= 5
        for (s, e), vector in zip(rows.tolist(), vectors):
            numpy.testing.assert_array_equal(vector, expected[wanted[(s, e)]])  # exact, not approx
            seen.add((s, e))
    assert seen == set(wanted)  # every candidate once, none crossing a doc boundary
    # Chunks are filled across widths: every chunk but the last is full.
    sizes = [len(rows) for rows, _ in iter_span_vectors(encoder, X.dataXd, lengths, 4, chunk_size=5)]
    assert sizes == [5] * (len(wanted) // 5) + ([len(wanted) % 5] if len(wanted) % 5 else [])


@pytest.mark.parametrize("blas", [False, True])
def test_predict_classifier_equals_predict(blas):
    """The in-place ReLU gives exactly the classifier's own predictions and leaves the
    span vectors alone; any other classifier runs its own predict."""
    from thinc.api import Maxout, Relu, Softmax_v2, chain

    from spacy_sciner.ops import use_numpy_blas
    from spacy_sciner.spancat.model import predict_classifier

    X = numpy.random.default_rng(0).normal(size=(40, 6)).astype("f")
    for classifier in (chain(Relu(nO=8, dropout=0.1), Softmax_v2(nO=3)), chain(Maxout(nO=8, nP=2), Softmax_v2(nO=3))):
        classifier.initialize(X=X[:2], Y=numpy.zeros((2, 3), "f"))
        if blas:
            use_numpy_blas(classifier)
        before = X.copy()
        expected = classifier.predict(X)
        got = predict_classifier(classifier, X)
        numpy.testing.assert_array_equal(got, expected)
        numpy.testing.assert_array_equal(X, before)
        assert got.shape == (40, 3) and numpy.allclose(got.sum(axis=1), 1.0)
