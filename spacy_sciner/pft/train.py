"""The pre-fine-tuning loop: one flat, commented function in the spirit of nanoGPT's train.py.

Determinism and resume: the data order of epoch ``e`` is a permutation seeded by
``(seed, e)``; the masking and dropout randomness of micro-batch ``m`` are seeded by
``(seed, m)``. The whole random state is therefore a function of the step counter, and a run
resumed from a checkpoint (model, optimizer, scheduler, grad scaler, step) continues
exactly as an uninterrupted run would. Masking runs in DataLoader workers (loader.py); as a
micro-batch is a function of its number, the worker count changes nothing but speed. The
output layout and checkpointing are in checkpoint.py.

Speed on a GPU: nothing in a step waits for the device (the loss parts are kept as device
tensors and read once per ``log_every`` steps), so the host queues work ahead. The log's
``tokens_per_s`` covers the whole run; ``tokens_per_s_steady`` leaves out the warm-up (the
first ``steady_from_step`` steps of the run and of each resumed segment: CUDA context,
kernel selection, allocator growth, worker start-up), which a short run otherwise
mixes into its speed.

Every input is checked before the long work (reading the corpus, loading the model) and the
output folder is created only then, so a bad setting stops the run at once with one line
and leaves nothing behind.
"""
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Dict, Optional, Tuple

# MKL picks code paths by memory alignment, so a resumed process (other addresses) drifted
# from an uninterrupted one by float rounding (measured: 1e-8 in the loss after ~70 steps).
# Strict conditional numerical reproducibility removes that at no measured cost (24.1 vs
# 24.2 ms per MiniLM-sized matmul). MKL reads it at its first call, so setting it here works
# as long as nothing did a BLAS call before; users can still override it.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from .checkpoint import (  # noqa: E402
    LOG_FILE,
    STATE_FILE,
    PFTIOError,
    check_output_writable,
    check_resume,
    list_checkpoints,
    load_state,
    make_output,
    restore_scaler,
    save_checkpoint,
    write_json_atomic,
)
from .checkpoint import install_final as _install_final  # noqa: E402
from .checkpoint import installed as _installed  # noqa: E402
from .data import PFTDataError, load_corpus, split_heldout  # noqa: E402
from .device import amp_dtype, autocast, make_scaler, resolve_device  # noqa: E402
from .heads import SpanBoundaryHead, compute_losses, load_masked_lm, load_tokenizer, max_positions  # noqa: E402
from .loader import MicroBatches, PackedExamples, default_workers, micro_batches  # noqa: E402
from .masking import MaskVocab, mask_batch, parse_objective  # noqa: E402
from .stats import Throughput, add_counts, count_targets, per_1k_tokens  # noqa: E402

__all__ = ["PFTConfig", "PFTIOError", "STATE_FILE", "train_pft"]


@dataclass
class PFTConfig:
    """Settings of one PFT run (every CLI option maps to one field)."""

    corpus: str
    output: str
    encoder: str = "sciner-minilm"
    objective: str = "mlm_cand+ecb"
    max_steps: int = 1000
    batch_size: int = 16
    grad_accum: int = 1
    lr: float = 5e-5
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    mask_ratio: float = 0.15
    max_length: int = 128
    eval_fraction: float = 0.05
    eval_max: int = 256
    eval_every: int = 200
    save_every: int = 200
    log_every: int = 10
    keep_checkpoints: int = 2
    seed: int = 0
    gpu_id: int = -1
    threads: int = 0
    workers: Optional[int] = None  # None: default_workers(device); never changes results
    limit: Optional[int] = None
    resume: bool = False
    progress: bool = True
    extra: Dict = field(default_factory=dict)


# Share of the steps (at least one) that is warm-up for ``tokens_per_s_steady``.
STEADY_WARMUP = 0.1


def steady_warmup_steps(max_steps: int) -> int:
    """Steps left out of the steady-state speed, at the start of a run and of each resume."""
    return max(1, math.ceil(STEADY_WARMUP * max_steps))


def _sync(device: torch.device) -> None:
    """Wait for the device, so that a clock read next covers the work queued so far."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _window_means(window, grad_accum: int) -> Dict[str, float]:
    """Mean per-step loss parts of a log window, from the detached device tensors.

    window: Per step, ``{name: [part of each micro-batch]}``.
    One stacked copy to the host for the whole window (one sync) instead of an ``.item()``
    per part and micro-batch; the sums are then formed exactly as the per-item code formed
    them (float32 values added in Python floats, in micro-batch order), so the logged
    numbers are unchanged.
    """
    parts = [v for step in window for values in step.values() for v in values]
    values = iter(torch.stack(parts).tolist() if parts else [])
    per_step = []
    for step in window:
        sums = {}
        for name, items in step.items():
            total = 0.0
            for _ in items:
                total = total + next(values) / grad_accum
            sums[name] = total
        per_step.append(sums)
    # A step may lack an objective (e.g. no candidate fitted): average where present.
    names = sorted({n for w in per_step for n in w})
    return {n: float(np.mean([w[n] for w in per_step if n in w])) for n in names}


def _step_seed(seed: int, micro: int) -> int:
    return int(np.random.default_rng([seed, 7, micro]).integers(2**62))


def make_adamw(groups, lr: float) -> torch.optim.Optimizer:
    """AdamW with the fused kernel where torch has one for the device.

    On MiniLM (22.7M parameters, 2 CPU threads) the default per-tensor AdamW step costs
    ~0.9 CPU-s, as much as the forward and backward pass; the fused kernel ~0.08 CPU-s.
    """
    try:
        return torch.optim.AdamW(groups, lr=lr, fused=True)
    except (RuntimeError, ValueError):  # no fused kernel for this device / dtype
        return torch.optim.AdamW(groups, lr=lr)


def evaluate(model, sbo_head, heldout, objectives, vocab: MaskVocab, cfg: PFTConfig, device) -> Dict[str, float]:
    """Mean loss over the held-out slice, with fixed masking (comparable across steps)."""
    model.eval()
    totals: Dict[str, float] = {}
    n_batches = 0
    with torch.no_grad():
        for i in range(0, len(heldout), cfg.batch_size):
            rng = np.random.default_rng([cfg.seed, 2, i])
            batch = mask_batch(heldout[i : i + cfg.batch_size], objectives, rng, vocab, cfg.mask_ratio)
            loss, parts = compute_losses(model, sbo_head, batch, device)
            totals["loss"] = totals.get("loss", 0.0) + float(loss)
            for name, value in parts.items():
                totals[name] = totals.get(name, 0.0) + float(value)
            n_batches += 1
    model.train()
    return {k: v / max(n_batches, 1) for k, v in totals.items()}


def _absolute(cfg: PFTConfig) -> PFTConfig:
    """Absolute corpus and encoder paths, so that a resume may run from another directory."""
    encoder = str(Path(cfg.encoder).resolve()) if Path(cfg.encoder).exists() else cfg.encoder
    return replace(cfg, corpus=str(Path(cfg.corpus).resolve()), encoder=encoder)


def _check_settings(cfg: PFTConfig) -> None:
    """Reject settings that would only fail (or divide by zero) after the long work."""
    at_least_one = ("max_steps", "batch_size", "grad_accum", "eval_every", "save_every", "log_every")
    bad = [f"--{k.replace('_', '-')} {getattr(cfg, k)}" for k in at_least_one if getattr(cfg, k) < 1]
    if bad:
        raise ValueError(f"PFT settings must be at least 1: {', '.join(bad)}")
    if not 0 < cfg.mask_ratio <= 1:
        raise ValueError(f"--mask-ratio {cfg.mask_ratio} must be in (0, 1]")
    if not 0 <= cfg.warmup_ratio <= 1:
        raise ValueError(f"--warmup-ratio {cfg.warmup_ratio} must be in [0, 1]")
    if not cfg.lr > 0:
        raise ValueError(f"--lr {cfg.lr} must be positive")
    if not 0 <= cfg.eval_fraction < 1 or cfg.eval_max < 0:
        raise ValueError(f"eval_fraction {cfg.eval_fraction} must be in [0, 1) and eval_max {cfg.eval_max} >= 0")
    if cfg.limit is not None and cfg.limit < 1:
        raise ValueError(f"--limit {cfg.limit} must be at least 1")
    if cfg.workers is not None and cfg.workers < 0:
        raise ValueError(f"--workers {cfg.workers} must be at least 0")
    corpus = Path(cfg.corpus)
    if not corpus.is_file():
        raise PFTDataError(f"PFT corpus {'is not a file' if corpus.exists() else 'not found'}: {corpus}")


def _resume_state(cfg: PFTConfig, output: Path) -> Tuple[Optional[Path], Optional[Dict]]:
    """The checkpoint to resume from and its trainer state (None, None for a fresh run)."""
    existing = list_checkpoints(output)
    if existing and not cfg.resume:
        raise PFTIOError(f"{output} already holds PFT checkpoints; pass --resume or use a new directory")
    if not existing:
        return None, None
    state = load_state(existing[-1])
    check_resume(existing[-1], state["config"], asdict(cfg))
    return existing[-1], state


def _tokenizer(cfg: PFTConfig):
    """Load the encoder's tokenizer: the cheap proof that the encoder exists."""
    tokenizer = load_tokenizer(cfg.encoder)
    if cfg.max_length > max_positions(cfg.encoder):
        raise ValueError(
            f"--max-length {cfg.max_length} exceeds the {max_positions(cfg.encoder)} positions of "
            f"encoder '{cfg.encoder}'; longer sentences are split into windows anyway"
        )
    return tokenizer


def _data(cfg: PFTConfig, tokenizer, objectives):
    """Encode the corpus once and hold out a seeded slice for the evaluation loss."""
    examples, stats = load_corpus(Path(cfg.corpus), tokenizer, cfg.max_length, cfg.limit)
    if objectives & {"mlm_cand", "ecb"} and stats.candidates_kept == 0:
        raise PFTDataError(
            f"PFT corpus {cfg.corpus} has no usable candidate spans ({stats.candidates} read, "
            f"{stats.candidates_no_piece} on no word piece, {stats.candidates_cut_by_window} cut by "
            f"the window), so objective '{cfg.objective}' has nothing to predict"
        )
    train, heldout = split_heldout(examples, cfg.eval_fraction, cfg.eval_max, cfg.seed)
    return train, heldout, stats


def _optimizer(model, sbo_head, cfg: PFTConfig):
    """AdamW without decay on biases and LayerNorm weights (BERT recipe), linear warm-up."""
    from transformers import get_linear_schedule_with_warmup

    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if sbo_head is not None:
        params += [(f"sbo.{n}", p) for n, p in sbo_head.named_parameters()]
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "mlp.2.weight", "mlp.5.weight")
    groups = [
        {"params": [p for n, p in params if not n.endswith(no_decay)], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in params if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = make_adamw(groups, cfg.lr)
    warmup = int(cfg.warmup_ratio * cfg.max_steps)
    return [p for _, p in params], optimizer, get_linear_schedule_with_warmup(optimizer, warmup, cfg.max_steps)


def _restore(state: Dict, optimizer, scheduler, scaler, sbo_head, log: Dict) -> int:
    """Load a checkpoint's optimizer, schedule, scaler, SBO head and log; return its step."""
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    restore_scaler(scaler, state["scaler"])
    if sbo_head is not None:
        sbo_head.load_state_dict(state["sbo_head"])
    # The speed too: a resume that only installs the final model runs no step to recompute it.
    keys = ("train", "eval", "resumed_at", "wall_s", "tokens", "batches_without_targets", "masked_pieces",
            "steps", "tokens_per_s", "masked_per_1k_tokens", "steady_wall_s", "steady_tokens", "steady_steps",
            "tokens_per_s_steady")
    log.update({k: state["log"][k] for k in keys if k in state["log"]})
    log["resumed_at"].append(state["step"])
    return state["step"]


def _micro_batches_step(model, sbo_head, batches, step: int, cfg: PFTConfig, device, dtype, scaler,
                        log: Dict) -> Tuple[Dict[str, list], int]:
    """Run forward/backward over one optimizer step's grad_accum micro-batches.

    RETURNS (Tuple[Dict[str, list], int]): The per-objective losses (still on the device) and
        the number of tokens read.
    """
    step_parts: Dict[str, list] = {}
    step_tokens = 0
    for k in range(cfg.grad_accum):
        micro = step * cfg.grad_accum + k
        batch = next(batches)  # micro-batch number `micro`, masked by a worker
        torch.manual_seed(_step_seed(cfg.seed, micro))  # dropout, as a function of the step
        with autocast(device, dtype):
            loss, parts = compute_losses(model, sbo_head, batch, device)
        # Average over micro-batches so the step size does not depend on grad_accum.
        scaler.scale(loss / cfg.grad_accum).backward()
        # Kept on the device: an .item() here would make the host wait for every micro-batch.
        for name, value in parts.items():
            step_parts.setdefault(name, []).append(value.detach())
        # No sequence had a usable candidate (or ECB boundary): counted, not hidden.
        log["batches_without_targets"] += 0 if parts else 1
        add_counts(log["masked_pieces"], count_targets(batch))
        step_tokens += batch.n_tokens
    return step_parts, step_tokens


def _optimizer_step(params, optimizer, scheduler, scaler, max_grad_norm: float) -> None:
    """One optimizer step on the accumulated gradients: unscale (fp16), clip, step, schedule."""
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def train_pft(cfg: PFTConfig) -> Dict:
    """Pre-fine-tune an encoder on a candidate corpus; write checkpoints, model and log.

    cfg (PFTConfig): The run settings.
    RETURNS (Dict): The run log (also written to ``OUTPUT_DIR/pft_log.json``).
    """
    from tqdm import tqdm

    # ---- checks, cheapest first, before anything is read at length or written
    objectives = parse_objective(cfg.objective)
    cfg = _absolute(cfg)
    output = Path(cfg.output)
    _check_settings(cfg)
    check_output_writable(output)
    resume_from, state = _resume_state(cfg, output)
    if state is not None and state["step"] >= cfg.max_steps and _installed(output):
        return json.loads((output / LOG_FILE).read_text())  # nothing left to do
    device = resolve_device(cfg.gpu_id)
    tokenizer = _tokenizer(cfg)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)

    # ---- data and model (from the last checkpoint when resuming); then the output exists
    train, heldout, stats = _data(cfg, tokenizer, objectives)
    vocab = MaskVocab.from_tokenizer(tokenizer)
    torch.manual_seed(cfg.seed)  # a freshly added MLM head / the SBO head start from the seed
    model, head_info = load_masked_lm(str(resume_from) if resume_from else cfg.encoder)
    if state is not None:
        head_info = state["log"]["head"]  # what happened when the run started
    model.to(device).train()
    sbo_head = SpanBoundaryHead(model.config.hidden_size).to(device) if "sbo" in objectives else None
    make_output(output)

    params, optimizer, scheduler = _optimizer(model, sbo_head, cfg)
    # Mixed precision only on CUDA: bf16 where the GPU has it (no scaler needed), else fp16.
    dtype = amp_dtype(cfg.gpu_id)
    scaler = make_scaler(dtype)

    log = {
        "objective": cfg.objective, "config": asdict(cfg), "head": head_info,
        "corpus": stats.to_dict(), "train_examples": len(train), "heldout_examples": len(heldout),
        "device": str(device), "steps": 0, "train": [], "eval": [], "resumed_at": [], "finished": False,
        "batches_without_targets": 0, "masked_pieces": {},
    }
    step = 0
    if state is not None:
        model.train()
        step = _restore(state, optimizer, scheduler, scaler, sbo_head, log)

    def checkpoint() -> None:
        state_out = {
            "step": step, "config": asdict(cfg), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "log": log,
            "sbo_head": sbo_head.state_dict() if sbo_head is not None else None,
        }
        save_checkpoint(output, step, model, tokenizer, state_out, log, cfg.keep_checkpoints)
        write_json_atomic(output / LOG_FILE, log)

    # ---- the loop: one iteration = one optimizer step over grad_accum micro-batches
    workers = cfg.workers if cfg.workers is not None else default_workers(device)
    # Workers get the examples pickled once: packed, that is a memory copy (loader.py).
    dataset = MicroBatches(PackedExamples(train) if workers else train, objectives, vocab, cfg.batch_size,
                           cfg.seed, cfg.mask_ratio, start=step * cfg.grad_accum, stop=cfg.max_steps * cfg.grad_accum)
    batches = micro_batches(dataset, workers, pin_memory=device.type == "cuda")
    log.update({"workers": workers, "steady_from_step": steady_warmup_steps(cfg.max_steps)})
    steady_after = step + log["steady_from_step"]  # this segment's warm-up ends here
    meter, window_losses = Throughput.from_log(log), []
    if heldout and step == 0:
        log["eval"].append({"step": 0, **evaluate(model, sbo_head, heldout, objectives, vocab, cfg, device)})
    bar = tqdm(total=cfg.max_steps, initial=step, disable=not cfg.progress, desc=f"pft {cfg.objective}")
    while step < cfg.max_steps:
        t0 = time.perf_counter()
        step_parts, step_tokens = _micro_batches_step(model, sbo_head, batches, step, cfg, device, dtype, scaler, log)
        _optimizer_step(params, optimizer, scheduler, scaler, cfg.max_grad_norm)
        step += 1
        window_losses.append(step_parts)
        log_now = step % cfg.log_every == 0 or step == cfg.max_steps
        mean = _window_means(window_losses, cfg.grad_accum) if log_now else None  # waits for the device
        if not log_now and (step == steady_after or step % cfg.eval_every == 0 or step % cfg.save_every == 0):
            _sync(device)  # the clocks stop only once the queued work is done
        meter.add(time.perf_counter() - t0, step_tokens, steady=step > steady_after)
        bar.update(1)

        if log_now:
            entry = {"step": step, "loss": float(sum(mean.values())), "losses": mean,
                     "lr": scheduler.get_last_lr()[0], "tokens_per_s": meter.close_window()}
            log["train"].append(entry)
            bar.set_postfix(loss=f"{entry['loss']:.3f}", tok_s=f"{entry['tokens_per_s']:.0f}")
            window_losses = []
        if heldout and (step % cfg.eval_every == 0 or step == cfg.max_steps):
            log["eval"].append({"step": step, **evaluate(model, sbo_head, heldout, objectives, vocab, cfg, device)})
        log.update({"steps": step, **meter.to_log(),
                    "masked_per_1k_tokens": per_1k_tokens(log["masked_pieces"], meter.tokens)})
        if step % cfg.save_every == 0 or step == cfg.max_steps:
            log["finished"] = step == cfg.max_steps
            checkpoint()
    bar.close()
    del batches  # stops the loader's workers before the final write
    _install_final(output, model, tokenizer)
    # Written last: a run killed while installing is finished again by --resume.
    log.update({"finished": True, "installed": True})
    write_json_atomic(output / LOG_FILE, log)
    return log
