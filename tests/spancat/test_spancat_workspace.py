"""Host buffers reused from batch to batch on the CPU (``workspace.py``) and the mean
pooling of word pieces without the gather (``tokvecs.mean_of_pieces``): the same numbers
as without them, and the buffers really reused."""
import copy
import pickle
import threading

import numpy
import pytest
from spancat_helpers import TRAIN_DATA
from test_spancat_prefilter import LENGTHS, no_edge_starts, setup
from thinc.api import NumpyOps

from spacy_sciner.spancat.inference import predict_spans
from spacy_sciner.spancat.model import predict_classifier
from spacy_sciner.spancat.prefilter import iter_kept_span_vectors
from spacy_sciner.spancat.tokvecs import mean_of_pieces
from spacy_sciner.spancat.workspace import Workspace


def test_workspace_reuses_one_buffer_per_role():
    ws = Workspace()
    a = ws.empty("chunk", (10, 4))
    assert a.shape == (10, 4) and a.dtype == numpy.float32 and a.flags.c_contiguous
    b = ws.empty("chunk", (3, 4))  # smaller: a view of the same buffer
    assert numpy.shares_memory(a, b)
    c = ws.empty("hidden", (3, 4))  # another role: its own buffer
    assert not numpy.shares_memory(b, c)
    d = ws.empty("chunk", (20, 4))  # larger: grown, then reused
    assert not numpy.shares_memory(a, d) and numpy.shares_memory(d, ws.empty("chunk", (5, 2)))
    assert ws.empty("chunk", (2, 2), dtype="float64").dtype == numpy.float64
    assert ws.nbytes() == 2 * 2 * 8 + 3 * 4 * 4
    ws.clear()
    assert ws.nbytes() == 0


def test_workspace_is_per_thread_and_copies_empty():
    ws = Workspace()
    mine = ws.empty("chunk", (8, 8))
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(ws.empty("chunk", (8, 8))))
    thread.start()
    thread.join()
    assert not numpy.shares_memory(mine, theirs[0])
    for other in (pickle.loads(pickle.dumps(ws)), copy.deepcopy(ws)):
        assert isinstance(other, Workspace) and other.nbytes() == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mean_of_pieces_is_thinc_reduce_mean_bit_for_bit(seed):
    rng = numpy.random.default_rng(seed)
    src = rng.normal(size=(40, 5)).astype("f")
    # Tokens of 0-6 pieces, zero-length ones first, inside and last.
    lengths = numpy.concatenate([[0], rng.integers(0, 7, size=25), [3, 0, 0]]).astype("i")
    rows = rng.integers(0, len(src), size=int(lengths.sum())).astype("i")
    expected = NumpyOps().reduce_mean(src[rows], lengths)
    assert numpy.array_equal(mean_of_pieces(src, rows, lengths), expected)
    out = numpy.full((len(lengths), 5), numpy.nan, dtype="f")
    assert mean_of_pieces(src, rows, lengths, out=out) is out and numpy.array_equal(out, expected)
    nothing = mean_of_pieces(src, rows[:0], numpy.zeros(3, "i"))
    assert nothing.shape == (3, 5) and not nothing.any()


@pytest.mark.parametrize("chunk_size", [4, 1000])
def test_prefilter_writes_its_chunks_into_the_workspace(chunk_size):
    encoder, head, tokens = setup("max_endpoints", 4)
    expected = [(rows, vectors.copy()) for rows, vectors in iter_kept_span_vectors(
        encoder, head, tokens, LENGTHS, 5, chunk_size, 0.0, keep=no_edge_starts)]
    ws = Workspace()
    for _ in range(2):  # the second pass reuses the buffers of the first
        got = []
        for rows, vectors in iter_kept_span_vectors(encoder, head, tokens, LENGTHS, 5, chunk_size, 0.0,
                                                    keep=no_edge_starts, workspace=ws):
            assert numpy.shares_memory(vectors, ws.empty("chunk", (1, 1)))
            got.append((rows, vectors.copy()))  # a chunk is valid until the next one
        assert len(got) == len(expected) > (1 if chunk_size == 4 else 0)
        for (rows, vectors), (want_rows, want) in zip(got, expected):
            assert numpy.array_equal(rows, want_rows) and numpy.array_equal(vectors, want)
    assert numpy.array_equal(tokens, setup("max_endpoints", 4)[2])  # the input untouched


def test_predict_classifier_writes_its_hidden_layer_into_the_workspace(trained_nlp):
    classifier = trained_nlp.get_pipe("sciner_spancat").model.get_ref("classifier")
    X = numpy.random.default_rng(0).normal(size=(30, classifier.get_dim("nI"))).astype("f")
    ws = Workspace()
    for n in (30, 7):
        assert numpy.array_equal(predict_classifier(classifier, X[:n], ws), classifier.predict(X[:n]))
    assert ws.nbytes() == 30 * classifier.layers[0].get_dim("nO") * 4


def spans(out):
    return out.spans.lengths.tolist(), out.spans.dataXd.tolist(), out.labels.tolist(), out.scores.tolist()


def test_batches_through_one_workspace_give_what_fresh_arrays_give(trained_nlp):
    """Batches of different sizes, several chunks each, one workspace: every batch's spans
    equal those computed with new arrays, whatever batch used the buffers before."""
    pipe = trained_nlp.get_pipe("sciner_spancat")
    transformer = trained_nlp.get_pipe("transformer")
    texts = [text for text, _ in TRAIN_DATA]
    batches = [texts, texts[:1], texts[::-1], texts[2:]]
    settings = dict(n_labels=len(pipe.labels), max_span_length=8, chunk_size=7, threshold=None,
                    filter_threshold=0.01, compact=True)
    ws = Workspace()
    for batch in batches:
        docs = [trained_nlp.make_doc(text) for text in batch]
        transformer.set_annotations(docs, transformer.predict(docs))
        fresh = predict_spans(pipe.model, docs, **settings)
        reused = predict_spans(pipe.model, docs, workspace=ws, **settings)
        assert spans(reused) == spans(fresh) and sum(fresh.spans.lengths) > 0
    assert ws.nbytes() > 0
    # The component keeps one workspace; a copy of the component gets an empty one.
    assert isinstance(pipe._workspace, Workspace)
    assert copy.deepcopy(pipe)._workspace.nbytes() == 0
