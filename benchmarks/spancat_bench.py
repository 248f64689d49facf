"""Benchmark: sciner_spancat vs spaCy's spancat and ner on the same transformer, and
spaCy's stock CPU ner (no transformer).

For each dataset (SciERC JSON with nested gold, BioNLP13CG IOB2), trains the pipelines
with `spacy train` from configs/: the three transformer systems with the SAME encoder
(offline MiniLM), epochs, seed, optimizer, schedule and batcher (all overridden
identically on the command line); the CNN ner with the same epochs, seed, evaluation
frequency and selection rule but spaCy's stock optimizer and batcher (what a user of
`spacy init config --optimize accuracy` gets). Selection, the same for every system:
model-best on dev (`spacy train`'s own choice); then, on dev only, sciner_spancat's filter
threshold and decision rule (`sciner calibrate`) and spaCy spancat's threshold (the same
dev-F1 search, `best_f1_threshold`, over its (span, label) probabilities). Then:

- accuracy on test: exact-span P/R/F against ALL gold spans (nested included, spans longer
  than the maximum span length included), and flat-entity P/R/F (doc.ents), cross-checked
  with seqeval on the same predictions;
- training wall time;
- inference words/s on the same 2,000+ sentences: bare transformer vs transformer +
  sciner_spancat (filter on / off) vs transformer + spaCy spancat (n-grams 1..8).

Writes benchmarks/results/spancat.json and spancat.md. Resumable: finished training runs
(a `done.json` in their folder) are reused. Usage:

    python benchmarks/spancat_bench.py --epochs 4 --seed 0
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import spacy
from spacy.scorer import get_ner_prf
from spacy.tokens import Doc, DocBin
from spacy.training import Example

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spancat_report import previous_results, report_only, write_markdown  # noqa: E402

try:  # fail now, not after hours of training when the first evaluation imports it
    import spacy_sciner  # noqa: F401
except ImportError as err:
    sys.exit(f"spacy-sciner is not importable ({err}): install it first, e.g. pip install -e .")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
SPANS_KEY = "sc"
SYSTEMS = {
    # name: (config, component name)
    "sciner_spancat": ("configs/sciner_spancat.cfg", "sciner_spancat"),
    "spacy_spancat": ("configs/spacy_spancat.cfg", "spancat"),
    "spacy_ner": ("configs/spacy_ner.cfg", "ner"),
    "spacy_ner_cnn": ("configs/spacy_ner_cnn.cfg", "ner"),
}
TRANSFORMER_SYSTEMS = ("sciner_spancat", "spacy_spancat", "spacy_ner")


def prepare(dataset: str, work: Path) -> Path:
    """Convert one dataset to DocBins (train/dev/test) under work/dataset/corpus."""
    from spacy_sciner.corpora.conll import read_conll
    from spacy_sciner.corpora.scierc import read_scierc

    out = work / dataset / "corpus"
    if (out / "test.spacy").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    vocab = spacy.blank("en").vocab
    for split in ("train", "dev", "test"):
        if dataset == "scierc":
            docs = read_scierc(DATA / "scierc" / f"{split}.json", vocab, spans_key=SPANS_KEY)
        else:
            docs = read_conll(DATA / "BioNLP13CG" / f"{split}.tsv", vocab, spans_key=SPANS_KEY)
        DocBin(docs=list(docs), store_user_data=True).to_disk(out / f"{split}.spacy")
    return out


def train(dataset: str, system: str, corpus: Path, work: Path, args) -> dict:
    """Run `spacy train` for one system (skipped when a finished run exists)."""
    out = work / dataset / system
    done = out / "done.json"
    if done.exists():
        return json.loads(done.read_text())
    config, _ = SYSTEMS[system]
    n_train = len(DocBin().from_disk(corpus / "train.spacy"))
    # Same schedule for every system: warm-up 10% of the steps, linear decay to the end.
    epochs = args.epochs_for(dataset)
    steps = max(1, epochs * n_train // args.sentences_per_batch)
    cmd = [
        sys.executable, "-m", "spacy", "train", str(ROOT / config),
        "--output", str(out),
        "--paths.train", str(corpus / "train.spacy"),
        "--paths.dev", str(corpus / "dev.spacy"),
        "--system.seed", str(args.seed),
        "--training.max_epochs", str(epochs),
        "--training.max_steps", "0",
        "--training.eval_frequency", str(max(1, steps // args.evals)),
        "--training.patience", "0",
        "--training.logger.progress_bar", "false",
        "--gpu-id", str(args.gpu_id),
    ]
    if system in TRANSFORMER_SYSTEMS:
        cmd += [
            "--training.batcher.size", str(args.batch_words),
            "--training.optimizer.learn_rate.total_steps", str(steps),
            "--training.optimizer.learn_rate.warmup_steps", str(max(1, steps // 10)),
            "--training.optimizer.learn_rate.initial_rate", str(args.lr),
            "--components.transformer.model.name", args.encoder,
        ]
    out.mkdir(parents=True, exist_ok=True)
    print(f"[{dataset}/{system}] training: {' '.join(cmd[3:])}", flush=True)
    start = time.perf_counter()
    with open(out / "train.log", "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    result = {"train_seconds": time.perf_counter() - start, "steps_planned": steps, "epochs": epochs,
              "load_avg_1min_at_end": os.getloadavg()[0]}
    if system == "sciner_spancat":
        # Filter threshold (target recall 0.99) and decision threshold: chosen on dev only.
        cal = subprocess.run(
            [sys.executable, "-m", "spacy_sciner", "calibrate", str(out / "model-best"),
             str(corpus / "dev.spacy"), str(out / "model-calibrated"),
             "--target-recall", str(args.target_recall)],
            check=True, capture_output=True, text=True, cwd=ROOT,
        )
        result["calibration_log"] = cal.stdout[-2000:].replace(f"{ROOT}/", "")  # no machine paths in results
    elif system == "spacy_spancat":
        result["calibration"] = tune_spancat_threshold(out / "model-best", corpus / "dev.spacy", out / "model-calibrated")
    done.write_text(json.dumps(result, indent=2))
    return result


def tune_spancat_threshold(model: Path, dev_path: Path, output: Path, spacy_tokens: bool = False) -> dict:
    """spaCy spancat's threshold chosen on dev by the search sciner calibrate uses: the
    dev-micro-F1-best cutoff over every (suggested span, label) probability; saved.
    `spacy_tokens`: run on spaCy's tokenization of the text (what `spacy train` with
    gold_preproc = false trained on) instead of the gold words; spans are matched by
    character offsets either way."""
    import numpy

    from spacy_sciner.spancat.filter import best_f1_threshold

    nlp = spacy.load(model)
    spancat = nlp.get_pipe("spancat")
    labels = {label: i for i, label in enumerate(spancat.labels)}
    n_labels = len(labels) + 1  # + a column for labels the model never saw (always misses)
    scores, correct, n_gold = [], [], 0
    for gold_doc, doc, rows, probs in spancat_candidates(nlp, dev_path, spacy_tokens):
        size = len(gold_doc.text) + 1
        gold = {(s.start_char * size + s.end_char) * n_labels + labels.get(s.label_, n_labels - 1) for s in gold_doc.spans[SPANS_KEY]}
        n_gold += len({(s.start, s.end, s.label_) for s in gold_doc.spans[SPANS_KEY]})
        starts = numpy.array([t.idx for t in doc] + [len(doc.text)], dtype="int64")
        ends = numpy.array([0] + [t.idx + len(t) for t in doc], dtype="int64")
        keys = (starts[rows[:, 0].astype("int64")] * size + ends[rows[:, 1].astype("int64")]) * n_labels
        pairs = keys[:, None] + numpy.arange(len(labels))[None, :]
        correct.append(numpy.isin(pairs.ravel(), numpy.fromiter(gold, dtype="int64", count=len(gold))))
        scores.append(probs.ravel())
    best = best_f1_threshold(numpy.concatenate(scores), numpy.concatenate(correct), n_gold)
    spancat.cfg["threshold"] = best["threshold"]
    nlp.to_disk(output)
    return {"threshold": best["threshold"], "dev_p": best["p"], "dev_r": best["r"], "dev_f": best["f"]}


def input_docs(nlp, gold_docs: list, spacy_tokens: bool = False) -> list:
    """What a pipeline is given for `gold_docs`: their gold words, or spaCy's tokenization of
    their text (what `spacy evaluate` and `nlp(text)` use). Never their annotations."""
    from spacy_sciner.render import retokenized_copies

    return [nlp.make_doc(d.text) for d in gold_docs] if spacy_tokens else retokenized_copies(gold_docs, nlp.vocab)


def spancat_candidates(nlp, dev_path: Path, spacy_tokens: bool):
    """(gold doc, predicted doc, suggested (start, end) token rows, their label probabilities)
    for every dev doc, from spaCy spancat's own suggester and model."""
    from spacy.util import minibatch

    spancat = nlp.get_pipe("spancat")
    for batch in minibatch(list(DocBin().from_disk(dev_path).get_docs(nlp.vocab)), 64):
        docs = input_docs(nlp, batch, spacy_tokens)
        for name, proc in nlp.pipeline:
            if name == "spancat":
                break
            docs = list(proc.pipe(docs))
        indices, probs = spancat.predict(docs)
        rows, probs = spancat.model.ops.to_numpy(indices.dataXd), spancat.model.ops.to_numpy(probs)
        offset = 0
        for gold_doc, doc, count in zip(batch, docs, spancat.model.ops.to_numpy(indices.lengths).tolist()):
            yield gold_doc, doc, rows[offset : offset + count], probs[offset : offset + count]
            offset += count


def model_dir(dataset: str, system: str, work: Path) -> Path:
    run = work / dataset / system
    return run / ("model-calibrated" if system in ("sciner_spancat", "spacy_spancat") else "model-best")


def predicted_spans(doc: Doc, system: str):
    if system.startswith("spacy_ner"):
        return list(doc.ents)
    return list(doc.spans.get(SPANS_KEY, []))


def with_abbreviations(model: Path, out: Path) -> Path:
    """The pipeline at `model` with `sciner_abbreviations` after `sciner_spancat` (no weights, no
    threshold: defined short forms take the label their long form was predicted with), saved at
    `out` once, for `evaluate(..., model=out)`."""
    if not (out / "meta.json").exists():
        nlp = spacy.load(model)
        nlp.add_pipe("sciner_abbreviations", after="sciner_spancat")
        nlp.to_disk(out)
    return out


def evaluate(dataset: str, system: str, corpus: Path, work: Path, model: Path = None, split: str = "test") -> dict:
    """Exact-span (nested gold) and flat-entity P/R/F on test, plus a seqeval cross-check.
    `model`: the pipeline folder (default: model_dir(dataset, system, work)); `system` then
    only says how predictions are read (`spacy_ner*`: doc.ents, else doc.spans). `split`:
    "dev" to score the dev set instead (for a choice that must not look at test)."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    nlp = spacy.load(model or model_dir(dataset, system, work))
    gold_docs = list(DocBin().from_disk(corpus / f"{split}.spacy").get_docs(nlp.vocab))
    # Predict from the words alone: gold never reaches the pipeline.
    preds = list(nlp.pipe(input_docs(nlp, gold_docs), batch_size=64))
    if system.startswith("spacy_spancat"):  # also convergence.py's spacy_spancat_decay<N>
        # spaCy's spancat writes no doc.ents: decode its spans greedily (highest score
        # first, no overlap) so that the flat comparison is possible at all.
        for doc in preds:
            group = doc.spans[SPANS_KEY]
            scores = group.attrs.get("scores")
            order = sorted(range(len(group)), key=lambda i: -float(scores[i]))
            taken, ents = set(), []
            for i in order:
                span = group[i]
                if not taken.intersection(range(span.start, span.end)):
                    taken.update(range(span.start, span.end))
                    ents.append(span)
            doc.ents = sorted(ents, key=lambda s: s.start)
    # Exact labelled spans against ALL gold spans (nested, longer than L, filtered: all count).
    gold = {(i, s.start, s.end, s.label_) for i, d in enumerate(gold_docs) for s in d.spans[SPANS_KEY]}
    pred = {(i, s.start, s.end, s.label_) for i, d in enumerate(preds) for s in predicted_spans(d, system)}
    tp = len(gold & pred)
    sp = tp / len(pred) if pred else 0.0
    sr = tp / len(gold) if gold else 0.0
    sf = 2 * sp * sr / (sp + sr) if sp + sr else 0.0
    ents = get_ner_prf([Example(p, g) for p, g in zip(preds, gold_docs)])

    def bio(doc):
        tags = ["O"] * len(doc)
        for ent in doc.ents:
            tags[ent.start] = f"B-{ent.label_}"
            for i in range(ent.start + 1, ent.end):
                tags[i] = f"I-{ent.label_}"
        return tags

    y_true = [bio(g) for g in gold_docs]
    y_pred = [bio(p) for p in preds]
    return {
        "spans_p": sp, "spans_r": sr, "spans_f": sf,
        "ents_p": ents["ents_p"], "ents_r": ents["ents_r"], "ents_f": ents["ents_f"],
        "seqeval_p": precision_score(y_true, y_pred), "seqeval_r": recall_score(y_true, y_pred),
        "seqeval_f": f1_score(y_true, y_pred),
        "gold_spans": sum(len(g.spans[SPANS_KEY]) for g in gold_docs),
    }


def speed(dataset: str, work: Path, n_sentences: int, rounds: int) -> dict:
    """Words/s of four pipelines over the same sentences, interleaved over `rounds`."""
    texts = []
    for split in ("test", "dev", "train"):
        for doc in DocBin().from_disk(work / dataset / "corpus" / f"{split}.spacy").get_docs(spacy.blank("en").vocab):
            texts.append([t.text for t in doc])
    texts = texts[:n_sentences]
    n_words = sum(len(t) for t in texts)
    sciner = spacy.load(model_dir(dataset, "sciner_spancat", work))
    spacy_sc = spacy.load(model_dir(dataset, "spacy_spancat", work))
    comp = sciner.get_pipe("sciner_spancat")
    filter_on = comp.cfg.get("use_filter", True)

    def run(nlp, disable=(), use_filter=None):
        if use_filter is not None:
            comp.cfg["use_filter"] = use_filter
        docs = (Doc(nlp.vocab, words=w) for w in texts)
        start = time.perf_counter()
        with nlp.select_pipes(disable=list(disable)):
            for _ in nlp.pipe(docs, batch_size=64):
                pass
        return n_words / (time.perf_counter() - start)

    variants = {
        "transformer": lambda: run(sciner, disable=["sciner_spancat"]),
        "transformer+sciner_spancat(filter)": lambda: run(sciner, use_filter=True),
        "transformer+sciner_spancat(no filter)": lambda: run(sciner, use_filter=False),
        "transformer+spacy_spancat(1..8)": lambda: run(spacy_sc),
    }
    if (work / dataset / "spacy_ner_cnn" / "done.json").exists():
        cnn = spacy.load(model_dir(dataset, "spacy_ner_cnn", work))
        variants["spacy_ner_cnn (no transformer)"] = lambda: run(cnn)
    for fn in variants.values():  # warm-up of every pipeline (allocations, lazy init)
        fn()
    measured = {k: [] for k in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            measured[name].append(fn())
    comp.cfg["use_filter"] = filter_on
    result = {"sentences": len(texts), "words": n_words, "rounds": rounds, "words_per_s": {}}
    base = statistics.median(measured["transformer"])
    for name, values in measured.items():
        med = statistics.median(values)
        result["words_per_s"][name] = {"median": med, "all": values, "ratio_vs_transformer": med / base}
    return result


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=["scierc", "bionlp13cg"])
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    p.add_argument("--epochs", nargs="+", default=["4"],
                   help="Epochs for every dataset (e.g. 4), or per dataset (scierc=4 bionlp13cg=3); always the same for every system")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-words", type=int, default=500)
    p.add_argument("--sentences-per-batch", type=int, default=20, help="Approximate, for the LR schedule length")
    p.add_argument("--evals", type=int, default=4, help="Dev evaluations per run (best checkpoint on dev)")
    p.add_argument("--encoder", default="sciner-minilm")
    p.add_argument("--gpu-id", type=int, default=-1)
    p.add_argument("--target-recall", type=float, default=0.99)
    p.add_argument("--speed-dataset", default="scierc")
    p.add_argument("--speed-sentences", type=int, default=2000)
    p.add_argument("--speed-rounds", type=int, default=3)
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--no-train", action="store_true", help="Only evaluate runs that have finished (done.json); list the others as missing")
    p.add_argument("--speed-only", action="store_true", help="Only measure inference speed (trained runs must exist)")
    p.add_argument("--report-only", action="store_true",
                   help="Write spancat.md from spancat.json as a running benchmark left it (systems not in it: missing)")
    p.add_argument("--before-rev", default="127b1b0", help="Git revision whose committed spancat.json gives the 'before' column")
    args = p.parse_args(argv)
    epochs = {}
    for item in args.epochs:
        name, _, value = item.rpartition("=")
        epochs[name or "*"] = int(value)
    args.epochs_for = lambda ds: epochs.get(ds, epochs.get("*"))
    return args


def measure_accuracy(args, results: dict) -> None:
    """Train (or reuse) and evaluate every system on every data set, into ``results``;
    spancat.json is rewritten after each, so ``--report-only`` can show a run still going."""
    for ds in args.datasets:
        corpus = prepare(ds, args.work)
        results["accuracy"][ds] = {}
        for system in args.systems:
            if args.no_train and not (args.work / ds / system / "done.json").exists():
                results["missing"].append(f"{ds}/{system}")
                continue
            run = train(ds, system, corpus, args.work, args)
            scores = evaluate(ds, system, corpus, args.work)
            results["accuracy"][ds][system] = {**scores, **{k: v for k, v in run.items() if k != "calibration_log"}}
            if "calibration_log" in run:
                results["accuracy"][ds][system]["calibration"] = run["calibration_log"]
            print(f"[{ds}/{system}] {json.dumps(results['accuracy'][ds][system])}", flush=True)
            (args.results / "spancat.json").write_text(json.dumps(results, indent=2))


def speed_only(args) -> None:
    """Measure inference speed alone (the trained pipelines must exist): spancat_speed.json."""
    load_start = os.getloadavg()[0]
    measured = speed(args.speed_dataset, args.work, args.speed_sentences, args.speed_rounds)
    measured.update(load_start=load_start, load_end=os.getloadavg()[0])
    (args.results / "spancat_speed.json").write_text(json.dumps(measured, indent=2))
    print((args.results / "spancat_speed.json").read_text())


def main(argv=None) -> None:
    args = parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        report_only(args)
        return
    if args.speed_only:
        speed_only(args)
        return
    results = {
        "seed": args.seed, "epochs": {ds: args.epochs_for(ds) for ds in args.datasets}, "encoder": args.encoder, "lr": args.lr,
        "batch_words": args.batch_words, "machine": f"{os.cpu_count()} CPU cores",
        "load_start": os.getloadavg()[0], "accuracy": {}, "speed": {}, "evals": args.evals,
        "before_rev": args.before_rev, "before": previous_results(args.before_rev), "missing": [],
    }
    measure_accuracy(args, results)
    if not args.skip_speed:
        results["speed"][args.speed_dataset] = speed(args.speed_dataset, args.work, args.speed_sentences, args.speed_rounds)
    speed_file = args.results / "spancat_speed.json"
    if not results["speed"] and speed_file.exists():
        # Measured separately with --speed-only (same trained pipelines).
        results["speed"][args.speed_dataset] = json.loads(speed_file.read_text())
    results["load_end"] = os.getloadavg()[0]
    (args.results / "spancat.json").write_text(json.dumps(results, indent=2))
    write_markdown(results, args.results / "spancat.md")
    print((args.results / "spancat.md").read_text())


if __name__ == "__main__":
    main()
