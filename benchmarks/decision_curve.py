"""Dev-F curve of a short `spacy train` run: the old decision rule vs argmax + prior biases.

Three variants train the same config on the same data (the shipped demo sample by default)
with the same seed, steps and evaluation frequency:

* before (``--before-rev``, default 127b1b0): a span is output when its best label's
  probability is >= 0.5, output biases start at zero. That tree is exported with
  ``git archive`` and every command runs inside it (cwd and PYTHONPATH), so its entry
  points resolve to the old modules;
* this checkout with ``threshold = 0.5``: the same training as "after" (prior biases,
  candidate edges), only the old decision rule, so the two curves isolate the rule;
* after (this checkout): argmax over the labels + "no entity", biases at the class prior.

For each, the dev F after every evaluation, then model-best (chosen on dev during training,
as `spacy train` does) is calibrated on dev and scored on test. Finished variants (their
test.json exists) are reused.

    python benchmarks/decision_curve.py            # ~10 min on 2 cores

Writes benchmarks/results/decision_curve.{json,md,png}.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s*$")


def export_revision(rev: str, dest: Path) -> Path:
    """The tree of ``rev`` in ``dest`` (reused when present)."""
    if not (dest / "spacy_sciner").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def run(cmd, env, log: Path, cwd: Path) -> str:
    # cwd matters: `python -m` puts it first on sys.path, before PYTHONPATH.
    with open(log, "w") as out:
        subprocess.run(cmd, env=env, check=True, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    return log.read_text()


def parse_curve(log: str):
    """(step, dev span F) rows of spaCy's console table (E # LOSS.. SPANS_SC_F/P/R ..)."""
    rows = []
    for line in log.splitlines():
        match = ROW.match(line)
        if match:
            rows.append({"epoch": int(match.group(1)), "step": int(match.group(2)), "dev_f": float(match.group(5))})
    return rows


def variant(name: str, code: Path, corpus: Path, work: Path, args, overrides=()) -> dict:
    out = work / name
    if (out / "result.json").exists():
        return json.loads((out / "result.json").read_text())
    env = dict(os.environ, PYTHONPATH=str(code), TOKENIZERS_PARALLELISM="false")
    cmd = [
        sys.executable, "-m", "spacy", "train", str(code / "configs" / "sciner_spancat.cfg"), "--output", str(out),
        "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
        "--system.seed", str(args.seed), "--training.max_epochs", "0", "--training.max_steps", str(args.steps),
        "--training.eval_frequency", str(args.eval_every), "--training.optimizer.learn_rate.warmup_steps", str(args.warmup),
        "--training.optimizer.learn_rate.total_steps", str(args.steps), "--training.logger.progress_bar", "false",
        *overrides,
    ]
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    curve = parse_curve(run(cmd, env, out / "train.log", code))
    seconds = time.perf_counter() - start
    cal = [sys.executable, "-m", "spacy_sciner", "calibrate", str(out / "model-best"), str(corpus / "dev.spacy"), str(out / "model-calibrated")]
    calibration = run(cal, env, out / "calibrate.log", code)
    metrics = out / "test.json"
    run([sys.executable, "-m", "spacy", "evaluate", str(out / "model-calibrated"), str(corpus / "test.spacy"), "--output", str(metrics)], env, out / "evaluate.log", code)
    best = max(curve, key=lambda r: r["dev_f"]) if curve else None
    test = json.loads(metrics.read_text())
    result = {
        "curve": curve, "train_seconds": seconds, "best_step": best and best["step"], "best_dev_f": best and best["dev_f"],
        "test_spans_f": test["spans_sc_f"], "test_spans_p": test["spans_sc_p"], "test_spans_r": test["spans_sc_r"],
        "calibration_tail": calibration[-600:], "code": str(code), "overrides": list(overrides),
    }
    (out / "result.json").write_text(json.dumps(result, indent=2))
    return result


def write_outputs(results: dict, results_dir: Path) -> None:
    for r in results["variants"].values():  # no machine-specific paths in committed results
        r["code"] = os.path.relpath(r["code"], ROOT)
        r["calibration_tail"] = r["calibration_tail"].replace(f"{ROOT}/", "")
    (results_dir / "decision_curve.json").write_text(json.dumps(results, indent=2))
    lines = [
        f"# Decision rule: dev-F curve of a short run ({results['dataset']}, seed {results['seed']}, {results['steps']} steps, dev every {results['eval_every']})",
        "", f"Machine: {results['machine']}; load average at start {results['load_start']:.1f}, at end {results['load_end']:.1f}.", "",
        "| variant | dev F at each evaluation (step: F) | best dev step | test span F of model-best, calibrated (P / R) |",
        "|---|---|---:|---:|",
    ]
    for name, r in results["variants"].items():
        curve = ", ".join(f"{row['step']}: {row['dev_f']:.1f}" for row in r["curve"])
        lines.append(f"| {name} | {curve} | {r['best_step']} | {100 * r['test_spans_f']:.1f} ({100 * r['test_spans_p']:.1f} / {100 * r['test_spans_r']:.1f}) |")
    (results_dir / "decision_curve.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, r in results["variants"].items():
        ax.plot([row["step"] for row in r["curve"]], [row["dev_f"] for row in r["curve"]], marker="o", label=name)
    ax.set_xlabel("updates")
    ax.set_ylabel("dev span F (uncalibrated)")
    ax.set_title(f"sciner_spancat on {results['dataset']}: decision rule")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(results_dir / "decision_curve.png", dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before-rev", default="127b1b0")
    p.add_argument("--dataset", default="demo", help="A name of scripts/convert_dataset.py")
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "decision_curve")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = p.parse_args()
    corpus = args.work / "corpus"
    if not (corpus / "test.spacy").exists():
        subprocess.run([sys.executable, "scripts/convert_dataset.py", args.dataset, args.data_dir, str(corpus)], check=True, cwd=ROOT)
    results = {"dataset": args.dataset, "seed": args.seed, "steps": args.steps, "eval_every": args.eval_every,
               "before_rev": args.before_rev, "machine": f"{os.cpu_count()} CPU cores", "load_start": os.getloadavg()[0], "variants": {}}
    before = export_revision(args.before_rev, args.work / "code-before")
    variants = {
        f"before ({args.before_rev}): p >= 0.5, zero biases": ("before", before, ()),
        "this checkout, threshold 0.5: p >= 0.5, prior biases": ("floor05", ROOT, ("--components.sciner_spancat.threshold", "0.5")),
        "after: argmax, prior biases": ("after", ROOT, ()),
    }
    for name, (folder, code, overrides) in variants.items():
        results["variants"][name] = variant(folder, code, corpus, args.work, args, overrides)
        print(name, json.dumps({k: v for k, v in results["variants"][name].items() if k != "calibration_tail"}), flush=True)
    results["load_end"] = os.getloadavg()[0]
    args.results.mkdir(parents=True, exist_ok=True)
    write_outputs(results, args.results)
    print((args.results / "decision_curve.md").read_text())


if __name__ == "__main__":
    main()
