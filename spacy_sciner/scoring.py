"""Scorer for span-based NER: nested spans and flat entities, in spaCy's score format.

``spacy-sciner.span_scorer.v1`` returns a function that ``spacy train``, ``spacy
evaluate`` and ``nlp.evaluate`` call with the component's cfg as keyword arguments. It
reports

* ``spans_{key}_p/_r/_f`` and ``spans_{key}_per_type``: exact (start, end, label)
  matches of ``doc.spans[key]`` against the reference's ``doc.spans[key]``, overlapping
  and nested spans allowed (``Scorer.score_spans(allow_overlap=True)``);
* ``ents_p/_r/_f`` and ``ents_per_type``: ``doc.ents`` against the reference's
  ``doc.ents`` with spaCy's own NER scorer (``get_ner_prf``), unless the component does
  not write ``doc.ents`` (``write_ents=False``).

Honest recall: every reference doc is scored, and every gold span counts, including
spans the component can never predict (longer than ``max_span_length``, or pruned by
the filter); they are false negatives. Unlike spaCy's spancat scorer, a reference doc
without the key is scored as "no gold spans" instead of being skipped, so predictions on
it count as false positives: an evaluation set is assumed to be fully annotated.
"""
from typing import Any, Callable, Dict, Iterable

from spacy.scorer import Scorer, get_ner_prf
from spacy.training import Example
from spacy.util import registry

DEFAULT_SPANS_KEY = "sc"


def score_spans_and_ents(
    examples: Iterable[Example],
    *,
    spans_key: str = DEFAULT_SPANS_KEY,
    write_ents: bool = True,
    **cfg: Any,
) -> Dict[str, Any]:
    """Score nested spans and flat entities.

    examples (Iterable[Example]): Predicted docs paired with reference docs.
    spans_key (str): The ``doc.spans`` key to score.
    write_ents (bool): Whether to score ``doc.ents`` as well.
    cfg: Other settings of the component (ignored), as passed by ``Pipe.score``.
    RETURNS (Dict[str, Any]): ``spans_{key}_p/_r/_f/_per_type`` and, with
        ``write_ents``, ``ents_p/_r/_f/_per_type``.
    """
    examples = list(examples)
    attr = f"spans_{spans_key}"
    scores = Scorer.score_spans(
        examples,
        attr,
        getter=lambda doc, _: doc.spans.get(spans_key, []),
        has_annotation=None,
        allow_overlap=True,
    )
    if write_ents:
        scores.update(get_ner_prf(examples))
    return scores


@registry.scorers("spacy-sciner.span_scorer.v1")
def make_span_scorer() -> Callable[..., Dict[str, Any]]:
    """Registered scorer: see ``score_spans_and_ents``."""
    return score_spans_and_ents
