"""Evaluation of benchmarks/convergence.py's runs: the dev-chosen decision rule on a
checkpoint (``sciner calibrate``; spaCy spancat's threshold), then test F with
spancat_bench.evaluate; and the test F of the best checkpoint at each time mark. ``run`` is a
convergence.Run (its dir, system, dataset and manifest ``m``)."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import spancat_bench

ROOT = spancat_bench.ROOT


def train_env(args) -> dict:
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if args.threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(args.threads)
    return env


def evaluate_run(run, args, corpus: Path, checkpoint: str = "model-best") -> dict:
    """Dev-chosen decision rule on a checkpoint (model-best: sciner also model-last), then test F."""
    from convergence_runs import GOLD_PREPROC, base_system  # (convergence_runs imports this module)

    edir = run.dir / ("eval" if checkpoint == "model-best" else f"eval-{checkpoint.replace('/', '-')}")
    shutil.rmtree(edir, ignore_errors=True)
    edir.mkdir(parents=True)
    selected = run.path(checkpoint)
    info = {"checkpoint": checkpoint}
    if run.system.startswith("sciner_spancat"):
        out = edir / "calibrated"
        also = ["--also", str(run.path("model-last"))] if checkpoint == "model-best" else []
        if base_system(run.system) in GOLD_PREPROC:  # dev read as it was during training
            also.append("--gold-tokens")
        cal = subprocess.run([sys.executable, "-m", "spacy_sciner", "calibrate", str(selected),
                              str(corpus / "dev.spacy"), str(out), *also],
                             capture_output=True, text=True, cwd=ROOT, env=train_env(args))
        if cal.returncode:
            raise RuntimeError(f"calibrate failed: {(cal.stderr or cal.stdout)[-500:]}")
        info["calibration_log"] = cal.stdout[-1500:]
        selected = out
    elif run.system.startswith("spacy_spancat"):  # also its _goldtok and _decay<N> variants
        info["calibration"] = spancat_bench.tune_spancat_threshold(selected, corpus / "dev.spacy", edir / "calibrated")
        selected = edir / "calibrated"
    # spancat_bench.evaluate loads model_dir(dataset, system, work): point both names there.
    work = edir / "work"
    (work / run.dataset / run.system).mkdir(parents=True)
    for name in ("model-best", "model-calibrated"):
        (work / run.dataset / run.system / name).symlink_to(selected.resolve())
    t0 = time.time()
    info.update(spancat_bench.evaluate(run.dataset, run.system, corpus, work))
    info["test_eval_seconds"] = round(time.time() - t0, 1)
    shutil.rmtree(work, ignore_errors=True)
    return info


def evaluate_marks(run, args, corpus: Path) -> None:
    """Test F of the best checkpoint at each time mark (the same as at the end when the run
    converged before the mark or its best did not change after it)."""
    final_best = run.m["best"]["step"]
    marks = run.m.setdefault("marks", {})
    for minutes in args.marks:
        key, snap = f"{minutes:g}", run.dir / "marks" / f"{minutes:g}"
        if key in marks:
            continue
        if snap.exists():
            info = json.loads((snap / "best.json").read_text())
            if info["step"] != final_best:
                info["evaluation"] = {k: v for k, v in evaluate_run(run, args, corpus, f"marks/{key}").items() if k != "calibration_log"}
            else:
                info["evaluation"] = "final"
        elif run.m["status"] in ("converged", "max steps") and run.m["curve"][-1]["seconds"] <= 60 * minutes:
            info = {**{k: run.m["best"][k] for k in ("step", "seconds", "score")}, "evaluation": "final"}
        else:
            continue
        marks[key] = info
        run.save()
