"""Learning curves to convergence: dev F against updates and wall time, per system.

Each run (dataset x system x seed) trains a config from configs/ with `spacy sciner train`
(spaCy's training loop with a checkpoint at each evaluation): early stopping on dev
(spaCy's patience, in updates: --patience-evals evaluations), max_epochs 0 and a large
max_steps; spacy-sciner.JSONLLogger.v1 writes the curve. Runs are resumable ACROSS
SESSIONS: run state (config, sciner train's output folder with model-last, model-best and
the checkpoint, the curve, manifest.json) lives under a state dir (default
benchmarks/work/convergence, ignored by git; $SCINER_CONVERGENCE_STATE), not committed.

A run stops by convergence (no dev gain in `patience` evaluations), by max_steps, or by
its time budget (--max-minutes: a before_update callback, sciner_convergence.budget.v1,
ends the call at the first evaluation after which the next one would pass the budget). A
stopped run, or one whose process was killed, continues in the next call, `sciner train
--resume` on the same folder: from the last evaluation's checkpoint (weights, Adam's
moments, the data position, schedules, random states), so that on the CPU it ends with
the weights of an uninterrupted run. The curve's seconds are training-loop wall time, going
on across calls (initialisation and checkpoint loading excluded). Runs in the results
recorded with "segments" ran under the runner before it (up to commit 85c4a34), which
continued a run as a new `spacy train` sourcing model-last: fresh Adam moments, data order
restarted; its report columns (resume check) are kept for them.

After every finished or stopped run, benchmarks/results/convergence.{json,md,png} (and one
convergence_<dataset>.png per dataset) are rewritten from every run in the state dir, merged
with the runs already in the JSON. A converged run is evaluated: model-best (best dev
checkpoint); sciner_spancat* calibrated on dev (`sciner calibrate BEST DEV OUT --also
LAST`), spacy_spancat's threshold tuned on dev (spancat_bench.tune_spancat_threshold); test
F by spancat_bench.evaluate.

Time marks (--marks, default 15 30 60 minutes of training-loop time): dev F reached by each
mark, and the test F of the best checkpoint at that moment (snapshotted during training,
calibrated and evaluated like model-best).

Fixed-budget variants (``<transformer system>_decay<N>``, e.g. ``sciner_spancat_hybrid_decay2000``):
the same system with its learning rate decaying linearly to 0 at step N, where the run ends
(no patience), as fewshot.py trains; their own runs and rows next to the default ones.
``sciner_spancat_hybrid_ends``: the hybrid with a different span vector (max pooling + the
boundary tokens' vectors + a span-width embedding; convergence_runs.SPAN_HEAD), an ablation.
``<transformer system>_decay<N>_lr<X>`` (e.g. ``sciner_spancat_hybrid_decay2000_lr2e-4``): the
same with peak learning rate X instead of --lr.

Domain pretraining of the CNN side (``*_floret``, ``*_pretrain`` systems): floret vectors and
``spacy pretrain`` weights built once per data set from its aux text (convergence_assets.py,
cached under STATE/assets with their build times in assets.json) and given to the run's config.

The systems, a run's manifest and its calls: convergence_runs.py; the test evaluation:
convergence_eval.py; the report: convergence_report.py.

One background job at a time on the 2-core machine; repeat a command until its runs say
converged (each call continues the stopped ones), commit benchmarks/results/convergence.*:

    nohup python benchmarks/convergence.py --datasets bionlp13cg --systems sciner_spancat_cnn --max-minutes 120 > conv.log 2>&1 &
    python benchmarks/convergence.py --report-only     # rewrite the results from the state dir
    python benchmarks/convergence.py --smoke           # tiny random BERT, demo data, seconds
"""
import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spancat_bench  # noqa: E402  (prepare, DATA)
from convergence_report import write_results  # noqa: E402
from convergence_eval import evaluate_marks, evaluate_run, train_env  # noqa: E402,F401  (train_env: for fewshot, weak_cnn)
from convergence_runs import (OWN_ENCODER, PATIENCE_EVALS, ROOT, RUNNER, SYSTEMS, Run, base_system,  # noqa: E402,F401
                              known_system, recover, train_call)  # (base_system: for recipes)

# ---------------------------------------------------------------------------- main


# The run state: under benchmarks/work (ignored by git, like fewshot.py's work folder), so
# that a run goes on in a later session on a machine whose home cache does not persist.
STATE = Path(os.environ.get("SCINER_CONVERGENCE_STATE", ROOT / "benchmarks" / "work" / "convergence"))


def get_corpus(dataset: str, state: Path) -> Path:
    if dataset in ("scierc", "bionlp13cg"):  # the very DocBins of spancat_bench
        return spancat_bench.prepare(dataset, state / "corpora")
    out = state / "corpora" / dataset / "corpus"
    if not (out / "test.spacy").exists():
        res = subprocess.run([sys.executable, "scripts/convert_dataset.py", dataset, str(spancat_bench.DATA), str(out)],
                             cwd=ROOT, capture_output=True, text=True)
        if res.returncode:
            sys.exit((res.stderr or res.stdout).strip().splitlines()[-1])
    return out


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv=None):
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=None, help="scierc bionlp13cg (default), or any scripts/convert_dataset.py name")
    p.add_argument("--systems", nargs="+", default=None,
                   help=f"Default: all of {', '.join(s for s in SYSTEMS if s not in OWN_ENCODER)} "
                        f"({', '.join(OWN_ENCODER)} also need --encoder). A transformer system + _decay<N> (e.g. "
                        "sciner_spancat_hybrid_decay2000): that system on a fixed budget, its learning rate "
                        "decaying linearly to 0 at step N, where it ends (no patience); + _lr<X> (e.g. _decay2000_lr2e-4): "
                        "peak rate X instead of --lr")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-minutes", type=float, default=0, help="Time budget of each run in this invocation (0: none); checked at evaluation points")
    p.add_argument("--max-steps", type=int, default=20000)
    p.add_argument("--patience-evals", type=int, default=None, help=f"Evaluations without dev gain before stopping (default {PATIENCE_EVALS[0]} transformer, {PATIENCE_EVALS[1]} CNN)")
    p.add_argument("--eval-frequency", type=int, default=None, help="Steps between evaluations (default: per dataset and system family)")
    p.add_argument("--lr", type=float, default=1e-4, help="Transformer systems: peak learning rate")
    p.add_argument("--warmup-steps", type=int, default=100, help="Transformer systems: linear warm-up, then linear decay to 0 at --max-steps")
    p.add_argument("--batch-words", type=int, default=500, help="Transformer systems: words per batch")
    p.add_argument("--encoder", default="sciner-minilm")
    p.add_argument("--pretrain-epochs", type=int, default=5, help="*_pretrain systems: spacy pretrain epochs on the aux text (the project's pretrain_epochs; resumed from the epochs saved)")
    p.add_argument("--marks", nargs="+", type=float, default=None, help="Minutes at which to report dev F (default 15 30 60)")
    p.add_argument("--state", type=Path, default=STATE)
    p.add_argument("--results", type=Path, default=None, help="Default benchmarks/results (smoke: STATE/results)")
    p.add_argument("--no-evaluate", action="store_true", help="Do not evaluate converged runs on test")
    p.add_argument("--evaluate-stopped", action="store_true", help="Also evaluate runs stopped by the budget (best dev so far)")
    p.add_argument("--restart", action="store_true", help="Delete the runs' state and start from scratch")
    p.add_argument("--report-only", action="store_true", help="Only rewrite the results from the state dir")
    p.add_argument("--threads", type=int, default=0, help="OMP/MKL threads of each training (0: library default)")
    p.add_argument("--gpu-id", type=int, default=-1)
    p.add_argument("--smoke", action="store_true", help="Tiny random BERT, demo data, a few steps (for tests)")
    args = p.parse_args(argv)
    from importlib import util as importlib_util

    spec = importlib_util.spec_from_file_location("convert_dataset", ROOT / "scripts" / "convert_dataset.py")
    known = importlib_util.module_from_spec(spec)
    spec.loader.exec_module(known)
    args.datasets = args.datasets or (["demo"] if args.smoke else ["scierc", "bionlp13cg"])
    args.systems = args.systems or [s for s in SYSTEMS if s not in OWN_ENCODER]  # those need --encoder
    for ds in args.datasets:
        if ds not in known.DATASETS:
            p.error(f"unknown dataset '{ds}' (known: {', '.join(sorted(known.DATASETS))})")
    for system in args.systems:
        if not known_system(system):
            p.error(f"unknown system '{system}' (known: {', '.join(SYSTEMS)}, and <transformer system>_decay<N>[_lr<X>])")
    for name in ("max_minutes", "max_steps", "patience_evals", "eval_frequency", "warmup_steps", "batch_words", "threads"):
        value = getattr(args, name)
        if value is not None and (value < 0 or (name in ("max_steps", "batch_words") and value < 1)):
            p.error(f"--{name.replace('_', '-')} must be {'positive' if name in ('max_steps', 'batch_words') else '>= 0'}, got {value}")
    if args.smoke:
        args.marks = args.marks or [0.05, 0.1, 0.5]
        if args.max_steps == 20000:
            args.max_steps = 200
        args.warmup_steps = min(args.warmup_steps, 2)
        args.patience_evals = args.patience_evals or 2
        args.lr = 1e-3 if args.lr == 1e-4 else args.lr
        args.batch_words = min(args.batch_words, 100)
        args.threads = args.threads or 1
    args.marks = args.marks or [15, 30, 60]
    if any(m <= 0 for m in args.marks):
        p.error("--marks must be positive minutes")
    args.results = args.results or (args.state / "results" if args.smoke else ROOT / "benchmarks" / "results")
    own = [s for s in args.systems if base_system(s) in OWN_ENCODER]
    if own and not args.report_only and not args.smoke and args.encoder == p.get_default("encoder"):
        p.error(f"{', '.join(own)} train on an encoder of their own: give its folder with --encoder")
    needs_data = [ds for ds in args.datasets if not known.DATASETS[ds][1].startswith("assets/")]
    if needs_data and not args.report_only and not spancat_bench.DATA.is_dir():
        p.error(f"data folder {spancat_bench.DATA} not found (needed for {', '.join(needs_data)}; see README, 'Data')")
    try:
        args.state.mkdir(parents=True, exist_ok=True)
        args.results.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        p.error(f"cannot create {err.filename}: {err.strerror}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.smoke and any(SYSTEMS[base_system(s)][1] for s in args.systems):
        from spacy_sciner.testing import make_tiny_bert

        tiny = args.state / "tiny-bert"
        if not (tiny / "config.json").exists():
            make_tiny_bert(tiny)
        args.encoder = str(tiny)
    if args.report_only:
        print(write_results(args.state, args.results, args))
        return 0
    failed = 0
    for ds in args.datasets:
        corpus = get_corpus(ds, args.state)
        for system in args.systems:
            run = Run(args.state, ds, system, args.seed)
            if args.restart and run.dir.exists():
                shutil.rmtree(run.dir)
                run = Run(args.state, ds, system, args.seed)
            recover(run)
            failed += train_run(run, args, corpus)
            if not args.no_evaluate:
                failed += evaluate_on_test(run, args, corpus)
            write_results(args.state, args.results, args)
    print(f"results: {args.results / 'convergence.json'}")
    return 1 if failed else 0


def train_run(run: Run, args, corpus: Path) -> int:
    """One call of a run not yet converged (up to --max-minutes); RETURNS 1 if it failed."""
    if run.m["status"] in ("converged", "max steps"):
        return 0
    if run.m.get("runner") != RUNNER:
        print(f"[{run.key}] FAILED: its state was written by the segment runner before `sciner train` "
              f"(commit 85c4a34 or earlier), which cannot be continued: --restart to train it again", flush=True)
        return 1
    args.deadline = time.time() + 60 * args.max_minutes if args.max_minutes else 0
    status = train_call(run, args, corpus)
    best, curve = run.m["best"], run.m["curve"]
    print(f"[{run.key}] {status}: {len(curve)} evals, last step {curve[-1]['step'] if curve else '—'}, "
          f"best dev F {best['score']:.4f} at step {best['step']}" if best else f"[{run.key}] {status}: no evaluation", flush=True)
    if status != "failed":
        return 0
    print(f"[{run.key}] FAILED, see {run.dir}/train.log:\n{run.m['calls'][-1].get('log_tail', '')[-800:]}", flush=True)
    return 1


def evaluate_on_test(run: Run, args, corpus: Path) -> int:
    """Test F of the best dev checkpoint (if missing or stale; stopped runs only with
    --evaluate-stopped) and at the time marks. RETURNS the number of failed evaluations."""
    failed = 0
    if run.m["best"] and stale_evaluation(run.m) and (
            run.m["status"] in ("converged", "max steps") or args.evaluate_stopped):
        try:
            run.m["evaluation"] = evaluate_run(run, args, corpus)
        except Exception as err:  # reported; the other runs go on
            failed += 1
            print(f"[{run.key}] evaluation FAILED: {type(err).__name__}: {err}", flush=True)
        else:
            run.m["evaluation"]["status_at_evaluation"] = run.m["status"]
            run.m["evaluation"]["best_step"] = run.m["best"]["step"]
            run.save()
            print(f"[{run.key}] test span F {run.m['evaluation']['spans_f']:.4f} (best dev step {run.m['best']['step']})", flush=True)
    if run.m["evaluation"]:
        try:
            evaluate_marks(run, args, corpus)
        except Exception as err:
            failed += 1
            print(f"[{run.key}] evaluation at time marks FAILED: {type(err).__name__}: {err}", flush=True)
    return failed


def stale_evaluation(manifest: dict) -> bool:
    """Whether a run's test evaluation is missing or was made of another best checkpoint:
    a run evaluated when stopped by its budget and continued later may have found a better
    one. (Evaluations recorded without ``best_step`` count as stale if the run has changed
    status since.)"""
    evaluation = manifest["evaluation"]
    if evaluation is None:
        return True
    if "best_step" in evaluation:
        return evaluation["best_step"] != manifest["best"]["step"]
    return evaluation.get("status_at_evaluation", manifest["status"]) != manifest["status"]


if __name__ == "__main__":
    sys.exit(main())
