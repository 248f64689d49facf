"""``sciner_candidate_miner``: annotate ``doc.spans["candidates"]`` with mined candidates.

Each span's label is its source tag(s): "dict", "pattern", "phrase", several joined with
"|" when the same span comes from several sources. The dictionary (training entities,
gazetteers and a mined candidate table) is serialized with the pipeline; acronym
definitions are found in every processed doc at run time.

    nlp.add_pipe("sciner_candidate_miner", config={"case": "smart"})
    nlp.initialize(lambda: train_examples)   # training entities -> "dict"
    # or: miner.initialize(table="candidates.tsv", gazetteers=["genes.txt"])
"""
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

import srsly
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span, SpanGroup
from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import SimpleFrozenList, ensure_path

from .candidates import SOURCES, CandidateTable, annotate
from .dictionary import TermDictionary

DEFAULT_CONFIG = {
    "spans_key": "candidates",
    "case": "smart",
    "overlap": "longest",
    "acronyms": True,
    "sources": list(SOURCES),
    "min_quality": 0.0,
    "top_percent": 100.0,
    "gold_spans_key": "sc",
}


@Language.factory(
    "sciner_candidate_miner",
    default_config=DEFAULT_CONFIG,
    # Reported by nlp.evaluate (candidate P/R/F vs gold spans), never weighted in training.
    default_score_weights={"candidates_p": None, "candidates_r": None, "candidates_f": None},
)
def make_candidate_miner(
    nlp: Language,
    name: str,
    spans_key: str,
    case: str,
    overlap: str,
    acronyms: bool,
    sources: List[str],
    min_quality: float,
    top_percent: float,
    gold_spans_key: str,
) -> "CandidateMiner":
    """Create a CandidateMiner.

    spans_key (str): Key of doc.spans written.
    case (str): Dictionary case policy: "exact", "lowercase" or "smart".
    overlap (str): "longest" (longest span first, overlapping ones dropped) or "all".
    acronyms (bool): Find acronym definitions and their uses in each doc ("pattern").
    sources (List[str]): Sources to annotate, among "dict", "pattern", "phrase".
    min_quality (float): Phrase-only table rows below this quality are not loaded.
    top_percent (float): Keep only the top l% most frequent table rows.
    gold_spans_key (str): Where initialize() reads training entities in reference docs.
    """
    return CandidateMiner(nlp, name, spans_key=spans_key, case=case, overlap=overlap,
                          acronyms=acronyms, sources=sources, min_quality=min_quality,
                          top_percent=top_percent, gold_spans_key=gold_spans_key)


class CandidateMiner(Pipe):
    """Annotates candidate entity spans from dictionaries, patterns and mined phrases."""

    def __init__(self, nlp: Language, name: str = "sciner_candidate_miner", **cfg):
        self.name = name
        self.vocab = nlp.vocab
        self.cfg = dict(DEFAULT_CONFIG, **cfg)
        unknown = set(self.cfg["sources"]) - set(SOURCES)
        if unknown:
            raise ValueError(f"Unknown candidate sources {sorted(unknown)}: choose from {SOURCES}")
        self.dictionary = TermDictionary(case=self.cfg["case"])
        self.load_report: Dict[str, object] = {}

    @property
    def key(self) -> str:
        return self.cfg["spans_key"]

    def __call__(self, doc: Doc) -> Doc:
        words = [token.text for token in doc]
        use_acronyms = self.cfg["acronyms"] and "pattern" in self.cfg["sources"]
        matches = annotate([words], self.dictionary if len(self.dictionary) else None,
                           acronyms=use_acronyms, overlap=self.cfg["overlap"])[0]
        group = SpanGroup(doc, name=self.key)
        for start, end, sources in matches:
            group.append(Span(doc, start, end, label=sources))
        doc.spans[self.key] = group
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterable[Doc]:
        for doc in stream:
            yield self(doc)

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        """Unlabeled P/R/F of the candidate spans against the gold spans.

        The reference docs' spans under ``gold_spans_key`` (or their ents) are the gold
        standard: this is the candidate quality measure of Tri-Train Table 5.
        RETURNS (Dict[str, object]): ``{key}_p``, ``{key}_r``, ``{key}_f``.
        """
        key, gold_key = self.key, self.cfg["gold_spans_key"]

        def getter(doc: Doc, attr: str):
            if attr in doc.spans:  # the predicted doc
                return doc.spans[attr]
            return doc.spans[gold_key] if gold_key in doc.spans else doc.ents

        scores = Scorer.score_spans(examples, key, getter=getter, labeled=False,
                                    allow_overlap=True)
        return {k: v for k, v in scores.items() if not k.endswith("_per_type")}

    def add_terms(self, terms: Iterable[str], source: str = "dict") -> Dict[str, object]:
        """Add terms with a source tag; returns counts of added/skipped terms."""
        self._check_source(source)
        return self.dictionary.add_many(terms, source).as_dict()

    def add_table(self, table: Union[str, Path, CandidateTable]) -> int:
        """Load mined candidates (a ``sciner mine`` TSV or a CandidateTable)."""
        if not isinstance(table, CandidateTable):
            table = CandidateTable.read(str(table))
        if self.cfg["top_percent"] < 100:
            table = table.top_percent(self.cfg["top_percent"])
        loaded = table.to_dictionary(self.cfg["case"], self.cfg["sources"],
                                     self.cfg["min_quality"])
        for term, sources, case_sensitive in loaded.to_list():
            for source in sources.split("|"):
                self.dictionary.add(term, source, case_sensitive=case_sensitive)
        return len(loaded)

    def initialize(
        self,
        get_examples: Optional[Callable[[], Iterable[Example]]] = None,
        *,
        nlp: Optional[Language] = None,
        table: Optional[str] = None,
        gazetteers: Sequence[str] = SimpleFrozenList(),
        terms_from_examples: bool = True,
    ) -> None:
        """Build the dictionary: training entities, gazetteers and a mined table.

        get_examples (Optional[Callable]): Training examples; the texts of the spans in
            ``reference.spans[gold_spans_key]`` (or ``reference.ents``) become "dict" terms.
        nlp (Optional[Language]): The pipeline (unused; spaCy passes it).
        table (Optional[str]): Path of a candidate table written by ``sciner mine``.
        gazetteers (Sequence[str]): Gazetteer files (plain or BEL), loaded as "dict".
        terms_from_examples (bool): Whether to add the training entities.
        """
        self.dictionary = TermDictionary(case=self.cfg["case"])
        report: Dict[str, object] = {}
        if get_examples is not None and terms_from_examples and "dict" in self.cfg["sources"]:
            report["examples"] = self.add_terms(self._gold_terms(get_examples()), "dict")
        for path in gazetteers:
            if "dict" in self.cfg["sources"]:
                report[str(path)] = self.dictionary.load_gazetteer(str(path)).as_dict()
        if table is not None:
            report["table"] = self.add_table(table)
        self.load_report = report

    def _gold_terms(self, examples: Iterable[Example]) -> Iterable[str]:
        key = self.cfg["gold_spans_key"]
        for eg in examples:
            ref = eg.reference
            spans = ref.spans[key] if key in ref.spans else ref.ents
            for span in spans:
                yield span.text

    def _check_source(self, source: str) -> None:
        if source not in SOURCES:
            raise ValueError(f"Unknown candidate source '{source}': choose from {SOURCES}")

    # Serialization: the config and the dictionary rows; the automaton is rebuilt on load.
    def to_bytes(self, *, exclude: Iterable[str] = SimpleFrozenList()) -> bytes:
        return srsly.msgpack_dumps({"cfg": self.cfg, "terms": self.dictionary.to_list()})

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = SimpleFrozenList()):
        data = srsly.msgpack_loads(bytes_data)
        self._load(data["cfg"], data["terms"])
        return self

    def to_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = SimpleFrozenList()):
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        srsly.write_json(path / "cfg", self.cfg)
        srsly.write_jsonl(path / "terms.jsonl", (
            {"text": t, "sources": s, "case_sensitive": c} for t, s, c in self.dictionary.to_list()
        ))

    def from_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = SimpleFrozenList()):
        path = ensure_path(path)
        rows = [(r["text"], r["sources"], r["case_sensitive"])
                for r in srsly.read_jsonl(path / "terms.jsonl")]
        self._load(srsly.read_json(path / "cfg"), rows)
        return self

    def _load(self, cfg: Dict[str, object], rows: List) -> None:
        self.cfg = dict(DEFAULT_CONFIG, **cfg)
        self.dictionary = TermDictionary.from_list(rows, case=self.cfg["case"])
