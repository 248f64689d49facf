import random
from collections import Counter

import numpy

from spacy_sciner.mining.phrases import (
    FEATURE_NAMES, NgramStats, count_ngrams, fit_logistic, score_phrases)

KNOWN = ["support vector machine", "neural network", "gene expression", "random forest",
         "hidden markov model", "word embedding"]
UNKNOWN = ["conditional random field", "decision tree", "language model", "cell line",
           "protein kinase", "graph convolution network"]


def synthetic_corpus(n_sentences=1500, seed=0):
    """Filler words with embedded multi-word phrases; the answers are known by design."""
    rng = random.Random(seed)
    filler = [f"w{i}" for i in range(300)] + ["the", "of", "and", "is", "a", "in"]
    for _ in range(n_sentences):
        words = [rng.choice(filler) for _ in range(rng.randint(6, 14))]
        for phrase in rng.sample(KNOWN + UNKNOWN, 2):
            pos = rng.randint(0, len(words))
            words[pos:pos] = phrase.split()
        yield words


def test_count_ngrams_respects_stop_words_and_punctuation():
    counts = Counter()
    count_ngrams("the acetyl - coa carboxylase , of cells".split(), counts, max_n=8)
    assert set(counts) == {"acetyl", "acetyl - coa", "acetyl - coa carboxylase", "coa",
                           "coa carboxylase", "carboxylase", "cells"}
    counts = Counter()
    count_ngrams("a b c d e f g h i j".split(), counts, max_n=3, min_n=2)
    assert max(k.count(" ") for k in counts) == 2 and min(k.count(" ") for k in counts) == 1


def test_phrase_quality_finds_unknown_phrases_and_rejects_fragments():
    stats = NgramStats(max_n=8)
    for words in synthetic_corpus():
        stats.add_sentence(words)
    scores, report = score_phrases(stats, set(KNOWN), min_count=5, min_n=2, min_positives=5)
    assert report["model"] == "logistic" and report["positives"] == len(KNOWN)
    mined = {k for k, q in scores.items() if q >= 0.5}
    # Every planted phrase is found, the distantly supervised ones and the unknown ones.
    assert set(UNKNOWN) <= mined and set(KNOWN) <= mined
    # Fragments of phrases (sub-phrases always followed by the same word) and
    # phrase+filler n-grams stay below the threshold.
    for fragment in ("support vector", "vector machine", "graph convolution", "conditional random"):
        assert scores[fragment] < 0.5, (fragment, scores[fragment])
    assert len(mined - set(KNOWN) - set(UNKNOWN)) <= 2


def test_unsupervised_fallback_without_positives():
    stats = NgramStats()
    for words in synthetic_corpus(600):
        stats.add_sentence(words)
    scores, report = score_phrases(stats, set(), min_count=5)
    assert report["model"] == "unsupervised"
    assert numpy.mean([scores[p] for p in UNKNOWN]) > 0.5
    assert all(0.0 <= q <= 1.0 for q in scores.values())


def test_memory_cap_prunes_rare_ngrams_and_keeps_frequent_ones():
    capped, exact = NgramStats(max_entries=2000), NgramStats(max_entries=10 ** 9)
    for i, words in enumerate(synthetic_corpus(1500, seed=1)):
        batch = NgramStats(max_entries=10 ** 9)
        batch.add_sentence(words)
        capped.merge(batch)
        exact.merge(batch)
    assert len(capped.ngrams) <= 2000 < len(exact.ngrams) and capped.floor >= 1
    for phrase in KNOWN + UNKNOWN:
        # Frequent n-grams survive; their counts are lower bounds of the exact ones.
        assert exact.ngrams[phrase] - capped.floor * 10 <= capped.ngrams[phrase] <= exact.ngrams[phrase]
        assert capped.ngrams[phrase] > 0


def test_features_shape_and_logistic_fit():
    stats = NgramStats()
    for words in synthetic_corpus(300):
        stats.add_sentence(words)
    keys = stats.frequent(3, min_n=2)
    X = stats.features(keys)
    assert X.shape == (len(keys), len(FEATURE_NAMES)) and numpy.isfinite(X).all()
    rng = numpy.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] - X[:, 1] > 0).astype(float)
    w, mean, scale = fit_logistic(X, y, l2=0.1)
    pred = (numpy.hstack([(X - mean) / scale, numpy.ones((200, 1))]) @ w) > 0
    assert (pred == y.astype(bool)).mean() > 0.95 and w[0] > 0 > w[1]


def test_each_prune_drops_only_as_much_as_it_needs():
    stats = NgramStats(max_entries=300)
    stats.ngrams.update({f"pair {i}": 2 for i in range(100)})
    for prune in range(2):
        stats.ngrams.update({f"once {prune} {i}": 1 for i in range(1000)})
        stats.prune()
        # Dropping the singletons suffices both times: the pairs are kept.
        assert len(stats.ngrams) == 100 and stats.floor == 1
