"""The in-training side of benchmarks/convergence.py: what `spacy sciner train --code` loads.

``sciner_convergence.budget.v1`` (a before_update callback) snapshots the best weights at
time marks and ends a call of the run at its time budget. Everything else that a run needs
to stop and go on (patience, model-best, the checkpoint a later call resumes from) is
``sciner train``'s. Kept apart from the orchestration so that the training subprocess
imports only this.
"""
import json
import os
import shutil
import time
from pathlib import Path

from spacy.util import registry

STOP_MARKER = "stop.json"
# Unix time at which a call's budget ends (0 or unset: none). An environment variable, not a
# config setting: `sciner train --resume` refuses a config that differs from the checkpoint's.
DEADLINE_ENV = "SCINER_CONVERGENCE_DEADLINE"


class ConvergenceStop(Exception):
    """Raised by the before_update callback at an evaluation point to end a call."""


@registry.callbacks("sciner_convergence.budget.v1")
def make_budget(curve: str, stop_file: str, model_last: str, eval_frequency: int, marks: list = (), run_dir: str = ""):
    """before_update callback, at the first step after each evaluation (when model-last and
    the checkpoint hold that evaluation's weights): snapshot the best weights for the time
    marks, then end the call (``ConvergenceStop``, after writing ``stop_file``) when the next
    evaluation would end after the deadline in ``$SCINER_CONVERGENCE_DEADLINE``.

    Time marks (minutes of training-loop time, the curve's ``seconds``): when an evaluation
    first passes a mark, the best weights as of the evaluation before (RUN/best-copy) are
    copied to RUN/marks/<minutes>, for test F at equal wall time. The work is derived from
    the curve and the folders alone, so a resumed process repeating an evaluation's call does
    nothing twice."""
    deadline = float(os.environ.get(DEADLINE_ENV) or 0)
    started = time.time()

    def before_update(nlp, args):
        step = args["step"]
        if step == 0 or (step - 1) % eval_frequency:
            return
        records = read_curve(Path(curve))
        if not records:
            return
        if run_dir:
            snapshot_marks(Path(run_dir), Path(model_last), records, marks)
        # The next evaluation interval is assumed as long as the last one.
        interval = records[-1]["seconds"] - records[-2]["seconds"] if len(records) > 1 else time.time() - started
        if deadline and time.time() + interval > deadline:
            Path(stop_file).write_text(json.dumps({"reason": "time budget", "step": records[-1]["step"]}))
            raise ConvergenceStop("time budget")

    return before_update


def snapshot_marks(run_dir: Path, model_last: Path, records: list, marks) -> None:
    """Copy best-copy (the best weights up to the previous evaluation) to marks/<m> for each
    mark the last evaluation passes first; then make the last evaluation best-copy if it is
    better than best-copy's."""
    last = records[-1]
    prev = records[-2]["seconds"] if len(records) > 1 else None
    for minutes in marks:
        target = run_dir / "marks" / f"{minutes:g}"
        passed_now = prev is not None and prev <= 60 * minutes < last["seconds"]
        if passed_now and not target.exists() and (run_dir / "best-copy").exists():
            replace_dir(run_dir / "best-copy", target)
    best_file = run_dir / "best-copy" / "best.json"
    best = json.loads(best_file.read_text())["score"] if best_file.exists() else -1.0
    if (last["score"] or 0.0) > best and model_last.exists():
        replace_dir(model_last, run_dir / "best-copy")
        best_file.write_text(json.dumps({"step": last["step"], "seconds": round(last["seconds"], 3),
                                         "score": last["score"] or 0.0}))


def read_curve(path: Path) -> list:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill
            break
    return records


def replace_dir(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + "-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)
