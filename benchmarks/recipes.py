"""The recipe table (issue 9, item 4): test F, training time and inference words/s of every
system trained by convergence.py, so that a user can choose between accurate and fast.

F and training time come from benchmarks/results/convergence.json (test span F of the best
dev checkpoint with its dev-chosen decision rule; minutes of training-loop time to that
checkpoint and in all). Inference speed is measured here, on the same model that was
scored (sciner_spancat*: the dev-calibrated copy; spacy_spancat: its dev-tuned threshold;
spacy_ner*: model-best): `nlp.pipe` over the same sentences (test, then dev) from words,
batch 64, every pipeline warmed up once, then --rounds interleaved rounds; the median.
Thread count and load average are recorded: run it on an otherwise idle machine.

    python benchmarks/recipes.py                      # -> benchmarks/results/recipes.{json,md}
    python benchmarks/recipes.py --report-only        # rewrite the table from recipes.json
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convergence  # noqa: E402  (get_corpus, SYSTEMS, Parser)

ROOT = convergence.ROOT
FAST_TARGET = 5000  # words/s on 2 cores (issue 9)


def scored_model(run_dir: Path, system: str) -> Path:
    """The pipeline folder whose test F convergence.json reports."""
    if system.startswith(("sciner_spancat", "spacy_spancat")):
        return run_dir / "eval" / "calibrated"
    from convergence_runs import checkpoint_path

    return checkpoint_path(run_dir, "model-best")


def sentences(corpus: Path, n: int) -> list:
    """Up to `n` sentences (word lists): test first, then dev."""
    import spacy
    from spacy.tokens import DocBin

    vocab = spacy.blank("en").vocab
    out = []
    for split in ("test", "dev"):
        out += [[t.text for t in d] for d in DocBin().from_disk(corpus / f"{split}.spacy").get_docs(vocab)]
    return out[:n]


def words_per_s(nlp, texts: list, batch_size: int = 64) -> float:
    from spacy.tokens import Doc

    docs = (Doc(nlp.vocab, words=w) for w in texts)
    start = time.perf_counter()
    for _ in nlp.pipe(docs, batch_size=batch_size):
        pass
    return sum(map(len, texts)) / (time.perf_counter() - start)


def speed_key(run: dict) -> str:
    """Where a run's speed is stored in recipes.json: system, and the seed if not 0."""
    return run["system"] if run["seed"] == 0 else f"{run['system']}-seed{run['seed']}"


def measure(runs: list, state: Path, n_sentences: int, rounds: int, max_batch_items: int = 4096) -> dict:
    """Words/s of each evaluated run's scored model, per data set, interleaved rounds; every
    transformer pipeline with the same `max_batch_items` (its saved one depends on when the
    run was trained)."""
    import spacy

    speeds = {}
    for ds in sorted({r["dataset"] for r in runs}):
        texts = sentences(convergence.get_corpus(ds, state), n_sentences)
        pipes = {}
        for r in runs:
            if r["dataset"] == ds:
                path = scored_model(state / "runs" / ds / f"{r['system']}-seed{r['seed']}", r["system"])
                if not (path / "config.cfg").exists():
                    print(f"[{ds}/{r['system']}] no scored model at {path}: skipped", flush=True)
                    continue
                pipes[speed_key(r)] = nlp = spacy.load(path)
                if "transformer" in nlp.pipe_names:
                    nlp.get_pipe("transformer").cfg["max_batch_items"] = max_batch_items
        for nlp in pipes.values():  # warm-up: allocations, lazy initialisation
            words_per_s(nlp, texts)
        measured = {name: [] for name in pipes}
        for _ in range(rounds):
            for name, nlp in pipes.items():
                measured[name].append(words_per_s(nlp, texts))
        speeds[ds] = {"sentences": len(texts), "words": sum(map(len, texts)),
                      "words_per_s": {k: {"median": statistics.median(v), "all": v} for k, v in measured.items()}}
    return speeds


def keep_earlier(speeds: dict, saved: dict) -> None:
    """Merge the speeds of an earlier recipes.json into `speeds`: data sets not measured now keep
    their own conditions; in a data set measured now, a model measured before but no longer on
    disk keeps its earlier speed, flagged with that call's conditions (``earlier``)."""
    for ds, before in saved["speeds"].items():
        before_meta = before.get("meta", saved["meta"])
        if ds not in speeds:
            speeds[ds] = {**before, "meta": before_meta}
            continue
        for key, entry in before["words_per_s"].items():
            if key not in speeds[ds]["words_per_s"]:
                speeds[ds]["words_per_s"][key] = {**entry, "earlier": entry.get("earlier", before_meta)}


def conditions(speeds: dict, meta: dict) -> str:
    """Threads and load average of the measurements: one phrase, or one per data set when
    they were measured in different calls (--datasets)."""
    def phrase(m):
        # max_batch_items: the transformer's sub-batches; every call before it was recorded used 4096.
        return (f"{m['threads']} thread(s), transformer max_batch_items {m.get('max_batch_items', 4096)}, "
                f"load average {m['load_start']:.1f} -> {m['load_end']:.1f}")

    metas = {ds: s.get("meta", meta) for ds, s in sorted(speeds.items())}
    if len({json.dumps(m, sort_keys=True) for m in metas.values()}) <= 1:
        return phrase(next(iter(metas.values()), meta))
    return "; ".join(f"{ds}: {phrase(m)} ({m['updated'][:10]})" for ds, m in metas.items())


# Rows of the by-data-set table: the package's recipes first, then the baselines.
ORDER = ["sciner_spancat_hybrid", "sciner_spancat", "sciner_spancat_cnn", "sciner_spancat_cnn_floret",
         "sciner_spancat_cnn_pretrain", "sciner_spancat_cnn_floret_pretrain", "spacy_ner_cnn",
         "spacy_ner_cnn_floret", "spacy_spancat", "spacy_ner"]


def by_dataset(conv: dict) -> list:
    """Test span F per recipe (rows) and data set (columns): the mean over seeds (each seed
    listed when there are several), "stopped" where a run ended by its time budget rather than
    by convergence, the update count where it ended at max_steps (a fixed-budget variant), the
    best per data set in bold where the column compares two systems or more."""
    cells = {}
    for r in conv["runs"].values():
        if r["summary"]["test_spans_f"] is not None:
            cells.setdefault((r["system"], r["dataset"]), []).append(r)
    datasets = sorted({ds for _, ds in cells})
    systems = sorted({s for s, _ in cells}, key=lambda s: (ORDER.index(s) if s in ORDER else len(ORDER), s))
    mean = {k: statistics.mean(100 * r["summary"]["test_spans_f"] for r in runs) for k, runs in cells.items()}
    best = {ds: max(v for (_, d), v in mean.items() if d == ds) for ds in datasets}
    lines = ["| test span F | " + " | ".join(datasets) + " |", "|---|" + "---:|" * len(datasets)]
    for system in systems:
        row = []
        for ds in datasets:
            runs = sorted(cells.get((system, ds), []), key=lambda r: r["seed"])
            if not runs:
                row.append("—")
                continue
            text = f"{mean[system, ds]:.1f}"
            compared = sum(1 for _, d in cells if d == ds) > 1
            text = f"**{text}**" if compared and text == f"{best[ds]:.1f}" else text  # ties at the shown precision
            if len(runs) > 1:
                text += f" (seeds {', '.join(str(r['seed']) for r in runs)}: " + ", ".join(
                    f"{100 * r['summary']['test_spans_f']:.1f}" for r in runs) + ")"
            if any(r["summary"]["status"] == "stopped" for r in runs):
                text += " (stopped)"
            elif any(r["summary"]["status"] == "max steps" for r in runs):  # *_decay<N>: by design
                steps = {r.get("settings", {}).get("max_steps") for r in runs}
                text += f" ({steps.pop():,} updates)" if len(steps) == 1 and None not in steps else " (max steps)"
            row.append(text)
        lines.append(f"| {system} | " + " | ".join(row) + " |")
    return lines


def gold_token_note(conv: dict) -> list:
    """Which rows trained on the gold words: every test F is scored on them, but only the
    *_goldtok systems also trained, selected and calibrated there."""
    from convergence_runs import GOLD_PREPROC

    if not any(convergence.base_system(r["system"]) in GOLD_PREPROC for r in conv["runs"].values()):
        return []
    return ["", "Every test F is scored on the data set's own words; the `*_goldtok` rows also trained, picked model-best "
            "and calibrated on them (`spacy-sciner.GoldTokensCorpus.v1`), all other rows on spaCy's tokenization of the text."]


def table(conv: dict, speeds: dict, meta: dict) -> str:
    lines = ["# Recipes: accuracy, training time, inference speed", "",
             f"Test span F: best dev checkpoint of each convergence.py run, decision rule chosen on dev "
             f"(benchmarks/results/convergence.md says how far each run got). Inference: `nlp.pipe` from words, "
             f"batch 64, median of {meta['rounds']} interleaved rounds after a warm-up, {conditions(speeds, meta)}; "
             f"fast-recipe target {FAST_TARGET:,} words/s.", "", *by_dataset(conv), *gold_token_note(conv), "",
             "| dataset | recipe | transformer | run status | test span F | best dev F | min to best / trained | words/s | ≥ 5k w/s |",
             "|---|---|---|---|---:|---:|---|---:|---|"]
    for r in sorted(conv["runs"].values(), key=lambda r: (r["dataset"], -(r["summary"]["test_spans_f"] or 0))):
        s = r["summary"]
        measured = speeds.get(r["dataset"], {}).get("words_per_s", {})
        # seed 0's speed may be stored under the system alone (recipes.json before seeds were keys)
        speed = measured.get(speed_key(r)) or (measured.get(r["system"]) if r["seed"] == 0 else None)
        several = sum(o["dataset"] == r["dataset"] and o["system"] == r["system"] for o in conv["runs"].values()) > 1
        recipe = f"{r['system']} (seed {r['seed']})" if several else r["system"]
        wps = f"{speed['median']:,.0f}" + ("*" if "earlier" in speed else "") if speed else "—"
        ok = ("yes" if speed["median"] >= FAST_TARGET else "no") if speed else "—"
        test = f"{100 * s['test_spans_f']:.1f}" if s["test_spans_f"] is not None else "—"
        trf = "yes" if convergence.SYSTEMS.get(convergence.base_system(r["system"]), (None, False))[1] else "no"
        # a run still in its first segment has no evaluation yet
        dev = f"{100 * s['best_dev_f']:.1f}" if s["best_dev_f"] is not None else "—"
        to_best = f"{s['best_seconds'] / 60:.0f}" if s["best_seconds"] is not None else "—"
        lines.append(f"| {r['dataset']} | {recipe} | {trf} | {s['status']} | {test} | {dev} | "
                     f"{to_best} / {s['train_seconds'] / 60:.0f} | {wps} | {ok} |")
    earlier = sorted({(ds, e["earlier"]["updated"][:10], e["earlier"]["threads"], e["earlier"]["load_start"], e["earlier"]["load_end"])
                      for ds, m in speeds.items() for e in m["words_per_s"].values() if "earlier" in e})
    if earlier:
        lines += ["", "\\* measured in an earlier call whose model is no longer on disk (not re-measured with the others): "
                  + "; ".join(f"{ds} {day}, {t} thread(s), load average {a:.1f} -> {b:.1f}" for ds, day, t, a, b in earlier) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = convergence.Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state", type=Path, default=convergence.STATE)
    p.add_argument("--convergence", type=Path, default=ROOT / "benchmarks" / "results" / "convergence.json")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "recipes")
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="torch/BLAS threads (the 2-core machine: 2)")
    p.add_argument("--max-batch-items", type=int, default=4096,
                   help="The transformer's max_batch_items for every transformer pipeline (4096: every row "
                        "measured so far; the configs' 256 is faster on CPU: benchmarks/batch_items.py)")
    p.add_argument("--datasets", nargs="+", default=None,
                   help="Measure only these data sets; the speeds of the others stay as recipes.json has them")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    if not args.convergence.exists():
        p.error(f"{args.convergence} not found: run benchmarks/convergence.py first")
    conv = json.loads(args.convergence.read_text())
    out = args.results.with_suffix(".json")
    if args.report_only:
        if not out.exists():
            p.error(f"{out} not found: run without --report-only first")
        saved = json.loads(out.read_text())
        speeds, meta = saved["speeds"], saved["meta"]
    else:
        import torch

        torch.set_num_threads(args.threads)
        runs = [r for r in conv["runs"].values() if r["summary"]["test_spans_f"] is not None
                and (not args.datasets or r["dataset"] in args.datasets)]
        load_start = os.getloadavg()[0]
        speeds = measure(runs, args.state, args.sentences, args.rounds, args.max_batch_items)
        meta = {"rounds": args.rounds, "threads": args.threads, "max_batch_items": args.max_batch_items, "load_start": load_start,
                "load_end": os.getloadavg()[0], "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        for measured in speeds.values():
            measured["meta"] = meta
        if out.exists():
            keep_earlier(speeds, json.loads(out.read_text()))
        out.write_text(json.dumps({"meta": meta, "speeds": speeds}, indent=2) + "\n")
    args.results.with_suffix(".md").write_text(table(conv, speeds, meta))
    print(args.results.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
