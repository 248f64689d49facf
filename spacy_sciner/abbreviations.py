"""``sciner_abbreviations``: give defined short forms the label of their long form.

A model (or a gazetteer) that finds "adenomatous polyposis" rarely finds "FAP": abbreviations
are short, ambiguous and missing from dictionaries. Documents define them, though: in
"familial adenomatous polyposis ( FAP )" the short form means what its long form means.
Placed after ``sciner_spancat`` (or any component writing ``doc.spans`` / ``doc.ents``), this
component finds the document's acronym definitions (Schwartz & Hearst, as the candidate
miner does: ``mining.acronyms``), and when a predicted span ends where a long form ends it
adds the short form, and every other use of it in the document, with that span's label.
Predicted spans win: a short form overlapping one is left alone. It has no weights and no
threshold; it works per ``Doc``, so it sees more definitions when a Doc is a whole abstract
than when it is one sentence.

    nlp.add_pipe("sciner_abbreviations", after="sciner_spancat")

``sciner calibrate --abbreviations auto`` makes that choice on dev (``choose_on_dev``).
"""
from typing import Any, Dict, Iterable, List, Optional

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

from .mining.acronyms import abbreviation_spans
from .scoring import DEFAULT_SPANS_KEY, score_spans_and_ents

MODES = ("off", "on", "auto")


class AbbreviationPropagator:
    """Adds the short forms of labeled long forms to a span group and/or ``doc.ents``.

    spans_key (Optional[str]): Span group to extend (its ``attrs["scores"]``, if any, get
        the long form's score for each new span); None: none.
    ents (bool): Extend ``doc.ents`` too (new entities never overlap existing ones).
    """

    def __init__(self, name: str = "sciner_abbreviations",
                 spans_key: Optional[str] = DEFAULT_SPANS_KEY, ents: bool = True):
        self.name = name
        self.spans_key = spans_key
        self.ents = ents

    def __call__(self, doc: Doc) -> Doc:
        words = [t.text for t in doc]
        if self.spans_key is not None and self.spans_key in doc.spans:
            self._extend_group(doc, words)
        if self.ents and doc.ents:
            known = [(e.start, e.end, e.label_, "") for e in doc.ents]
            new = [Span(doc, s, e, label=label) for s, e, label, _ in abbreviation_spans(words, known)]
            if new:
                doc.ents = sorted([*doc.ents, *new], key=lambda span: span.start)
        return doc

    def _extend_group(self, doc: Doc, words: List[str]) -> None:
        group = doc.spans[self.spans_key]
        # The source field carries the long form's index, to copy its score.
        known = [(s.start, s.end, s.label_, str(i)) for i, s in enumerate(group)]
        new = abbreviation_spans(words, known)
        if not new:
            return
        scores = group.attrs.get("scores")
        group.extend([Span(doc, s, e, label=label) for s, e, label, _ in new])
        if scores is not None and len(scores) == len(known):
            source = [int(src.split(":", 1)[1]) for _, _, _, src in new]
            group.attrs["scores"] = numpy.concatenate(
                [numpy.asarray(scores, dtype="f"), numpy.asarray(scores, dtype="f")[source]])


@Language.factory(
    "sciner_abbreviations",
    assigns=["doc.spans", "doc.ents"],
    default_config={"spans_key": DEFAULT_SPANS_KEY, "ents": True},
)
def make_abbreviation_propagator(nlp: Language, name: str, spans_key: Optional[str],
                                 ents: bool) -> AbbreviationPropagator:
    """Create a ``sciner_abbreviations`` component (see the module docstring)."""
    return AbbreviationPropagator(name, spans_key, ents)


def choose_on_dev(nlp: Language, examples: Iterable[Example], *, after: str, mode: str = "auto",
                  batch_size: int = 64) -> Dict[str, Any]:
    """Add ``sciner_abbreviations`` after the component ``after``, or not, by its dev score.

    The pipeline predicts the dev docs once; the component is applied to copies of those
    predictions, and both versions are scored with ``after``'s span key (exact spans, as
    ``sciner calibrate`` scores its decision rule).

    nlp (Language): The pipeline, changed in place when the component is added.
    examples (Iterable[Example]): Dev examples with gold spans.
    after (str): The span-writing component to follow; its ``spans_key`` and ``write_ents``
        settings are copied.
    mode (str): "on": add it whatever the score; "auto": add it only if the dev span F rises;
        "off": leave the pipeline alone (nothing is predicted).
    batch_size (int): Docs per batch.
    RETURNS (Dict[str, Any]): ``mode``, ``added`` and, unless "off", ``dev_f_without`` /
        ``dev_f_with`` (span F) and ``spans_added`` (short forms the component added on dev).
    """
    if mode not in MODES:
        raise ValueError(f"abbreviations mode must be one of {MODES}, got {mode!r}")
    if mode == "off":
        return {"mode": mode, "added": False}
    if "sciner_abbreviations" in nlp.pipe_names:
        return {"mode": mode, "added": False, "note": "already in the pipeline"}
    cfg = getattr(nlp.get_pipe(after), "cfg", {})
    key, ents = cfg.get("spans_key", DEFAULT_SPANS_KEY), bool(cfg.get("write_ents", True))
    examples = list(examples)
    preds = list(nlp.pipe((eg.predicted.copy() for eg in examples), batch_size=batch_size))
    propagator = AbbreviationPropagator(spans_key=key, ents=ents)
    extended = [propagator(doc.copy()) for doc in preds]
    f_key = f"spans_{key}_f"
    report: Dict[str, Any] = {"mode": mode}
    for name, docs in (("without", preds), ("with", extended)):
        scores = score_spans_and_ents([Example(d, eg.reference) for d, eg in zip(docs, examples)],
                                      spans_key=key, write_ents=False)
        report[f"dev_f_{name}"] = float(scores[f_key] or 0.0)
    report["spans_added"] = sum(len(e.spans.get(key, [])) - len(p.spans.get(key, []))
                                for p, e in zip(preds, extended))
    report["added"] = mode == "on" or report["dev_f_with"] > report["dev_f_without"]
    if report["added"]:
        nlp.add_pipe("sciner_abbreviations", after=after, config={"spans_key": key, "ents": ents})
    return report
