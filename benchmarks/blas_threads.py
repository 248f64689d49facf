"""numpy's BLAS beside a transformer: ``sciner_spancat`` with its one-thread limit off and on.

On the CPU ``sciner_spancat`` multiplies with numpy's BLAS (``spacy_sciner/ops.py``), whose
worker threads keep spinning after each product; beside a PyTorch transformer they take a
core from its next forward or backward pass. When its model reads a transformer, the
component therefore holds that BLAS to one thread during inference and updates
(``ops.blas_threads``). This script switches that limit off and on in one process (the
component's ``_blas_limit``), so both settings see the same machine state, and writes
OUT/blas_threads.{json,md}:

1. ``pipe``: ``nlp.pipe`` words/s of a saved pipeline at each batch size: its first
   component (the transformer) alone, the whole pipeline with the limit off, and on;
   interleaved rounds after a warm-up, medians; and whether both settings give the same
   spans and ents;
2. ``updates`` (``--train-data``): seconds per ``nlp.update`` with the limit off and on,
   alternating blocks of the same batches, median per setting.

    python benchmarks/blas_threads.py --model PIPELINE --data ../shared/data/scierc \\
        --train-data CORPUS/train.spacy --out benchmarks/results/blas_threads_plain
"""
import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Dict, List, Optional

from blas_ops import interleaved_pipe, read_texts, training_batches, write_report

SETTINGS = {"limit off": None, "limit on": 1}


def set_limit(nlp, limit: Optional[int]) -> int:
    """Set the BLAS limit of every component that has one; RETURNS how many have one."""
    components = [c for _, c in nlp.pipeline if hasattr(c, "_blas_limit")]
    for component in components:
        component._blas_limit = limit
    return len(components)


def check_labels(nlp, batches: list, path: Path, parser: argparse.ArgumentParser) -> None:
    """Stop with the component's own message if a training span has a label it does not know."""
    from spacy_sciner.spancat.sampling import gold_spans

    for _, component in nlp.pipeline:
        if hasattr(component, "_blas_limit"):
            for examples in batches:
                for eg in examples:
                    try:
                        gold_spans(eg, component.key, component._label_map)
                    except ValueError as err:
                        parser.error(f"--train-data {path}: {err}")


def time_pipe(nlp, texts: List[str], rounds: int, batch_size: int) -> dict:
    """words/s of the first component alone and of the pipeline with each setting."""
    first = nlp.pipe_names[0]
    variants = [(f"{first} alone", None, [first])] + [(name, limit, None) for name, limit in SETTINGS.items()]
    seconds, outputs, words = interleaved_pipe(nlp, texts, rounds, batch_size, variants, set_limit)
    wps = {name: words / statistics.median(s) for name, s in seconds.items()}
    return {"batch_size": batch_size, "words": words, "seconds": seconds, "words_per_s": wps,
            "ratio_to_first": {name: wps[name] / wps[f"{first} alone"] for name in SETTINGS},
            "same_output": outputs["limit off"] == outputs["limit on"]}


def time_updates(nlp, batches: list, blocks: int) -> dict:
    """Seconds per ``nlp.update`` over ``batches`` with each setting, alternating blocks
    (the first block of each warms up, untimed)."""
    optimizer = nlp.resume_training()
    seconds: Dict[str, list] = {name: [] for name in SETTINGS}
    for block in range(blocks + 1):
        for name in SETTINGS if block % 2 else list(SETTINGS)[::-1]:
            set_limit(nlp, SETTINGS[name])
            start = time.perf_counter()
            for examples in batches:
                nlp.update(examples, sgd=optimizer, drop=0.1)
            if block:
                seconds[name].append((time.perf_counter() - start) / len(batches))
    per_update = {name: statistics.median(s) for name, s in seconds.items()}
    return {"updates": len(batches), "blocks": blocks, "seconds": seconds, "s_per_update": per_update,
            "on_over_off": per_update["limit on"] / per_update["limit off"]}


def markdown(report: dict) -> str:
    """The report as Markdown."""
    lines = ["# numpy's BLAS beside a transformer: sciner_spancat's one-thread limit off vs on", "",
             report["label"], "", f"Machine: `{json.dumps(report['machine'])}`", "",
             f"Pipeline `{report['model']}` ({', '.join(report['pipeline'])}); {report['texts']} texts.", ""]
    if report.get("pipe"):
        lines += [f"`nlp.pipe`, median of {report['rounds']} interleaved rounds after a warm-up:", "",
                  "| batch | transformer alone words/s | limit off words/s (ratio) | limit on words/s (ratio) | same output |",
                  "|---|---:|---:|---:|---|"]
        for row in report["pipe"]:
            wps, ratio = row["words_per_s"], row["ratio_to_first"]
            alone = next(v for k, v in wps.items() if k.endswith(" alone"))
            lines.append(f"| {row['batch_size']} | {alone:,.0f} | {wps['limit off']:,.0f} ({ratio['limit off']:.2f}x) | "
                         f"**{wps['limit on']:,.0f} ({ratio['limit on']:.2f}x)** | {'yes' if row['same_output'] else 'NO'} |")
    if report.get("updates"):
        u = report["updates"]
        lines += ["", f"`nlp.update` on {u['updates']} batches of ~{report['batch_words']} words (dropout 0.1), "
                  f"median of {u['blocks']} alternating blocks per setting: limit off {u['s_per_update']['limit off']:.3f} s, "
                  f"limit on {u['s_per_update']['limit on']:.3f} s per update (**{u['on_over_off']:.3f}x** the time)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True, help="A saved transformer + sciner_spancat pipeline")
    p.add_argument("--data", type=Path, required=True, help="A SciERC folder or a text file, one text per line")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--train-data", type=Path, help="A training DocBin: also time nlp.update")
    p.add_argument("--updates", type=int, default=15, help="Batches per block with --train-data")
    p.add_argument("--blocks", type=int, default=6, help="Timed blocks per setting with --train-data")
    p.add_argument("--batch-words", type=int, default=500)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--label", default="")
    args = p.parse_args(argv)
    for path, what in ((args.model / "config.cfg", "--model: no config.cfg there (not a saved pipeline)"),
                       (args.data, "--data: no such file or folder")):
        if not path.exists():
            p.error(f"{what}: {path}")
    if args.train_data is not None and not args.train_data.is_file():
        p.error(f"--train-data: no such DocBin: {args.train_data}")
    import spacy
    import torch

    nlp = spacy.load(args.model)
    if not any(getattr(component, "_blas_limit", None) == 1 for _, component in nlp.pipeline):
        p.error(f"--model {args.model}: no sciner_spancat reading a transformer (no limit to switch)")
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
               "load_avg_1min": os.getloadavg()[0]}
    batches = None
    if args.train_data is not None:  # read and checked before any timing
        batches = training_batches(nlp, args.train_data, args.updates, args.batch_words)
        check_labels(nlp, batches, args.train_data, p)
    texts = read_texts(args.data, args.sentences)
    report = {"label": args.label, "machine": machine, "model": str(args.model), "pipeline": nlp.pipe_names,
              "texts": len(texts), "rounds": args.rounds, "batch_words": args.batch_words,
              "pipe": [time_pipe(nlp, texts, args.rounds, size) for size in args.batch_sizes]}
    if batches is not None:
        report["updates"] = time_updates(nlp, batches, args.blocks)
    return write_report(report, args.out, "blas_threads", markdown)


if __name__ == "__main__":
    main()
