"""displaCy for span predictions: a colour per label, and gold vs predicted pages.

displaCy's span style gives every label it has no colour for the same grey, and
``spacy evaluate --displacy-path`` only renders spaCy's own components. Here:

* ``label_colors(labels)`` / ``displacy_options(labels)``: a fixed colour per label, for
  ``displacy.render(doc, style="span", options=displacy_options(labels))``;
* ``render_comparison(...)``: one HTML page with, per doc, the gold spans above the
  predicted ones (both nested, same colours) and what differs (missed / spurious);
* ``sciner render``: that page for a pipeline (or a DocBin of predictions) on a gold
  DocBin, or for a pipeline on plain text.
"""
import html
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from spacy import displacy
from spacy.tokens import Doc

# Light colours (dark text stays readable), as distinct from each other as 20 allow.
PALETTE = (
    "#7aecec", "#feca74", "#c887fb", "#bfeeb7", "#ff9561", "#aa9cfc", "#ffeb80", "#9cc9cc",
    "#f0a3c8", "#b0d2ff", "#e4e7d2", "#ddb8f8", "#ffc8a8", "#a8e6a1", "#f7b2b2", "#c7d7a0",
    "#ffd9f0", "#b5f0e0", "#e8c39e", "#d0d0ff",
)


def label_colors(labels: Iterable[str]) -> Dict[str, str]:
    """A colour per label, the same for the same label set whatever its order.

    The sorted labels take the palette's colours in turn (distinct up to 20 labels);
    further labels get light colours whose hues step by the golden angle (all distinct).

    labels (Iterable[str]): Span labels (duplicates ignored).
    RETURNS (Dict[str, str]): label -> CSS colour.
    """
    colors = {}
    for i, label in enumerate(sorted(set(labels))):
        if i < len(PALETTE):
            colors[label] = PALETTE[i]
        else:
            rank = i - len(PALETTE)
            colors[label] = f"hsl({rank * 137.508 % 360:.1f}, 70%, {76 + rank % 3 * 4}%)"
    return colors


def displacy_options(labels: Iterable[str], spans_key: str = "sc") -> Dict[str, object]:
    """Options for ``displacy.render(doc, style="span", options=...)``.

    labels (Iterable[str]): The labels to colour, e.g. ``nlp.get_pipe("sciner_spancat").labels``.
    spans_key (str): The span group to draw.
    RETURNS (Dict[str, object]): ``{"spans_key": ..., "colors": {label: colour}}``.
    """
    return {"spans_key": spans_key, "colors": label_colors(labels)}


SpanKey = Tuple[int, int, str]


def span_set(doc: Doc, key: str) -> Set[SpanKey]:
    """(start, end, label) of every span in ``doc.spans[key]`` (empty if the key is absent)."""
    return {(s.start, s.end, s.label_) for s in doc.spans[key]} if key in doc.spans else set()


def _describe(doc: Doc, spans: Iterable[SpanKey]) -> str:
    return ", ".join(f"{doc[s:e].text!r} {label}" for s, e, label in sorted(spans)) or "none"


def _render_group(doc: Doc, key: str, options: Dict[str, object]) -> str:
    if key not in doc.spans or not len(doc.spans[key]):
        return f'<div class="spans">{html.escape(doc.text)}</div>'
    return displacy.render(doc, style="span", page=False, options={**options, "spans_key": key})


def render_comparison(
    predicted: Sequence[Doc],
    gold: Optional[Sequence[Doc]],
    labels: Iterable[str],
    *,
    spans_key: str = "sc",
    gold_key: str = "sc",
    title: str = "sciner predictions",
    only_errors: bool = False,
) -> Tuple[str, Dict[str, int]]:
    """An HTML page: per doc, gold spans above predicted ones, then missed/spurious.

    predicted (Sequence[Doc]): Docs with predictions in ``doc.spans[spans_key]``.
    gold (Optional[Sequence[Doc]]): The same docs (same tokens) with gold spans in
        ``doc.spans[gold_key]``, or None to show predictions only.
    labels (Iterable[str]): Labels to colour (those found in the docs are added).
    spans_key (str): Span group of the predictions.
    gold_key (str): Span group of the gold spans.
    title (str): Page title.
    only_errors (bool): Show only docs whose predictions differ from the gold.
    RETURNS (Tuple[str, Dict[str, int]]): The page, and counts: docs shown, true
        positives, false positives (spurious), false negatives (missed).
    """
    pairs = list(zip(predicted, gold if gold is not None else [None] * len(predicted)))
    all_labels = set(labels)
    for pred, ref in pairs:
        all_labels.update(label for _, _, label in span_set(pred, spans_key))
        if ref is not None:
            all_labels.update(label for _, _, label in span_set(ref, gold_key))
    options = displacy_options(all_labels, spans_key)
    counts = {"docs": 0, "tp": 0, "fp": 0, "fn": 0}
    blocks = []
    for i, (pred, ref) in enumerate(pairs):
        body, differs = _doc_body(pred, ref, spans_key, gold_key, options, counts)
        if only_errors and not differs:
            continue
        counts["docs"] += 1
        blocks.append(f'<section><h2>doc {i}</h2>{body}</section>')
    summary = f"{counts['docs']} docs shown"
    if gold is not None:
        summary += f"; spans: {counts['tp']} correct, {counts['fn']} missed, {counts['fp']} spurious"
    page = _page(title, summary, options, blocks)
    return page, counts


def _doc_body(pred: Doc, ref: Optional[Doc], spans_key: str, gold_key: str, options: Dict,
              counts: Dict[str, int]) -> Tuple[str, bool]:
    """One doc's HTML (gold above predicted, then missed/spurious) and whether its
    predictions differ from the gold (True without gold); adds to ``counts``."""
    pred_spans = span_set(pred, spans_key)
    if ref is None:
        return f'<h3>predicted</h3>{_render_group(pred, spans_key, options)}', True
    gold_spans = span_set(ref, gold_key)
    missed, spurious = gold_spans - pred_spans, pred_spans - gold_spans
    counts["tp"] += len(gold_spans & pred_spans)
    counts["fn"] += len(missed)
    counts["fp"] += len(spurious)
    body = (
        f'<h3>gold</h3>{_render_group(ref, gold_key, options)}'
        f'<h3>predicted</h3>{_render_group(pred, spans_key, options)}'
        f'<p class="diff"><b>missed</b>: {html.escape(_describe(ref, missed))}<br>'
        f'<b>spurious</b>: {html.escape(_describe(pred, spurious))}</p>'
    )
    return body, bool(missed or spurious)


def _page(title: str, summary: str, options: Dict, blocks: List[str]) -> str:
    """The whole HTML page: title, summary, label legend and the doc blocks."""
    legend = " ".join(
        f'<span style="background:{color};padding:2px 6px;margin:2px;border-radius:3px">{html.escape(label)}</span>'
        for label, color in options["colors"].items()
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        '<style>body{font-family:sans-serif;margin:2em;max-width:70em}section{border-top:1px solid #ccc;'
        'margin-top:1.5em}h2{font-size:1em;color:#666}h3{font-size:.9em;margin:.6em 0 0}'
        '.diff{font-size:.85em;color:#444}</style></head><body>'
        f'<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p><p>{legend}</p>'
        + "".join(blocks)
        + "</body></html>"
    )


def retokenized_copies(docs: Sequence[Doc], vocab) -> List[Doc]:
    """Plain copies of `docs` (words and spaces only) in `vocab`, for a pipeline to annotate
    on exactly the gold tokenization."""
    return [Doc(vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]) for doc in docs]
