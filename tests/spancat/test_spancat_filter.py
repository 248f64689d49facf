"""Threshold selection (filter recall, dev-F1 threshold), decoding, and calibration."""
import numpy
import pytest
import spacy
from spancat_helpers import TRAIN_DATA, make_examples

from spacy_sciner.spancat.decode import greedy_decode
from spacy_sciner.spancat.filter import best_f1_threshold, recall_threshold


def test_recall_threshold_reaches_target():
    gold = numpy.asarray([0.9, 0.8, 0.7, 0.2, 0.05, 0.6, 0.95, 0.3, 0.4, 0.5])
    for target in (0.5, 0.8, 0.9, 0.99, 1.0):
        threshold = recall_threshold(gold, target)
        recall = (gold >= threshold).mean()
        assert recall >= target
        # and it is the highest such threshold: one notch higher misses the target
        assert (gold >= threshold + 1e-5).mean() < target
    assert recall_threshold(numpy.zeros(0), 0.99) == 0.0
    with pytest.raises(ValueError, match="target_recall"):
        recall_threshold(gold, 0.0)


def test_best_f1_threshold():
    scores = numpy.asarray([0.9, 0.8, 0.7, 0.6, 0.3])
    correct = numpy.asarray([True, True, False, True, False])
    best = best_f1_threshold(scores, correct, n_gold=4)
    # keeping the top 4 gives P 3/4, R 3/4 (F .75) - better than the top 2 (P 1, R .5)
    assert 0.3 < best["threshold"] < 0.6 and (scores >= best["threshold"]).sum() == 4
    assert best["f"] == pytest.approx(0.75)
    tied = best_f1_threshold(numpy.asarray([0.5, 0.5]), numpy.asarray([True, False]), n_gold=1)
    assert tied["threshold"] < 0.5 and tied["p"] == 0.5  # ties are kept together


def test_greedy_decode_highest_score_first():
    spans = numpy.asarray([[0, 3], [1, 2], [3, 5], [4, 6], [6, 7]])
    scores = numpy.asarray([0.6, 0.9, 0.7, 0.8, 0.1])
    assert greedy_decode(spans, scores, 7) == [1, 3, 4]


def calibrated_copy(trained_nlp):
    return spacy.blank("en").from_config(trained_nlp.config).from_bytes(trained_nlp.to_bytes())


def test_calibrate_reaches_target_recall_and_prunes(trained_nlp):
    nlp = calibrated_copy(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    report = pipe.calibrate(make_examples(nlp), target_recall=0.99, nlp=nlp)
    assert report["filter_recall"] >= 0.99 and report["n_gold_spans"] == 7
    assert 0.0 < report["filtration_rate"] < 1.0
    assert pipe.cfg["filter_threshold"] == report["filter_threshold"]
    # The pruned pipeline still reaches every gold span, with fewer spans through the MLP.
    docs = [nlp.get_pipe("transformer")(nlp.make_doc(text)) for text, _ in TRAIN_DATA]
    candidates = pipe.score_candidates(docs, prune=True)
    doc_of = numpy.repeat(numpy.arange(len(docs)), candidates.spans.lengths)[candidates.keep]
    kept = {(int(i), int(s), int(e)) for i, (s, e) in zip(doc_of, candidates.spans.dataXd[candidates.keep])}
    gold = {(i, s, e) for i, (_, spans) in enumerate(TRAIN_DATA) for s, e, _ in spans}
    assert gold <= kept
    # predict compares filter logits with the threshold's logit: it keeps exactly the
    # candidates calibration counted with probabilities.
    prediction = pipe.predict(docs)
    assert prediction.n_scored == len(kept) == round(prediction.n_candidates * (1 - report["filtration_rate"]))
    scores = nlp.evaluate(make_examples(nlp))
    assert scores["spans_sc_f"] == 1.0 and report["dev_f"] == 1.0
    # Calibrated thresholds are saved with the component.
    restored = calibrated_copy(nlp).get_pipe("sciner_spancat")
    # (srsly's JSON float parsing may differ in the last bit; thresholds are floored to
    # 6 decimals on calibration, far below any score they separate.)
    assert restored.cfg["filter_threshold"] == pytest.approx(report["filter_threshold"], rel=1e-12)
    assert restored.cfg["calibration"]["filtration_rate"] == pytest.approx(report["filtration_rate"])


def test_lower_target_recall_prunes_more_and_recall_counts_pruned(trained_nlp):
    nlp = calibrated_copy(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    strict = dict(pipe.calibrate(make_examples(nlp), target_recall=1.0, nlp=nlp))
    loose = pipe.calibrate(make_examples(nlp), target_recall=0.5, tune_threshold=False, nlp=nlp)
    assert loose["filtration_rate"] > strict["filtration_rate"]
    assert 0.5 <= loose["filter_recall"] < 1.0
    pipe.cfg["threshold"] = 0.0  # output every span the filter keeps
    scores = nlp.evaluate(make_examples(nlp))
    # Gold spans lost to the filter count as misses.
    assert scores["spans_sc_r"] == pytest.approx(loose["filter_recall"])


def test_calibrate_counts_dev_labels_unseen_in_training_as_misses(trained_nlp):
    """Dev data may hold a label that the training slice never had: it stays gold (the
    filter must keep it, and recall counts it) but can never be predicted correctly."""
    nlp = calibrated_copy(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    assert "Gene" not in pipe.labels
    dev = TRAIN_DATA + [("p53 binds dna", [(0, 1, "Gene")])]
    report = pipe.calibrate(make_examples(nlp, dev), target_recall=1.0, nlp=nlp)
    assert report["n_gold_spans"] == 8
    assert report["filter_recall"] == 1.0
    # At most 7 of the 8 gold (span, label) pairs can be right.
    assert report["dev_r"] <= 7 / 8 + 1e-9
    assert report["dev_f"] > 0.0


def test_gold_spans_prefer_a_known_label_over_an_unknown_one_on_the_same_span():
    from spacy_sciner.spancat.sampling import gold_spans

    nlp = spacy.blank("en")
    (eg,) = make_examples(nlp, [("p53 binds dna", [(0, 1, "Gene"), (0, 1, "Method"), (2, 3, "Gene")])])
    spans, labels = gold_spans(eg, "sc", {"Method": 0, "Task": 1}, unknown=2)
    assert spans.tolist() == [[0, 1], [2, 3]] and labels.tolist() == [0, 2]


def test_saved_thresholds_keep_exactly_what_calibration_counted():
    """A threshold rounded to fixed decimals let in a span scoring just below the cut, so the
    saved pipeline's dev F differed from the one calibration reported (demo: 207 vs 206 spans)."""
    import srsly

    from spacy_sciner.spancat.filter import separating_threshold

    for cut, below in [(0.0137295123, 0.01372951), (0.6, 0.4), (0.5, None), (0.123456789, 0.12345678), (1.0, 0.9999999)]:
        t = separating_threshold(cut, below)
        restored = srsly.json_loads(srsly.json_dumps({"t": t}))["t"]
        assert restored < cut and t < cut and (below is None or (t > below and restored > below)), (cut, below, t)
    assert separating_threshold(0.6, 0.4) == 0.5 and separating_threshold(0.37371, 0.2) == 0.3
    # Scores closer than ~1e-10 cannot be told apart in the saved cfg: both are kept.
    assert separating_threshold(0.123456789, 0.1234567889) <= 0.1234567889
    scores = numpy.asarray([0.9, 0.0137295123, 0.01372951, 0.001])
    best = best_f1_threshold(scores, numpy.asarray([True, True, False, False]), n_gold=2)
    assert best["f"] == 1.0 and (scores >= best["threshold"]).sum() == 2


def test_greedy_decode_ties_keep_position_order_and_takes_lists():
    rows = [[0, 2], [1, 3], [3, 4]]
    assert greedy_decode(rows, [0.5, 0.5, 0.1], 4) == [0, 2]  # tie: the first row wins
    assert greedy_decode(numpy.asarray(rows), numpy.asarray([0.5, 0.6, 0.1], "f"), 4) == [1, 2]
    assert greedy_decode([], [], 3) == [] and greedy_decode([[2, 3]], [0.1], 3) == [0]
