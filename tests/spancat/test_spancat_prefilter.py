"""Filter-first enumeration (``prefilter``): the filter's logits from projections of the
token rows select the same candidates, with the same vectors, as gathering every
candidate's vector and running the filter on them."""
import numpy
import pytest
from thinc.api import Linear

from spacy_sciner.spancat.model import build_span_encoder, iter_span_vectors
from spacy_sciner.spancat.prefilter import can_prefilter, iter_kept_span_vectors

LENGTHS = numpy.asarray([7, 1, 12, 3], dtype="i")


def setup(reducer, width_embedding, seed=0):
    rng = numpy.random.default_rng(seed)
    tokens = rng.normal(size=(int(LENGTHS.sum()), 6)).astype("f")
    encoder = build_span_encoder(reducer, width_embedding, width_buckets=3)
    encoder.initialize()
    if width_embedding:
        embed = encoder.layers[1]
        embed.set_param("E", rng.normal(size=embed.get_param("E").shape).astype("f"))
    n_in = 6 * encoder.attrs["multiplier"] + width_embedding
    head = Linear(nO=1, nI=n_in)
    head.initialize()
    head.set_param("W", rng.normal(size=(1, n_in)).astype("f"))
    head.set_param("b", numpy.asarray([0.3], dtype="f"))
    return encoder, head, tokens


def no_edge_starts(rows):
    # Some candidate rule (drop spans starting at an even global position > 10).
    return ~((rows[:, 0] % 2 == 0) & (rows[:, 0] > 10))


@pytest.mark.parametrize("reducer", ["max", "endpoints", "max_endpoints"])
@pytest.mark.parametrize("width_embedding", [0, 4])
@pytest.mark.parametrize("chunk_size", [5, 1000])
def test_prefilter_keeps_what_the_filter_on_gathered_vectors_keeps(reducer, width_embedding, chunk_size):
    encoder, head, tokens = setup(reducer, width_embedding)
    assert can_prefilter(encoder, head, has_rows=False)
    rows, vectors = zip(*iter_span_vectors(encoder, tokens, LENGTHS, 5, 1000, keep=no_edge_starts))
    rows, vectors = numpy.concatenate(rows), numpy.concatenate(vectors)
    logits = head.predict(vectors)[:, 0]
    # A cut between two logits far apart, so float32 rounding cannot move one across it.
    ordered = numpy.sort(logits)
    gap = int(numpy.argmax(numpy.diff(ordered[len(ordered) // 4 : -len(ordered) // 4]))) + len(ordered) // 4
    cut = float((ordered[gap] + ordered[gap + 1]) / 2)
    expected = logits >= cut
    assert 0 < expected.sum() < len(expected)
    counts = {}
    chunks = list(iter_kept_span_vectors(encoder, head, tokens, LENGTHS, 5, chunk_size, cut,
                                         keep=no_edge_starts, counts=counts))
    assert counts["candidates"] == len(rows)
    sizes = [len(chunk) for chunk, _ in chunks]  # full chunks but the last
    assert sizes == [chunk_size] * (int(expected.sum()) // chunk_size) + ([int(expected.sum()) % chunk_size] if expected.sum() % chunk_size else [])
    got_rows = numpy.concatenate([chunk for chunk, _ in chunks])
    got_vectors = numpy.concatenate([v for _, v in chunks])
    assert numpy.array_equal(got_rows, rows[expected])  # same spans, same order
    assert numpy.array_equal(got_vectors, vectors[expected])  # the same vectors, exactly
    # The logits themselves agree up to float32 rounding.
    projected = head.predict(got_vectors)[:, 0]
    numpy.testing.assert_allclose(projected, logits[expected], rtol=1e-5, atol=1e-5)


def test_prefilter_keeps_nothing_but_counts_every_candidate():
    encoder, head, tokens = setup("max", 0)
    counts = {}
    assert list(iter_kept_span_vectors(encoder, head, tokens, LENGTHS, 4, 10, numpy.inf, counts=counts)) == []
    # Widths 1..4 over docs of 7, 1, 12 and 3 tokens.
    assert counts["candidates"] == sum(max(0, n - w + 1) for n in LENGTHS for w in range(1, 5))


def test_prefilter_applies_only_to_enumerated_spans_and_a_linear_filter():
    encoder, head, _ = setup("max", 0)
    assert not can_prefilter(encoder, head, has_rows=True)  # a suggester's rows
    assert not can_prefilter(build_span_encoder("mean"), head, has_rows=False)
