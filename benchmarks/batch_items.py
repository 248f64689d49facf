"""Inference words/s against the transformer component's `max_batch_items`.

spacy-transformers' `Transformer.pipe` sorts each `nlp.pipe` batch by length and runs the
encoder on sub-batches of at most `max_batch_items` padded tokens (`len(doc)` x docs); every
sequence of a sub-batch is padded to its longest. spacy-transformers' default, 4096, puts a
whole batch of 64 sentences into one or two sub-batches; a smaller value pads less and keeps
the matrices small. The predicted spans must not change (the encoder masks padding): each
setting's spans are compared with the first's.

Each run is a trained pipeline of benchmarks/convergence.py (its scored copy, as recipes.py
measures it) on its data set's test sentences (then dev): `nlp.pipe` from words, batch 64, one
warm-up pass per setting, then --rounds interleaved rounds (median), the whole pipeline and the
transformer alone (`select_pipes`), so that the span head's share shows too.

    python benchmarks/batch_items.py --runs scierc/sciner_spancat_decay2000/0 \\
        scierc_doc/sciner_spancat_hybrid_sents_decay2000/0   # -> benchmarks/results/batch_items.{json,md,png}
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convergence  # noqa: E402
import recipes  # noqa: E402  (scored_model, sentences)

ROOT = convergence.ROOT


def timed_pipe(nlp, texts: list, batch_size: int) -> tuple:
    """Seconds of one `nlp.pipe` pass from words, and the spans each doc ends with."""
    from spacy.tokens import Doc

    start = time.perf_counter()
    docs = list(nlp.pipe((Doc(nlp.vocab, words=w) for w in texts), batch_size=batch_size))
    seconds = time.perf_counter() - start
    spans = [sorted((s.start, s.end, s.label_) for group in d.spans.values() for s in group)
             + [(e.start, e.end, e.label_) for e in d.ents] for d in docs]
    return seconds, spans


def measure_run(model: Path, texts: list, values: list, rounds: int, batch_size: int) -> dict:
    """words/s of the pipeline and of its transformer alone at each max_batch_items value."""
    import spacy

    nlp = spacy.load(model)
    trf = nlp.get_pipe("transformer")
    words = sum(map(len, texts))
    variants = {"pipeline": list(nlp.pipe_names), "transformer": ["transformer"]}
    seconds = {(v, name): [] for v in values for name in variants}
    spans = {}
    for r in range(rounds + 1):  # round 0: warm-up, not timed
        for v in values if r % 2 else values[::-1]:
            trf.cfg["max_batch_items"] = v
            for name, enable in variants.items():
                with nlp.select_pipes(enable=enable):
                    took, out = timed_pipe(nlp, texts, batch_size)
                if r:
                    seconds[(v, name)].append(took)
                if name == "pipeline":
                    spans[v] = out
    rows = []
    for v in values:
        wps = {name: words / statistics.median(seconds[(v, name)]) for name in variants}
        rows.append({"max_batch_items": v, "pipeline_wps": wps["pipeline"], "transformer_wps": wps["transformer"],
                     "span_head_share": 1 - wps["pipeline"] / wps["transformer"],
                     "same_spans": spans[v] == spans[values[0]]})
    return {"model": str(model), "sentences": len(texts), "words": words, "rows": rows}


def first_words(texts: list, max_words: int) -> list:
    """The leading docs of `texts` up to `max_words` words (at least one doc)."""
    total = 0
    for i, words in enumerate(texts):
        total += len(words)
        if total > max_words:
            return texts[:max(i, 1)]
    return texts


def parse_run(name: str, state: Path) -> tuple:
    """"dataset/system/seed" -> (dataset, scored model folder)."""
    parts = name.split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        raise SystemExit(f"batch_items: --runs takes dataset/system/seed, not {name!r}")
    dataset, system, seed = parts
    model = recipes.scored_model(state / "runs" / dataset / f"{system}-seed{seed}", system)
    if not (model / "config.cfg").exists():
        raise SystemExit(f"batch_items: no trained pipeline for {name} at {model}")
    return dataset, model


def markdown(report: dict) -> str:
    meta = report["meta"]
    lines = [f"`nlp.pipe` words/s by the transformer's `max_batch_items` (batch {meta['batch_size']}, "
             f"{meta['threads']} thread(s), median of {meta['rounds']} interleaved rounds after a warm-up, "
             f"load average {meta['load_start']:.1f} -> {meta['load_end']:.1f}, {meta['updated'][:10]}). "
             "Speed-up: against the first value (spacy-transformers' default). Same spans: every doc's "
             "predicted spans equal the first value's.", "",
             "| run | sentences | max_batch_items | pipeline words/s | speed-up | transformer alone words/s | span head's share | same spans |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, run in report["runs"].items():
        first = run["rows"][0]["pipeline_wps"]
        for row in run["rows"]:
            lines.append(f"| {name} | {run['sentences']} | {row['max_batch_items']} | {row['pipeline_wps']:,.0f} | "
                         f"{row['pipeline_wps'] / first:.2f}x | {row['transformer_wps']:,.0f} | "
                         f"{100 * row['span_head_share']:.0f}% | {'yes' if row['same_spans'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # the [bench] extra; the README's test command installs only [test]
        print("note: matplotlib not installed (pip install -e '.[bench]'): no PNG written", flush=True)
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, run in report["runs"].items():
        xs = [r["max_batch_items"] for r in run["rows"]]
        ax.plot(xs, [r["pipeline_wps"] for r in run["rows"]], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("transformer max_batch_items")
    ax.set_ylabel("words/s (whole pipeline)")
    ax.set_title(f"nlp.pipe, {report['meta']['threads']} thread(s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> dict:
    p = convergence.Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", nargs="+", required=True, help="dataset/system/seed of convergence.py runs")
    p.add_argument("--state", type=Path, default=convergence.STATE)
    p.add_argument("--values", nargs="+", type=int, default=[4096, 1024, 512, 256, 128])
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--max-words", type=int, default=12000,
                   help="Fewer docs where they hold more words than this (one Doc per abstract)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "batch_items")
    args = p.parse_args(argv)
    if any(v < 1 for v in args.values):
        p.error("--values must be positive")
    runs = {name: parse_run(name, args.state) for name in args.runs}  # all checked before timing
    import torch

    torch.set_num_threads(args.threads)
    load_start = os.getloadavg()[0]
    report = {"runs": {}}
    for name, (dataset, model) in runs.items():
        texts = first_words(recipes.sentences(convergence.get_corpus(dataset, args.state), args.sentences), args.max_words)
        report["runs"][name] = measure_run(model, texts, args.values, args.rounds, args.batch_size)
        report["runs"][name]["model"] = str(model.relative_to(args.state))  # no machine's home in the results
        print(f"[{name}] " + ", ".join(f"{r['max_batch_items']}: {r['pipeline_wps']:,.0f}" for r in report["runs"][name]["rows"]), flush=True)
    report["meta"] = {"threads": args.threads, "rounds": args.rounds, "batch_size": args.batch_size,
                      "load_start": load_start, "load_end": os.getloadavg()[0],
                      "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.results.with_suffix(".md").write_text(markdown(report))
    plot(report, args.results.with_suffix(".png"))
    print(args.results.with_suffix(".md").read_text())
    return report


if __name__ == "__main__":
    main()
