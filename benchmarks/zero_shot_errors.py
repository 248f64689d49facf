"""Where the zero-shot weak model and plain gazetteer matching go wrong (issue 12): exact
labelled spans on test, errors sorted into kinds, recall on abbreviations vs other mentions.

It reads what ``weak_cnn.py`` left in its work folder for a data set whose weak labels are its
target labels (NCBI-disease: Disease): the weak model ``pretrain-<row>/model-best`` (argmax, as
the zero-shot row of ``weak_cnn.md`` scores it) and the gazetteer's labels of the test text
(``gazetteer_test.spacy``, spans "weak"). Nothing is tuned here; the test set is only scored.

* false positives: ``inside gold`` (a sub-span of a gold mention: a boundary error),
  ``covers gold``, ``crosses gold``, ``no gold overlap`` (a spurious mention);
* false negatives: ``overlapped by a prediction`` (found with wrong boundaries) or
  ``no prediction near`` (missed);
* recall on gold mentions that are abbreviations (``is_abbreviation``: at most 10 characters
  without spaces, two or more capitals or digits, no run of three lower-case letters: "A-T",
  "DM", "MPS IVA") and on the rest.

    python benchmarks/zero_shot_errors.py --dataset ncbi_disease --rows trf-fine-plain trf-fine-plain-abbr

Writes benchmarks/results/zero_shot_errors.{json,md}.
"""
import argparse
import collections
import json
import re
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

import spacy
from spacy.tokens import Doc, DocBin

from spacy_sciner.mining.acronyms import abbreviation_spans
from spacy_sciner.weak.noise import noise_report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import convergence  # noqa: E402

Key = Tuple[int, int, str]


def is_abbreviation(text: str) -> bool:
    """Whether a mention reads as an abbreviation ("A - T", "DM", "MPS IVA", "aAPC")."""
    compact = text.replace(" ", "")
    strong = sum(c.isupper() or c.isdigit() for c in compact)
    return 0 < len(compact) <= 10 and strong >= 2 and not re.search(r"[a-z]{3}", compact)


def span_dict(spans: Iterable) -> Dict[Key, str]:
    return {(s.start, s.end, s.label_): s.text for s in spans}


def fp_kind(span: Key, gold: Iterable[Key]) -> str:
    overlapping = [g for g in gold if g[0] < span[1] and span[0] < g[1]]
    if not overlapping:
        return "no gold overlap"
    if any(g[0] <= span[0] and span[1] <= g[1] for g in overlapping):
        return "inside gold"
    if any(span[0] <= g[0] and g[1] <= span[1] for g in overlapping):
        return "covers gold"
    return "crosses gold"


def breakdown(gold: List[Dict[Key, str]], pred: List[Dict[Key, str]], top: int = 15) -> dict:
    """Compare predicted with gold spans, doc by doc (both: {(start, end, label): text})."""
    count = collections.Counter()
    fps, fns = collections.Counter(), collections.Counter()
    fp_text, fn_text = collections.Counter(), collections.Counter()
    for g, p in zip(gold, pred, strict=True):
        for key, text in g.items():
            group = "abbreviation" if is_abbreviation(text) else "other"
            count[f"gold {group}"] += 1
            if key in p:
                count[f"found {group}"] += 1
                continue
            near = any(k[0] < key[1] and key[0] < k[1] for k in p)
            fns["overlapped by a prediction" if near else "no prediction near"] += 1
            fn_text[text.lower()] += 1
        for key, text in p.items():
            if key not in g:
                fps[fp_kind(key, g)] += 1
                fp_text[text.lower()] += 1
    # P / R / F: label-weak's noise report (its exact, all-types row), as weak_cnn.py's gazetteer row
    total = noise_report((list(p), list(g)) for g, p in zip(gold, pred)).get("ALL", {})
    scores = {k: round(total.get(f"{k}_exact", 0.0), 1) for k in ("p", "r", "f")}
    tp = count["found abbreviation"] + count["found other"]
    n_pred, n_gold = sum(len(p) for p in pred), sum(len(g) for g in gold)
    recall = {group: round(100 * count[f"found {group}"] / max(count[f"gold {group}"], 1), 1)
              for group in ("abbreviation", "other")}
    return {**scores, "tp": tp, "fp": n_pred - tp, "fn": n_gold - tp,
            "gold_abbreviations": count["gold abbreviation"], "gold_other": count["gold other"],
            "recall_by_kind": recall, "fp_kinds": dict(fps), "fn_kinds": dict(fns),
            "top_fp": fp_text.most_common(top), "top_fn": fn_text.most_common(top)}


def abbreviation_potential(docs: Iterable[Doc], spans_key: str = "weak") -> dict:
    """What label-weak's ``--abbreviations`` rule (``abbreviation_spans``) adds to weak docs: the
    short forms of definitions whose long form ends with a weak span ("chronic lymphocytic
    [leukemia] ( CLL )"), and their other uses in the same doc."""
    n = 0
    for doc in docs:
        spans = [(s.start, s.end, s.label_, "") for s in doc.spans.get(spans_key, [])]
        if spans:
            n += len(abbreviation_spans([t.text for t in doc], spans))
    return {"short_form_spans": n}


def predict(model: Path, docs: List[Doc], abbreviations: bool = False) -> List[Dict[Key, str]]:
    """The model on the gold docs' words (their tokenization), spans of its spans_key; with
    `abbreviations`, ``sciner_abbreviations`` runs after it."""
    nlp = spacy.load(model)
    if abbreviations:
        nlp.add_pipe("sciner_abbreviations")
    key = nlp.get_pipe("sciner_spancat").cfg.get("spans_key", "sc")
    texts = (Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]) for d in docs)
    return [span_dict(doc.spans[key]) for doc in nlp.pipe(texts, batch_size=32)]


def markdown(res: dict) -> str:
    lines = ["# Zero-shot errors", "",
             f"{res['dataset']} test, exact labelled spans; the weak models {', '.join(f'`{r}`' for r in res['rows'])} "
             "(argmax) from `weak_cnn.py` and plain gazetteer matching with the same type map; `+ abbreviations`: "
             "the model with `sciner_abbreviations` after it, the gazetteer with label-weak's `--abbreviations` "
             f"(a short form defined in the sentence takes its long form's label). {res['gold']} gold mentions, "
             f"{res['gold_abbreviations']} of them abbreviations (at most 10 characters, two or more capitals or "
             "digits, no run of three lower-case letters).", "",
             "| system | P | R | F | R on abbreviations | R on other mentions | false positives by kind | "
             "false negatives by kind | most frequent false negatives |", "|---|---:|---:|---:|---:|---:|---|---|---|"]
    pot = res.get("weak_corpus_abbreviations")
    def kinds(counts: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))

    for name, b in res["systems"].items():
        top = ", ".join(f"{t} ({n})" for t, n in b["top_fn"][:8])
        lines.append(f"| {name} | {b['p']} | {b['r']} | {b['f']} | {b['recall_by_kind']['abbreviation']} | "
                     f"{b['recall_by_kind']['other']} | {kinds(b['fp_kinds'])} | {kinds(b['fn_kinds'])} | {top} |")
    if pot:
        lines += ["", f"Weak corpus ({pot['docs']} lines, {pot['weak_spans']} weak spans): label-weak's "
                  f"`--abbreviations` adds {pot['short_form_spans']} short-form spans (defined short forms whose "
                  "long form ends with a weak span, and their other uses in the same line)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="ncbi_disease")
    p.add_argument("--rows", nargs="+", default=["trf-fine-plain"], help="weak_cnn.py rows whose model-best is scored")
    p.add_argument("--state", type=Path, default=Path.home() / ".cache" / "spacy-sciner" / "convergence")
    p.add_argument("--work", type=Path, default=Path.home() / ".cache" / "spacy-sciner" / "weak_cnn")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "zero_shot_errors")
    args = p.parse_args(argv)
    work = args.work / args.dataset
    models = {row: work / f"pretrain-{row}" / "model-best" for row in args.rows}
    gaz, gaz_abbr = work / "gazetteer_test.spacy", work / "gazetteer_test-abbr.spacy"
    for path in (*models.values(), gaz, gaz_abbr, work / "weak.spacy"):
        if not path.exists():
            sys.exit(f"error: {path} does not exist: run benchmarks/weak_cnn.py for {args.dataset} first")
    corpus = convergence.get_corpus(args.dataset, args.state)
    vocab = spacy.blank("en").vocab
    gold_docs = list(DocBin().from_disk(corpus / "test.spacy").get_docs(vocab))
    gold = [span_dict(d.spans["sc"]) for d in gold_docs]
    systems = {}
    for row, model in models.items():
        systems[f"weak model ({row})"] = breakdown(gold, predict(model, gold_docs))
        systems[f"weak model ({row}) + abbreviations"] = breakdown(gold, predict(model, gold_docs, True))
    for name, path in (("gazetteer", gaz), ("gazetteer + abbreviations", gaz_abbr)):
        systems[name] = breakdown(gold, [span_dict(d.spans["weak"]) for d in DocBin().from_disk(path).get_docs(vocab)])
    weak_docs = list(DocBin().from_disk(work / "weak.spacy").get_docs(vocab))
    potential = {"docs": len(weak_docs), "weak_spans": sum(len(d.spans["weak"]) for d in weak_docs),
                 **abbreviation_potential(weak_docs)}
    first = next(iter(systems.values()))
    res = {"dataset": args.dataset, "rows": args.rows, "gold": first["tp"] + first["fn"],
           "gold_abbreviations": first["gold_abbreviations"], "systems": systems,
           "weak_corpus_abbreviations": potential}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    args.results.with_suffix(".md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
