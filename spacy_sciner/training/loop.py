"""``spacy train``'s loop with checkpoints that a killed run resumes from, exactly.

spaCy's ``train`` (spacy/training/loop.py) saves ``model-last`` and ``model-best`` at each
evaluation but no optimizer state, data position or random state, so a run that dies after
an hour starts again from update 0. This loop makes the same updates in the same order as
spaCy's (same data shuffling, dropout, schedules, evaluations, patience and model-best rule;
tested equal weights), and at each evaluation also writes ``OUTPUT/checkpoint`` (see
checkpoint.py). With ``resume=True`` a run continues from there: weights, Adam's moments,
the epoch's data order and the batches done, the learning-rate and dropout schedules, the
dev results that patience and model-best count, and Python's, numpy's, torch's and the
components' random states. On the CPU a resumed run ends with the same weights as an
uninterrupted one (tested). On a GPU it is a continuation, not bit-identical (cupy's random
state and GPU kernels are not reproduced, nor a mixed-precision grad scaler's scale).

Exactness covers corpora read into memory (``max_epochs >= 0``, spaCy's default) and
streams read again for each pass (``max_epochs = -1``) whose passes are seeded by their
number, as ``spacy-sciner.WeakBalancedCorpus.v1``'s are (tested): a resume reads the passes
done again, without training, to the batch it stopped at.

One deliberate difference from spaCy's loop: with ``use_averages = true`` the evaluations
and the saved pipelines use the averages of a transformer's weights too (averages.py);
spaCy's ``nlp.use_params`` swaps in only those of its own layers.
"""
import os
import random
import shutil
import sys
from pathlib import Path
from timeit import default_timer as timer
from typing import IO, Any, Dict, Iterator, List, Optional, Tuple

# As in pft/train.py: MKL picks code paths by memory alignment, and a resumed process has
# other addresses; strict reproducibility mode keeps its rounding the same. MKL reads it at
# its first call. It also makes this loop round differently from a plain `spacy train` at
# MiniLM's sizes (measured: 1e-4 in the weights after 30 demo updates; equal with the same
# MKL_CBWR), so compare the two under the same setting.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy  # noqa: E402
from spacy.errors import Errors  # noqa: E402
from spacy.schemas import ConfigSchemaTraining  # noqa: E402
from spacy.training.loop import (  # noqa: E402
    DIR_MODEL_BEST,
    DIR_MODEL_LAST,
    clean_output_dir,
    create_before_to_disk_callback,
    create_evaluation_callback,
    subdivide_batch,
    update_meta,
)
from spacy.util import registry, resolve_dot_names  # noqa: E402
from thinc.api import constant, fix_random_seed, set_gpu_allocator  # noqa: E402
from wasabi import Printer  # noqa: E402

from . import checkpoint  # noqa: E402
from .averages import use_averages  # noqa: E402

# Where a resumed run continues ({"step", "seconds"} already trained), set while its logger
# is set up: loggers that write a file (JSONLLogger) append to it and go on with its clock.
RESUMED: Optional[Dict[str, Any]] = None


def epoch_batches(examples: Optional[List], corpus, nlp, batcher, max_epochs: int,
                  position: Optional[Dict] = None) -> Iterator[Tuple]:
    """spaCy's ``create_train_batches``, resumable: yields ``(epoch, index in epoch, order, batch)``.

    ``examples`` is the corpus read into memory (``max_epochs >= 0``) or None (an endless
    stream: ``corpus(nlp)`` is read again for each epoch). The order is a list of example
    indices shuffled in place once per epoch with Python's ``random``: the same calls on a
    list of the same length as spaCy's ``random.shuffle(examples)``, hence the same data
    order. ``position`` (``orders``: the order of each epoch begun; ``batches`` done in the
    last) resumes a run: the epochs before are batched again without training, because a
    batch-size schedule (``compounding.v1``) is one generator that runs on across epochs.
    """
    orders = list(position["orders"]) if position else []
    skip = position["batches"] if position else 0
    epoch, order = 0, None
    while max_epochs < 1 or epoch != max_epochs:
        replay = epoch < len(orders)
        if examples is not None:
            if replay:
                order = [int(i) for i in orders[epoch]]
            else:
                order = order if order is not None else list(range(len(examples)))
                random.shuffle(order)
            stream = [examples[i] for i in order]
        else:
            stream = corpus(nlp)
        for i, batch in enumerate(batcher(stream)):
            if not replay or (epoch == len(orders) - 1 and i >= skip):
                yield epoch, i, order, batch
        epoch += 1


def finished(step: int, results: List[Tuple[float, int]], T: Dict[str, Any]) -> bool:
    """spaCy's stopping rules after update ``step``: no dev improvement in ``patience``
    updates (the earliest best step counts), or ``max_steps`` reached."""
    best_step = -max((r_score, -r_step) for r_score, r_step in results)[1] if results else step
    return bool((T["patience"] and step - best_step >= T["patience"]) or (T["max_steps"] and step >= T["max_steps"]))


def train(nlp, output_path: Path, *, run_id: Dict[str, Any], use_gpu: int = -1, resume_from: Optional[Dict] = None,
          stdout: IO = sys.stdout, stderr: IO = sys.stderr) -> Path:
    """Train ``nlp`` (initialized, or loaded from a checkpoint's model) as ``spacy train`` does.

    nlp (Language): The pipeline with the full config.
    output_path (Path): Where model-best, model-last and the checkpoint go.
    run_id (Dict[str, Any]): The run's ``config`` (before interpolation) and ``inputs``
        (checkpoint.input_fingerprints), kept so that a resume can be checked against them.
    use_gpu (int): GPU id or -1 (``require_gpu`` must have been called).
    resume_from (Optional[Dict]): A checkpoint's state to continue from.
    RETURNS (Path): The path of model-last.
    """
    global RESUMED
    msg = Printer(no_print=True)
    config = nlp.config.interpolate()
    if config["training"]["seed"] is not None:
        fix_random_seed(config["training"]["seed"])
    if use_gpu >= 0 and config["training"]["gpu_allocator"]:
        set_gpu_allocator(config["training"]["gpu_allocator"])
    T = registry.resolve(config["training"], schema=ConfigSchemaTraining)
    train_corpus, dev_corpus = resolve_dot_names(config, [T["train_corpus"], T["dev_corpus"]])
    optimizer, frozen, annotating = T["optimizer"], T["frozen_components"], T["annotating_components"]
    before_to_disk, before_update = create_before_to_disk_callback(T["before_to_disk"]), T["before_update"]
    evaluate = create_evaluation_callback(nlp, dev_corpus, T["score_weights"])
    dropouts = constant(T["dropout"]) if isinstance(T["dropout"], float) else T["dropout"]
    keys = checkpoint.param_keys(nlp)

    # Where the run stands: fresh, or the saved state of a checkpoint.
    saved = resume_from or {}
    step = saved.get("step", -1)  # the last update made; spaCy counts updates from 0
    results: List[Tuple[float, int]] = [tuple(r) for r in saved.get("results", [])]
    losses: Dict[str, float] = dict(saved.get("losses", {}))
    words_seen, seconds_before = saved.get("words", 0), saved.get("seconds", 0.0)
    orders = list(saved["position"]["orders"]) if resume_from else []  # each epoch's data order
    # Read the corpus before the random states are restored: an augmenter draws from `random`
    # while it is read, which an uninterrupted run did before its first update.
    examples = list(train_corpus(nlp)) if T["max_epochs"] >= 0 else None
    if examples is not None and not examples:
        raise ValueError(Errors.E986)
    if resume_from:
        checkpoint.restore_optimizer(optimizer, saved["optimizer"], keys, steps=step + 1)
        for _ in range(step + 1):
            next(dropouts)
        checkpoint.restore_random(nlp, saved["random"])
        stdout.write(msg.info(f"Resuming after update {step} (epoch {len(saved['position']['orders']) - 1}, "
                              f"{len(results)} evaluations) from {output_path / checkpoint.CHECKPOINT}") + "\n")
    else:
        clean_output_dir(output_path)
        checkpoint.remove(output_path)  # an older run's checkpoint must not be resumed into this one
    batches = epoch_batches(examples, train_corpus, nlp, T["batcher"], T["max_epochs"], saved.get("position"))

    def save_model(is_best: bool) -> None:
        with use_averages(nlp, optimizer.averages):
            before_to_disk(nlp).to_disk(output_path / DIR_MODEL_LAST)
        if is_best:
            shutil.rmtree(output_path / DIR_MODEL_BEST, ignore_errors=True)
            shutil.copytree(output_path / DIR_MODEL_LAST, output_path / DIR_MODEL_BEST)

    stdout.write(msg.info(f"Pipeline: {nlp.pipe_names}") + "\n")
    rate = "Learn rate at the resumed update" if resume_from else "Initial learn rate"
    stdout.write(msg.info(f"{rate}: {optimizer.learn_rate}") + "\n")
    with nlp.select_pipes(disable=frozen):
        RESUMED = {"step": step, "seconds": seconds_before} if resume_from else None
        try:  # read by the logger's setup only; never left set for a later `spacy train` in this process
            log_step, finalize_logger = T["logger"](nlp, stdout, stderr)
        finally:
            RESUMED = None
    start = timer()
    # A run killed after its last evaluation but before it was marked finished has no update left.
    if resume_from and finished(step, results, T):
        batches = iter(())
    try:
        for epoch, index, order, batch in batches:
            step += 1
            if epoch == len(orders):  # a new epoch: keep its order for a resume
                orders.append(numpy.asarray(order if order is not None else [], dtype="int32"))
            if before_update:
                before_update(nlp, {"step": step, "epoch": epoch})
            # One update: spaCy's train_while_improving, step for step.
            dropout = next(dropouts)
            for subbatch in subdivide_batch(batch, T["accumulate_gradient"]):
                nlp.update(subbatch, drop=dropout, losses=losses, sgd=False, exclude=frozen, annotates=annotating)
            for name, proc in nlp.pipeline:
                if name not in frozen and getattr(proc, "is_trainable", False) and proc.model not in (True, False, None):
                    proc.finish_update(optimizer)
            optimizer.step_schedules()
            score, other_scores, is_best = None, None, None
            if not step % T["eval_frequency"]:
                with use_averages(nlp, optimizer.averages):
                    score, other_scores = evaluate()
                results.append((score, step))
                is_best = score == max(results)[0]
            words_seen += sum(len(eg) for eg in batch)
            info = {"epoch": epoch, "step": step, "score": score, "other_scores": other_scores, "losses": losses,
                    "checkpoints": results, "seconds": int(seconds_before + timer() - start), "words": words_seen}
            if is_best is not None:
                with nlp.select_pipes(disable=frozen):
                    update_meta(T, nlp, info)
                save_model(is_best)
                info["output_path"] = str(output_path / DIR_MODEL_LAST)
            log_step(info if is_best is not None else None)
            if is_best is not None:
                losses = {}
                checkpoint.write(output_path, {
                    **run_id, "finished": False, "step": step, "results": results, "losses": losses,
                    "words": words_seen, "seconds": seconds_before + timer() - start,
                    "position": {"orders": orders, "batches": index + 1},
                    "optimizer": checkpoint.optimizer_state(optimizer, keys),
                    "random": checkpoint.random_state(nlp)}, nlp)
            if finished(step, results, T):
                break
    except Exception as e:
        stdout.write(msg.warn(f"Aborting and saving the final best model. Encountered exception: {e!r}") + "\n")
        raise
    finally:
        finalize_logger()
        save_model(False)
    # Training ended normally: keep the config and the end, not a second copy of the weights.
    checkpoint.write(output_path, {**run_id, "finished": True, "step": step})
    stdout.write(msg.good("Saved pipeline to output directory", output_path / DIR_MODEL_LAST) + "\n")
    return output_path / DIR_MODEL_LAST
