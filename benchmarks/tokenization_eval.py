"""Does the test tokenization decide a comparison? Re-score convergence.py runs on spaCy's
own tokenization of the text.

convergence.py (spancat_bench.evaluate) scores test on the GOLD tokens: each test doc is
rebuilt from its words. Most systems there train with `gold_preproc = false`, i.e. on spaCy's
tokenization of the text (gold spans aligned to it), and `sciner calibrate` reads dev the same
way; spaCy spancat's threshold is tuned on the gold tokens; the *_goldtok systems train,
select and calibrate on the gold words (spacy-sciner.GoldTokensCorpus.v1). Where the two
tokenizations differ (SciERC: a hyphenated word such as "state-of-the-art" is one gold token
and seven spaCy tokens), a pipeline may be scored on a tokenization it never trained on. This
script scores the same saved pipelines both ways: on the gold words, and the way a user's
`nlp(text)` runs them (spaCy's tokenizer on the text); exact labelled spans compared by
character offsets against every gold span. In each column every system's decision rule is
chosen on dev in that column's tokenization: convergence.py's where it already was, re-tuned
here otherwise (spaCy spancat's threshold by the same dev-F1 search; sciner_spancat by
`sciner calibrate` of the checkpoint its calibration selected, with or without --gold-tokens).
convergence.json's own test F is shown beside them as a check.

    python benchmarks/tokenization_eval.py --dataset scierc \
        --systems spacy_spancat_decay1470 sciner_spancat_hybrid_v2_decay1470
    # -> benchmarks/results/tokenization_<dataset>.{json,md}
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convergence  # noqa: E402
import recipes  # noqa: E402
import spancat_bench  # noqa: E402
from convergence_report import portable  # noqa: E402
from convergence_runs import GOLD_PREPROC, checkpoint_path  # noqa: E402

ROOT = convergence.ROOT


def char_spans(doc, system: str) -> set:
    return {(s.start_char, s.end_char, s.label_) for s in spancat_bench.predicted_spans(doc, system)}


def score(nlp, gold_docs: list, system: str, spacy_tokens: bool) -> dict:
    """Exact labelled-span P/R/F by character offsets; the pipeline sees spaCy's tokens of
    the text (`spacy_tokens`) or the gold words."""
    preds = nlp.pipe(spancat_bench.input_docs(nlp, gold_docs, spacy_tokens), batch_size=64)
    gold = {(i, s.start_char, s.end_char, s.label_) for i, d in enumerate(gold_docs) for s in d.spans[spancat_bench.SPANS_KEY]}
    pred = {(i, *span) for i, d in enumerate(preds) for span in char_spans(d, system)}
    tp = len(gold & pred)
    p, r = (tp / len(pred) if pred else 0.0), (tp / len(gold) if gold else 0.0)
    return {"p": p, "r": r, "f": 2 * p * r / (p + r) if p + r else 0.0, "n_pred": len(pred), "n_gold": len(gold)}


def differing_docs(nlp, docs: list) -> int:
    """Docs whose spaCy tokenization differs from their gold words."""
    return sum(1 for d in docs if [t.text for t in nlp.make_doc(d.text)] != [t.text for t in d])


def rescore_run(run: dict, state: Path, corpus: Path, gold: dict) -> dict:
    """Dev and test F of one run on both tokenizations, each with the decision rule chosen
    on dev in that tokenization: the run's own (convergence.py's) where it matches, re-tuned
    otherwise (spaCy spancat: its threshold; sciner_spancat: `sciner calibrate` of the
    checkpoint its calibration selected, with or without --gold-tokens)."""
    import spacy

    run_dir = state / "runs" / run["dataset"] / f"{run['system']}-seed{run['seed']}"
    model = recipes.scored_model(run_dir, run["system"])
    out = {"system": run["system"], "seed": run["seed"], "model": str(model),
           "convergence_test_f": run["summary"]["test_spans_f"]}
    base = convergence.base_system(run["system"])
    # convergence.py tunes spaCy spancat on gold tokens; sciner as the run read dev in training.
    native = "spacy" if run["system"].startswith("sciner_spancat") and base not in GOLD_PREPROC else "gold"
    models = {native: model}
    other = "gold" if native == "spacy" else "spacy"
    retuned = run_dir / "eval" / f"calibrated-{other}-tokens"
    if run["system"].startswith("spacy_spancat"):
        out["threshold_gold_tokens"] = ((run["evaluation"] or {}).get("calibration") or {}).get("threshold")
        out["threshold_spacy_tokens"] = spancat_bench.tune_spancat_threshold(
            checkpoint_path(run_dir, (run["evaluation"] or {}).get("checkpoint", "model-best")), corpus / "dev.spacy", retuned, spacy_tokens=True)
        models[other] = retuned
    elif run["system"].startswith("sciner_spancat"):
        out[f"calibration_{other}_tokens"] = recalibrate(model, corpus / "dev.spacy", retuned, gold_tokens=other == "gold")
        models[other] = retuned
    else:
        models[other] = model
    out["rule_tuned_on"] = {native: "convergence.py", other: "re-tuned here" if models[other] != model else "none (no rule)"}
    for tokens in ("gold", "spacy"):
        nlp = spacy.load(models[tokens])
        out[f"rule_{tokens}_tokens"] = decision_rule(nlp)
        for split in ("dev", "test"):
            out[f"{split}_{tokens}_tokens"] = score(nlp, gold[split], run["system"], tokens == "spacy")
    return out


def decision_rule(nlp) -> str:
    """The pipeline's span decision, short: spancat's threshold, sciner's argmax or floor."""
    if "spancat" in nlp.pipe_names:
        return f"threshold {nlp.get_pipe('spancat').cfg['threshold']:.3g}"
    if "sciner_spancat" in nlp.pipe_names:
        cfg = nlp.get_pipe("sciner_spancat").cfg
        return "argmax" if cfg.get("threshold") is None else f"floor {cfg['threshold']:.3g}"
    return "—"


def recalibrate(calibrated: Path, dev: Path, output: Path, gold_tokens: bool) -> dict:
    """`sciner calibrate` of the checkpoint a calibrated pipeline was made from, on dev read
    with (gold_tokens) or without the gold words; returns the new report."""
    import spacy

    report = spacy.load(calibrated).get_pipe("sciner_spancat").cfg["calibration"]
    checkpoint = report.get("selected_checkpoint") or str(calibrated)
    cmd = [sys.executable, "-m", "spacy_sciner", "calibrate", checkpoint, str(dev), str(output)] + (["--gold-tokens"] if gold_tokens else [])
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"calibrate failed: {(done.stderr or done.stdout)[-500:]}")
    new = spacy.load(output).get_pipe("sciner_spancat").cfg["calibration"]
    return {k: new.get(k) for k in ("dev_tokens", "filter_threshold", "threshold", "decision", "dev_f")}


def write_markdown(result: dict, path: Path) -> None:
    ds = result["dataset"]
    lines = [f"# Test span F on gold tokens vs spaCy's tokens ({ds})", "",
             f"{result['differing']['dev']} of {result['n_docs']['dev']} dev and "
             f"{result['differing']['test']} of {result['n_docs']['test']} test docs are tokenized differently by spaCy "
             "than in the gold data. Exact labelled spans by character offsets against every gold span; each system's "
             "decision rule (spaCy spancat's threshold; sciner_spancat's filter and rule, `sciner calibrate`) chosen on dev "
             "in the column's tokenization, re-tuned where convergence.py chose it on the other one. "
             f"{result['threads']} torch thread(s), load average "
             f"{result['load'][0]:.1f} -> {result['load'][1]:.1f}, {result['updated']}.", "",
             "| system | seed | test F, gold tokens (convergence.json) | test F, gold tokens | test F, spaCy tokens (P / R) "
             "| dev F, gold tokens | dev F, spaCy tokens | decision rule (gold / spaCy tokens) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    for r in result["runs"]:
        st = r["test_spacy_tokens"]
        thr = f"{r.get('rule_gold_tokens', '?')} / {r.get('rule_spacy_tokens', '?')}"
        lines.append(f"| {r['system']} | {r['seed']} | {pct(r['convergence_test_f'])} | {pct(r['test_gold_tokens']['f'])} | "
                     f"{pct(st['f'])} ({pct(st['p'])} / {pct(st['r'])}) | {pct(r['dev_gold_tokens']['f'])} | "
                     f"{pct(r['dev_spacy_tokens']['f'])} | {thr} |")
    lines += ["", "| system | seeds | mean test F, gold tokens | mean test F, spaCy tokens |", "|---|---|---:|---:|"]
    for system, m in result["means"].items():
        lines.append(f"| {system} | {', '.join(map(str, m['seeds']))} | {pct(m['test_gold_tokens'])} | {pct(m['test_spacy_tokens'])} |")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="scierc")
    p.add_argument("--systems", nargs="+", required=True)
    p.add_argument("--state", type=Path, default=convergence.STATE)
    p.add_argument("--convergence", type=Path, default=ROOT / "benchmarks" / "results" / "convergence.json")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    import spacy
    import torch
    from spacy.tokens import DocBin

    torch.set_num_threads(args.threads)
    runs = [r for r in json.loads(args.convergence.read_text())["runs"].values()
            if r["dataset"] == args.dataset and r["system"] in args.systems and r["summary"]["test_spans_f"] is not None]
    missing = [f"{r['system']}/seed{r['seed']}" for r in runs
               if not recipes.scored_model(args.state / "runs" / r["dataset"] / f"{r['system']}-seed{r['seed']}", r["system"]).exists()]
    if not runs or missing:
        p.error(f"no evaluated runs of {args.systems} on {args.dataset} in {args.convergence}" if not runs
                else f"run state not found under {args.state} for {missing} (it lives outside the repository)")
    corpus = convergence.get_corpus(args.dataset, args.state)
    vocab = spacy.blank("en").vocab
    gold = {split: list(DocBin().from_disk(corpus / f"{split}.spacy").get_docs(vocab)) for split in ("dev", "test")}
    load_start = os.getloadavg()[0]
    rows = []
    for run in sorted(runs, key=lambda r: (r["system"], r["seed"])):
        print(f"[{run['system']}/seed{run['seed']}] scoring", flush=True)
        rows.append(rescore_run(run, args.state, corpus, gold))
    means = {}
    for system in sorted({r["system"] for r in rows}):
        mine = [r for r in rows if r["system"] == system]
        means[system] = {"seeds": [r["seed"] for r in mine],
                         **{k: statistics.mean(r[k]["f"] for r in mine) for k in ("test_gold_tokens", "test_spacy_tokens")}}
    blank = spacy.blank("en")
    result = {"dataset": args.dataset, "runs": rows, "means": means, "threads": args.threads,
              "n_docs": {k: len(v) for k, v in gold.items()}, "differing": {k: differing_docs(blank, v) for k, v in gold.items()},
              "load": [load_start, os.getloadavg()[0]], "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = args.results / f"tokenization_{args.dataset}"
    out.with_suffix(".json").write_text(portable(json.dumps(result, indent=1)) + "\n")
    write_markdown(result, out.with_suffix(".md"))
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
