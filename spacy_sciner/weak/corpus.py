"""The NER-BERT corpus rules for a weakly labeled corpus, type granularities and the
fixed held-out split.

Input: Docs whose weak labels are in ``doc.spans["weak"]`` (what ``sciner label-weak``
writes): one label per span, ``"ENTITY"`` for untyped mined candidates, a type otherwise.
Each Doc is read once into a :class:`WeakSentence` (its index in the file, the Doc, and
its spans as ``(start, end, label)`` tuples), and the rules below work on those tuples,
so a Doc is never modified.

The rules (Liu et al. 2021, NER-BERT, with its parameters as defaults), in this order:

1. **rare types**: a type with fewer than ``min_distinct`` (10) distinct entities
   (distinct by lower-cased text) is dropped: its spans are removed (or, with
   ``rare_to_untyped``, relabeled ``ENTITY``). ``ENTITY`` itself is not a type and is
   never dropped. Applied with another part's statistics, a type that part does not
   have at all counts as rare too (count 0).
2. **no typed entity**: a sentence left with no span, or with ``ENTITY`` spans only, is
   dropped (counted apart: ``no_entity`` and ``only_untyped``).
3. **frequent and untyped-heavy**: a sentence whose typed spans are all of the
   ``top_types`` (20) most frequent types (by span count, after rule 1) and that holds
   more than ``max_untyped`` (4) ``ENTITY`` spans is dropped with probability
   ``drop_prob`` (0.7). The draw is a hash of (seed, the sentence's index in the file),
   so it does not depend on the split, on the order of reading, or on other sentences.

The type statistics of rules 1 and 3 are computed by ``CorpusRules.statistics`` and
applied by ``CorpusRules.apply``, so that a held-out part can be filtered with the
statistics of the training part (it never influences the training stream).
"""
import hashlib
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

WEAK_SPANS_KEY = "weak"
UNTYPED_LABEL = "ENTITY"
TYPED_LABEL = "ENTITY_TYPED"
# What label-weak's conflict="ambiguous" writes for a span with several types.
AMBIGUOUS_LABEL = "AMBIGUOUS"
AMBIGUOUS_MODES = ("untyped", "drop", "keep")
GRANULARITIES = ("fine", "coarse")

SpanTuple = Tuple[int, int, str]


class WeakCorpusError(ValueError):
    """A weak corpus or a corpus argument that cannot be used; the message names the
    file or the argument."""


class WeakSentence(NamedTuple):
    """One Doc of a weak corpus.

    index (int): Position of the Doc in its file (stable id for hashing and splitting).
    doc (Doc): The Doc as read; never modified.
    spans (Tuple[SpanTuple, ...]): Its weak spans as (start, end, label), sorted.
    """

    index: int
    doc: Doc
    spans: Tuple[SpanTuple, ...]


@dataclass
class TypeStats:
    """What rules 1 and 3 need from a corpus.

    distinct (Dict[str, int]): Distinct lower-cased entities per type (``ENTITY`` excluded).
    rare (Dict[str, int]): The types rule 1 drops, with their distinct counts.
    top (List[str]): The ``top_types`` most frequent kept types (span count, then name).
    """

    distinct: Dict[str, int]
    rare: Dict[str, int]
    top: List[str]


@dataclass
class FilterStats:
    """What each rule dropped (sentences unless said otherwise); ``to_dict`` for JSON."""

    docs_in: int = 0
    rare_types: Dict[str, int] = field(default_factory=dict)
    rare_spans: int = 0  # spans removed (or untyped) by rule 1
    no_entity: int = 0  # rule 2: no span at all
    only_untyped: int = 0  # rule 2: only ENTITY spans
    frequent_eligible: int = 0  # rule 3: sentences the rule applies to
    frequent: int = 0  # rule 3: of those, dropped
    docs_out: int = 0
    top_types: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)


def unit_hash(seed: int, tag: str, index: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, tag, index): the same in every process
    and Python version (unlike ``hash``), independent of any other draw."""
    digest = hashlib.blake2b(f"{seed}:{tag}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def read_weak_docbin(
    path: Union[str, Path], vocab: Vocab, spans_key: str = WEAK_SPANS_KEY
) -> List[WeakSentence]:
    """Read a weak DocBin into WeakSentences.

    path (Union[str, Path]): The ``.spacy`` file.
    vocab (Vocab): The vocab to read the Docs with.
    spans_key (str): The key of the weak spans.
    RETURNS (List[WeakSentence]): One per Doc, in file order. A Doc without the key has
        no spans; a file where *no* Doc has it, or an empty file, is an error.
    """
    path = Path(path)
    if not path.is_file():
        raise WeakCorpusError(f"{path}: weak corpus file not found")
    try:
        docs = list(DocBin().from_disk(path).get_docs(vocab))
    except Exception as err:  # msgpack/zlib errors say nothing about the file
        raise WeakCorpusError(f"{path}: not a readable DocBin ({type(err).__name__}: {err})") from err
    if not docs:
        raise WeakCorpusError(f"{path}: empty DocBin (no docs)")
    if not any(spans_key in doc.spans for doc in docs):
        keys = sorted({key for doc in docs for key in doc.spans})
        raise WeakCorpusError(
            f"{path}: no doc has spans key {spans_key!r} (keys found: {keys or 'none'}); "
            "set spans_key to the key the weak labels are in"
        )
    return [
        WeakSentence(i, doc, tuple(sorted((s.start, s.end, s.label_) for s in doc.spans.get(spans_key, []))))
        for i, doc in enumerate(docs)
    ]


@dataclass(frozen=True)
class CorpusRules:
    """The rules' parameters (see the module docstring); NER-BERT's values by default.

    min_distinct (int): Rule 1 drops types with fewer distinct (lower-cased) entities.
    top_types (int): How many of the most frequent kept types rule 3 looks at.
    max_untyped (int): Rule 3 applies to sentences with more ``ENTITY`` spans than this.
    drop_prob (float): Rule 3's drop probability.
    seed (int): Seed of rule 3's draws.
    rare_to_untyped (bool): Relabel spans of rare types ``ENTITY`` instead of removing them.
    untyped_label (str): The untyped label, which is not a type.
    """

    min_distinct: int = 10
    top_types: int = 20
    max_untyped: int = 4
    drop_prob: float = 0.7
    seed: int = 0
    rare_to_untyped: bool = False
    untyped_label: str = UNTYPED_LABEL

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop_prob <= 1.0:
            raise WeakCorpusError(f"drop_prob must be in [0, 1], got {self.drop_prob}")

    def statistics(self, sentences: Iterable[WeakSentence]) -> TypeStats:
        """Distinct entities and spans per type (what rules 1 and 3 need)."""
        texts: Dict[str, Set[str]] = defaultdict(set)
        spans = Counter()
        for sent in sentences:
            for start, end, label in sent.spans:
                if label != self.untyped_label:
                    texts[label].add(sent.doc[start:end].text.lower())
                    spans[label] += 1
        distinct = {label: len(t) for label, t in sorted(texts.items())}
        rare = {label: n for label, n in distinct.items() if n < self.min_distinct}
        kept = sorted((label for label in distinct if label not in rare), key=lambda lab: (-spans[lab], lab))
        return TypeStats(distinct=distinct, rare=rare, top=kept[: self.top_types])

    def apply(
        self, sentences: Iterable[WeakSentence], stats: TypeStats
    ) -> Tuple[List[WeakSentence], FilterStats]:
        """Rules 1-3 with the given statistics (of these or other sentences).

        RETURNS (Tuple[List[WeakSentence], FilterStats]): The kept sentences (spans
            updated by rule 1, order kept) and the counts.
        """
        untyped, top = self.untyped_label, set(stats.top)
        out = FilterStats(rare_types=dict(stats.rare), top_types=list(stats.top))
        kept: List[WeakSentence] = []
        for sent in sentences:
            out.docs_in += 1
            spans = []
            for start, end, label in sent.spans:
                # A type the statistics never saw (only in a held-out part) counts as rare:
                # the model trained on the other part has no such label.
                if label in stats.rare or (label != untyped and label not in stats.distinct):
                    out.rare_types.setdefault(label, 0)
                    out.rare_spans += 1
                    if not self.rare_to_untyped:
                        continue
                    label = untyped
                spans.append((start, end, label))
            typed = {label for _, _, label in spans if label != untyped}
            if not spans:
                out.no_entity += 1
                continue
            if not typed:
                out.only_untyped += 1
                continue
            n_untyped = sum(1 for _, _, label in spans if label == untyped)
            if typed <= top and n_untyped > self.max_untyped:
                out.frequent_eligible += 1
                if unit_hash(self.seed, "frequent", sent.index) < self.drop_prob:
                    out.frequent += 1
                    continue
            kept.append(sent._replace(spans=tuple(sorted(spans))))
        out.docs_out = len(kept)
        return kept, out


def filter_corpus(sentences: Sequence[WeakSentence], **rules) -> Tuple[List[WeakSentence], FilterStats]:
    """Rules 1-3 with statistics from the same sentences.

    sentences (Sequence[WeakSentence]): The corpus.
    rules: :class:`CorpusRules` parameters.
    RETURNS (Tuple[List[WeakSentence], FilterStats]): Kept sentences and the counts.
    """
    corpus_rules = CorpusRules(**rules)
    return corpus_rules.apply(sentences, corpus_rules.statistics(sentences))


def heldout_indices(n_docs: int, fraction: float = 0.1, seed: int = 0) -> Set[int]:
    """The fixed held-out part of a corpus of ``n_docs`` Docs: the ``round(fraction *
    n_docs)`` indices (at least 1 when fraction > 0 and n_docs > 1) with the smallest
    hash under ``seed``. It depends on nothing but (n_docs, fraction, seed): not on the
    filters, the granularity or the sampler.

    RETURNS (Set[int]): The held-out Doc indices; the rest is the training part.
    """
    if not 0.0 <= fraction < 1.0:
        raise WeakCorpusError(f"heldout_fraction must be in [0, 1), got {fraction}")
    n = round(fraction * n_docs)
    if fraction > 0 and n_docs > 1:
        n = max(n, 1)
    ranked = sorted(range(n_docs), key=lambda i: (unit_hash(seed, "heldout", i), i))
    return set(ranked[:n])


def label_map(
    labels: Iterable[str],
    granularity: str = "fine",
    mapping: Optional[Dict[str, str]] = None,
    *,
    untyped_label: str = UNTYPED_LABEL,
    typed_label: str = TYPED_LABEL,
) -> Dict[str, str]:
    """The relabeling of one type granularity.

    labels (Iterable[str]): The labels present.
    granularity (str): "fine" keeps every label as it is; "coarse" maps every typed label
        to ``typed_label`` ("ENTITY_TYPED") and keeps ``ENTITY``: the seed's few-types
        ablation with two types.
    mapping (Optional[Dict[str, str]]): With "coarse", labels to map otherwise (e.g.
        ``{"Disease": "BIO", "Chemical": "BIO", "ENTITY": "BIO"}`` for one type); labels it
        does not name take the default coarse mapping.
    RETURNS (Dict[str, str]): Old label -> new label, for every label given.
    """
    if granularity not in GRANULARITIES:
        raise WeakCorpusError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    if granularity == "fine":
        if mapping:
            raise WeakCorpusError("coarse_map is only used with granularity 'coarse'")
        return {label: label for label in labels}
    mapping = dict(mapping or {})
    for old, new in mapping.items():
        if not isinstance(new, str) or not new.strip() or new != new.strip():
            raise WeakCorpusError(f"coarse_map: label for {old!r} must be a non-empty string without outer spaces, got {new!r}")
    return {
        label: mapping.get(label, label if label == untyped_label else typed_label) for label in labels
    }


def relabel(sentences: Iterable[WeakSentence], mapping: Dict[str, str]) -> List[WeakSentence]:
    """Relabel the spans of each sentence; spans that become equal are kept once."""
    return [
        sent._replace(spans=tuple(sorted({(s, e, mapping.get(label, label)) for s, e, label in sent.spans})))
        for sent in sentences
    ]


def resolve_ambiguous(
    sentences: Iterable[WeakSentence],
    mode: str = "untyped",
    *,
    ambiguous_label: str = AMBIGUOUS_LABEL,
    untyped_label: str = UNTYPED_LABEL,
) -> List[WeakSentence]:
    """Treat ``AMBIGUOUS`` spans (several types, no winner) before the rules: "untyped"
    relabels them ``ENTITY`` (an entity, type unknown: the default), "drop" removes them,
    "keep" leaves them as a type of their own."""
    if mode not in AMBIGUOUS_MODES:
        raise WeakCorpusError(f"ambiguous must be one of {AMBIGUOUS_MODES}, got {mode!r}")
    if mode == "keep":
        return list(sentences)
    new = None if mode == "drop" else untyped_label
    return [
        sent._replace(spans=tuple(sorted({
            (s, e, new if label == ambiguous_label else label)
            for s, e, label in sent.spans if not (label == ambiguous_label and new is None)
        })))
        for sent in sentences
    ]


def span_counts(sentences: Iterable[WeakSentence]) -> Counter:
    """Spans per label over the sentences (what the before/after plot shows)."""
    return Counter(label for sent in sentences for _, _, label in sent.spans)
