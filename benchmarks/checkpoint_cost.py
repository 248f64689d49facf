"""What `sciner train`'s checkpoints cost: seconds per write, disk, and the time to resume.

A checkpoint is written at each evaluation (spacy_sciner/training/checkpoint.py): the
weights, Adam's moments and the random states. This script loads a trained pipeline, makes
``--updates`` updates on its training data (so that the optimizer holds its moments), then
times ``--rounds`` checkpoint writes against spaCy's own ``model-last`` save (which spaCy's
loop does at every evaluation anyway), and the resume side: loading the checkpoint's model
and restoring the optimizer and random states.

    python benchmarks/checkpoint_cost.py --model training/ncbi_disease/model-calibrated \
        --train corpus/ncbi_disease/train.spacy --out benchmarks/results/checkpoint_cost
"""
import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import spacy
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_sciner.training import checkpoint


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(args) -> dict:
    nlp = spacy.load(args.model)
    docs = list(DocBin().from_disk(args.train).get_docs(nlp.vocab))[: args.updates * args.batch]
    if len(docs) < args.updates * args.batch:
        raise SystemExit(f"{args.train}: {len(docs)} docs, fewer than --updates x --batch")
    optimizer = nlp.resume_training()
    for i in range(args.updates):
        batch = docs[i * args.batch:(i + 1) * args.batch]
        nlp.update([Example(nlp.make_doc(d.text), d) for d in batch], sgd=optimizer)
    keys = checkpoint.param_keys(nlp)
    work = Path(tempfile.mkdtemp(prefix="ckpt-cost-"))
    try:
        def write():
            state = {"optimizer": checkpoint.optimizer_state(optimizer, keys), "random": checkpoint.random_state(nlp)}
            checkpoint.write(work, state, nlp)

        writes, saves = [], []
        for _ in range(args.rounds):  # interleaved, so that disk caching affects both alike
            writes.append(timed(write))
            saves.append(timed(lambda: nlp.to_disk(work / "model-last")))
        folder, state = checkpoint.read(work)
        fresh = nlp.resume_training()
        load = timed(lambda: spacy.load(folder / checkpoint.MODEL))
        restore = timed(lambda: checkpoint.restore_optimizer(fresh, state["optimizer"], keys, steps=0))
        return {
            "model": str(args.model), "pipe_names": nlp.pipe_names, "updates_before": args.updates,
            "checkpoint_write_s": writes, "model_last_save_s": saves,
            "checkpoint_write_median_s": statistics.median(writes), "model_last_save_median_s": statistics.median(saves),
            "checkpoint_mb": round(folder_mb(work / checkpoint.CHECKPOINT), 1),
            "state_pkl_mb": round((folder / checkpoint.STATE).stat().st_size / 2**20, 1),
            "model_last_mb": round(folder_mb(work / "model-last"), 1),
            "resume_load_model_s": load, "resume_restore_optimizer_s": restore,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_report(result: dict, out: Path, label: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    result["label"] = label
    (out / "checkpoint_cost.json").write_text(json.dumps(result, indent=2) + "\n")
    r = result
    md = [f"# Checkpoint cost of `sciner train` ({label})", "",
          f"Pipeline `{r['model']}` ({', '.join(r['pipe_names'])}), optimizer after {r['updates_before']} updates; "
          f"medians of {len(r['checkpoint_write_s'])} interleaved rounds.", "",
          "| what | seconds | MB on disk |", "|---|---:|---:|",
          f"| checkpoint write (weights + optimizer + random states) | {r['checkpoint_write_median_s']:.2f} | {r['checkpoint_mb']:.0f} |",
          f"| spaCy's model-last save (done at every evaluation anyway) | {r['model_last_save_median_s']:.2f} | {r['model_last_mb']:.0f} |",
          f"| resume: load the checkpoint's model | {r['resume_load_model_s']:.2f} | |",
          f"| resume: restore the optimizer state | {r['resume_restore_optimizer_s']:.2f} | {r['state_pkl_mb']:.0f} (state.pkl) |", ""]
    (out / "checkpoint_cost.md").write_text("\n".join(md))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--train", type=Path, required=True)
    p.add_argument("--updates", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/checkpoint_cost"))
    p.add_argument("--label", default="CPU")
    args = p.parse_args(argv)
    result = measure(args)
    write_report(result, args.out, args.label)
    print((args.out / "checkpoint_cost.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
