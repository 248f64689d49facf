"""Noise report: how weak labels compare with gold spans on a labeled set.

For each type: the weak spans with that label against the gold spans with that label.

* exact: a weak span is right when a gold span has the same start, end and label;
  P = right weak spans / weak spans, R = gold spans found exactly / gold spans.
* overlap: a weak span is right when it shares a token with a gold span of its label;
  R counts the gold spans that share a token with a weak span of their label.

Two more rows: ``ALL`` (every type, micro-averaged) and ``ANY_TYPE`` (labels ignored:
boundaries only, which is what untyped ``ENTITY`` spans can be judged on).
"""
from collections import Counter
from typing import Dict, Iterable, List, Sequence, Tuple

Spans = Sequence[Tuple[int, int, str]]


def _overlaps(span: Tuple[int, int, str], others: Spans, typed: bool) -> bool:
    s, e, label = span
    return any(s < e2 and s2 < e and (not typed or label == l2) for s2, e2, l2 in others)


def noise_report(pairs: Iterable[Tuple[Spans, Spans]]) -> Dict[str, Dict[str, float]]:
    """Per-type precision/recall of weak spans against gold spans.

    pairs (Iterable[Tuple[Spans, Spans]]): Per doc, (weak spans, gold spans) as
        (start, end, label) triples.
    RETURNS (Dict[str, Dict[str, float]]): type -> counts (weak, gold, exact and overlap
        hits) and p_exact, r_exact, f_exact, p_overlap, r_overlap (percent).
    """
    counts: Dict[str, Counter] = {}
    for weak, gold in pairs:
        gold_set = set(gold)
        gold_bounds = {(s, e) for s, e, _ in gold}
        weak_set = set(weak)
        weak_bounds = {(s, e) for s, e, _ in weak}
        for key, typed in (("label", True), ("ANY_TYPE", False)):
            for span in weak:
                row = counts.setdefault(span[2] if typed else key, Counter())
                row["weak"] += 1
                row["weak_exact"] += (span in gold_set) if typed else (span[:2] in gold_bounds)
                row["weak_overlap"] += _overlaps(span, gold, typed)
            for span in gold:
                row = counts.setdefault(span[2] if typed else key, Counter())
                row["gold"] += 1
                row["gold_exact"] += (span in weak_set) if typed else (span[:2] in weak_bounds)
                row["gold_overlap"] += _overlaps(span, weak, typed)
    total: Counter = Counter()
    for label, row in counts.items():
        if label != "ANY_TYPE":
            total.update(row)
    if counts:
        counts["ALL"] = total
    return {label: _scores(row) for label, row in sorted(counts.items(), key=_row_order)}


def _row_order(item) -> Tuple[int, str]:
    return ({"ALL": 1, "ANY_TYPE": 2}.get(item[0], 0), item[0])


def _pct(num: int, den: int) -> float:
    return round(100.0 * num / den, 2) if den else 0.0


def _scores(row: Counter) -> Dict[str, float]:
    p, r = _pct(row["weak_exact"], row["weak"]), _pct(row["gold_exact"], row["gold"])
    return {
        "weak": row["weak"], "gold": row["gold"],
        "weak_exact": row["weak_exact"], "gold_exact": row["gold_exact"],
        "weak_overlap": row["weak_overlap"], "gold_overlap": row["gold_overlap"],
        "p_exact": p, "r_exact": r, "f_exact": round(2 * p * r / (p + r), 2) if p + r else 0.0,
        "p_overlap": _pct(row["weak_overlap"], row["weak"]),
        "r_overlap": _pct(row["gold_overlap"], row["gold"]),
    }


def format_report(report: Dict[str, Dict[str, float]]) -> List[str]:
    """The report as aligned text lines (a header, then one line per type)."""
    lines = [f"{'type':<32} {'weak':>7} {'gold':>7} {'P exact':>8} {'R exact':>8} "
             f"{'F exact':>8} {'P overlap':>10} {'R overlap':>10}"]
    for label, row in report.items():
        lines.append(f"{label:<32} {row['weak']:>7} {row['gold']:>7} {row['p_exact']:>8.1f} "
                     f"{row['r_exact']:>8.1f} {row['f_exact']:>8.1f} "
                     f"{row['p_overlap']:>10.1f} {row['r_overlap']:>10.1f}")
    return lines
