"""Balanced sampling over weak types and the registered corpus reader that serves a weak
corpus to ``spacy train``::

    [corpora.train]
    @readers = "spacy-sciner.WeakBalancedCorpus.v1"
    path = ${paths.weak}
    split = "train"

    [corpora.dev]
    @readers = "spacy-sciner.WeakBalancedCorpus.v1"
    path = ${paths.weak}
    split = "heldout"

Sampling law (Lample & Conneau 2019, their exponent 0.7, used by NER-BERT for types):
a type E is drawn with probability

    q(E) = |E|^alpha / sum_F |F|^alpha,    |E| = number of sentences holding a span of type E

and then one of those |E| sentences uniformly. |E| counts *sentences*, not spans: the
sampled unit is a sentence, so with sentence counts "draw E, then a sentence of E" is
exactly the law above, and a type whose mentions cluster in a few long lists of
sentences gets no extra weight for it. A sentence with several types can be reached
through each of them. ``ENTITY`` (untyped) is not a type to balance: a sentence is
grouped by its typed labels only, unless it has none (possible with ``filters = false``),
then it falls in a group ``ENTITY`` or, without any span, ``""``. With alpha = 1 this is
plain sampling by type size; alpha < 1 raises the rare types.
"""
from itertools import islice
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import filter_spans
from spacy.vocab import Vocab

from ..corpora.readers import make_predicted
from .corpus import (
    GRANULARITIES,
    UNTYPED_LABEL,
    WEAK_SPANS_KEY,
    FilterStats,
    WeakCorpusError,
    CorpusRules,
    WeakSentence,
    heldout_indices,
    label_map,
    read_weak_docbin,
    relabel,
    resolve_ambiguous,
)

SPLITS = ("train", "heldout")
# spaCy's init_nlp initializes on this many examples of a streamed corpus (max_epochs = -1).
INIT_SAMPLE = 100
# Types are drawn in chunks: one numpy call per chunk instead of one per sentence.
CHUNK = 4096


class BalancedTypeSampler:
    """Draw sentences so that types come with probability proportional to |E|^alpha.

    spans (Sequence[Sequence[Tuple[int, int, str]]]): Each sentence's spans.
    alpha (float): The exponent (> 0); 0.7 by default, 1 is proportional sampling.
    untyped_label (str): The untyped label, not balanced (see the module docstring).
    """

    def __init__(
        self, spans: Sequence[Sequence[Tuple[int, int, str]]], alpha: float = 0.7, untyped_label: str = UNTYPED_LABEL
    ) -> None:
        check_alpha(alpha)
        if not spans:
            raise WeakCorpusError("nothing to sample: no sentences")
        groups: Dict[str, List[int]] = {}
        for position, sent_spans in enumerate(spans):
            labels = {label for _, _, label in sent_spans}
            typed = labels - {untyped_label}
            keys = typed or ({untyped_label} if labels else {""})
            for key in keys:
                groups.setdefault(key, []).append(position)
        self.alpha = alpha
        self.types: List[str] = sorted(groups)
        self.members = [numpy.asarray(groups[t], dtype=numpy.int64) for t in self.types]
        self.sizes = numpy.asarray([len(m) for m in self.members], dtype=numpy.float64)
        weights = self.sizes**alpha
        self.probs = weights / weights.sum()

    def expected(self) -> Dict[str, float]:
        """The law: each type's probability of being drawn."""
        return {t: float(p) for t, p in zip(self.types, self.probs)}

    def draw(self, n: Optional[int], seed: Sequence[int]) -> Iterator[Tuple[str, int]]:
        """Draw ``n`` (type, sentence position) pairs; ``n = None`` never stops.

        seed (Sequence[int]): Seed of the numpy generator (e.g. [seed, epoch]).
        """
        rng = numpy.random.default_rng(list(seed))
        left = n
        while left is None or left > 0:
            size = CHUNK if left is None else min(CHUNK, left)
            which = rng.choice(len(self.types), size=size, p=self.probs)
            offsets = (rng.random(size) * self.sizes[which]).astype(numpy.int64)
            for t, offset in zip(which.tolist(), offsets.tolist()):
                yield self.types[t], int(self.members[t][offset])
            if left is not None:
                left -= size


def check_alpha(alpha: float) -> None:
    if not alpha > 0:
        raise WeakCorpusError(f"alpha must be > 0 (0.7 in Lample & Conneau), got {alpha}")


class WeakBalancedCorpus:
    """A weak DocBin as Examples: corpus rules, granularity, a fixed held-out split and
    balanced type sampling. See :func:`create_weak_balanced_corpus` for the arguments.

    After the first call, ``stats`` holds the rules' counts (``FilterStats``) for the
    chosen split, ``sampler`` the train split's sampler (None for "heldout") and ``raw``
    every Doc of the file as read (once per run: see ``read_shared``).
    """

    def __init__(self, path: Path, **options) -> None:
        self.path = Path(path)
        self.o = options
        check_alpha(options["alpha"])
        if options["granularity"] not in GRANULARITIES:
            raise WeakCorpusError(f"granularity must be one of {GRANULARITIES}, got {options['granularity']!r}")
        if options["split"] not in SPLITS:
            raise WeakCorpusError(f"split must be one of {SPLITS}, got {options['split']!r}")
        if options["split"] == "heldout" and not options["heldout_fraction"] > 0:
            raise WeakCorpusError("split 'heldout' needs heldout_fraction > 0")
        if options["n_samples"] < -1:
            raise WeakCorpusError(f"n_samples must be -1 (endless), 0 (one pass's worth) or more, got {options['n_samples']}")
        heldout_indices(2, options["heldout_fraction"])  # validates the fraction now, not at training time
        label_map([], options["granularity"], options["coarse_map"])
        resolve_ambiguous([], options["ambiguous"])
        self.rules = CorpusRules(
            **{k: options[k] for k in ("min_distinct", "top_types", "max_untyped", "drop_prob", "rare_to_untyped", "untyped_label")},
            seed=options["corpus_seed"],
        )
        self.stats: Optional[FilterStats] = None
        self.sampler: Optional[BalancedTypeSampler] = None
        self.first_of_label: Dict[str, int] = {}
        self.calls = 0
        self.raw: List[WeakSentence] = []
        self._cache: Optional[Tuple[int, List[WeakSentence]]] = None

    def prepare(self, vocab: Vocab) -> List[WeakSentence]:
        """Read, split, filter and relabel (once per vocab); the chosen split's sentences."""
        if self._cache is not None and self._cache[0] == id(vocab):
            return self._cache[1]
        o = self.o
        self.raw = read_shared(self.path, vocab, o["spans_key"])
        sentences = resolve_ambiguous(self.raw, o["ambiguous"], untyped_label=o["untyped_label"])
        held = heldout_indices(len(sentences), o["heldout_fraction"], o["corpus_seed"])
        train = [s for s in sentences if s.index not in held]
        chosen = train if o["split"] == "train" else [s for s in sentences if s.index in held]
        if o["filters"]:
            # Statistics from the training part only: the held-out part never shapes training.
            chosen, self.stats = self.rules.apply(chosen, self.rules.statistics(train))
        else:
            self.stats = FilterStats(docs_in=len(chosen), docs_out=len(chosen))
        if not chosen:
            raise WeakCorpusError(
                f"{self.path}: no sentence left in split {o['split']!r} after the corpus rules "
                f"({self.stats.to_dict()}); loosen them (rare_types lists the types with fewer than "
                f"min_distinct = {o['min_distinct']} distinct entities; e.g. spacy train ... "
                f"--corpora.train.min_distinct 1 --corpora.dev.min_distinct 1) or set filters = false"
            )
        # Granularity after the rules: fine and coarse runs train on the same sentences.
        labels = {label for s in chosen for _, _, label in s.spans}
        chosen = relabel(chosen, label_map(labels, o["granularity"], o["coarse_map"], untyped_label=o["untyped_label"]))
        if o["split"] == "train":
            self.sampler = BalancedTypeSampler([s.spans for s in chosen], o["alpha"], o["untyped_label"])
            self.first_of_label = first_of_label(chosen)
        self._cache = (id(vocab), chosen)
        return chosen

    def __call__(self, nlp: Language) -> Iterator[Example]:
        sentences = self.prepare(nlp.vocab)
        epoch = self.calls
        self.calls += 1
        if self.o["split"] == "heldout":
            positions: Iterator[int] = iter(range(len(sentences)))
        else:
            n = {0: len(sentences), -1: None}.get(self.o["n_samples"], self.o["n_samples"])
            # A new stream per call (spaCy calls the train corpus once per epoch), fixed by (seed, call).
            positions = with_every_label((p for _, p in self.sampler.draw(n, [self.o["seed"], epoch])), sentences,
                                         self.first_of_label)
        key = self.o["output_key"]
        for position in positions:
            yield make_example(nlp, sentences[position], key)


def first_of_label(sentences: Sequence[WeakSentence]) -> Dict[str, int]:
    """label -> position of the first sentence holding it (computed once per corpus)."""
    first: Dict[str, int] = {}
    for position, sent in enumerate(sentences):
        for _, _, label in sent.spans:
            first.setdefault(label, position)
    return first


def with_every_label(
    positions: Iterator[int], sentences: Sequence[WeakSentence], first: Optional[Dict[str, int]] = None
) -> Iterator[int]:
    """The positions, led by the first sentence of each label that the first
    ``INIT_SAMPLE`` positions do not reach (none when they reach all: the stream is then
    unchanged). spaCy's ``init_nlp`` initializes the pipes on the first 100 examples of a
    streamed corpus (``max_epochs = -1``, as in weak-pretraining configs): a type too rare
    to be drawn there would be unknown to the component when training draws it later,
    and training would stop. ``first``: :func:`first_of_label` of the sentences, if known."""
    head = list(islice(positions, INIT_SAMPLE))
    seen = {label for position in head for _, _, label in sentences[position].spans}
    first = first if first is not None else first_of_label(sentences)
    yield from sorted({p for label, p in first.items() if label not in seen})
    yield from head
    yield from positions


# The last file read, shared by the readers of one run (train and held-out read the same
# file; a DocBin with spans reads at ~1.5-3 ms a Doc). WeakSentences are tuples over Docs
# that nothing modifies, so sharing them is safe; one entry bounds the memory.
_LAST_READ: Dict[str, object] = {}


def read_shared(path: Path, vocab: Vocab, spans_key: str) -> List[WeakSentence]:
    """``read_weak_docbin``, reusing the previous result for the same file (path, size,
    mtime), vocab and key."""
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, id(vocab), spans_key)
    except OSError:  # missing: let read_weak_docbin say so
        key = None
    if key is None or _LAST_READ.get("key") != key:
        _LAST_READ.clear()
        _LAST_READ.update(key=key, sentences=read_weak_docbin(path, vocab, spans_key))
    return _LAST_READ["sentences"]


def make_example(nlp: Language, sent: WeakSentence, key: str) -> Example:
    """An Example whose reference has the sentence's (relabeled) spans in ``key``, and
    their non-overlapping subset in ``doc.ents`` (the longest wins, as for gold corpora:
    ``spacy_sciner.corpora.common``), so that ents scores on the held-out part mean something."""
    words = [t.text for t in sent.doc]
    spaces = [bool(t.whitespace_) for t in sent.doc]
    reference = Doc(nlp.vocab, words=words, spaces=spaces)
    reference.spans[key] = [Span(reference, s, e, label=label) for s, e, label in sent.spans]
    reference.ents = filter_spans(reference.spans[key])
    return Example(make_predicted(nlp, reference), reference)


def create_weak_balanced_corpus(
    path: Path,
    spans_key: str = WEAK_SPANS_KEY,
    output_key: str = "sc",
    alpha: float = 0.7,
    seed: int = 0,
    filters: bool = True,
    granularity: str = "fine",
    coarse_map: Optional[Dict[str, str]] = None,
    split: str = "train",
    heldout_fraction: float = 0.1,
    corpus_seed: int = 0,
    n_samples: int = 0,
    min_distinct: int = 10,
    top_types: int = 20,
    max_untyped: int = 4,
    drop_prob: float = 0.7,
    rare_to_untyped: bool = False,
    untyped_label: str = UNTYPED_LABEL,
    ambiguous: str = "untyped",
) -> WeakBalancedCorpus:
    """``spacy-sciner.WeakBalancedCorpus.v1``: a weak DocBin for weak pretraining.

    path (Path): The weak DocBin (``sciner label-weak``'s output).
    spans_key (str): Where the weak labels are in the input Docs.
    output_key (str): Where the reference Docs get them: the ``spans_key`` of the
        ``sciner_spancat`` being trained ("sc").
    alpha (float): Sampling exponent, > 0 (see the module docstring).
    seed (int): Seed of the sampling (each call draws a new stream from (seed, call)).
    filters (bool): Apply the NER-BERT rules (``spacy_sciner.weak.corpus``).
    granularity (str): "fine" (labels as they are) or "coarse" (typed -> ENTITY_TYPED).
    coarse_map (Optional[Dict[str, str]]): Labels to map otherwise with "coarse".
    split (str): "train" (sampled) or "heldout" (the fixed held-out part, every
        sentence once, in file order: for checkpoint selection on weak data).
    heldout_fraction (float): Share of the Docs held out (0.1); 0 trains on all.
    corpus_seed (int): Seed of the split and of rule 3, kept apart from ``seed`` so
        that runs with other sampling seeds see the same corpus and held-out part.
    n_samples (int): Draws per call: 0 as many as the filtered train sentences, -1
        endless (for ``max_epochs = -1``), or a number; a call leads with one sentence of
        each label its first 100 draws miss (see ``with_every_label``).
    min_distinct, top_types, max_untyped, drop_prob, rare_to_untyped: The rules' parameters.
    untyped_label (str): The label of untyped spans ("ENTITY").
    ambiguous (str): ``AMBIGUOUS`` spans (label-weak's conflict="ambiguous") become
        "untyped" (default), are dropped ("drop") or stay a type ("keep").
    RETURNS (WeakBalancedCorpus): A callable ``(nlp) -> Iterator[Example]``.
    """
    return WeakBalancedCorpus(
        path, spans_key=spans_key, output_key=output_key, alpha=alpha, seed=seed, filters=filters,
        granularity=granularity, coarse_map=coarse_map, split=split, heldout_fraction=heldout_fraction,
        corpus_seed=corpus_seed, n_samples=n_samples, min_distinct=min_distinct, top_types=top_types,
        max_untyped=max_untyped, drop_prob=drop_prob, rare_to_untyped=rare_to_untyped, untyped_label=untyped_label,
        ambiguous=ambiguous,
    )
