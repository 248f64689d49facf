import numpy
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry

from spacy_sciner.mining.candidates import CandidateTable


def make_nlp(**config):
    nlp = spacy.blank("en")
    nlp.add_pipe("sciner_candidate_miner", config=config)
    return nlp


def gold_example(nlp, words, spans):
    doc = Doc(nlp.vocab, words=words)
    doc.spans["sc"] = [Span(doc, s, e, label=label) for s, e, label in spans]
    return Example(nlp.make_doc(doc.text), doc)


def candidates(doc, key="candidates"):
    return [(span.text, span.label_) for span in doc.spans[key]]


def test_component_annotates_all_sources(tmp_path):
    nlp = make_nlp()
    table = CandidateTable()
    table.add("gene expression", "phrase", 10, 0.9)
    table.add("weak phrase", "phrase", 10, 0.1)
    table.write(str(tmp_path / "c.tsv"))
    examples = [gold_example(nlp, ["random", "forest", "works"], [(0, 2, "Method")])]
    nlp.get_pipe("sciner_candidate_miner").initialize(lambda: examples, table=str(tmp_path / "c.tsv"))
    doc = nlp("A random forest and a support vector machine (SVM) on gene expression; weak phrase.")
    # overlap="longest": the whole acronym definition wins over its long and short forms.
    assert candidates(doc) == [("random forest", "dict"), ("support vector machine (SVM)", "pattern"),
                               ("gene expression", "phrase"), ("weak phrase", "phrase")]
    strict = make_nlp(min_quality=0.5, sources=["phrase"])
    strict.get_pipe("sciner_candidate_miner").initialize(table=str(tmp_path / "c.tsv"))
    assert candidates(strict("gene expression of a weak phrase")) == [("gene expression", "phrase")]


def test_nlp_initialize_and_overlap_policies():
    nlp = make_nlp(overlap="all", acronyms=False)
    examples = [gold_example(nlp, ["support", "vector", "machine"], [(0, 3, "M"), (1, 2, "T")])]
    nlp.initialize(lambda: examples)
    assert candidates(nlp("a support vector machine")) == [
        ("support vector machine", "dict"), ("vector", "dict")]
    nlp.get_pipe("sciner_candidate_miner").cfg["overlap"] = "longest"
    assert candidates(nlp("a support vector machine")) == [("support vector machine", "dict")]


def test_serialization_round_trip(tmp_path):
    nlp = make_nlp(case="smart", spans_key="cands")
    miner = nlp.get_pipe("sciner_candidate_miner")
    assert miner.add_terms(["NF-kappaB", "protein kinase", "x", "protein kinase", "This", "10"]) == {
        "added": 2, "blank": 0, "duplicate": 1, "too_short": 1, "stop_word": 1, "no_letter": 1,
        "malformed": 0, "first_column": 0, "examples": ["<terms>:3: too_short", "<terms>:4: duplicate",
                                     "<terms>:5: stop_word", "<terms>:6: no_letter"]}
    text = "The Protein Kinase activates NF-kappaB but not nf-kappab ."
    expected = [("Protein Kinase", "dict"), ("NF-kappaB", "dict")]
    assert candidates(nlp(text), "cands") == expected
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert candidates(loaded(text), "cands") == expected
    assert loaded.get_pipe("sciner_candidate_miner").cfg == miner.cfg
    other = make_nlp(case="smart", spans_key="cands")
    other.get_pipe("sciner_candidate_miner").from_bytes(miner.to_bytes())
    assert candidates(other(text), "cands") == expected
    fresh = make_nlp()
    fresh.get_pipe("sciner_candidate_miner").from_disk(tmp_path / "pipeline" / "sciner_candidate_miner")
    assert candidates(fresh(text), "cands") == expected


def test_suggester_shape_matches_spacy_ngram_suggester():
    nlp = make_nlp(overlap="all")
    nlp.get_pipe("sciner_candidate_miner").add_terms(["support vector machine"])
    docs = [nlp("a support vector machine (SVM) ."), nlp.make_doc("no candidates here"),
            nlp.make_doc("")]
    suggester = registry.misc.get("spacy-sciner.candidate_suggester.v1")()
    out = suggester(docs)
    assert out.dataXd.dtype == numpy.int32 and out.lengths.dtype == numpy.int32
    assert out.dataXd.tolist() == [[1, 4], [1, 7], [5, 6]] and out.lengths.tolist() == [3, 0, 0]
    with_ngrams = registry.misc.get("spacy-sciner.candidate_suggester.v1")(sizes=[1, 2])(docs)
    ngram = registry.misc.get("spacy.ngram_suggester.v1")(sizes=[1, 2])(docs)
    assert with_ngrams.dataXd.dtype == ngram.dataXd.dtype and with_ngrams.dataXd.shape[1] == 2
    # Candidates not already among the n-grams are added: [1, 4) and [1, 7), not [5, 6).
    assert with_ngrams.lengths.tolist() == [ngram.lengths[0] + 2, 5, 0]
    assert {tuple(r) for r in ngram.dataXd.tolist()} < {tuple(r) for r in with_ngrams.dataXd.tolist()}
    empty = suggester([nlp.make_doc("")])
    assert empty.dataXd.shape == (0, 0) and empty.lengths.tolist() == [0]


def test_suggester_in_spancat_config():
    nlp = make_nlp()
    spancat = nlp.add_pipe("spancat", config={"suggester": {
        "@misc": "spacy-sciner.candidate_suggester.v1", "sizes": [1]}})
    spancat.add_label("Method")
    nlp.initialize()
    # initialize() rebuilds the dictionary (from training examples); add terms after it.
    nlp.get_pipe("sciner_candidate_miner").add_terms(["random forest"])
    doc = nlp("a random forest")
    assert spancat.suggester([doc]).lengths.tolist() == [4]


def test_evaluate_reports_candidate_precision_recall_and_config_resolves():
    nlp = make_nlp()
    examples = [gold_example(nlp, ["a", "random", "forest", "and", "a", "tree"],
                             [(1, 3, "Method"), (5, 6, "Method")])]
    nlp.initialize(lambda: examples)
    # One of two gold spans is a candidate ("random forest", learnt from the examples) and
    # the one candidate is correct; "tree" was learnt too but is a different doc here.
    doc_examples = [gold_example(nlp, ["the", "random", "forest", "grows"], [(1, 3, "M"), (3, 4, "M")])]
    scores = nlp.evaluate(doc_examples)
    assert (scores["candidates_p"], scores["candidates_r"]) == (1.0, 0.5)
    resolved = spacy.util.load_model_from_config(nlp.config, auto_fill=True)
    assert resolved.get_pipe("sciner_candidate_miner").cfg["case"] == "smart"
