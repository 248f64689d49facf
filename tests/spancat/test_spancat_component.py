"""spaCy's standard component tests for sciner_spancat, plus SEPT-specific behaviour."""
import subprocess
import sys

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from spacy_sciner.spancat.component import SciNERSpanCategorizer
from spacy_sciner.spancat.sampling import sample_training_spans

from spancat_helpers import TRAIN_DATA, make_examples, make_nlp, predicted_spans, train


def copy_nlp(nlp: Language) -> Language:
    """An independent copy through to_bytes/from_bytes (tests that change cfg use one)."""
    return spacy.blank("en").from_config(nlp.config).from_bytes(nlp.to_bytes())


def gold_of(data):
    return [sorted((s, e, label) for s, e, label in spans) for _, spans in data]


def test_overfit_tiny_set(trained_nlp):
    docs = list(trained_nlp.pipe([text for text, _ in TRAIN_DATA]))
    assert [sorted(predicted_spans(doc)) for doc in docs] == gold_of(TRAIN_DATA)
    for doc in docs:
        scores = doc.spans["sc"].attrs["scores"]
        assert len(scores) == len(doc.spans["sc"]) and (scores >= 0.5).all()
        # doc.ents: a non-overlapping subset of the spans, greedy by score: every span
        # left out overlaps a chosen entity that scores at least as high.
        scored = {(sp.start, sp.end, sp.label_): float(sc) for sp, sc in zip(doc.spans["sc"], scores)}
        ents = [(e.start, e.end, e.label_) for e in doc.ents]
        assert set(ents) <= set(scored) and len(ents) > 0
        assert all(a[1] <= b[0] for a, b in zip(ents, ents[1:]))
        for span, score in scored.items():
            if span not in ents:
                assert any(e[0] < span[1] and span[0] < e[1] and scored[e] >= score for e in ents)
    # The nested gold pair is in doc.spans but only one of the two can be an entity.
    assert len(docs[0].ents) == 2 and len(docs[0].spans["sc"]) == 3


def test_loss_decreases(tiny_bert_dir):
    nlp = make_nlp(tiny_bert_dir)
    examples = make_examples(nlp)
    first = train(nlp, examples, steps=1)["sciner_spancat"]
    optimizer = nlp.resume_training()
    optimizer.learn_rate = 0.01
    for _ in range(20):
        last = nlp.update(examples, sgd=optimizer, losses={})["sciner_spancat"]
    assert last < first / 2


def test_disk_round_trip(trained_nlp, tmp_path):
    texts = [text for text, _ in TRAIN_DATA]
    before = list(trained_nlp.pipe(texts))
    trained_nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    after = list(loaded.pipe(texts))
    assert loaded.get_pipe("sciner_spancat").labels == trained_nlp.get_pipe("sciner_spancat").labels
    for a, b in zip(before, after):
        assert predicted_spans(a) == predicted_spans(b)
        numpy.testing.assert_allclose(a.spans["sc"].attrs["scores"], b.spans["sc"].attrs["scores"], rtol=1e-5)
        assert [(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents]


def test_bytes_round_trip_keeps_cfg(trained_nlp):
    nlp = copy_nlp(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    pipe.cfg["threshold"] = 0.625
    pipe.cfg["filter_threshold"] = 0.125
    restored = copy_nlp(nlp).get_pipe("sciner_spancat")
    assert restored.cfg["threshold"] == 0.625
    assert restored.cfg["filter_threshold"] == 0.125
    assert restored.labels == pipe.labels
    text = TRAIN_DATA[1][0]
    assert predicted_spans(nlp(text)) == predicted_spans(restored.__call__(restored_doc(nlp, text)))


def restored_doc(nlp, text):
    return nlp.get_pipe("transformer")(nlp.make_doc(text))


def test_evaluate_keys(trained_nlp):
    examples = make_examples(trained_nlp)
    for eg in examples:  # flat gold entities too, so the ents scores are defined
        eg.reference.ents = [s for s in eg.reference.spans["sc"] if (s.start, s.end) != (1, 3) and (s.start, s.end) != (3, 5)]
    scores = trained_nlp.evaluate(examples)
    for key in ("spans_sc_p", "spans_sc_r", "spans_sc_f", "spans_sc_per_type", "ents_p", "ents_r", "ents_f", "ents_per_type"):
        assert key in scores
    assert scores["spans_sc_f"] == 1.0
    assert set(scores["spans_sc_per_type"]) == {"Method", "Other", "Material", "Metric", "Task"}
    assert 0.0 < scores["ents_f"] <= 1.0


def test_default_config_resolves():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("sciner_spancat")
    assert isinstance(pipe, SciNERSpanCategorizer)
    assert pipe.cfg["max_span_length"] == 8 and pipe.key == "sc"
    assert pipe.model.get_ref("tok2vec").get_ref("listener").upstream_name == "*"


def test_entry_points_without_import():
    code = (
        "import spacy, sys\n"
        "nlp = spacy.blank('en')\n"
        "pipe = nlp.add_pipe('sciner_spancat')\n"
        "assert spacy.registry.architectures.get('spacy-sciner.SpanCategorizer.v1')\n"
        "assert spacy.registry.scorers.get('spacy-sciner.span_scorer.v1')\n"
        "print(type(pipe).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "SciNERSpanCategorizer"


def test_gold_never_reaches_predictions(trained_nlp):
    with_gold = make_examples(trained_nlp)
    without_gold = make_examples(trained_nlp, [(text, []) for text, _ in TRAIN_DATA])
    wrong_gold = make_examples(trained_nlp, [(text, [(0, 2, "Task")]) for text, _ in TRAIN_DATA])
    outputs = []

    class Capture:  # a Scorer stand-in that records what nlp.evaluate predicted
        def score(self, examples, per_component=False):
            outputs.append([(predicted_spans(eg.predicted), eg.predicted.spans["sc"].attrs["scores"].tolist()) for eg in examples])
            return {}

    for examples in (with_gold, without_gold, wrong_gold):
        trained_nlp.evaluate(examples, scorer=Capture())
    assert outputs[0] == outputs[1] == outputs[2]
    assert any(spans for spans, _ in outputs[0])


def test_threshold_controls_output(trained_nlp):
    nlp = copy_nlp(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    text = TRAIN_DATA[0][0]
    default = nlp(text)
    pipe.cfg["threshold"] = 0.0
    everything = nlp(text)
    # With threshold 0 every candidate span up to L is output (nested/overlapping kept).
    n = len(default)
    assert len(everything.spans["sc"]) == sum(n - w + 1 for w in range(1, min(8, n) + 1))
    assert set(predicted_spans(default)) <= set(predicted_spans(everything))
    pipe.cfg["threshold"] = 1.0
    assert len(nlp(text).spans["sc"]) == 0 and len(nlp(text).ents) == 0


def test_write_ents_off(trained_nlp):
    nlp = copy_nlp(trained_nlp)
    nlp.get_pipe("sciner_spancat").cfg["write_ents"] = False
    doc = nlp(TRAIN_DATA[0][0])
    assert len(doc.spans["sc"]) > 0 and len(doc.ents) == 0


def test_empty_and_single_token_docs(trained_nlp):
    docs = list(trained_nlp.pipe(["", "bleu", "", "the support vector machine beats neural nets"]))
    assert len(docs[0].spans["sc"]) == 0 and len(docs[0].spans["sc"].attrs["scores"]) == 0
    assert all((s.start, s.end) == (0, 1) for s in docs[1].spans["sc"])
    assert predicted_spans(docs[3]) == predicted_spans(trained_nlp(docs[3].text))


def test_update_with_empty_docs(tiny_bert_dir):
    nlp = make_nlp(tiny_bert_dir)
    examples = make_examples(nlp)
    train(nlp, examples, steps=1)
    empty = make_examples(nlp, [("", [])])
    assert nlp.update(empty, losses={})["sciner_spancat"] == 0.0


@pytest.mark.parametrize("reducer", ["max", "mean_max"])
def test_long_document_is_chunked(tiny_bert_dir, reducer):
    nlp = make_nlp(tiny_bert_dir, chunk_size=7000, model={"hidden_width": 32, "reducer": reducer})
    train(nlp, make_examples(nlp), steps=2)
    pipe = nlp.get_pipe("sciner_spancat")
    pipe.cfg["threshold"] = 0.0
    classifier = pipe.model.get_ref("classifier")
    sizes = []
    classifier_forward = classifier._func

    def spy(model, X, is_train):  # records how many span vectors each chunk holds
        sizes.append(X.shape[0])
        return classifier_forward(model, X, is_train)

    classifier._func = spy
    words = ("support vector machines and neural nets improve translation quality " * 556).split()[:5000]
    doc = nlp(Doc(nlp.vocab, words=words))
    assert len(doc) == 5000
    n_candidates = sum(5000 - w + 1 for w in range(1, 9))
    assert sum(sizes) == n_candidates and max(sizes) <= 7000
    assert len(doc.spans["sc"]) == n_candidates  # threshold 0 keeps every scored span
    assert doc.spans["sc"][-1].end == 5000


def test_pipe_n_process(trained_nlp):
    texts = [text for text, _ in TRAIN_DATA] * 3
    single = [predicted_spans(doc) for doc in trained_nlp.pipe(texts, batch_size=2)]
    multi = [predicted_spans(doc) for doc in trained_nlp.pipe(texts, batch_size=2, n_process=2)]
    assert single == multi and any(single)


def test_labels_from_examples_and_from_argument(tiny_bert_dir):
    nlp = make_nlp(tiny_bert_dir)
    nlp.initialize(lambda: make_examples(nlp))
    pipe = nlp.get_pipe("sciner_spancat")
    assert set(pipe.labels) == {"Method", "Other", "Material", "Metric", "Task"}
    assert pipe.model.get_ref("output_layer").get_dim("nO") == 6
    with pytest.raises(ValueError, match="already initialized"):
        pipe.add_label("Gene")
    # Labels given explicitly (as `spacy init labels` does) are used instead of the data's.
    nlp2 = make_nlp(tiny_bert_dir)
    nlp2.config["initialize"]["components"]["sciner_spancat"] = {"labels": ["A", "B"]}
    nlp2.get_pipe("sciner_spancat").add_label("Gene")
    nlp2.initialize(lambda: make_examples(nlp2))
    assert nlp2.get_pipe("sciner_spancat").labels == ("Gene", "A", "B")
    assert nlp2.get_pipe("sciner_spancat").model.get_ref("output_layer").get_dim("nO") == 4


def test_unknown_gold_label_is_reported(tiny_bert_dir):
    nlp = make_nlp(tiny_bert_dir)
    train(nlp, make_examples(nlp), steps=1)
    with pytest.raises(ValueError, match="label 'Gene'.*does not know"):
        nlp.update(make_examples(nlp, [("p53 is a gene", [(0, 1, "Gene")])]))


def test_no_labels_is_an_error(tiny_bert_dir):
    nlp = make_nlp(tiny_bert_dir)
    with pytest.raises(ValueError, match="E143"):
        nlp.initialize(lambda: make_examples(nlp, [("no entities here", [])]))


@pytest.mark.parametrize(
    "config,message",
    [
        ({"max_span_length": 0}, "max_span_length must be an integer >= 1"),
        ({"negatives_per_doc": -1}, "negatives_per_doc must be an integer >= 0"),
        ({"threshold": 1.5}, "threshold must be None \\(argmax\\) or in"),
        ({"filter_threshold": -0.1}, "filter_threshold must be None or in"),
        ({"chunk_size": 0}, "chunk_size must be an integer >= 1"),
        ({"learn_rate_scale": 0.0}, "learn_rate_scale must be > 0"),
        ({"model": {"reducer": "attention_v9"}}, "Unknown reducer 'attention_v9'"),
        ({"model": {"dropout": 1.0}}, "dropout must be in"),
    ],
)
def test_bad_config_messages(config, message):
    with pytest.raises(ValueError, match=message):
        spacy.blank("en").add_pipe("sciner_spancat", config=config)


def test_learn_rate_scale_reaches_the_optimizer(trained_nlp):
    nlp = copy_nlp(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    calls = []

    def fake_optimizer(key, weights, gradient, *, lr_scale=1.0):
        calls.append(lr_scale)
        return weights, gradient

    for scale in (1.0, 4.0):
        pipe.cfg["learn_rate_scale"] = scale
        calls.clear()
        nlp.update(make_examples(nlp), sgd=None)
        pipe.finish_update(fake_optimizer)
        # Only the component's own weights (MLP, filter) go through it, all scaled.
        assert calls and set(calls) == {scale}


def test_spans_longer_than_max_count_as_misses(trained_nlp):
    nlp = copy_nlp(trained_nlp)
    nlp.get_pipe("sciner_spancat").cfg["max_span_length"] = 2
    examples = make_examples(nlp)
    scores = nlp.evaluate(examples)
    # The two 3-token gold spans cannot be enumerated: 5 of 7 gold spans at best.
    assert scores["spans_sc_r"] == pytest.approx(5 / 7)
    assert scores["spans_sc_p"] == 1.0
    assert all(len(span) <= 2 for doc in nlp.pipe([t for t, _ in TRAIN_DATA]) for span in doc.spans["sc"])


def test_use_filter_off_ignores_the_threshold(trained_nlp):
    nlp = copy_nlp(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    docs = [nlp.get_pipe("transformer")(nlp.make_doc(text)) for text, _ in TRAIN_DATA]
    pipe.cfg["filter_threshold"] = 1.0  # would prune every span
    pruned = pipe.predict(docs)
    assert pruned.n_scored == 0 and pruned.spans.dataXd.shape[0] == 0 and pruned.n_candidates > 0
    pipe.cfg["use_filter"] = False
    prediction = pipe.predict(docs)
    assert prediction.n_scored == prediction.n_candidates > 0
    assert prediction.spans.dataXd.shape[0] > 0


def test_get_loss_is_summed_cross_entropy(trained_nlp):
    pipe = trained_nlp.get_pipe("sciner_spancat")
    examples = make_examples(trained_nlp)
    docs = [trained_nlp.get_pipe("transformer")(eg.predicted) for eg in examples]
    examples = [Example(doc, eg.reference) for doc, eg in zip(docs, examples)]
    spans, targets = sample_training_spans(examples, "sc", pipe._label_map, 8, 5, numpy.random.default_rng(0))
    scores = pipe.model.predict((docs, spans))
    loss, d_scores = pipe.get_loss(examples, (spans, scores))
    n_classes = len(pipe.labels) + 1
    onehot = numpy.eye(n_classes, dtype="f")[targets]
    numpy.testing.assert_allclose(d_scores[:, :n_classes], scores[:, :n_classes] - onehot, atol=1e-6)
    p_entity = 1 / (1 + numpy.exp(-scores[:, n_classes].astype("f8")))
    is_entity = targets < n_classes - 1
    numpy.testing.assert_allclose(d_scores[:, n_classes], p_entity - is_entity, atol=1e-6)
    expected = -numpy.log(scores[numpy.arange(len(targets)), targets]).sum() - (
        numpy.log(p_entity[is_entity]).sum() + numpy.log(1 - p_entity[~is_entity]).sum()
    )
    assert loss == pytest.approx(expected, rel=1e-4)
