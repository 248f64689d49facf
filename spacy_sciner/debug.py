"""Span statistics of a DocBin, per label and per length (``sciner debug-data``).

``spacy debug data`` only knows spaCy's own components; this looks at any span group:
how many spans of each label, how long they are, how many are nested in or cross
another span, how many are longer than ``max_span_length`` (sciner_spancat never
enumerates those, so they cost recall), and how many are empty or start/end on
whitespace or on punctuation other than matched brackets/quotes (usually conversion
errors).
"""
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, Tuple

from spacy.tokens import Doc, Span

# Per-label counters, in the order the table prints them.
LABEL_FIELDS = (
    "count", "nested", "containing", "crossing", "longer_than_max", "empty", "whitespace_edged", "punct_edged",
)
# Kinds of suspicious spans whose first examples are kept.
EXAMPLE_KINDS = ("longer_than_max", "empty", "whitespace_edged", "punct_edged", "crossing")
MAX_EXAMPLES = 5


BRACKETS = {"(": ")", "[": "]", "{": "}"}
QUOTES = {'"', "'", "``", "''", "\u201c", "\u201d"}


def _balanced(texts: List[str]) -> bool:
    """Whether the brackets among `texts` open and close in order."""
    stack: List[str] = []
    for text in texts:
        if text in BRACKETS:
            stack.append(BRACKETS[text])
        elif text in BRACKETS.values():
            if not stack or stack.pop() != text:
                return False
    return not stack


def _edge_flags(span: Span) -> Dict[str, bool]:
    """empty; whitespace_edged; punct_edged: punctuation at an edge other than a bracket
    closed (or opened) inside the span or a pair of quotes around it, so "( CCRs )" and
    "support vector machine ( SVM )" are fine, "SVM )" and "machine ," are not."""
    doc = span.doc
    if span.start >= span.end:
        return {"empty": True, "whitespace_edged": False, "punct_edged": False}
    first, last = doc[span.start], doc[span.end - 1]
    texts = [token.text for token in span]
    brackets_ok = _balanced(texts)
    quoted = len(span) > 1 and first.text in QUOTES and last.text in QUOTES

    def bad(token) -> bool:
        if not token.is_punct:
            return False
        if token.text in BRACKETS or token.text in BRACKETS.values():
            return not brackets_ok
        return not (token.text in QUOTES and quoted)

    return {
        "empty": False,
        "whitespace_edged": first.is_space or last.is_space,
        "punct_edged": bad(first) or bad(last),
    }


def _overlap_flags(start: int, end: int, bounds: List[Tuple[int, int]]) -> Dict[str, bool]:
    """Whether the span [start, end) lies inside, holds or crosses another of the extents."""
    flags = {"nested": False, "containing": False, "crossing": False}
    if start == end:  # an empty span nests in nothing
        return flags
    for other_start, other_end in bounds:
        if (other_start, other_end) == (start, end):
            continue
        if other_start <= start and end <= other_end:
            flags["nested"] = True
        elif start <= other_start and other_end <= end:
            flags["containing"] = True
        elif other_start < end and start < other_end:
            flags["crossing"] = True
    return flags


def _pair_counts(bounds: List[Tuple[int, int]]) -> Counter:
    """Nested and crossing pairs among sorted, distinct, non-empty extents."""
    pairs: Counter = Counter()
    for a, (start, end) in enumerate(bounds):
        for inner_start, inner_end in bounds[a + 1:]:
            if inner_start >= end:
                break
            if inner_end <= end or start == inner_start:
                pairs["nested_pairs"] += 1
            else:
                pairs["crossing_pairs"] += 1
    return pairs


def span_statistics(docs: Iterable[Doc], spans_key: str = "sc", max_span_length: int = 8) -> Dict[str, object]:
    """Count the spans of ``doc.spans[spans_key]`` over `docs`.

    docs (Iterable[Doc]): The documents.
    spans_key (str): The span group to look at.
    max_span_length (int): Spans with more tokens are counted as ``longer_than_max``.
    RETURNS (Dict[str, object]): Totals (docs, tokens, spans, docs_without_key,
        docs_without_spans, nested_pairs, crossing_pairs, same_extent_pairs (same tokens,
        different labels), duplicates, and the per-span counts of LABEL_FIELDS),
        ``labels`` (label -> counters and mean/max length), ``lengths`` (length ->
        count) and ``examples`` (kind -> a few "doc N: 'text' LABEL" strings).
    """
    totals: Counter = Counter()
    labels: Dict[str, Counter] = defaultdict(Counter)
    label_tokens: Counter = Counter()
    label_max: Dict[str, int] = {}
    lengths: Counter = Counter()
    examples: Dict[str, List[str]] = {kind: [] for kind in EXAMPLE_KINDS}
    for i, doc in enumerate(docs):
        totals["docs"] += 1
        totals["tokens"] += len(doc)
        if spans_key not in doc.spans:
            totals["docs_without_key"] += 1
        spans = list(doc.spans[spans_key]) if spans_key in doc.spans else []
        if not spans:
            totals["docs_without_spans"] += 1
        seen = Counter((s.start, s.end, s.label_) for s in spans)
        totals["duplicates"] += sum(n - 1 for n in seen.values())
        extents = Counter((s.start, s.end) for s in spans)
        totals["same_extent_pairs"] += sum(n * (n - 1) // 2 for n in extents.values())
        bounds = sorted(b for b in extents if b[0] < b[1])  # empty spans nest in nothing
        for span in spans:
            label, length = span.label_, span.end - span.start
            flags = _edge_flags(span)
            flags["longer_than_max"] = length > max_span_length
            flags.update(_overlap_flags(span.start, span.end, bounds))
            counts = labels[label]
            counts["count"] += 1
            totals["spans"] += 1
            lengths[length] += 1
            label_tokens[label] += length
            label_max[label] = max(label_max.get(label, 0), length)
            for name in LABEL_FIELDS[1:]:
                if flags[name]:
                    counts[name] += 1
                    totals[name] += 1
                    if name in examples and len(examples[name]) < MAX_EXAMPLES:
                        examples[name].append(f"doc {i}: {span.text!r} {label} (tokens {span.start}-{span.end})")
        totals.update(_pair_counts(bounds))
    label_table = {
        label: {
            **{name: counts[name] for name in LABEL_FIELDS},
            "mean_length": label_tokens[label] / counts["count"],
            "max_length": label_max[label],
        }
        for label, counts in sorted(labels.items())
    }
    result = {name: totals[name] for name in (
        "docs", "tokens", "spans", "docs_without_key", "docs_without_spans", "nested_pairs",
        "crossing_pairs", "same_extent_pairs", "duplicates",
    )}
    result.update({name: totals[name] for name in LABEL_FIELDS[1:]})
    result.update({
        "spans_key": spans_key,
        "max_span_length": max_span_length,
        "labels": label_table,
        "lengths": dict(sorted(lengths.items())),
        "examples": {kind: found for kind, found in examples.items() if found},
    })
    return result


def format_statistics(stats: Dict[str, object], bar_width: int = 40) -> List[str]:
    """The report of ``span_statistics`` as printable lines."""
    L = stats["max_span_length"]
    lines = [
        f"{stats['docs']} docs, {stats['tokens']} tokens, {stats['spans']} spans in doc.spans[{stats['spans_key']!r}]"
        f" ({stats['docs_without_spans']} docs without spans, {stats['docs_without_key']} without the key)",
        "",
        f"{'label':<24}{'count':>7}{'mean len':>9}{'max len':>8}{'>' + str(L):>6}{'nested':>8}"
        f"{'contains':>9}{'crossing':>9}{'empty':>6}{'ws-edge':>8}{'punct-edge':>11}",
    ]
    for label, row in stats["labels"].items():
        lines.append(
            f"{label[:23]:<24}{row['count']:>7}{row['mean_length']:>9.2f}{row['max_length']:>8}{row['longer_than_max']:>6}"
            f"{row['nested']:>8}{row['containing']:>9}{row['crossing']:>9}{row['empty']:>6}{row['whitespace_edged']:>8}"
            f"{row['punct_edged']:>11}"
        )
    lines += ["", "length  count"]
    lengths = stats["lengths"]
    top = max(lengths.values(), default=1)
    longer = sum(n for length, n in lengths.items() if length > L)
    rows = [(str(length), lengths.get(length, 0)) for length in range(0 if 0 in lengths else 1, L + 1)]
    rows.append((f">{L}", longer))
    for name, n in rows:
        lines.append(f"{name:>6}{n:>7}  {'#' * round(bar_width * n / top)}")
    lines += [
        "",
        f"nested pairs {stats['nested_pairs']}, crossing pairs {stats['crossing_pairs']}, "
        f"same tokens with different labels {stats['same_extent_pairs']}, exact duplicates {stats['duplicates']}",
        f"longer than max_span_length={L}: {stats['longer_than_max']}; empty: {stats['empty']}; "
        f"whitespace at an edge: {stats['whitespace_edged']}; punctuation at an edge: {stats['punct_edged']}",
    ]
    for kind, found in stats["examples"].items():
        lines.append(f"examples ({kind.replace('_', ' ')}):")
        lines += [f"  {example}" for example in found]
    return lines
