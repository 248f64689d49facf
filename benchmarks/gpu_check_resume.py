"""gpu_check's ``resume`` step: ``sciner train`` killed mid-run, resumed, against an uninterrupted run.

Two runs of the same config and settings (``--updates`` updates, a checkpoint every quarter):
one uninterrupted, one that raises before update ``updates // 2 + 1`` (the callback below,
loaded with ``--code`` by both runs, so that their configs are equal) and is then resumed with
``--resume``. Reported: the update the resume started after, seconds, and the largest absolute
difference between the two model-last weights (0 on the CPU, where resuming is exact; on a GPU
cupy's random state and kernels are not reproduced, so a small difference is expected).
"""
import os
import subprocess
import sys
import time
from pathlib import Path

from spacy.util import registry

ROOT = Path(__file__).resolve().parent.parent
CRASH_ENV = "SCINER_BENCH_CRASH_AT"


@registry.callbacks("sciner_bench.crash_at.v1")
def make_crash_at():
    """Raise before update ``$SCINER_BENCH_CRASH_AT`` (unset: never): a killed run."""
    at = os.environ.get(CRASH_ENV)

    def crash(nlp, info):
        if at is not None and info["step"] == int(at):
            raise RuntimeError(f"gpu_check: simulated kill before update {at}")
    return crash


def step_resume(args, corpus: Path, work: Path, config: Path) -> dict:
    """Run the check (see the module docstring); RETURNS its report."""
    updates = max(4, args.updates)
    base = [sys.executable, "-m", "spacy_sciner", "train", str(config), "--code", __file__,
            "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
            "--components.transformer.model.name", args.encoder, "--training.max_steps", str(updates),
            "--training.max_epochs", "0", "--training.eval_frequency", str(updates // 4),
            "--training.optimizer.learn_rate.total_steps", str(updates),
            "--training.optimizer.learn_rate.warmup_steps", str(max(1, updates // 10)),
            "--training.logger.progress_bar", "false", "--gpu-id", str(args.gpu_id),
            "--training.before_update", '{"@callbacks":"sciner_bench.crash_at.v1"}']
    crash_at = updates // 2 + 1
    start = time.perf_counter()
    _run(base + ["--output", str(work / "resume_full")], work / "resume_full.log", expect_ok=True)
    _run(base + ["--output", str(work / "resume_cut")], work / "resume_cut.log", expect_ok=False, crash_at=crash_at)
    _run(base + ["--output", str(work / "resume_cut"), "--resume"], work / "resume_cut.log", expect_ok=True)
    log = (work / "resume_cut.log").read_text()
    if "Resuming after update" not in log:
        raise RuntimeError(f"the second run did not resume: {log[-1500:]}")
    resumed_after = int(log.split("Resuming after update ")[1].split()[0])
    diff = max_abs_diff(work / "resume_full" / "model-last", work / "resume_cut" / "model-last")
    return {"updates": updates, "crashed_before": crash_at, "resumed_after": resumed_after,
            "seconds": time.perf_counter() - start, "max_abs_diff": diff, "identical": diff == 0.0}


def _run(cmd, log: Path, *, expect_ok: bool, crash_at=None) -> None:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at is not None:
        env[CRASH_ENV] = str(crash_at)
    with open(log, "a") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env).returncode
    if (rc == 0) != expect_ok:
        raise RuntimeError(f"sciner train exited {rc} ({'expected 0' if expect_ok else 'expected a crash'}): "
                           f"{log.read_text()[-1500:]}")


def max_abs_diff(a: Path, b: Path) -> float:
    """The largest absolute difference between two saved pipelines' weights (torch's included)."""
    import numpy
    import spacy

    nlps = [spacy.load(a), spacy.load(b)]
    worst = 0.0
    for (name, pa), (_, pb) in zip(nlps[0].pipeline, nlps[1].pipeline):
        for na, nb in zip(pa.model.walk(), pb.model.walk()):
            for param in na.param_names:
                if na.has_param(param):
                    x, y = (numpy.asarray(n.ops.to_numpy(n.get_param(param))) for n in (na, nb))
                    worst = max(worst, float(numpy.abs(x - y).max()) if x.size else 0.0)
            for sa, sb in zip(na.shims, nb.shims):
                da, db = sa._model.state_dict(), sb._model.state_dict()
                for key in da:
                    worst = max(worst, float((da[key].float() - db[key].float()).abs().max()) if da[key].numel() else 0.0)
    return worst
