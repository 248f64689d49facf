"""spacy_sciner.ops: CPU matrix products through numpy's BLAS instead of thinc's blis."""
import sys
from pathlib import Path

import numpy
import spacy
from spacy.util import load_config, load_model_from_config, registry
from thinc.api import Linear, Maxout, NumpyOps, chain

from spacy_sciner.ops import blas_threads, use_numpy_blas

sys.path.insert(0, str(Path(__file__).parent / "tok2vec"))
sys.path.insert(0, str(Path(__file__).parent / "spancat"))
from tok2vec_helpers import cnn_config, make_cnn_nlp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _blis_nodes(model):
    return [node for node in model.walk() if type(node.ops) is NumpyOps and node.ops.use_blis]


def test_switches_every_blis_node_and_keeps_the_outputs():
    model = chain(Maxout(16, 8, nP=3), Linear(4, 16))
    model.initialize(X=numpy.zeros((2, 8), dtype="f"))
    X = numpy.random.default_rng(0).random((50, 8), dtype="f")
    before = model.predict(X)
    n_nodes = len(list(model.walk()))
    assert len(_blis_nodes(model)) == n_nodes
    assert use_numpy_blas(model) == n_nodes
    assert not _blis_nodes(model)
    assert all(node.ops.use_blis is False for node in model.walk())
    numpy.testing.assert_allclose(model.predict(X), before, rtol=1e-5, atol=1e-6)
    assert use_numpy_blas(model) == 0  # idempotent


def test_leaves_other_ops_alone():
    class OtherOps(NumpyOps):  # e.g. AppleOps, BigEndianOps: their own kernels
        name = "other"

    model = Linear(4, 8)
    model.ops = OtherOps()
    assert use_numpy_blas(model) == 0
    assert type(model.ops) is OtherOps


def test_sciner_spancat_runs_its_model_without_blis():
    nlp = spacy.blank("en")
    spancat = nlp.add_pipe("sciner_spancat")
    assert not _blis_nodes(spancat.model)


def test_callback_switches_every_component_through_the_registry():
    nlp = make_cnn_nlp()
    assert _blis_nodes(nlp.get_pipe("tok2vec").model)  # a stock tok2vec multiplies through blis
    callback = registry.callbacks.get("spacy-sciner.numpy_blas.v1")()
    assert callback(nlp) is nlp
    for name in nlp.pipe_names:
        assert not _blis_nodes(nlp.get_pipe(name).model), name


def test_cnn_config_builds_without_blis():
    config = load_config(ROOT / "configs" / "sciner_spancat_cnn.cfg")
    assert config["nlp"]["after_pipeline_creation"]["@callbacks"] == "spacy-sciner.numpy_blas.v1"
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    for name in nlp.pipe_names:
        assert not _blis_nodes(nlp.get_pipe(name).model), name


def test_stock_tok2vec_gives_the_same_vectors_either_way():
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec", config={"model": cnn_config(16)})
    nlp.initialize()
    docs = [nlp.make_doc("The IL-2 receptor binds CD25 on T cells ."), nlp.make_doc("A second one .")]
    tok2vec = nlp.get_pipe("tok2vec").model
    before = tok2vec.predict(docs)
    use_numpy_blas(tok2vec)
    after = tok2vec.predict(docs)
    for b, a in zip(before, after):
        numpy.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_relu_is_thincs_relu_through_numpy():
    """NumpyBlasOps.relu: thinc's values (negatives to 0, NaN kept), in place when asked,
    float64 too; other arrays go to thinc's own loop. A Relu layer learns the same."""
    from thinc.api import Relu

    from spacy_sciner.ops import NumpyBlasOps

    thinc_ops, ops = NumpyOps(use_blis=False), NumpyBlasOps()
    X = numpy.random.default_rng(0).standard_normal((300, 20)).astype("f")
    X[0, :3] = [numpy.nan, -0.0, -numpy.inf]
    for dtype in ("f", "d"):
        A = X.astype(dtype)
        assert numpy.array_equal(ops.relu(A), thinc_ops.relu(A), equal_nan=True)
        assert (ops.relu(A)[1:] >= 0).all() and numpy.isnan(ops.relu(A)[0, 0])
        B = A.copy()
        assert ops.relu(B, inplace=True) is B and numpy.array_equal(B, thinc_ops.relu(A), equal_nan=True)
        assert not numpy.array_equal(A, B, equal_nan=True)  # not in place unless asked: A kept
    layers = []
    for layer_ops in (thinc_ops, ops):
        layer = Relu(8, 20)
        layer.ops = layer_ops
        layer.initialize(X=X[1:3])
        layer.set_param("W", numpy.ones((8, 20), dtype="f") * 0.1)
        layers.append(layer)
    (Y1, back1), (Y2, back2) = (layer.begin_update(X[1:]) for layer in layers)
    numpy.testing.assert_allclose(Y1, Y2, rtol=1e-6)
    dY = numpy.ones_like(Y1)
    numpy.testing.assert_allclose(back1(dY), back2(dY), rtol=1e-6)


def test_sciner_spancat_gets_the_numpy_relu():
    from spacy_sciner.ops import NumpyBlasOps

    nlp = spacy.blank("en")
    spancat = nlp.add_pipe("sciner_spancat")
    assert any(isinstance(node.ops, NumpyBlasOps) for node in spancat.model.walk())


def test_blas_threads_holds_numpy_blas_inside_the_block_and_restores_it():
    from threadpoolctl import threadpool_info, threadpool_limits

    def threads():
        return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}

    with threadpool_limits(3, user_api="blas"):
        with blas_threads(1):
            assert threads() == {1}
            numpy.ones((64, 64), dtype="f") @ numpy.ones((64, 64), dtype="f")
        assert threads() == {3}
        with blas_threads(None):  # left as it is
            assert threads() == {3}
