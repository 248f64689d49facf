"""CPU matrix products: thinc's blis against numpy's BLAS (spacy_sciner/ops.py), in one run.

Three measurements, written to OUT/blas_ops.{json,md}:

1. ``gemm``: seconds of thinc's ``NumpyOps().gemm`` (blis) and ``NumpyOps(use_blis=False)
   .gemm`` (numpy) on the shapes of the CNN tok2vec's maxout layers and of the span MLP,
   the largest difference between their results, median of ``--rounds``;
2. ``pipelines``: for each saved pipeline (``--model``, one or more), ``nlp.pipe`` words/s
   with every model's matrix products through blis, as spaCy builds them, and through numpy,
   as spacy-sciner runs them, and of its first component alone (a transformer: the ratio
   against the bare encoder that issue 11 asks about), interleaved rounds after a warm-up,
   medians; and whether both variants predict the same spans and ents on every doc;
3. ``updates`` (``--train-data``): seconds per ``nlp.update`` of each pipeline both ways.

Several pipelines in one run (e.g. spaCy's stock CNN ``ner`` beside the CNN recipe) make
their words/s comparable: same machine, same load, same texts.

    python benchmarks/blas_ops.py --model training/ncbi_disease/model-calibrated \\
        --data ../shared/data/scierc --sentences 2000 --out benchmarks/results/blas_ops
"""
import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Dict, List

import numpy

# (rows, inputs, outputs): a batch of 50k tokens through a width-96 maxout window layer
# (3 x 96 inputs, 3 pieces), its 384-wide hybrid join, and 20k spans through the MLP.
GEMM_SHAPES = [(50000, 288, 288), (50000, 480, 288), (20000, 960, 128)]


def time_gemm(shapes: List[tuple], rounds: int) -> List[dict]:
    """Median seconds of blis and numpy gemm per shape, and their largest difference."""
    from thinc.api import NumpyOps

    variants = {"blis": NumpyOps(), "numpy": NumpyOps(use_blis=False)}
    rng = numpy.random.default_rng(0)
    rows = []
    for m, k, n in shapes:
        x, w = rng.random((m, k), dtype="f"), rng.random((n, k), dtype="f")
        seconds: Dict[str, list] = {name: [] for name in variants}
        for _ in range(rounds + 1):  # the first round warms up, untimed
            for name, ops in variants.items():
                start = time.perf_counter()
                ops.gemm(x, w, trans2=True)
                seconds[name].append(time.perf_counter() - start)
        diff = numpy.abs(variants["blis"].gemm(x, w, trans2=True) - variants["numpy"].gemm(x, w, trans2=True))
        blis, np_ = (statistics.median(seconds[v][1:]) for v in ("blis", "numpy"))
        rows.append({"shape": [m, k, n], "blis_s": blis, "numpy_s": np_, "speedup": blis / np_,
                     "max_abs_diff": float(diff.max()), "max_abs_value": float(numpy.abs(x @ w.T).max())})
    return rows


def set_ops(nlp, blis: bool) -> None:
    """Every component's model through blis (spaCy's default) or numpy (spacy-sciner's)."""
    from thinc.api import Model, NumpyOps

    ops = NumpyOps(use_blis=blis)
    for _, component in nlp.pipeline:
        model = getattr(component, "model", None)
        if isinstance(model, Model):
            for node in model.walk():
                if type(node.ops) is NumpyOps:
                    node.ops = ops


def timed_pipe(nlp, texts: List[str], batch_size: int) -> tuple:
    """Seconds of one ``nlp.pipe`` pass, and each doc's spans and ents."""
    start = time.perf_counter()
    docs = list(nlp.pipe(texts, batch_size=batch_size))
    seconds = time.perf_counter() - start
    out = [sorted((s.start, s.end, s.label_) for g in d.spans.values() for s in g)
           + [(e.start, e.end, e.label_) for e in d.ents] for d in docs]
    return seconds, out, sum(len(d) for d in docs)


def interleaved_pipe(nlp, texts: List[str], rounds: int, batch_size: int, variants: list, apply) -> tuple:
    """Seconds per ``nlp.pipe`` pass of each variant, in interleaved rounds after an
    untimed warm-up round. ``variants``: (name, setting, components to enable or None for
    all); ``apply(nlp, setting)`` sets a variant up. RETURNS (seconds by variant, the
    outputs of the whole-pipeline variants, words per pass)."""
    seconds: Dict[str, list] = {name: [] for name, _, _ in variants}
    outputs, words = {}, 0
    for r in range(rounds + 1):  # round 0 warms up, untimed
        for name, setting, enable in variants if r % 2 else variants[::-1]:
            apply(nlp, setting)
            with nlp.select_pipes(enable=enable or nlp.pipe_names):
                took, out, words = timed_pipe(nlp, texts, batch_size)
            if r:
                seconds[name].append(took)
            if enable is None:
                outputs[name] = out
    return seconds, outputs, words


def time_pipeline(model: Path, texts: List[str], rounds: int, batch_size: int) -> dict:
    """words/s of the pipeline with blis and with numpy, and of its first component alone."""
    import spacy

    nlp = spacy.load(model)
    first = nlp.pipe_names[0]
    variants = [("blis", True, None), ("numpy", False, None), (f"{first} alone", False, [first])]
    seconds, outputs, words = interleaved_pipe(nlp, texts, rounds, batch_size, variants, set_ops)
    wps = {name: words / statistics.median(s) for name, s in seconds.items()}
    return {"model": str(model), "pipeline": nlp.pipe_names, "texts": len(texts), "words": words,
            "batch_size": batch_size, "rounds": rounds, "seconds": seconds, "words_per_s": wps,
            "same_output": outputs["blis"] == outputs["numpy"],
            "speedup": wps["numpy"] / wps["blis"],
            "ratio_to_first": {v: wps[v] / wps[f"{first} alone"] for v in ("blis", "numpy")}}


def training_batches(nlp, train: Path, updates: int, batch_words: int) -> list:
    """The first ``updates`` batches of about ``batch_words`` words of a training DocBin."""
    from spacy.tokens import DocBin
    from spacy.training import Example

    batches, batch, words = [], [], 0
    for doc in DocBin().from_disk(train).get_docs(nlp.vocab):
        batch.append(Example(nlp.make_doc(doc.text), doc))
        words += len(doc)
        if words >= batch_words:
            batches.append(batch)
            batch, words = [], 0
        if len(batches) == updates:
            break
    if batch and len(batches) < updates:
        batches.append(batch)
    if not batches:
        raise SystemExit(f"no training docs in {train}")
    return batches


def time_updates(model: Path, train: Path, updates: int, rounds: int, batch_words: int) -> dict:
    """Seconds per ``nlp.update`` with blis and with numpy on the same batches (the first
    ``updates`` batches of about ``batch_words`` words), interleaved rounds after a warm-up."""
    import spacy

    nlp = spacy.load(model)
    batches = training_batches(nlp, train, updates, batch_words)
    optimizer = nlp.resume_training()
    seconds: Dict[str, list] = {"blis": [], "numpy": []}
    for r in range(rounds + 1):  # round 0 warms up, untimed
        for name in ("blis", "numpy") if r % 2 else ("numpy", "blis"):
            set_ops(nlp, name == "blis")
            start = time.perf_counter()
            for examples in batches:
                nlp.update(examples, sgd=optimizer, drop=0.1)
            if r:
                seconds[name].append((time.perf_counter() - start) / len(batches))
    per_update = {name: statistics.median(s) for name, s in seconds.items()}
    return {"model": str(model), "train": str(train), "updates": len(batches), "batch_words": batch_words, "seconds": seconds,
            "s_per_update": per_update, "speedup": per_update["blis"] / per_update["numpy"]}


def read_texts(data: Path, n: int) -> List[str]:
    """Sentences of a SciERC folder (test, then dev, then train), or lines of a text file."""
    if data.is_file():
        return [line.strip() for line in data.open(encoding="utf8") if line.strip()][:n]
    texts = []
    for split in ("test", "dev", "train"):
        for line in (data / f"{split}.json").open(encoding="utf8"):
            texts.extend(" ".join(s) for s in json.loads(line)["sentences"])
    return texts[:n]


def summary(report: dict) -> List[str]:
    """One row per pipeline: words/s and seconds per update, blis -> numpy."""
    updates = {u["model"]: u for u in report.get("updates", [])}
    lines = ["| pipeline | `nlp.pipe` words/s, blis -> numpy | vs its first component alone | "
             "`nlp.update` s, blis -> numpy | same spans and ents |", "|---|---|---|---|---|"]
    for p in report["pipelines"]:
        wps, ratio, u = p["words_per_s"], p["ratio_to_first"], updates.get(p["model"])
        upd = (f"{u['s_per_update']['blis']:.3f} -> {u['s_per_update']['numpy']:.3f} ({u['speedup']:.2f}x)"
               if u else "—")
        name = p.get("name") or f"`{p['model']}`"
        lines.append(f"| {name} ({', '.join(p['pipeline'])}) | {wps['blis']:,.0f} -> "
                     f"**{wps['numpy']:,.0f} ({p['speedup']:.2f}x)** | {ratio['blis']:.2f}x -> {ratio['numpy']:.2f}x "
                     f"| {upd} | {'yes' if p['same_output'] else 'NO'} |")
    return lines


def pipeline_lines(p: dict) -> List[str]:
    """The detail of one pipeline's ``nlp.pipe`` timing."""
    first = p["pipeline"][0]
    lines = ["", f"`nlp.pipe` of `{p['model']}` ({', '.join(p['pipeline'])}): {p['texts']} texts, "
             f"{p['words']} words, batch {p['batch_size']}, median of {p['rounds']} interleaved rounds "
             f"after a warm-up; same spans and ents with both: {'yes' if p['same_output'] else 'NO'}", "",
             f"| matrix products | words/s | vs `{first}` alone |", "|---|---:|---:|"]
    for v in ("blis", "numpy"):
        lines.append(f"| {v} | {p['words_per_s'][v]:,.0f} | {p['ratio_to_first'][v]:.2f}x |")
    lines.append(f"| (`{first}` alone) | {p['words_per_s'][first + ' alone']:,.0f} | 1.00x |")
    return lines + ["", f"numpy over blis: {p['speedup']:.2f}x the words/s."]


def markdown(report: dict) -> str:
    """The report as Markdown: the pipelines' summary first, then the detail."""
    lines = ["# CPU matrix products: thinc's blis vs numpy's BLAS", "", report["label"], "",
             f"Machine: `{json.dumps(report['machine'])}`", ""]
    if report.get("pipelines"):
        lines += summary(report) + [""]
    lines += ["| gemm shape (rows, in, out) | blis s | numpy s | speed-up | max abs diff (max abs value) |",
              "|---|---:|---:|---:|---|"]
    for row in report["gemm"]:
        lines.append(f"| {tuple(row['shape'])} | {row['blis_s']:.3f} | {row['numpy_s']:.3f} | "
                     f"{row['speedup']:.2f}x | {row['max_abs_diff']:.2g} ({row['max_abs_value']:.3g}) |")
    for p in report.get("pipelines", []):
        lines += pipeline_lines(p)
    for u in report.get("updates", []):
        lines += ["", f"`nlp.update` of `{u['model']}` on the first {u['updates']} batches of ~{u['batch_words']} "
                  f"words of `{u['train']}` (dropout 0.1), median of the rounds: blis {u['s_per_update']['blis']:.3f} s, "
                  f"numpy {u['s_per_update']['numpy']:.3f} s per update ({u['speedup']:.2f}x the updates/s)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, nargs="+", default=[],
                   help="Saved pipelines, timed in one run (omit: gemm only)")
    p.add_argument("--names", nargs="+", default=[], help="A short name per --model for the summary table")
    p.add_argument("--data", type=Path, help="A SciERC folder or a text file, one text per line")
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shapes", type=json.loads, default=GEMM_SHAPES, help="JSON list of [rows, in, out]")
    p.add_argument("--train-data", type=Path, help="A training DocBin: also time nlp.update of --model")
    p.add_argument("--updates", type=int, default=10, help="Batches timed per round with --train-data")
    p.add_argument("--batch-words", type=int, default=500)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--label", default="")
    args = p.parse_args(argv)
    if args.model and (args.data is None or not args.data.exists()):
        p.error("--model needs --data: a SciERC folder or a text file")
    if args.names and len(args.names) != len(args.model):
        p.error(f"--names: {len(args.names)} names for {len(args.model)} --model pipelines")
    for model in args.model:
        if not (model / "config.cfg").is_file():
            p.error(f"--model {model}: no config.cfg there (not a saved pipeline)")
    if args.train_data is not None and (not args.model or not args.train_data.is_file()):
        p.error("--train-data needs --model and an existing DocBin")
    import torch

    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
               "load_avg_1min": os.getloadavg()[0], "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")}
    report = {"label": args.label, "machine": machine, "gemm": time_gemm(args.shapes, args.rounds)}
    if args.model:
        texts = read_texts(args.data, args.sentences)
        report["pipelines"] = [time_pipeline(m, texts, args.rounds, args.batch_size) for m in args.model]
        for entry, name in zip(report["pipelines"], args.names):
            entry["name"] = name
    if args.train_data is not None:
        report["updates"] = [time_updates(m, args.train_data, args.updates, args.rounds, args.batch_words)
                             for m in args.model]
    return write_report(report, args.out, "blas_ops", markdown)


def write_report(report: dict, out: Path, stem: str, to_markdown) -> dict:
    """OUT/STEM.json and OUT/STEM.md (also printed), with the load at the end of the run."""
    report["machine"]["load_avg_1min_end"] = os.getloadavg()[0]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf8")
    text = to_markdown(report)
    (out / f"{stem}.md").write_text(text, encoding="utf8")
    print(text)
    return report


if __name__ == "__main__":
    main()
