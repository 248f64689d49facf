"""The in-training side of benchmarks/convergence.py: what `spacy train --code` loads.

``sciner_convergence.stopper.v1`` (a before_update callback) copies model-last to a
crash-safe checkpoint after each evaluation, snapshots the best weights at time marks, and
ends a segment by convergence (global patience) or by its time budget;
``sciner_convergence.shifted.v1`` continues a schedule after the steps already done.
Kept apart from the orchestration so that the training subprocess imports only this.
"""
import itertools
import json
import shutil
import time
from pathlib import Path

from spacy.util import registry

STOP_MARKER = "stop.json"


class ConvergenceStop(Exception):
    """Raised by the before_update callback at an evaluation point to end a segment."""


@registry.schedules("sciner_convergence.shifted.v1")
def shifted_schedule(schedule, offset: int = -1, first=None):
    """`schedule` continued after `offset` + 1 values (the steps 0..offset already done);
    `first` (e.g. 0.0), if not None, is yielded before: the hold step of a resumed run."""
    values = itertools.repeat(schedule) if isinstance(schedule, (int, float)) else iter(schedule)
    for _ in range(offset + 1):
        next(values)
    if first is not None:
        yield first
    yield from values


@registry.callbacks("sciner_convergence.stopper.v1")
def make_stopper(curve: str, stop_file: str, checkpoint: str, model_last: str, eval_frequency: int,
                 deadline: float, patience_steps: int, best_score: float, best_step: int, step_offset: int,
                 seconds_offset: float = 0.0, marks: list = (), run_dir: str = ""):
    """before_update callback: at the first step after each evaluation, copy model-last to
    `checkpoint` (atomically, with a fingerprint of the weights) and stop the segment when
    the global patience is used up or the next evaluation would end after `deadline` (unix
    time; 0: none). In a continued segment (step_offset >= 0) the first call also writes
    the fingerprint of the weights after the lr-0 hold step to resume.json.

    Time marks (minutes of global training time): when an evaluation first passes a mark,
    the best checkpoint as of the evaluation before (RUN/best-copy, kept by this callback)
    is copied to RUN/marks/<minutes>, for test F at equal wall time."""
    # prev: global seconds of the previous evaluation (a mark is passed between two evaluations)
    state = {"last": time.time(), "best": best_score, "prev": seconds_offset if step_offset >= 0 else None}
    seg_dir = Path(stop_file).parent

    def before_update(nlp, args):
        step = args["step"]
        if step == 0 or (step - 1) % eval_frequency:
            return
        now = time.time()
        interval, state["last"] = now - state["last"], now
        records = read_curve(Path(curve))
        if not records:
            return
        last = records[-1]
        fp = fingerprint(nlp)
        if step == 1 and step_offset >= 0:
            (seg_dir / "resume.json").write_text(json.dumps({"fingerprint": fp, "score": last["score"]}))
        save_checkpoint(Path(model_last), Path(checkpoint), {**last, "fingerprint": fp})
        own = records[1:] if step_offset >= 0 else records  # a continued segment's step 0 re-scores the saved model
        if run_dir and own:
            snapshot_marks(Path(run_dir), Path(model_last), last, state, marks,
                           last["seconds"] + (seconds_offset - records[0]["seconds"] if step_offset >= 0 else 0.0),
                           last["step"] + max(step_offset, 0))
        top = max([(r["score"] or 0.0, -(r["step"] + max(step_offset, 0))) for r in own] + [(best_score, -best_step)])
        global_step = last["step"] + max(step_offset, 0)
        reason = None
        if patience_steps and global_step - (-top[1]) >= patience_steps:
            reason = "converged"
        elif deadline and now + interval > deadline:
            reason = "time budget"
        if reason:
            Path(stop_file).write_text(json.dumps({"reason": reason, "step": last["step"], "fingerprint": fp}))
            raise ConvergenceStop(reason)

    return before_update


def snapshot_marks(run_dir: Path, model_last: Path, last: dict, state: dict, marks, seconds: float, step: int) -> None:
    """Copy best-copy (the best weights up to the previous evaluation) to marks/<m> for each
    mark this evaluation passes first; then make this evaluation best-copy if it is best."""
    for minutes in marks:
        target = run_dir / "marks" / f"{minutes:g}"
        passed_now = state["prev"] is not None and state["prev"] <= 60 * minutes < seconds
        if passed_now and not target.exists() and (run_dir / "best-copy").exists():
            replace_dir(run_dir / "best-copy", target)
    state["prev"] = seconds
    if (last["score"] or 0.0) > state["best"]:
        state["best"] = last["score"] or 0.0
        replace_dir(model_last, run_dir / "best-copy")
        (run_dir / "best-copy" / "best.json").write_text(json.dumps({"step": step, "seconds": round(seconds, 3), "score": state["best"]}))


def fingerprint(nlp) -> float:
    """Sum of |w| over every weight of the pipeline (thinc params and PyTorch shims), in
    float64: equal before saving and after reloading iff the weights are the same."""
    import numpy

    total, seen = 0.0, set()
    for _, proc in nlp.pipeline:
        model = getattr(proc, "model", None)
        if not hasattr(model, "walk"):
            continue
        for node in model.walk():
            if node.id in seen:
                continue
            seen.add(node.id)
            for name in node.param_names:
                if node.has_param(name):
                    total += float(numpy.abs(node.ops.to_numpy(node.get_param(name)).astype("float64")).sum())
            for shim in node.shims:
                torch_model = getattr(shim, "_model", None)
                if id(shim) not in seen and hasattr(torch_model, "parameters"):
                    seen.add(id(shim))
                    total += sum(float(t.detach().double().abs().sum()) for t in torch_model.parameters())
    return total


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


def save_checkpoint(model_last: Path, checkpoint: Path, record: dict) -> None:
    """Copy model-last (saved by spaCy at that evaluation) to `checkpoint`, crash-safe."""
    if not model_last.exists():
        return
    tmp, old = checkpoint.with_name(checkpoint.name + "-tmp"), checkpoint.with_name(checkpoint.name + "-old")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(model_last, tmp)
    (tmp / "checkpoint.json").write_text(json.dumps({k: record[k] for k in ("step", "score", "seconds", "fingerprint")}))
    if checkpoint.exists():
        shutil.rmtree(old, ignore_errors=True)
        checkpoint.rename(old)
    tmp.rename(checkpoint)
    shutil.rmtree(old, ignore_errors=True)


def replace_dir(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + "-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)
