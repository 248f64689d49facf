"""The decision rule (argmax by default, a dev-chosen floor as an option), prior-initialised
biases, the learning-rate scale's scope, suggesters and candidate edges."""
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from thinc.api import Adam

from spacy_sciner.spancat.candidates import EdgeRule
from spacy_sciner.spancat.decode import is_entity
from spacy_sciner.spancat.filter import CalibrationData, choose_thresholds
from spacy_sciner.spancat.sampling import gold_spans
from spacy_sciner.spancat.util import class_prior_biases

from spancat_helpers import TRAIN_DATA, make_examples, make_nlp, train


def test_is_entity_argmax_and_floor():
    # Columns: label A, label B, none.
    probs = numpy.asarray([[0.30, 0.20, 0.50], [0.45, 0.15, 0.40], [0.40, 0.40, 0.20], [0.3, 0.2, 0.3]], dtype="f")
    # argmax: row 0 -> none; rows 1, 2 -> a label; row 3 ties with none -> not an entity.
    assert is_entity(probs, 2, None).tolist() == [False, True, True, False]
    # A floor of 0.5 (the old default) outputs none of them, although two win the argmax.
    assert is_entity(probs, 2, 0.5).tolist() == [False, False, False, False]
    assert is_entity(probs, 2, 0.3).tolist() == [True, True, True, True]
    assert is_entity(numpy.zeros((0, 3), "f"), 2, None).shape == (0,)


def test_default_rule_is_argmax(tiny_bert_dir):
    nlp = make_nlp(tiny_bert_dir)
    assert nlp.get_pipe("sciner_spancat").cfg["threshold"] is None
    assert nlp.config["components"]["sciner_spancat"]["threshold"] is None
    # The shipped training config decides by argmax too.
    config = spacy.util.load_config(Path(__file__).parents[2] / "configs" / "sciner_spancat.cfg")
    assert config["components"]["sciner_spancat"]["threshold"] is None


def test_argmax_outputs_exactly_the_spans_whose_argmax_is_a_label(trained_nlp):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    docs = [trained_nlp.get_pipe("transformer")(trained_nlp.make_doc(t)) for t, _ in TRAIN_DATA]
    # Every candidate's class probabilities (no filter), from the calibration path.
    probs = pipe.score_candidates(docs, prune=False).probs
    n = len(pipe.labels)
    expected = probs[:, :n].max(axis=1) > probs[:, n]
    pipe.set_annotations(docs, pipe.predict(docs))
    assert sum(len(doc.spans["sc"]) for doc in docs) == int(expected.sum()) > 0
    for doc in docs:
        assert all(score > 0 for score in doc.spans["sc"].attrs["scores"])


def calibration_data(best, correct, argmax, n_gold):
    n = len(best)
    return CalibrationData(
        numpy.ones(n_gold, "f"), numpy.ones(n, "f"), numpy.asarray(best, "f"), numpy.asarray(correct, bool),
        numpy.asarray(argmax, bool), n_gold, n_gold, 0,
    )


def test_calibration_keeps_argmax_unless_a_floor_is_better_on_dev():
    # Argmax outputs exactly the two correct spans: F 1.0, no floor can beat it.
    data = calibration_data([0.9, 0.8, 0.3], [True, True, False], [True, True, False], n_gold=2)
    report = choose_thresholds(data, target_recall=0.99)
    assert report["threshold"] is None and report["decision"] == "argmax" and report["dev_f"] == 1.0
    # Argmax misses a correct span that "no entity" narrowly wins: a floor of 0.4 is better.
    data = calibration_data([0.9, 0.4, 0.2], [True, True, False], [True, False, False], n_gold=2)
    report = choose_thresholds(data, target_recall=0.99)
    assert report["decision"] == "floor" and report["threshold"] == pytest.approx(0.4)
    assert report["dev_f"] == pytest.approx(1.0) and report["argmax_dev_f"] == pytest.approx(2 / 3)


def test_biases_start_at_the_sampled_class_prior(tiny_bert_dir):
    nlp = make_nlp(tiny_bert_dir, negatives_per_doc=5)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    pipe = nlp.get_pipe("sciner_spancat")
    counts = numpy.zeros(len(pipe.labels) + 1)
    for eg in examples:
        _, labels = gold_spans(eg, "sc", pipe._label_map)
        numpy.add.at(counts, labels, 1)
    counts[-1] = 3 * 5  # every doc has more than 5 non-gold candidates
    class_bias, filter_bias = class_prior_biases(counts)
    numpy.testing.assert_allclose(pipe.model.get_ref("output_layer").get_param("b"), class_bias, rtol=1e-6)
    numpy.testing.assert_allclose(pipe.model.get_ref("filter").get_param("b"), filter_bias, rtol=1e-6)
    # "no entity" is the most likely class and the filter starts below 0.5 (few entities).
    assert class_bias.argmax() == len(pipe.labels) and filter_bias[0] < 0


def test_learn_rate_scale_never_touches_an_inline_tok2vec():
    nlp = spacy.blank("en")
    tok2vec = {
        "@architectures": "spacy.HashEmbedCNN.v2", "width": 16, "depth": 1, "embed_size": 100,
        "window_size": 1, "maxout_pieces": 2, "subword_features": True, "pretrained_vectors": None,
    }
    nlp.add_pipe("sciner_spancat", config={"model": {"hidden_width": 8, "tok2vec": tok2vec}, "learn_rate_scale": 10.0})
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    pipe = nlp.get_pipe("sciner_spancat")
    seen = {}
    adam = Adam(0.001)

    def recording(key, weights, gradient, *, lr_scale=1.0):
        seen[key[0]] = lr_scale
        return adam(key, weights, gradient, lr_scale=lr_scale)

    pipe.update(examples, sgd=None)
    pipe.finish_update(recording)
    inline = {node.id for node in pipe.model.get_ref("tok2vec").walk()}
    head = {node.id for node in pipe.model.get_ref("classifier").walk()}
    assert inline & set(seen) and head & set(seen)
    assert all(seen[i] == 1.0 for i in inline & set(seen))
    assert all(seen[i] == 10.0 for i in head & set(seen))


def test_no_candidate_has_whitespace_or_punctuation_edges(trained_nlp):
    nlp = trained_nlp
    pipe = nlp.get_pipe("sciner_spancat")
    words = ["we", "use", " ", "support", "vector", "machine", "\n", "(", "svm", ")", "."]
    doc = nlp.get_pipe("transformer")(Doc(nlp.vocab, words=words))

    def candidates():
        spans = pipe.score_candidates([doc], prune=False).spans
        return {tuple(r) for r in numpy.asarray(spans.dataXd).tolist()}

    rows = candidates()
    assert not {words[s] for s, _ in rows} & {" ", "\n", ")", "."}
    assert not {words[e - 1] for _, e in rows} & {" ", "\n", "(", "."}
    # A bracket at an edge only with its partner inside: "( svm )" yes, "( svm" no.
    assert (7, 10) in rows and (3, 10) in rows and (7, 9) not in rows and (8, 10) not in rows
    assert {(3, 6), (8, 9), (0, 2)} <= rows
    old = pipe.cfg["allow_punct_edges"]
    try:
        pipe.cfg["allow_punct_edges"] = True
        rows = candidates()
        assert {(7, 9), (9, 11), (10, 11)} <= rows
        assert not {words[s] for s, _ in rows} & {" ", "\n"}
    finally:
        pipe.cfg["allow_punct_edges"] = old


def test_edge_rule_on_suggested_and_nested_brackets():
    nlp = spacy.blank("en")
    doc = Doc(nlp.vocab, words=["[", "3H", "]", "thymidine", "(", "a", ")", ",", "x"])
    rule = EdgeRule([doc], allow_punct_edges=False)
    rows = numpy.asarray([[0, 4], [0, 2], [2, 4], [3, 7], [4, 7], [6, 9], [7, 9], [8, 9]], dtype="i")
    assert rule.mask(rows).tolist() == [True, False, False, True, True, False, False, True]


def test_edge_rule_keeps_candidates_inside_sentences():
    nlp = spacy.blank("en")
    words = ["we", "use", "bert", ".", "it", "works", "well"]
    two = Doc(nlp.vocab, words=words, sent_starts=[True, False, False, False, True, False, False])
    rows = numpy.asarray([[0, 3], [2, 5], [3, 5], [4, 7], [1, 6]], dtype="i")
    assert EdgeRule([two], allow_punct_edges=False).mask(rows).tolist() == [True, False, False, True, False]
    # Without sentence boundaries (and in a doc of one sentence) nothing changes.
    one = Doc(nlp.vocab, words=words)
    assert EdgeRule([one], allow_punct_edges=False).mask(rows).tolist() == [True, True, False, True, True]
    # Rows index the concatenation of several docs: each keeps its own sentences.
    rule = EdgeRule([one, two], allow_punct_edges=False)
    assert rule.mask(rows + 7).tolist() == [True, False, False, True, False]
    assert rule.mask(rows).tolist() == [True, True, False, True, True]


def test_candidates_and_predictions_stay_inside_sentences(trained_nlp):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    text = TRAIN_DATA[0][0] + " " + TRAIN_DATA[1][0]
    doc = trained_nlp.make_doc(text)
    first = len(trained_nlp.make_doc(TRAIN_DATA[0][0]))
    for i, token in enumerate(doc):
        token.is_sent_start = i in (0, first)
    doc = trained_nlp.get_pipe("transformer")(doc)
    rows = numpy.asarray(pipe.score_candidates([doc], prune=False).spans.dataXd)
    assert len(rows) and not ((rows[:, 0] < first) & (rows[:, 1] > first)).any()
    old = pipe.cfg["threshold"]
    try:
        pipe.cfg["threshold"] = 0.0  # output every kept candidate (the incremental path)
        spans = pipe(doc).spans["sc"]
        assert len(spans) and all(span.start >= first or span.end <= first for span in spans)
    finally:
        pipe.cfg["threshold"] = old


def test_ents_never_start_or_end_with_whitespace(trained_nlp):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    old = pipe.cfg["threshold"]
    try:
        pipe.cfg["threshold"] = 0.0  # output every candidate
        doc = trained_nlp("the support  vector machine\nbeats neural nets")
        assert len(doc.spans["sc"]) > 0
        for span in list(doc.spans["sc"]) + list(doc.ents):
            assert span.text == span.text.strip()
    finally:
        pipe.cfg["threshold"] = old


def test_suggester_feeds_training_and_inference(tiny_bert_dir):
    suggester = {"@misc": "spacy.ngram_suggester.v1", "sizes": [1, 2]}
    nlp = make_nlp(tiny_bert_dir, suggester=suggester)
    train(nlp, make_examples(nlp), steps=30)
    pipe = nlp.get_pipe("sciner_spancat")
    pipe.cfg["threshold"] = 0.0
    doc = nlp(TRAIN_DATA[0][0])
    assert {len(span) for span in doc.spans["sc"]} == {1, 2}
    # Negatives are drawn from the suggested spans only (gold spans keep their width).
    examples = make_examples(nlp)
    for rows in pipe._candidates(examples):
        assert set((rows[:, 1] - rows[:, 0]).tolist()) <= {1, 2}
    # The mined-candidate suggester of this package plugs in the same way.
    nlp2 = make_nlp(tiny_bert_dir, suggester={"@misc": "spacy-sciner.candidate_suggester.v1", "sizes": [1]})
    assert nlp2.get_pipe("sciner_spancat").suggester is not None
