"""Inference on the device: batched token vectors, the decision inside ``predict``, and
its agreement with the calibration path that scores every candidate on the host."""
import numpy
import pytest
import spacy
from spancat_helpers import TRAIN_DATA

from spacy_sciner.spancat.decode import best_labels, is_entity
from spacy_sciner.spancat.inference import filter_cut, predict_spans
from spacy_sciner.spancat.tokvecs import predict_token_vectors

TEXTS = [text for text, _ in TRAIN_DATA] + [
    "the  support vector machine\n( SVM ) , a method",  # whitespace tokens, brackets
    "bleu " * 40,  # a longer doc
]


def transformed(nlp, texts=TEXTS):
    return [nlp.get_pipe("transformer")(nlp.make_doc(text)) for text in texts]


def test_batched_token_vectors_equal_the_listener(trained_nlp):
    tok2vec = trained_nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec")
    docs = transformed(trained_nlp)
    expected = numpy.concatenate(tok2vec.predict(docs))
    trfs2arrays = tok2vec.layers[1]
    forward, calls = trfs2arrays._func, []
    trfs2arrays._func = lambda *args, **kwargs: calls.append(1) or forward(*args, **kwargs)
    try:
        fast = predict_token_vectors(tok2vec, docs)
        assert not calls  # the fast path does not go through the per-doc alignment
        tok2vec.predict(docs)
        assert calls  # (the spy works)
    finally:
        trfs2arrays._func = forward
    assert fast.shape == (sum(len(d) for d in docs), expected.shape[1])
    assert numpy.array_equal(fast, expected)


def test_token_vectors_fall_back_for_an_empty_doc(trained_nlp):
    tok2vec = trained_nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec")
    docs = transformed(trained_nlp, [TEXTS[0], "", TEXTS[1]])
    vectors = predict_token_vectors(tok2vec, docs)
    assert numpy.array_equal(vectors, numpy.concatenate([v for v in tok2vec.predict(docs) if len(v)]))


@pytest.mark.parametrize("split", [None, 3])
def test_batched_token_vectors_of_transformer_batches(trained_nlp, split):
    """Docs of one transformer batch share a padded shape (one join); docs of two
    batches do not (joined row blocks): both equal the listener."""
    tok2vec = trained_nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec")
    transformer = trained_nlp.get_pipe("transformer")
    docs = [trained_nlp.make_doc(text) for text in TEXTS]
    for part in ([docs] if split is None else [docs[:split], docs[split:]]):
        transformer.set_annotations(part, transformer.predict(part))
    shapes = {doc._.trf_data.model_output.last_hidden_state.shape[1:] for doc in docs}
    assert len(shapes) == (1 if split is None else 2)
    expected = numpy.concatenate(tok2vec.predict(docs))
    assert numpy.array_equal(predict_token_vectors(tok2vec, docs), expected)


def test_token_vectors_read_one_batch_in_place(trained_nlp):
    """One transformer batch: every doc's hidden state is a view of one array, read without
    joining (a copy of the padded batch); the docs in another order give the same rows."""
    from spacy_sciner.spancat.tokvecs import _rows_in_place

    tok2vec = trained_nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec")
    transformer = trained_nlp.get_pipe("transformer")
    docs = [trained_nlp.make_doc(text) for text in TEXTS]
    transformer.set_annotations(docs, transformer.predict(docs))
    hidden = [doc._.trf_data.model_output.last_hidden_state for doc in docs]
    width = docs[0]._.trf_data.width
    rows, starts = _rows_in_place(hidden, width)
    assert rows is not None and not rows.flags.owndata  # the batch's own array, no copy
    for state, start in zip(hidden, starts):
        assert numpy.array_equal(rows[start:start + state.size // width], state.reshape(-1, width))
    shuffled = docs[::-1]
    expected = numpy.concatenate(tok2vec.predict(shuffled))
    assert numpy.array_equal(predict_token_vectors(tok2vec, shuffled), expected)
    # States that are not views of one array are joined as before.
    copies = [state.copy() for state in hidden]
    assert _rows_in_place(copies, width) == (None, None)
    assert _rows_in_place([hidden[0], copies[1]], width) == (None, None)


def test_token_vectors_fall_back_for_a_doc_without_word_pieces(trained_nlp):
    tok2vec = trained_nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec")
    transformer = trained_nlp.get_pipe("transformer")
    docs = [trained_nlp.make_doc(text) for text in [TEXTS[0], "\u200b", TEXTS[1]]]
    transformer.set_annotations(docs, transformer.predict(docs))
    assert len(docs[1]) and docs[1]._.trf_data.align.lengths.sum() == 0  # the case itself
    expected = numpy.concatenate([v for v in tok2vec.predict(docs) if len(v)])
    assert numpy.array_equal(predict_token_vectors(tok2vec, docs), expected)


def between_scores(values, quantile, gap=1e-4):
    """A threshold between two adjacent distinct values at least ``gap`` apart, near the
    quantile: chunks of other sizes may round a score differently in its last bits (numpy's
    BLAS picks its kernels by matrix shape), which must not move a score across it."""
    unique = numpy.unique(values)
    wide = numpy.flatnonzero(numpy.diff(unique) > gap)
    i = wide[numpy.argmin(numpy.abs(wide - quantile * (len(unique) - 1)))]
    return float((unique[i] + unique[i + 1]) / 2)


@pytest.mark.parametrize("floor", [None, 0.3])
@pytest.mark.parametrize("compact", [True, False])
def test_predict_decides_like_scoring_every_candidate(trained_nlp, floor, compact):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    docs = transformed(trained_nlp)
    every = pipe.score_candidates(docs, prune=False)
    filter_threshold = between_scores(every.filter_probs, 0.5)
    kept = every.filter_probs >= filter_threshold
    assert 0 < kept.sum() < len(kept)
    n = len(pipe.labels)
    chosen = kept & is_entity(every.probs, n, floor)
    labels, scores = best_labels(every.probs, n)
    # No decision of this fixture within rounding of its rule: a floor or an argmax tie.
    top2 = numpy.sort(every.probs[kept], axis=1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0]).min() > 1e-5
    assert floor is None or numpy.abs(scores[kept] - floor).min() > 1e-5
    doc_of = numpy.repeat(numpy.arange(len(docs)), every.spans.lengths)
    expected = sorted(
        (int(d), int(s), int(e), int(label), float(score))
        for d, (s, e), label, score in zip(doc_of[chosen], every.spans.dataXd[chosen], labels[chosen], scores[chosen])
    )
    out = predict_spans(
        pipe.model, docs, n_labels=n, max_span_length=8, chunk_size=50, threshold=floor,
        filter_threshold=filter_threshold, compact=compact,
    )
    doc_of = numpy.repeat(numpy.arange(len(docs)), out.spans.lengths)
    got = [(int(d), int(s), int(e), int(label), float(score))
           for d, (s, e), label, score in zip(doc_of, out.spans.dataXd, out.labels, out.scores)]
    # The same spans and labels, also ordered by doc, start, end; the same scores up to rounding.
    assert [g[:4] for g in got] == [e[:4] for e in expected] and len(got) > 0
    numpy.testing.assert_allclose([g[4] for g in got], [e[4] for e in expected], rtol=1e-5)
    assert out.n_candidates == len(kept) and out.n_scored == int(kept.sum())


def test_floor_is_compared_in_float64():
    # A floor just above a float32 score rounds onto it in float32 arithmetic.
    score = numpy.float32(0.3)
    floor = float(score) + 1e-12
    probs = numpy.asarray([[score, 0.1, 0.6]], dtype="f")
    assert not is_entity(probs, 2, floor)[0]
    assert is_entity(probs, 2, float(score))[0]


def test_filter_cut_is_the_logit_of_the_threshold():
    assert filter_cut(None) is None
    assert filter_cut(0.0) == -numpy.inf and filter_cut(1.0) == numpy.inf
    assert filter_cut(0.5) == 0.0
    logits = numpy.linspace(-30, 30, 10001)
    probs = 1 / (1 + numpy.exp(-logits))
    for t in (1e-9, 0.0123, 0.5, 0.97):
        assert numpy.array_equal(logits >= filter_cut(t), probs >= t)


def test_predict_on_an_empty_batch_and_doc(trained_nlp):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    out = pipe.predict(transformed(trained_nlp, ["", ""]))
    assert out.spans.lengths.tolist() == [0, 0] and out.n_candidates == 0
    docs = list(trained_nlp.pipe(["", TEXTS[0]]))
    assert len(docs[0].spans["sc"]) == 0 and len(docs[1].spans["sc"]) > 0


@pytest.mark.parametrize("compact", [True, False])
def test_predict_where_the_edge_rule_empties_a_width(trained_nlp, compact):
    """No span may start or end on punctuation (brackets only in pairs), so these batches
    have widths without any candidate: no error on either path, the same spans as alone."""
    pipe = trained_nlp.get_pipe("sciner_spancat")

    def predict(texts):
        return predict_spans(pipe.model, transformed(trained_nlp, texts), n_labels=len(pipe.labels), max_span_length=8,
                             chunk_size=50, threshold=None, filter_threshold=1e-6, compact=compact)

    out = predict([". , ;", "- -"])  # no candidate at any width
    assert out.spans.lengths.tolist() == [0, 0] and out.n_scored == 0
    alone = predict(["( )"])  # width 1 empty, width 2 not: "( )" is a candidate
    mixed = predict([". , ;", "( )"])
    assert alone.n_candidates == mixed.n_candidates == 1
    assert mixed.spans.lengths.tolist() == [0] + alone.spans.lengths.tolist()
    assert mixed.spans.dataXd.tolist() == alone.spans.dataXd.tolist() and mixed.labels.tolist() == alone.labels.tolist()


def test_set_annotations_labels_and_scores(trained_nlp):
    docs = list(trained_nlp.pipe([text for text, _ in TRAIN_DATA]))
    for doc, (_, gold) in zip(docs, TRAIN_DATA):
        assert sorted((s.start, s.end, s.label_) for s in doc.spans["sc"]) == sorted(gold)
        assert len(doc.spans["sc"].attrs["scores"]) == len(doc.spans["sc"])
        assert all(s.label_ in {"Method", "Other", "Material", "Metric", "Task"} for s in doc.ents)


def test_label_strings_round_trip(trained_nlp):
    # Spans carry label ids from the shared StringStore: a fresh pipeline resolves them.
    nlp = spacy.blank("en").from_config(trained_nlp.config).from_bytes(trained_nlp.to_bytes())
    doc = nlp(TRAIN_DATA[2][0])
    assert {s.label_ for s in doc.spans["sc"]} == {"Metric", "Task"}


def annotations(docs):
    return [([(s.start, s.end, s.label_) for s in d.spans["sc"]], [(e.start, e.end, e.label_) for e in d.ents])
            for d in docs]


def test_pipe_runs_one_batch_ahead_with_the_same_output(trained_nlp):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    texts = TEXTS * 2
    expected = annotations([trained_nlp(text) for text in texts])  # __call__: predict per doc
    calls = []
    launch, finish = pipe._launch, pipe.set_annotations
    pipe._launch = lambda docs: calls.append(("launch", docs[0].text)) or launch(docs)
    pipe.set_annotations = lambda docs, *rest: calls.append(("finish", docs[0].text)) or finish(docs, *rest)
    try:
        docs = list(trained_nlp.pipe(texts, batch_size=3))
    finally:
        del pipe._launch, pipe.set_annotations
    assert annotations(docs) == expected and [d.text for d in docs] == texts
    firsts = [texts[i] for i in range(0, len(texts), 3)]
    # Batch i + 1 is queued before batch i's results are collected.
    assert calls == [("launch", firsts[0])] + [
        step for i in range(1, len(firsts)) for step in (("launch", firsts[i]), ("finish", firsts[i - 1]))
    ] + [("finish", firsts[-1])]


def test_pipe_sends_a_failing_batch_to_the_error_handler(trained_nlp):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    launch = pipe._launch

    def failing(docs):
        if any(d.text == TEXTS[1] for d in docs):
            raise ValueError("boom")
        return launch(docs)

    pipe._launch = failing
    try:
        with pytest.raises(ValueError, match="boom"):
            list(trained_nlp.pipe(TEXTS, batch_size=1))
        handled = []
        pipe.set_error_handler(lambda name, proc, docs, err: handled.append((name, [d.text for d in docs], str(err))))
        docs = list(trained_nlp.pipe(TEXTS, batch_size=1))
    finally:
        del pipe._launch
        pipe.set_error_handler(spacy.util.raise_error)
    assert handled == [("sciner_spancat", [TEXTS[1]], "boom")]
    assert [d.text for d in docs] == [t for t in TEXTS if t != TEXTS[1]]


@pytest.mark.parametrize("compact,used", [(True, True), (False, False)])
def test_cpu_predict_runs_the_filter_first(trained_nlp, monkeypatch, compact, used):
    """On the CPU (compacting) ``predict`` takes the filter-first path; masking does not."""
    from spacy_sciner.spancat import inference

    calls, original = [], inference.iter_kept_span_vectors
    monkeypatch.setattr(inference, "iter_kept_span_vectors", lambda *a, **k: calls.append(1) or original(*a, **k))
    pipe = trained_nlp.get_pipe("sciner_spancat")
    out = predict_spans(pipe.model, transformed(trained_nlp), n_labels=len(pipe.labels), max_span_length=8,
                        chunk_size=50, threshold=None, filter_threshold=0.01, compact=compact)
    assert bool(calls) == used and out.n_candidates > out.n_scored
