"""doc.ents' own probability floor (``ents_threshold``): how calibrate chooses it, and that
predict / set_annotations write doc.ents from it while doc.spans stays the decision rule's."""
import numpy
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import filter_spans
from spancat_helpers import TRAIN_DATA

from spacy_sciner.spancat.decode import greedy_decode
from spacy_sciner.spancat.filter import CalibrationData, choose_ents_threshold
from spacy_sciner.spancat.inference import collect_spans, launch_spans
from spacy_sciner.spancat.util import check_settings


def _data(rows, scores, ent_correct, n_gold_ents, doc_counts, doc_lengths):
    n = len(rows)
    return CalibrationData(
        numpy.zeros(0, "f"), numpy.ones(n, "f"), numpy.asarray(scores, "f"), numpy.zeros(n, bool), numpy.zeros(n, bool),
        0, 0, 0, numpy.asarray(rows, "i").reshape(-1, 2), numpy.asarray(doc_counts, "i"), numpy.asarray(doc_lengths, "i"),
        numpy.asarray(ent_correct, bool), n_gold_ents,
    )


def test_ents_floor_below_the_spans_rule_recovers_a_blocked_entity():
    """doc.spans' floor 0.5 outputs a correct span and an overlapping wrong one and misses
    a correct one at 0.3; decoded, the wrong one is blocked, so a floor under 0.3 gives
    doc.ents both entities, and the runner-up (3, 5) is blocked in turn."""
    data = _data([(0, 2), (1, 3), (4, 6), (3, 5)], [0.8, 0.6, 0.3, 0.1], [True, False, True, False], 2, [4], [6])
    spans_rule = data.best_scores >= 0.5
    report = choose_ents_threshold(data, numpy.ones(4, bool), spans_rule)
    assert report["ents_dev_f_from_spans"] == pytest.approx(2 / 3)  # P 1, R 1/2
    assert report["ents_dev_f"] == report["ents_floor_dev_f"] == 1.0
    floor = report["ents_threshold"]
    assert 0.1 < floor <= float(data.best_scores[2])  # keeps (4, 6); (3, 5) would be blocked anyway
    candidates = [i for i in range(4) if data.best_scores[i] >= floor]
    assert [candidates[i] for i in greedy_decode(data.rows[candidates], data.best_scores[candidates], 6)] == [0, 2]


def test_ents_floor_must_beat_decoding_the_spans():
    """Where no floor does better on dev, doc.ents keeps decoding doc.spans (None)."""
    data = _data([(0, 2), (1, 3)], [0.8, 0.3], [True, False], 1, [2], [4])
    report = choose_ents_threshold(data, numpy.ones(2, bool), data.best_scores >= 0.5)
    assert report["ents_threshold"] is None and report["ents_dev_f"] == report["ents_dev_f_from_spans"] == 1.0


def test_filtered_candidates_never_reach_doc_ents():
    data = _data([(0, 2), (4, 6)], [0.8, 0.3], [True, True], 2, [2], [6])
    kept = numpy.asarray([True, False])
    report = choose_ents_threshold(data, kept, kept & (data.best_scores >= 0.5))
    assert report["ents_threshold"] is None and report["ents_floor_dev_f"] == pytest.approx(2 / 3)


def test_greedy_decode_under_a_floor_is_the_full_decode_cut_at_the_floor():
    """The identity choose_ents_threshold rates every floor with: decoding the candidates
    >= f chooses exactly the spans >= f that decoding all candidates chooses."""
    rng = numpy.random.default_rng(0)
    for _ in range(200):
        length = int(rng.integers(1, 12))
        starts = rng.integers(0, length, 15)
        rows = numpy.stack([starts, numpy.minimum(length, starts + rng.integers(1, 4, 15))], axis=1)
        scores = numpy.round(rng.random(15), 1)  # ties too
        full = set(greedy_decode(rows, scores, length))
        for floor in (0.0, 0.25, 0.5, 0.7, 0.95):
            index = numpy.flatnonzero(scores >= floor)
            cut = {int(index[i]) for i in greedy_decode(rows[index], scores[index], length)}
            assert cut == {i for i in full if scores[i] >= floor}


def _examples_with_ents(nlp):
    examples = []
    for text, spans in TRAIN_DATA:
        ref = Doc(nlp.vocab, words=text.split())
        ref.spans["sc"] = [Span(ref, s, e, label=label) for s, e, label in spans]
        ref.ents = filter_spans(ref.spans["sc"])
        examples.append(Example(nlp.make_doc(text), ref))
    return examples


def _copy(trained_nlp):
    return spacy.blank("en").from_config(trained_nlp.config).from_bytes(trained_nlp.to_bytes())


@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize("rule", [None, 0.99])
def test_ents_come_from_their_floor_and_spans_from_the_rule(trained_nlp, compact, rule):
    """With an ents floor: doc.spans (and their scores) are those without it; doc.ents is
    the greedy decode of the kept candidates whose best label reaches the floor - on the
    CPU's filter-first path and on the masking (GPU) path."""
    nlp = _copy(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    pipe.calibrate(_examples_with_ents(nlp), target_recall=1.0, tune_threshold=False, nlp=nlp)
    pipe.cfg["threshold"] = rule
    texts = [text for text, _ in TRAIN_DATA] + ["the penn treebank beats bleu"]
    docs = [nlp.get_pipe("transformer")(nlp.make_doc(text)) for text in texts]
    settings = dict(n_labels=len(pipe.labels), max_span_length=int(pipe.cfg["max_span_length"]), chunk_size=7,
                    threshold=rule, filter_threshold=pipe.cfg["filter_threshold"], compact=compact)
    plain = collect_spans(launch_spans(pipe.model, docs, **settings))
    every = collect_spans(launch_spans(pipe.model, docs, **{**settings, "threshold": 0.0}))
    floor = 0.05
    both = collect_spans(launch_spans(pipe.model, docs, **settings, ents_threshold=floor))
    pipe.cfg["ents_threshold"] = floor
    pipe.set_annotations(docs, both)
    offset = every_offset = 0
    for doc, n_plain, n_every in zip(docs, plain.spans.lengths, every.spans.lengths):
        rows = plain.spans.dataXd[offset : offset + n_plain].tolist()
        assert [(s.start, s.end) for s in doc.spans["sc"]] == [tuple(r) for r in rows]
        assert numpy.array_equal(doc.spans["sc"].attrs["scores"], plain.scores[offset : offset + n_plain])
        candidates = every.spans.dataXd[every_offset : every_offset + n_every]
        scores = every.scores[every_offset : every_offset + n_every]
        index = numpy.flatnonzero(scores.astype("float64") >= floor)
        expected = [tuple(candidates[index[i]]) for i in greedy_decode(candidates[index], scores[index], len(doc))]
        assert [(e.start, e.end) for e in doc.ents] == expected
        offset, every_offset = offset + n_plain, every_offset + n_every
    assert sum(len(doc.ents) for doc in docs) > 0
    if rule is not None:  # the floor reaches spans the rule does not output
        assert any({(e.start, e.end) for e in doc.ents} - {(s.start, s.end) for s in doc.spans["sc"]} for doc in docs)


def test_calibrate_chooses_the_ents_floor_and_saves_it(trained_nlp, tmp_path):
    nlp = _copy(trained_nlp)
    pipe = nlp.get_pipe("sciner_spancat")
    report = pipe.calibrate(_examples_with_ents(nlp), target_recall=1.0, nlp=nlp)
    assert {"ents_threshold", "ents_dev_f", "ents_dev_f_from_spans", "ents_floor_dev_f"} <= set(report)
    assert report["ents_dev_f"] >= report["ents_dev_f_from_spans"]
    assert pipe.cfg["ents_threshold"] == report["ents_threshold"]
    pipe.cfg["ents_threshold"] = 0.125  # as if dev had chosen one: it is saved with the component
    nlp.to_disk(tmp_path / "p")
    assert spacy.load(tmp_path / "p").get_pipe("sciner_spancat").cfg["ents_threshold"] == 0.125
    # --ents-from-spans / tune_ents=False, or no gold doc.ents on dev: doc.ents decodes doc.spans
    off = pipe.calibrate(_examples_with_ents(nlp), target_recall=1.0, tune_ents=False, nlp=nlp)
    assert "ents_dev_f" not in off and pipe.cfg["ents_threshold"] is None


def test_ents_threshold_out_of_range_fails_with_its_name():
    with pytest.raises(ValueError, match="ents_threshold must be None"):
        check_settings(8, 50, None, None, 100, 1.5)
