"""NER-BERT corpus rules, granularities, the held-out split, the |E|^alpha sampler and the
registered reader spacy-sciner.WeakBalancedCorpus.v1, on hand-made weak DocBins."""
import json
import math
from itertools import islice
import sys
from collections import Counter
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from spacy.util import registry
from thinc.api import Config

from spacy_sciner.weak.corpus import (
    WeakCorpusError,
    WeakSentence,
    filter_corpus,
    heldout_indices,
    label_map,
    read_weak_docbin,
    relabel,
    resolve_ambiguous,
)
from spacy_sciner.weak.sampling import BalancedTypeSampler, create_weak_balanced_corpus

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import weak_sampling  # noqa: E402


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en")


def sentence(nlp, index, entities, prefix="s"):
    """A WeakSentence ``<prefix><index> see <e1> see <e2> ...`` with one span per entity
    (text, label); the first word makes every sentence's text unique."""
    words, spans = [f"{prefix}{index}"], []
    for text, label in entities:
        words.append("see")
        spans.append((len(words), len(words) + 1, label))
        words.append(text)
    return WeakSentence(index, Doc(nlp.vocab, words=words), tuple(spans))


def write_docbin(path, sentences, key="weak"):
    db = DocBin()
    for sent in sentences:
        doc = sent.doc
        doc.spans[key] = [Span(doc, s, e, label=label) for s, e, label in sent.spans]
        db.add(doc)
    db.to_disk(path)
    return path


def corpus(nlp, n_types=3, per_type=40, n_distinct=12):
    """Sentences with one typed span each (type k has per_type*(k+1) sentences) plus one
    ENTITY span; every type has n_distinct distinct entities."""
    sents, i = [], 0
    for k in range(n_types):
        for j in range(per_type * (k + 1)):
            sents.append(sentence(nlp, i, [(f"t{k}x{j % n_distinct}", f"T{k}"), (f"c{i}", "ENTITY")]))
            i += 1
    return sents


# --- rules -------------------------------------------------------------------------------

def test_rule1_rare_types_by_distinct_lowercased_text(nlp):
    # "Rare" has 9 distinct entities (its 20 mentions vary only in case), "Ok" has 10.
    sents = [sentence(nlp, i, [(f"r{i % 9}".upper() if i % 2 else f"r{i % 9}", "Rare")]) for i in range(20)]
    sents += [sentence(nlp, 20 + i, [(f"ok{i}", "Ok"), ("R0", "Rare")]) for i in range(10)]
    kept, stats = filter_corpus(sents, min_distinct=10)
    assert stats.rare_types == {"Rare": 9}
    assert stats.rare_spans == 30
    # The 20 Rare-only sentences lose their only span: dropped by rule 2 as "no entity".
    assert (stats.no_entity, stats.docs_out) == (20, 10)
    assert all(label == "Ok" for s in kept for _, _, label in s.spans)
    kept2, stats2 = filter_corpus(sents, min_distinct=10, rare_to_untyped=True)
    assert stats2.only_untyped == 20 and stats2.docs_out == 10
    assert Counter(label for s in kept2 for _, _, label in s.spans) == {"Ok": 10, "ENTITY": 10}
    # With a lower threshold nothing is rare.
    assert filter_corpus(sents, min_distinct=9)[1].rare_spans == 0


def test_rule1_counts_distinct_not_mentions(nlp):
    # Rare has 19 distinct entities (i % 19 over 30 sentences wraps once): kept at the default.
    sents = [sentence(nlp, i, [(f"e{i % 19}", "T")]) for i in range(30)]
    assert filter_corpus(sents)[1].rare_types == {}
    assert filter_corpus(sents, min_distinct=20)[1].rare_types == {"T": 19}


def test_rule1_with_other_statistics_drops_types_they_lack(nlp):
    # Statistics of a part without "Only": in another part that type counts as rare (0
    # distinct), also at min_distinct 1, so a model trained on the first part never meets it.
    from spacy_sciner.weak.corpus import CorpusRules

    train = [sentence(nlp, i, [(f"a{i}", "A")]) for i in range(3)]
    held = [sentence(nlp, 3, [("a9", "A"), ("o", "Only")]), sentence(nlp, 4, [("o", "Only")])]
    rules = CorpusRules(min_distinct=1)
    kept, stats = rules.apply(held, rules.statistics(train))
    assert stats.rare_types == {"Only": 0} and stats.rare_spans == 2 and stats.no_entity == 1
    assert [s.spans for s in kept] == [((2, 3, "A"),)]
    kept, stats = CorpusRules(min_distinct=1, rare_to_untyped=True).apply(held, rules.statistics(train))
    assert [label for s in kept for _, _, label in s.spans] == ["A", "ENTITY"] and stats.only_untyped == 1


def test_rule2_no_entity_and_only_untyped(nlp):
    sents = corpus(nlp, n_types=1, per_type=12)
    sents += [sentence(nlp, 100, []), sentence(nlp, 101, [("a", "ENTITY"), ("b", "ENTITY")])]
    kept, stats = filter_corpus(sents)
    assert (stats.no_entity, stats.only_untyped, stats.docs_in, stats.docs_out) == (1, 1, 14, 12)
    assert {s.index for s in kept} == set(range(12))


def frequent_corpus(nlp, n=1000):
    """T0 is the most frequent type. Sentences 0..n-1: T0 + 5 ENTITY (eligible for rule 3);
    then T0 + 4 ENTITY (not: 4 is not > 4) and T1 + 5 ENTITY (not: T1 is not in the top 1)."""
    ents5 = [(f"c{j}", "ENTITY") for j in range(5)]
    sents = [sentence(nlp, i, [(f"a{i % 50}", "T0")] + ents5) for i in range(n)]
    sents += [sentence(nlp, n + i, [(f"a{i % 50}", "T0")] + ents5[:4]) for i in range(20)]
    sents += [sentence(nlp, n + 20 + i, [(f"b{i}", "T1")] + ents5) for i in range(20)]
    return sents


def test_rule3_drops_about_drop_prob_of_eligible_sentences(nlp):
    sents = frequent_corpus(nlp)
    kept, stats = filter_corpus(sents, top_types=1)
    assert stats.top_types == ["T0"] and stats.frequent_eligible == 1000
    # Binomial(1000, 0.7): sd 14.5; 4 sd either side.
    assert abs(stats.frequent - 700) < 58
    survivors = {s.index for s in kept}
    assert set(range(1000, 1040)) <= survivors  # the two non-eligible groups all stay
    assert filter_corpus(sents, top_types=1, drop_prob=1.0)[1].docs_out == 40
    assert filter_corpus(sents, top_types=1, drop_prob=0.0)[1].docs_out == 1040
    assert filter_corpus(sents, top_types=2, drop_prob=1.0)[1].docs_out == 20  # T1 now in the top
    assert filter_corpus(sents, top_types=1, max_untyped=5, drop_prob=1.0)[1].frequent == 0


def test_rule3_deterministic_per_index_and_seed(nlp):
    sents = frequent_corpus(nlp, n=300)
    a = [s.index for s in filter_corpus(sents, top_types=1, seed=3)[0]]
    b = [s.index for s in filter_corpus(list(reversed(sents)), top_types=1, seed=3)[0]]
    assert a == sorted(b)  # a sentence's fate does not depend on the order of reading
    assert a != [s.index for s in filter_corpus(sents, top_types=1, seed=4)[0]]


# --- granularity and split ---------------------------------------------------------------

def test_fine_and_coarse_relabeling(nlp):
    labels = ["Disease", "Chemical", "ENTITY"]
    assert label_map(labels, "fine") == {label: label for label in labels}
    assert label_map(labels, "coarse") == {"Disease": "ENTITY_TYPED", "Chemical": "ENTITY_TYPED", "ENTITY": "ENTITY"}
    one = label_map(labels, "coarse", {"Disease": "BIO", "Chemical": "BIO", "ENTITY": "BIO"})
    assert set(one.values()) == {"BIO"}
    sent = sentence(nlp, 0, [("flu", "Disease"), ("salt", "Chemical"), ("x", "ENTITY")])
    both = sent._replace(spans=sent.spans + ((2, 3, "Chemical"),))  # same span, two types
    (out,) = relabel([both], label_map(labels, "coarse"))
    assert out.spans == ((2, 3, "ENTITY_TYPED"), (4, 5, "ENTITY_TYPED"), (6, 7, "ENTITY"))  # merged once


def test_ambiguous_spans_untyped_by_default(nlp):
    sent = sentence(nlp, 0, [("flu", "Disease"), ("x", "AMBIGUOUS")])
    assert resolve_ambiguous([sent])[0].spans == ((2, 3, "Disease"), (4, 5, "ENTITY"))
    assert resolve_ambiguous([sent], "drop")[0].spans == ((2, 3, "Disease"),)
    assert resolve_ambiguous([sent], "keep")[0].spans == sent.spans
    with pytest.raises(WeakCorpusError, match="ambiguous must be one of"):
        resolve_ambiguous([sent], "guess")


def test_heldout_split_fixed_disjoint_exact():
    held = heldout_indices(1000, 0.1, seed=0)
    assert len(held) == 100 and held == heldout_indices(1000, 0.1, seed=0)
    assert held != heldout_indices(1000, 0.1, seed=1)
    assert len(heldout_indices(5, 0.1)) == 1 and heldout_indices(5, 0.0) == set()


# --- the sampling law ---------------------------------------------------------------------

def test_sampler_follows_the_alpha_law():
    # Types with 2000, 200 and 20 sentences (one typed span each, plus ENTITY noise).
    spans = [[(0, 1, f"T{k}"), (2, 3, "ENTITY")] for k, n in enumerate([2000, 200, 20]) for _ in range(n)]
    n = 20000
    for alpha in (0.7, 1.0, 0.3):
        sampler = BalancedTypeSampler(spans, alpha=alpha)
        sizes = [2000, 200, 20]
        q = [s**alpha / sum(t**alpha for t in sizes) for s in sizes]
        assert sampler.types == ["T0", "T1", "T2"]
        assert sampler.expected() == pytest.approx(dict(zip(sampler.types, q)))
        drawn = Counter(label for label, _ in sampler.draw(n, [0, 0]))
        for k, qk in enumerate(q):
            # Each count is Binomial(n, q): 4.5 standard errors is a < 1e-5 false alarm per
            # check (9 checks); the laws for alpha 0.7 and 1 differ by > 20 standard errors.
            se = math.sqrt(qk * (1 - qk) / n)
            assert abs(drawn[f"T{k}"] / n - qk) < 4.5 * se, (alpha, k, drawn)
    # Under 0.7: T2 drawn ~3.2% of the time, against 0.9% under proportional sampling.
    assert BalancedTypeSampler(spans, 0.7).expected()["T2"] == pytest.approx(0.0317, abs=5e-4)


def test_sampler_is_seeded_and_uniform_within_a_type():
    spans = [[(0, 1, "A")]] * 10 + [[(0, 1, "B")]] * 1000
    sampler = BalancedTypeSampler(spans, 0.7)
    first = list(sampler.draw(5000, [1, 0]))
    assert first == list(sampler.draw(5000, [1, 0])) and first != list(sampler.draw(5000, [1, 1]))
    within_a = Counter(p for t, p in first if t == "A")
    assert set(within_a) == set(range(10)) and max(within_a.values()) < 3 * min(within_a.values())


# --- the registered reader ----------------------------------------------------------------

READER_CFG = """
[corpora]
[corpora.train]
@readers = "spacy-sciner.WeakBalancedCorpus.v1"
path = "{path}"
{extra}
[corpora.heldout]
@readers = "spacy-sciner.WeakBalancedCorpus.v1"
path = "{path}"
split = "heldout"
{extra}
"""


@pytest.fixture(scope="module")
def weak_docbin(tmp_path_factory, nlp):
    return write_docbin(tmp_path_factory.mktemp("weak") / "weak.spacy", corpus(nlp))


def resolve(path, extra=""):
    cfg = Config().from_str(READER_CFG.format(path=path, extra=extra))
    return registry.resolve(cfg)["corpora"]


def texts(reader, nlp):
    return [eg.reference.text for eg in reader(nlp)]


def test_reader_resolves_from_config_and_yields_gold_in_sc(weak_docbin, nlp):
    assert callable(registry.readers.get("spacy-sciner.WeakBalancedCorpus.v1"))
    corpora = resolve(weak_docbin)
    examples = list(corpora["train"](nlp))
    assert len(examples) == corpora["train"].stats.docs_out == 216  # 240 docs, 24 held out
    for eg in examples[:20]:
        assert eg.predicted.text == eg.reference.text and not eg.predicted.spans
        assert {s.label_ for s in eg.reference.spans["sc"]} <= {"T0", "T1", "T2", "ENTITY"}
        assert list(eg.reference.ents) == list(eg.reference.spans["sc"])  # no overlaps here
    eg = next(iter(resolve(weak_docbin, 'output_key = "gold"\ngranularity = "coarse"')["train"](nlp)))
    assert {s.label_ for s in eg.reference.spans["gold"]} == {"ENTITY_TYPED", "ENTITY"}


def test_reader_train_heldout_disjoint_and_deterministic(weak_docbin, nlp):
    corpora = resolve(weak_docbin)
    held = texts(corpora["heldout"], nlp)
    assert len(held) == len(set(held)) == 24
    train = set(texts(corpora["train"], nlp))
    assert not train & set(held)
    again = resolve(weak_docbin)
    assert texts(again["heldout"], nlp) == held
    first = texts(again["train"], nlp)
    assert first == texts(resolve(weak_docbin)["train"], nlp)  # same (seed, call): same stream
    assert first != texts(again["train"], nlp)  # the next call (epoch) draws anew
    # The held-out part does not move with the sampling seed, the filters or the granularity.
    other = resolve(weak_docbin, "seed = 7\nfilters = false\ngranularity = \"coarse\"")
    assert texts(other["heldout"], nlp) == held


def test_train_and_heldout_readers_read_the_file_once(weak_docbin, nlp, monkeypatch):
    import spacy_sciner.weak.sampling as sampling

    calls = []
    real = sampling.read_weak_docbin
    monkeypatch.setattr(sampling, "read_weak_docbin", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(sampling, "_LAST_READ", {})
    corpora = resolve(weak_docbin)
    texts(corpora["train"], nlp), texts(corpora["heldout"], nlp)
    assert len(calls) == 1
    texts(resolve(weak_docbin, 'spans_key = "weak"')["train"], spacy.blank("en"))  # another vocab
    assert len(calls) == 2


def test_heldout_reader_drops_types_the_training_part_lacks(tmp_path, nlp):
    # "Rare" occurs in one sentence only; wherever the split puts it, the held-out reader
    # yields only labels the train reader yields (a label the model has not seen stopped
    # spacy train with "has label 'Material', which the component does not know").
    sents = corpus(nlp, n_types=1, per_type=60) + [sentence(nlp, 60 + i, [("r", "Rare")]) for i in range(1)]
    path = write_docbin(tmp_path / "w.spacy", sents)
    seed = next(seed for seed in range(100) if 60 in heldout_indices(61, 0.1, seed))  # Rare held out
    for seed in (seed, seed + 1):
        corpora = resolve(path, f"min_distinct = 1\ncorpus_seed = {seed}")
        train = {s.label_ for eg in corpora["train"](nlp) for s in eg.reference.spans["sc"]}
        held = {s.label_ for eg in corpora["heldout"](nlp) for s in eg.reference.spans["sc"]}
        assert held <= train


def test_every_call_shows_every_label_within_spacys_init_sample(tmp_path, nlp):
    # spaCy's init_nlp takes the labels from the first 100 examples of a streamed corpus:
    # "Rare" (one sentence of 301) leads a call whose first 100 draws miss it; a call whose
    # first 100 draws reach every label is the draws, unchanged.
    from spacy_sciner.weak.sampling import INIT_SAMPLE

    sents = corpus(nlp, n_types=1, per_type=300) + [sentence(nlp, 300, [("r", "Rare"), ("c", "ENTITY")])]
    path = write_docbin(tmp_path / "w.spacy", sents)
    options = dict(n_samples=2 * INIT_SAMPLE, heldout_fraction=0.0, min_distinct=1)
    probe = create_weak_balanced_corpus(path, **options)
    probe.prepare(nlp.vocab)

    def head_has_rare(seed):
        return "Rare" in {t for t, _ in islice(probe.sampler.draw(2 * INIT_SAMPLE, [seed, 0]), INIT_SAMPLE)}

    missed = next(seed for seed in range(200) if not head_has_rare(seed))
    examples = list(create_weak_balanced_corpus(path, seed=missed, **options)(nlp))
    assert len(examples) == 2 * INIT_SAMPLE + 1
    assert [s.label_ for s in examples[0].reference.spans["sc"]] == ["Rare", "ENTITY"]
    reached = next(seed for seed in range(200) if head_has_rare(seed))
    plain = [probe.prepare(nlp.vocab)[p].doc.text for _, p in probe.sampler.draw(2 * INIT_SAMPLE, [reached, 0])]
    assert [eg.reference.text for eg in create_weak_balanced_corpus(path, seed=reached, **options)(nlp)] == plain


def test_reader_n_samples_and_endless(weak_docbin, nlp):
    reader = create_weak_balanced_corpus(weak_docbin, n_samples=-1)
    stream = iter(reader(nlp))
    assert len([next(stream) for _ in range(1000)]) == 1000
    assert len(list(create_weak_balanced_corpus(weak_docbin, n_samples=7)(nlp))) == 7


def test_bad_input_errors_name_file_or_argument(tmp_path, nlp, weak_docbin):
    empty = tmp_path / "empty.spacy"
    DocBin().to_disk(empty)
    with pytest.raises(WeakCorpusError, match=r"empty\.spacy: empty DocBin"):
        list(create_weak_balanced_corpus(empty)(nlp))
    with pytest.raises(WeakCorpusError, match=r"weak\.spacy: no doc has spans key 'nope'.*'weak'"):
        read_weak_docbin(weak_docbin, nlp.vocab, "nope")
    with pytest.raises(WeakCorpusError, match=r"missing\.spacy: weak corpus file not found"):
        list(create_weak_balanced_corpus(tmp_path / "missing.spacy")(nlp))
    for bad, match in [
        ({"alpha": 0}, "alpha must be > 0"), ({"alpha": -1.0}, "alpha must be > 0"),
        ({"granularity": "medium"}, "granularity must be one of .*'medium'"),
        ({"split": "dev"}, "split must be one of"), ({"heldout_fraction": 1.0}, "heldout_fraction"),
        ({"split": "heldout", "heldout_fraction": 0.0}, "heldout_fraction > 0"),
        ({"coarse_map": {"A": "B"}}, "coarse_map is only used"), ({"n_samples": -2}, "n_samples"),
        ({"ambiguous": "guess"}, "ambiguous must be one of"), ({"drop_prob": 1.5}, "drop_prob must be in"),
    ]:
        with pytest.raises(WeakCorpusError, match=match):
            create_weak_balanced_corpus(weak_docbin, **bad)
    with pytest.raises(WeakCorpusError, match="no sentence left") as err:
        list(create_weak_balanced_corpus(weak_docbin, min_distinct=100)(nlp))
    assert "min_distinct = 100" in str(err.value) and "--corpora.train.min_distinct 1" in str(err.value)
    # From a config, spaCy reports the reader's error as it is.
    with pytest.raises(WeakCorpusError, match="alpha"):
        resolve(weak_docbin, "alpha = 0.0")


def test_benchmark_script_writes_json_and_png(tmp_path, capsys):
    assert weak_sampling.main(["--synthetic", "400", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "weak_sampling.json").read_text())
    assert result["docs_in_file"] == 400 and "T_rare" in result["filter_stats"]["rare_types"]
    assert result["types"]["T_rare"]["spans_after_rules"] == 0
    assert sum(v["q_expected"] for v in result["types"].values()) == pytest.approx(1.0, abs=1e-4)
    try:
        import matplotlib  # noqa: F401  (the [bench] extra, not [test])
    except ImportError:
        assert not (tmp_path / "weak_sampling.png").exists()
    else:
        assert (tmp_path / "weak_sampling.png").stat().st_size > 1000
    assert weak_sampling.main([str(tmp_path / "missing.spacy"), "--out", str(tmp_path)]) == 1
    assert "missing.spacy" in capsys.readouterr().err


def test_spacy_training_initializes_and_updates_from_the_reader(weak_docbin, tmp_path):
    """What `spacy train` does with the corpora (checked end to end by hand: 30 steps of
    configs/sciner_spancat_cnn.cfg on a synthetic weak corpus, max_epochs = -1)."""
    from spacy.training.initialize import init_nlp

    path = Path(__file__).resolve().parents[2] / "configs" / "sciner_spancat_cnn.cfg"
    cfg = Config().from_disk(path, interpolate=False)
    readers = Config().from_str(READER_CFG.format(path=weak_docbin, extra=""))["corpora"]
    cfg["corpora"]["train"], cfg["corpora"]["dev"] = dict(readers["train"]), dict(readers["heldout"])
    cfg["training"]["max_epochs"] = -1
    cfg = Config().from_str(cfg.to_str())  # as `spacy train` reads it (a str round trip)
    nlp = init_nlp(cfg)
    assert set(nlp.get_pipe("sciner_spancat").labels) == {"T0", "T1", "T2", "ENTITY"}
    train = registry.resolve(cfg["corpora"])["train"]
    losses = nlp.update(list(train(nlp))[:16], losses={})
    assert losses["sciner_spancat"] > 0
