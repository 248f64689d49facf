"""Span enumeration and negative sampling: counts, gold handling, reproducibility."""
import numpy
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_sciner.spancat.sampling import enumerate_batch, enumerate_spans, sample_training_spans, span_targets

LABELS = {"Method": 0, "Task": 1}


def example(n_tokens, gold):
    vocab = spacy.blank("en").vocab
    words = [f"w{i}" for i in range(n_tokens)]
    ref = Doc(vocab, words=words)
    ref.spans["sc"] = [Span(ref, s, e, label=label) for s, e, label in gold]
    return Example(Doc(vocab, words=words), ref)


@pytest.mark.parametrize("n,L", [(0, 8), (1, 8), (5, 2), (7, 8), (30, 8)])
def test_enumerate_spans_is_every_span_up_to_L(n, L):
    spans = enumerate_spans(n, L)
    expected = {(s, e) for s in range(n) for e in range(s + 1, min(n, s + L) + 1)}
    assert {tuple(map(int, row)) for row in spans} == expected
    assert len(spans) == len(expected)  # no duplicates


def test_enumerate_batch_groups_per_doc():
    ragged = enumerate_batch([3, 0, 2], 2)
    assert ragged.lengths.tolist() == [5, 0, 3]
    assert ragged.dataXd.tolist()[-3:] == [[0, 1], [1, 2], [0, 2]]


def test_negative_counts_and_gold_kept():
    # A nested pair and a gold span longer than L=3 (still trained on).
    gold = [(1, 3, "Method"), (1, 2, "Task"), (4, 9, "Task")]
    egs = [example(20, gold), example(4, [])]
    spans, targets = sample_training_spans(egs, "sc", LABELS, 3, 10, numpy.random.default_rng(0))
    assert spans.lengths.tolist() == [3 + 10, 9]  # doc 2 has only 4+3+2 = 9 candidates
    rows = [tuple(map(int, r)) for r in spans.dataXd[:13]]
    assert rows[:3] == [(1, 3), (1, 2), (4, 9)] and targets[:3].tolist() == [0, 1, 1]
    negatives = rows[3:]
    assert len(set(negatives)) == 10
    assert all(e - s <= 3 and (s, e) not in {(1, 3), (1, 2), (4, 9)} for s, e in negatives)
    assert (targets[3:] == len(LABELS)).all()  # none class
    assert span_targets(egs, spans, "sc", LABELS).tolist() == targets.tolist()


def test_negatives_per_sentence_of_a_multi_sentence_doc():
    vocab = spacy.blank("en").vocab
    words = [f"w{i}" for i in range(30)]
    starts = [i in (0, 10, 20) for i in range(30)]  # three sentences
    ref = Doc(vocab, words=words, sent_starts=starts)
    ref.spans["sc"] = [Span(ref, 1, 3, label="Method")]
    sentenced = Example(Doc(vocab, words=words, sent_starts=starts), ref)
    # The doc made from the text has no sentence starts: the gold doc's count.
    from_text = Example(Doc(vocab, words=words), ref)
    plain_ref = Doc(vocab, words=words)
    plain_ref.spans["sc"] = [Span(plain_ref, 1, 3, label="Method")]
    plain = Example(Doc(vocab, words=words), plain_ref)  # no sentence boundaries: one sentence
    egs = [sentenced, from_text, plain]
    spans, _ = sample_training_spans(egs, "sc", LABELS, 3, 10, numpy.random.default_rng(0))
    assert spans.lengths.tolist() == [1 + 3 * 10, 1 + 3 * 10, 1 + 10]


def test_sampling_reproducible_from_seed():
    egs = [example(25, [(2, 4, "Method")]) for _ in range(3)]

    def draw(seed):
        return sample_training_spans(egs, "sc", LABELS, 8, 20, numpy.random.default_rng(seed))[0].dataXd.tolist()

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_component_rng_is_reset_by_initialize(tiny_bert_dir):
    from spancat_helpers import make_examples, make_nlp

    nlp = make_nlp(tiny_bert_dir, negatives_per_doc=5, seed=3)
    examples = make_examples(nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    draws = []
    for _ in range(2):
        nlp.initialize(lambda: examples)
        draws.append(sample_training_spans(examples, "sc", pipe._label_map, 8, 5, pipe._rng)[0].dataXd.tolist())
    assert draws[0] == draws[1]


def test_same_span_two_labels_keeps_first():
    egs = [example(5, [(0, 2, "Task"), (0, 2, "Method")])]
    spans, targets = sample_training_spans(egs, "sc", LABELS, 2, 0, numpy.random.default_rng(0))
    assert spans.dataXd.tolist() == [[0, 2]] and targets.tolist() == [1]


def test_negative_pool_avoids_overlapping_spans():
    from spacy_sciner.spancat.sampling import negative_pool

    pool = enumerate_spans(9, 4)
    gold = numpy.asarray([[1, 2], [6, 8]], dtype="i")
    avoid = numpy.asarray([[3, 5], [6, 8], [8, 9]], dtype="i")
    got = {tuple(r) for r in negative_pool(pool, gold, 9, avoid).tolist()}
    expected = {
        (s, e) for s, e in pool.tolist()
        if (s, e) not in {(1, 2), (6, 8)} and not any(s < b and a < e for a, b in avoid.tolist())
    }
    assert got == expected == {(0, 1), (2, 3), (0, 2), (1, 3), (0, 3), (5, 6)}
    assert {tuple(r) for r in negative_pool(pool, gold, 9).tolist()} == {tuple(r) for r in pool.tolist()} - {(1, 2), (6, 8)}


def test_negatives_avoid_keeps_negatives_off_weak_and_candidate_spans(tiny_bert_dir):
    from spancat_helpers import make_examples, make_nlp

    nlp = make_nlp(tiny_bert_dir, negatives_avoid=["sc", "candidates"], negatives_per_doc=1000)
    examples = make_examples(nlp)
    for eg in examples:  # an unlabeled mined candidate on the first token of each sentence
        eg.reference.spans["candidates"] = [Span(eg.reference, 0, 1, label="cand")]
    nlp.initialize(lambda: examples)
    pipe = nlp.get_pipe("sciner_spancat")
    assert pipe.cfg["negatives_avoid"] == ["sc", "candidates"]
    seen = []
    forward = pipe.model._func
    pipe.model._func = lambda model, X, is_train: seen.append(X[1]) or forward(model, X, is_train)
    try:
        nlp.update(examples)  # the transformer first: the listener needs its output
    finally:
        pipe.model._func = forward
    spans, offset = seen[0], 0
    for eg, count in zip(examples, spans.lengths.tolist()):
        rows = spans.dataXd[offset : offset + count].tolist()
        offset += count
        gold = [(s.start, s.end) for s in eg.reference.spans["sc"]]
        taken = [(s.start, s.end) for key in ("sc", "candidates") for s in eg.reference.spans[key]]
        negatives = [(s, e) for s, e in rows if (s, e) not in gold]
        assert negatives and all(not (s < b and a < e) for s, e in negatives for a, b in taken)
        # All allowed negatives were drawn (1000 per doc); the bias prior counted the same.
        assert len(negatives) == pipe._n_negatives(eg)
