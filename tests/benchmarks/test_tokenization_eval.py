"""benchmarks/tokenization_eval.py and spancat_bench's threshold search on either tokenization."""
import json
import re
import sys
from pathlib import Path

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import spancat_bench  # noqa: E402
import tokenization_eval  # noqa: E402


@Language.component("test_hyphen_spans")
def hyphen_spans(doc):
    """Labels every hyphenated word X by its characters, whatever the tokenization."""
    doc.spans["sc"] = [doc.char_span(m.start(), m.end(), label="X") for m in re.finditer(r"\S+-\S+", doc.text)]
    return doc


def gold_doc(vocab, words, spans):
    doc = Doc(vocab, words=words)
    doc.spans["sc"] = [Span(doc, s, e, label=lab) for s, e, lab in spans]
    return doc


def test_spans_are_matched_by_characters_on_either_tokenization():
    nlp = spacy.blank("en")
    nlp.add_pipe("test_hyphen_spans")
    gold = [gold_doc(nlp.vocab, ["a", "state-of-the-art", "model"], [(1, 2, "X")]),
            gold_doc(nlp.vocab, ["fine-grained", "typing"], [(0, 1, "Y")])]
    assert [t.text for t in nlp.make_doc(gold[0].text)][:3] == ["a", "state", "-"]  # spaCy splits it
    for spacy_tokens in (False, True):
        s = tokenization_eval.score(nlp, gold, "sciner_spancat", spacy_tokens)
        # one right (X), one wrong label (X for gold Y): P = R = 1/2 on both tokenizations
        assert (s["p"], s["r"], s["n_pred"], s["n_gold"]) == (0.5, 0.5, 2, 2)
    assert tokenization_eval.differing_docs(nlp, gold) == 2
    assert tokenization_eval.differing_docs(nlp, [gold_doc(nlp.vocab, ["plain", "words"], [])]) == 0


def spancat_model(tmp_path, sizes):
    """An untrained spaCy spancat (random CNN weights) suggesting n-grams of `sizes`, on disk."""
    nlp = spacy.blank("en")
    spancat = nlp.add_pipe("spancat", config={"suggester": {"@misc": "spacy.ngram_suggester.v1", "sizes": sizes}})
    for label in ("X", "Y"):
        spancat.add_label(label)
    nlp.initialize()
    nlp.to_disk(tmp_path / "model")
    return nlp


def write_dev(path, docs):
    DocBin(docs=docs).to_disk(path)
    return path


def test_threshold_search_is_the_same_where_tokenizations_agree(tmp_path):
    nlp = spancat_model(tmp_path, [1, 2, 3])
    docs = [gold_doc(nlp.vocab, ["we", "use", "a", "new", "model", "."], [(4, 5, "X")]),
            gold_doc(nlp.vocab, ["parsing", "is", "a", "task"], [(0, 1, "Y"), (3, 4, "X")])]
    dev = write_dev(tmp_path / "dev.spacy", docs)
    on_gold = spancat_bench.tune_spancat_threshold(tmp_path / "model", dev, tmp_path / "gold")
    on_spacy = spancat_bench.tune_spancat_threshold(tmp_path / "model", dev, tmp_path / "spacy", spacy_tokens=True)
    # Equal up to float noise (the two runs' BLAS sums may differ in the last bit).
    assert on_gold == pytest.approx(on_spacy, rel=1e-6) and on_gold["dev_f"] > 0
    # (saved through srsly's JSON, which keeps 15 significant digits)
    assert spacy.load(tmp_path / "spacy").get_pipe("spancat").cfg["threshold"] == pytest.approx(on_spacy["threshold"], rel=1e-12)


def test_threshold_search_matches_gold_spans_by_characters(tmp_path):
    """"fine-grained" is one gold token and three spaCy tokens. Suggesting single tokens only,
    the gold span is a candidate on the gold words and none on spaCy's tokens (where a match
    by token indices would wrongly take the candidate "fine" at the same index for it)."""
    nlp = spancat_model(tmp_path, [1])
    docs = [gold_doc(nlp.vocab, ["a", "fine-grained", "task"], [(1, 2, "X")])]
    dev = write_dev(tmp_path / "dev.spacy", docs)
    assert spancat_bench.tune_spancat_threshold(tmp_path / "model", dev, tmp_path / "gold")["dev_r"] == 1.0
    assert spancat_bench.tune_spancat_threshold(tmp_path / "model", dev, tmp_path / "spacy", spacy_tokens=True)["dev_r"] == 0.0


def test_missing_run_state_is_a_one_line_error(tmp_path, capsys):
    conv = {"runs": {"scierc/spacy_spancat_decay1470/seed0": {
        "dataset": "scierc", "system": "spacy_spancat_decay1470", "seed": 0, "summary": {"test_spans_f": 0.5}}}}
    (tmp_path / "convergence.json").write_text(json.dumps(conv))
    with pytest.raises(SystemExit) as err:
        tokenization_eval.main(["--systems", "spacy_spancat_decay1470", "--state", str(tmp_path / "state"),
                                "--convergence", str(tmp_path / "convergence.json"), "--results", str(tmp_path)])
    assert err.value.code == 2
    assert "run state not found" in capsys.readouterr().err


@pytest.mark.parametrize("system,native", [("sciner_spancat_hybrid_v2_decay1470", "spacy"),
                                           ("sciner_spancat_hybrid_v2_goldtok_decay1470", "gold")])
def test_sciner_runs_are_recalibrated_for_the_other_tokenization(tmp_path, tiny_bert_dir, system, native):
    """A sciner run keeps its own calibration in the column of the tokenization it was
    calibrated on (spaCy's, or the gold words for *_goldtok) and is re-calibrated on dev in
    the other one, from the checkpoint its calibration selected."""
    from typer.testing import CliRunner

    sys.path.insert(0, str(ROOT / "tests" / "spancat"))
    from spancat_helpers import TRAIN_DATA, make_examples, make_nlp, train

    from spacy_sciner.cli import sciner_cli

    nlp = make_nlp(tiny_bert_dir)
    train(nlp, make_examples(nlp), steps=20)
    run_dir = tmp_path / "state" / "runs" / "scierc" / f"{system}-seed0"
    run_dir.mkdir(parents=True)
    nlp.to_disk(run_dir / "model-best")
    # Known spaces (spaCy's Corpus keeps the words of a doc without them); one gold token
    # ("support-vector") that spaCy's tokenizer splits.
    docs = []
    for text, spans in [("the support-vector machine beats neural nets", [(1, 3, "Method")]), *TRAIN_DATA]:
        words = text.split()
        doc = Doc(nlp.vocab, words=words, spaces=[True] * (len(words) - 1) + [False])
        doc.spans["sc"] = [Span(doc, s, e, label=lab) for s, e, lab in spans]
        docs.append(doc)
    dev = write_dev(tmp_path / "dev.spacy", docs)
    flags = ["--gold-tokens"] if native == "gold" else []
    result = CliRunner().invoke(sciner_cli, ["calibrate", str(run_dir / "model-best"), str(dev), str(run_dir / "eval" / "calibrated"),
                                             "--also", str(run_dir / "model-best"), *flags])
    assert result.exit_code == 0, result.output
    run = {"dataset": "scierc", "system": system, "seed": 0, "summary": {"test_spans_f": 0.5}, "evaluation": {"checkpoint": "model-best"}}
    out = tokenization_eval.rescore_run(run, tmp_path / "state", tmp_path, {"dev": docs, "test": docs})
    other = "gold" if native == "spacy" else "spacy"
    assert out["rule_tuned_on"] == {native: "convergence.py", other: "re-tuned here"}
    assert out[f"calibration_{other}_tokens"]["dev_tokens"] == other
    recal = spacy.load(run_dir / "eval" / f"calibrated-{other}-tokens").get_pipe("sciner_spancat").cfg["calibration"]
    assert recal["dev_tokens"] == other and recal["n_gold_spans"] == 8
    assert all(0.0 <= out[f"{split}_{tok}_tokens"]["f"] <= 1.0 for split in ("dev", "test") for tok in ("gold", "spacy"))
