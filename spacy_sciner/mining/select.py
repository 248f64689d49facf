"""Pre-fine-tuning corpus builder: pick N sentences of an auxiliary corpus (Tri-Train §3.3).

Every sentence is annotated with candidates (the mined table as a dictionary, plus acronym
definitions in its document) and scored by its number of candidates, optionally weighted by
its relevance to the labeled training data:

    score = n_candidates * (1 + relevance_weight * relevance)

with relevance the share of its candidates that are training entities ("entity") or the
cosine similarity of its TF-IDF vector to the centroid of the training sentences ("tfidf").
"top" keeps the N highest scores, "bottom" the N lowest and "random" N uniformly drawn
sentences (the Tri-Train Table 4 variants). Selection streams: a heap of N entries is all
that is kept, so memory depends on N, not on the corpus size; with ``n_process`` > 1 each
worker keeps its own top N and the heaps are merged (same selection, see ``parallel``).

Output: a DocBin (``.spacy``) whose docs carry ``doc.spans["candidates"]`` labelled with
their source tags, or JSONL lines ``{"text", "tokens", "candidates": [[start, end, src]]}``.
"""
import contextlib
import heapq
import json
import math
import random
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc, DocBin, Span, SpanGroup
from spacy.vocab import Vocab

from .candidates import annotate, tokenize_documents
from .dictionary import TermDictionary
from ..outputs import atomic_outputs
from .parallel import LineBar, run_partitioned
from .phrases import STOP_WORDS

MODES = ("top", "bottom", "random")
WEIGHTS = ("none", "entity", "tfidf")


def _content_words(words: Sequence[str]) -> List[str]:
    return [w.lower() for w in words if w[0].isalnum() and w.lower() not in STOP_WORDS]


class Relevance:
    """Relevance of a sentence to the labeled training data.

    kind (str): "none", "entity" or "tfidf".
    entities (Iterable[str]): Training entity texts (for "entity").
    sentences (Iterable[Sequence[str]]): Training sentences as tokens (for "tfidf").
    """

    def __init__(self, kind: str = "none", entities: Iterable[str] = (),
                 sentences: Iterable[Sequence[str]] = ()):
        if kind not in WEIGHTS:
            raise ValueError(f"Unknown relevance weighting '{kind}': expected one of {WEIGHTS}")
        self.kind = kind
        self.entities = {" ".join(e.split()).lower() for e in entities}
        self.idf: Dict[str, float] = {}
        self.centroid: Dict[str, float] = {}
        if kind == "tfidf":
            docs = [Counter(_content_words(s)) for s in sentences]
            if not docs:
                raise ValueError("tfidf relevance needs training sentences (--train)")
            df = Counter(w for d in docs for w in d)
            n = len(docs)
            self.idf = {w: math.log((1 + n) / (1 + c)) + 1 for w, c in df.items()}
            self.default_idf = math.log(1 + n) + 1
            centroid: Counter = Counter()
            for d in docs:
                vec = self._vector(d)
                centroid.update(vec)
            norm = math.sqrt(sum(v * v for v in centroid.values())) or 1.0
            self.centroid = {w: v / norm for w, v in centroid.items()}
        if kind == "entity" and not self.entities:
            raise ValueError("entity relevance needs training entities (--train)")

    def _vector(self, counts: Counter) -> Dict[str, float]:
        vec = {w: c * self.idf.get(w, self.default_idf) for w, c in counts.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        return {w: v / norm for w, v in vec.items()}

    def __call__(self, words: Sequence[str], spans: Sequence[Tuple[int, int, str]]) -> float:
        if self.kind == "entity":
            if not spans:
                return 0.0
            hits = sum(" ".join(words[s:e]).lower() in self.entities for s, e, _ in spans)
            return hits / len(spans)
        if self.kind == "tfidf":
            vec = self._vector(Counter(_content_words(words)))
            return sum(v * self.centroid.get(w, 0.0) for w, v in vec.items())
        return 0.0


class Selection:
    """The N entries with the largest keys seen so far (a min-heap), plus counts.

    Entries are (key, tie breaker, (batch, position), words, spans, origin); keys and tie
    breakers are deterministic per batch, so merging the selections of several workers
    gives the same result as one process.
    """

    def __init__(self, n: int):
        self.n = n
        self.heap: List[tuple] = []
        self.counts: Counter = Counter()
        self.lines = 0
        self.occurrences = 0

    def push(self, entry: tuple) -> None:
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, entry)
        elif entry[:3] > self.heap[0][:3]:
            heapq.heapreplace(self.heap, entry)

    def merge(self, other: "Selection") -> None:
        for entry in other.heap:
            self.push(entry)
        self.counts.update(other.counts)
        self.lines += other.lines
        self.occurrences += other.occurrences


def select_batch(batch, index, dictionary, n, mode, relevance, relevance_weight, tokenizer,
                 acronyms, overlap, min_tokens, max_tokens, seed) -> Selection:
    """Score the sentences of one batch of documents and keep its best N."""
    rng = random.Random(seed * 1_000_003 + index)
    selection = Selection(n)
    position = 0
    tokenized = tokenize_documents([[text for _, _, text in doc] for doc in batch], tokenizer,
                                   True, dictionary)
    for doc, (sentences, dict_matches, line_of) in zip(batch, tokenized):
        selection.lines += len(doc)
        spans_per_sentence = annotate(sentences, None, acronyms, overlap, dict_matches)
        for words, spans, k in zip(sentences, spans_per_sentence, line_of):
            selection.counts["sentences"] += 1
            position += 1
            if len(words) < min_tokens or len(words) > max_tokens:
                selection.counts["too_short" if len(words) < min_tokens else "too_long"] += 1
                continue
            selection.occurrences += len(spans)
            score = len(spans) * (1.0 + relevance_weight * relevance(words, spans))
            key = {"top": score, "bottom": -score, "random": rng.random()}[mode]
            # A random tie breaker makes equal scores select uniformly, not by position.
            selection.push((key, rng.random(), (index, position), words, spans, doc[k]))
    return selection


def select_sentences(
    paths: Sequence[str],
    dictionary: Optional[TermDictionary],
    n: int = 30000,
    mode: str = "top",
    relevance: Optional[Relevance] = None,
    relevance_weight: float = 1.0,
    tokenizer: str = "regex",
    doc_boundary: str = "line",
    acronyms: bool = True,
    overlap: str = "longest",
    min_tokens: int = 3,
    max_tokens: int = 200,
    seed: int = 0,
    n_process: int = 1,
    batch_lines: int = 1000,
    progress: bool = True,
) -> Tuple[List[dict], Dict[str, object]]:
    """Stream a corpus and keep N sentences with their candidate spans.

    paths (Sequence[str]): Text files (one sentence or document per line).
    dictionary (Optional[TermDictionary]): Candidate terms with sources (a mined table).
    n (int): Number of sentences to keep.
    mode (str): "top", "bottom" or "random".
    relevance (Optional[Relevance]): Relevance weighting (None: none).
    relevance_weight (float): Lambda in the score formula above.
    tokenizer (str): "regex" or "whitespace" (see ``text``).
    doc_boundary (str): "line" or "blank" (see ``text.read_documents``).
    acronyms (bool): Find acronym definitions/uses within each document.
    overlap (str): Overlap policy of the candidate spans.
    min_tokens (int): Shorter sentences are skipped (counted).
    max_tokens (int): Longer sentences are skipped (counted): an encoder truncates them.
    seed (int): Seed of the random variant and of tie breaking.
    n_process (int): Worker processes (same selection whatever the number).
    batch_lines (int): Lines per batch.
    progress (bool): Show a progress bar.
    RETURNS (Tuple[List[dict], Dict[str, object]]): Selected items ({"words", "spaces",
        "spans", "score", "source"}), best first for "top", and a run report.
    """
    if mode not in MODES:
        raise ValueError(f"Unknown selection mode '{mode}': expected one of {MODES}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    relevance = relevance or Relevance("none")
    if dictionary is not None and len(dictionary):
        dictionary.automaton  # build once before forking

    def work(batch, index):
        return select_batch(batch, index, dictionary, n, mode, relevance, relevance_weight,
                            tokenizer, acronyms, overlap, min_tokens, max_tokens, seed)

    bar = LineBar(f"select {mode}", enabled=progress)
    parts, stats = run_partitioned(list(paths), doc_boundary, batch_lines, work,
                                   lambda: Selection(n), n_process, bar)
    bar.close()
    selection = Selection(n)
    for part in parts:
        selection.merge(part)
    items = []
    for key, _, _, words, spans, (path, line_no, text) in sorted(selection.heap, reverse=True):
        items.append({"words": words, "spaces": _spaces(words, text), "spans": spans,
                      "score": key if mode != "bottom" else -key, "source": f"{path}:{line_no}"})
    counts = selection.counts
    report = {"read": stats.as_dict(), "sentences_seen": counts["sentences"],
              "skipped_too_short": counts["too_short"], "skipped_too_long": counts["too_long"],
              "selected": len(items), "mode": mode, "relevance": relevance.kind,
              "n_process": n_process,
              "candidates_in_selection": sum(len(i["spans"]) for i in items)}
    return items, report


def _spaces(words: Sequence[str], text: str) -> List[bool]:
    """Whether whitespace follows each token in the original line (for Doc.text)."""
    spaces, pos = [], 0
    for word in words:
        found = text.find(word, pos)
        pos = (found if found >= 0 else pos) + len(word)
        spaces.append(pos < len(text) and text[pos].isspace())
    if spaces:
        spaces[-1] = False
    return spaces


def items_to_docs(items: Iterable[dict], vocab: Vocab, spans_key: str = "candidates"):
    """spaCy Docs with the candidate spans in ``doc.spans[spans_key]``."""
    for item in items:
        doc = Doc(vocab, words=item["words"], spaces=item["spaces"])
        group = SpanGroup(doc, name=spans_key)
        for start, end, sources in item["spans"]:
            group.append(Span(doc, start, end, label=sources))
        doc.spans[spans_key] = group
        yield doc


@contextlib.contextmanager
def _msgpack_entry_points_loaded_once():
    """Look srsly's msgpack encoder entry points up once, not once per serialized span group.

    DocBin.add serializes each doc's span groups with a fresh msgpack Packer, which scans
    all installed entry points (~1 ms); for 30k docs that was 3/4 of build-corpus. The
    entry points found now are registered explicitly and scanning is off meanwhile.
    """
    from srsly.msgpack import msgpack_decoders, msgpack_encoders

    registries = (msgpack_encoders, msgpack_decoders)
    before = [registry.entry_points for registry in registries]
    for registry in registries:
        for name, func in registry.get_entry_points().items():
            registry.register(name, func=func)
        registry.entry_points = False
    try:
        yield
    finally:
        for registry, flag in zip(registries, before):
            registry.entry_points = flag


def write_corpus(items: List[dict], output: str, spans_key: str = "candidates") -> None:
    """Write a DocBin (``.spacy``) or JSONL (``.jsonl``) file atomically."""
    if not output.endswith((".jsonl", ".spacy")):
        raise ValueError(f"{output}: output must end in .spacy (DocBin) or .jsonl")
    with atomic_outputs(output) as (tmp,):
        if output.endswith(".jsonl"):
            with open(tmp, "w", encoding="utf8") as out:
                for item in items:
                    out.write(json.dumps(_jsonl_record(item), ensure_ascii=False) + "\n")
        else:
            docbin = DocBin(attrs=["ORTH"], store_user_data=False)
            with _msgpack_entry_points_loaded_once():
                for doc in items_to_docs(items, Vocab(), spans_key):
                    docbin.add(doc)
            docbin.to_disk(tmp)


def _jsonl_record(item: dict) -> dict:
    text = "".join(w + (" " if s else "") for w, s in zip(item["words"], item["spaces"]))
    return {"text": text, "tokens": item["words"],
            "candidates": [[s, e, src] for s, e, src in item["spans"]]}
