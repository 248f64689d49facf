"""AutoPhrase-style statistical phrase mining (the C_phrase source).

Counting: every n-gram (n <= max_n) inside a punctuation-free chunk of a sentence, not
starting or ending with a stop word or an inner punctuation mark ("-", "/" may sit inside:
"acetyl - CoA carboxylase"), lower-cased. Memory stays flat as the corpus grows: when the
table exceeds ``max_entries`` the rarest entries are dropped (lossy counting; Manku &
Motwani 2002). Counts are exact while the table stays below the cap; above it they are
lower bounds: an n-gram loses the count it has when a prune finds it at or below that
prune's threshold (``floor``: the highest so far, mostly 1), which mostly affects n-grams
near ``min_count`` (AutoPhrase's own default support is 30). On all aux text (2.9M tokens)
with the miner's defaults, 92% of the n-grams seen at least 5 times stay frequent.

Features of each frequent n-gram (all from the counts, no second pass):
raw frequency; rectified frequency (occurrences not explained by its most frequent one-word
extension, an approximation of AutoPhrase's segmentation-based count); completeness (max
super-phrase / phrase and phrase / max sub-phrase frequency); concordance (minimum over
binary splits of PMI and of the t-statistic, with an independence PMI over words as
fallback); informativeness (mean and minimum word IDF, stop-word ratio, inner punctuation,
digits, length).

Quality: a logistic regression (numpy, L2, Newton steps) trained with distant supervision:
positives are the frequent n-grams also found by the dictionary or pattern sources,
negatives a random sample of the other frequent n-grams (AutoPhrase's noisy negatives).
With too few positives the score falls back to an unsupervised concordance average.
"""
import math
from collections import Counter
from typing import Dict, Iterable, List, Sequence, Set, Tuple

import numpy

from spacy.lang.en.stop_words import STOP_WORDS

INNER_PUNCT = {"-", "/"}
# spaCy's English stop words plus citation and layout words of scientific text, which
# would otherwise make "et al" the most frequent "phrase".
STOP_WORDS = set(STOP_WORDS) | {"et", "al", "fig", "figs", "figure", "table", "e.g", "i.e",
                                "vs", "respectively", "eq", "ref", "refs", "cf"}
FEATURE_NAMES = (
    "log_freq", "log_rectified", "super_ratio", "sub_ratio", "pmi", "t_stat", "pmi_words",
    "idf_mean", "idf_min", "stop_ratio", "inner_punct", "has_digit", "length",
)


def count_ngrams(
    words: Sequence[str], counts: Counter, max_n: int = 8, min_n: int = 1
) -> None:
    """Add the countable n-grams of one sentence to ``counts``.

    words (Sequence[str]): Lower-cased tokens.
    counts (Counter): Updated in place with " "-joined n-gram keys.
    max_n (int): Longest n-gram.
    min_n (int): Shortest n-gram.
    """
    n_words = len(words)
    for i in range(n_words):
        first = words[i]
        if first in STOP_WORDS or not first[0].isalnum():
            continue
        for j in range(i + 1, min(n_words, i + max_n) + 1):
            last = words[j - 1]
            if not last[0].isalnum():
                if last in INNER_PUNCT:
                    continue
                break
            if j - i < min_n or last in STOP_WORDS:
                continue
            counts[" ".join(words[i:j])] += 1


class NgramStats:
    """Streaming n-gram, word and document-frequency counts with a memory cap.

    max_n (int): Longest n-gram counted.
    max_entries (int): Cap on the n-gram table (lossy counting above it).
    """

    def __init__(self, max_n: int = 8, max_entries: int = 1_000_000):
        self.max_n = max_n
        self.max_entries = max_entries
        self.ngrams: Counter = Counter()
        self.words: Counter = Counter()
        self.doc_freq: Counter = Counter()
        self.n_tokens = 0
        self.n_docs = 0
        self.floor = 0  # the highest count at which entries were dropped

    def add_sentence(self, words: Sequence[str]) -> None:
        lowered = [w.lower() for w in words]
        count_ngrams(lowered, self.ngrams, self.max_n)
        self.words.update(lowered)
        self.doc_freq.update(set(lowered))
        self.n_tokens += len(lowered)
        self.n_docs += 1

    def merge(self, other: "NgramStats") -> None:
        """Add another (batch) table, pruning if the cap is exceeded."""
        self.ngrams.update(other.ngrams)
        self.words.update(other.words)
        self.doc_freq.update(other.doc_freq)
        self.n_tokens += other.n_tokens
        self.n_docs += other.n_docs
        self.floor = max(self.floor, other.floor)
        if len(self.ngrams) > self.max_entries:
            self.prune()

    def prune(self) -> None:
        """Drop the rarest n-grams until the table is at most half the cap.

        The threshold is the lowest count that gets there, chosen afresh at every prune
        (mostly 1: most n-grams are seen once), not one above the last prune's; a threshold
        that only grew dropped nine in ten entries after a few prunes.
        """
        sizes = Counter(self.ngrams.values())
        kept, threshold = len(self.ngrams), 0
        while kept > self.max_entries // 2:
            threshold += 1
            kept -= sizes.get(threshold, 0)
        self.ngrams = Counter({k: v for k, v in self.ngrams.items() if v > threshold})
        self.floor = max(self.floor, threshold)

    def frequent(self, min_count: int, min_n: int = 1) -> List[str]:
        """The n-grams seen at least ``min_count`` times with at least ``min_n`` words, sorted.

        Sorted because the table's insertion order depends on how the batches were merged,
        and the negative sample of ``score_phrases`` is drawn by position in this list.
        """
        return sorted(
            k for k, v in self.ngrams.items()
            if v >= min_count and (min_n <= 1 or k.count(" ") + 1 >= min_n)
        )

    def features(self, keys: Sequence[str]) -> numpy.ndarray:
        """Quality features (FEATURE_NAMES order) of n-grams present in the table."""
        ngrams, words, doc_freq = self.ngrams, self.words, self.doc_freq
        total = max(self.n_tokens, 1)
        n_docs = max(self.n_docs, 1)
        super_max: Dict[str, int] = {}
        wanted = set(keys)
        for key, count in ngrams.items():
            space = key.find(" ")
            if space < 0:
                continue
            # The two one-word-shorter parts of a counted n-gram: its prefix and suffix.
            for part in (key[: key.rfind(" ")], key[space + 1:]):
                if part in wanted and count > super_max.get(part, 0):
                    super_max[part] = count
        rows = numpy.zeros((len(keys), len(FEATURE_NAMES)), dtype="float32")
        for r, key in enumerate(keys):
            toks = key.split(" ")
            freq = ngrams[key]
            sup = super_max.get(key, 0)
            subs = [ngrams.get(p, 0) for p in (" ".join(toks[:-1]), " ".join(toks[1:]))] \
                if len(toks) > 1 else []
            max_sub = max(subs) if subs and max(subs) > 0 else freq
            pmi, t_stat = _concordance(toks, freq, ngrams, total)
            content = [t for t in toks if t not in STOP_WORDS and t[0].isalnum()]
            idfs = [math.log(n_docs / (1 + doc_freq.get(t, 0))) for t in content] or [0.0]
            word_probs = [words.get(t, 1) / total for t in toks]
            pmi_words = (math.log(freq / total) - sum(map(math.log, word_probs))) / max(
                len(toks) - 1, 1) if len(toks) > 1 else 0.0
            rows[r] = (
                math.log1p(freq), math.log1p(max(freq - sup, 0)), sup / freq, freq / max_sub,
                pmi, t_stat, pmi_words, sum(idfs) / len(idfs), min(idfs),
                sum(t in STOP_WORDS for t in toks) / len(toks),
                float(any(t in INNER_PUNCT for t in toks)),
                float(any(c.isdigit() for c in key)), float(len(toks)),
            )
        return rows


def _concordance(toks: List[str], freq: int, ngrams: Counter, total: int) -> Tuple[float, float]:
    """Minimum PMI and t-statistic over the binary splits whose parts are counted."""
    if len(toks) < 2:
        return 0.0, 0.0
    pmis, t_stats = [], []
    for k in range(1, len(toks)):
        left, right = ngrams.get(" ".join(toks[:k])), ngrams.get(" ".join(toks[k:]))
        if left and right:
            expected = left * right / total
            pmis.append(math.log(freq / expected))
            t_stats.append((freq - expected) / math.sqrt(freq))
    if not pmis:
        return 0.0, 0.0
    return min(pmis), min(t_stats)


def fit_logistic(
    X: numpy.ndarray, y: numpy.ndarray, l2: float = 1.0, n_iter: int = 25
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """L2-regularised logistic regression by Newton's method on standardised features.

    RETURNS (Tuple): weights (with bias last), feature means, feature scales.
    """
    mean = X.mean(axis=0)
    scale = X.std(axis=0) + 1e-6
    Z = numpy.hstack([(X - mean) / scale, numpy.ones((len(X), 1))]).astype("float64")
    w = numpy.zeros(Z.shape[1])
    reg = numpy.full(Z.shape[1], l2)
    reg[-1] = 0.0  # the bias is not shrunk
    for _ in range(n_iter):
        p = 1.0 / (1.0 + numpy.exp(-(Z @ w)))
        grad = Z.T @ (p - y) + reg * w
        hess = (Z * (p * (1 - p))[:, None]).T @ Z + numpy.diag(reg + 1e-9)
        step = numpy.linalg.solve(hess, grad)
        w -= step
        if numpy.abs(step).max() < 1e-6:
            break
    return w, mean, scale


def score_phrases(
    stats: NgramStats,
    positives: Set[str],
    min_count: int = 5,
    min_n: int = 2,
    neg_ratio: float = 2.0,
    min_positives: int = 10,
    seed: int = 0,
) -> Tuple[Dict[str, float], Dict[str, object]]:
    """Score every frequent n-gram with a distantly supervised quality classifier.

    stats (NgramStats): Corpus counts.
    positives (Set[str]): Lower-cased, space-joined texts of dictionary/pattern candidates.
    min_count (int): Minimum raw frequency of a phrase candidate.
    min_n (int): Minimum number of words of a phrase candidate.
    neg_ratio (float): Negatives sampled per positive.
    min_positives (int): Below this, use the unsupervised fallback score.
    seed (int): Seed of the negative sample.
    RETURNS (Tuple[Dict[str, float], Dict[str, object]]): Quality in [0, 1] per frequent
        n-gram, and a report (model kind, positives, negatives, weights).
    """
    keys = stats.frequent(min_count, min_n=1)
    if not keys:
        return {}, {"model": "none", "frequent_ngrams": 0}
    X = stats.features(keys)
    is_pos = numpy.array([k in positives for k in keys])
    n_pos = int(is_pos.sum())
    report: Dict[str, object] = {"frequent_ngrams": len(keys), "positives": n_pos}
    if n_pos >= min_positives:
        rng = numpy.random.default_rng(seed)
        neg_idx = numpy.flatnonzero(~is_pos)
        n_neg = min(len(neg_idx), int(n_pos * neg_ratio))
        neg_idx = rng.choice(neg_idx, size=n_neg, replace=False)
        train = numpy.concatenate([numpy.flatnonzero(is_pos), neg_idx])
        y = numpy.concatenate([numpy.ones(n_pos), numpy.zeros(n_neg)])
        w, mean, scale = fit_logistic(X[train], y)
        Z = numpy.hstack([(X - mean) / scale, numpy.ones((len(X), 1))])
        quality = 1.0 / (1.0 + numpy.exp(-(Z @ w)))
        report.update(model="logistic", negatives=n_neg,
                      weights=dict(zip(FEATURE_NAMES + ("bias",), map(float, w.round(4)))))
    else:
        # Unsupervised fallback: high concordance, informative words, few stop words.
        cols = [FEATURE_NAMES.index(n) for n in ("pmi", "t_stat", "pmi_words", "idf_mean")]
        Z = (X[:, cols] - X[:, cols].mean(axis=0)) / (X[:, cols].std(axis=0) + 1e-6)
        quality = 1.0 / (1.0 + numpy.exp(-Z.mean(axis=1)))
        report.update(model="unsupervised", negatives=0)
    lengths = X[:, FEATURE_NAMES.index("length")]
    scores = {k: float(q) for k, q, n in zip(keys, quality, lengths) if n >= min_n}
    return scores, report


def select_phrases(scores: Dict[str, float], threshold: float) -> Iterable[Tuple[str, float]]:
    """The (phrase, quality) pairs at or above the quality threshold."""
    return ((k, q) for k, q in scores.items() if q >= threshold)
