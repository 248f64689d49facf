"""The pre-fine-tuning loop: one flat, commented function in the spirit of nanoGPT's train.py.

Determinism and resume: the data order of epoch ``e`` is a permutation seeded by
``(seed, e)``; the masking and dropout randomness of micro-batch ``m`` are seeded by
``(seed, m)``. The whole random state is therefore a function of the step counter, and a run
resumed from a checkpoint (model, optimizer, scheduler, grad scaler, step) continues
exactly as an uninterrupted run would.

Output layout (OUTPUT_DIR)::

    config.json, model.safetensors, tokenizer files   # final model (AutoModel / spaCy load it)
    pft_log.json                                      # objective, steps, losses, tokens/s
    checkpoints/step-00000200/                        # last good checkpoints (model + state)
"""
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional

# MKL picks code paths by memory alignment, so a resumed process (other addresses) drifted
# from an uninterrupted one by float rounding (measured: 1e-8 in the loss after ~70 steps).
# Strict conditional numerical reproducibility removes that at no measured cost (24.1 vs
# 24.2 ms per MiniLM-sized matmul). MKL reads it at its first call, so setting it here works
# as long as nothing did a BLAS call before; users can still override it.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from .data import PFTDataError, load_corpus, split_heldout
from .heads import SpanBoundaryHead, compute_losses, load_masked_lm, load_tokenizer, max_positions
from .masking import MaskVocab, mask_batch, parse_objective

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.pt"
LOG_FILE = "pft_log.json"
# Settings that must not change between a run and its resumption.
RESUME_KEYS = ("encoder", "corpus", "objective", "batch_size", "grad_accum", "seed", "mask_ratio", "max_length")


class PFTIOError(OSError):
    """Output could not be written; the message names the path and the last good checkpoint."""


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
    limit: Optional[int] = None
    resume: bool = False
    progress: bool = True
    extra: Dict = field(default_factory=dict)


def _write_json_atomic(path: Path, data: Dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def _ensure_writable(output: Path) -> None:
    """Fail before any training when the output folder cannot be written."""
    try:
        (output / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
        probe = output / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise PFTIOError(f"PFT output directory {output} is not writable: {err}") from err


def _checkpoints(output: Path) -> List[Path]:
    """Complete checkpoints, oldest first (a rename makes each appear atomically)."""
    return sorted(p for p in (output / CHECKPOINTS).glob("step-*") if (p / STATE_FILE).exists())


def _save_model(model, tokenizer, path: Path) -> None:
    carried = getattr(model, "pft_carried_weights", {})  # e.g. BERT's pooler, see heads.py
    state = {**model.state_dict(), **carried} if carried else None
    model.save_pretrained(path, state_dict=state, safe_serialization=True)
    tokenizer.save_pretrained(path)


def save_checkpoint(output: Path, step: int, model, tokenizer, state: Dict, log: Dict, keep: int) -> Path:
    """Write a checkpoint to a temporary folder, then rename it into place (atomic).

    On any write error (disk full, permissions) the temporary folder is removed, older
    checkpoints are untouched, and ``PFTIOError`` names the last good one.
    """
    final = output / CHECKPOINTS / f"step-{step:08d}"
    tmp = output / CHECKPOINTS / f".tmp-step-{step:08d}"
    previous = _checkpoints(output)
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        _save_model(model, tokenizer, tmp)
        torch.save(state, tmp / STATE_FILE)
        (tmp / LOG_FILE).write_text(json.dumps(log, indent=2))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        last = previous[-1] if previous else "none"
        raise PFTIOError(
            f"Could not write PFT checkpoint {final}: {err}. The last good checkpoint is "
            f"{last}; free disk space or fix permissions, then rerun with --resume."
        ) from err
    for old in _checkpoints(output)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _install_final(output: Path, model, tokenizer) -> None:
    """Write the final model next to the log; each file lands by an atomic rename."""
    tmp = output / ".tmp-final"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        _save_model(model, tokenizer, tmp)
        for path in tmp.iterdir():
            os.replace(path, output / path.name)
    except OSError as err:
        raise PFTIOError(f"Could not write the final PFT model to {output}: {err}") from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _installed(output: Path) -> bool:
    """Whether the final model was completely installed (the log says so only afterwards)."""
    try:
        return bool(json.loads((output / LOG_FILE).read_text()).get("installed"))
    except (OSError, ValueError):
        return False


def _batch_indices(n_examples: int, batch_size: int, seed: int, micro: int) -> np.ndarray:
    """Examples of micro-batch ``micro``: a stateless function of the seed and the index."""
    per_epoch = math.ceil(n_examples / batch_size)
    epoch, offset = divmod(micro, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(n_examples)
    return order[offset * batch_size : (offset + 1) * batch_size]


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


def train_pft(cfg: PFTConfig) -> Dict:
    """Pre-fine-tune an encoder on a candidate corpus; write checkpoints, model and log.

    cfg (PFTConfig): The run settings.
    RETURNS (Dict): The run log (also written to ``OUTPUT_DIR/pft_log.json``).
    """
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    objectives = parse_objective(cfg.objective)
    # Absolute paths, so that resuming from another working directory is allowed.
    encoder = str(Path(cfg.encoder).resolve()) if Path(cfg.encoder).exists() else cfg.encoder
    cfg = replace(cfg, corpus=str(Path(cfg.corpus).resolve()), encoder=encoder)
    output = Path(cfg.output)
    _ensure_writable(output)
    existing = _checkpoints(output)
    if existing and not cfg.resume:
        raise PFTIOError(f"{output} already holds PFT checkpoints; pass --resume or use a new directory")
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    use_cuda = cfg.gpu_id >= 0
    if use_cuda and not torch.cuda.is_available():
        raise RuntimeError(f"--gpu-id {cfg.gpu_id} given but torch sees no CUDA device")
    device = torch.device(f"cuda:{cfg.gpu_id}" if use_cuda else "cpu")

    # ---- data: encode the corpus once; hold out a seeded slice for the evaluation loss
    tokenizer = load_tokenizer(cfg.encoder)
    if cfg.max_length > max_positions(cfg.encoder):
        raise ValueError(
            f"--max-length {cfg.max_length} exceeds the {max_positions(cfg.encoder)} positions of "
            f"encoder '{cfg.encoder}'; longer sentences are split into windows anyway"
        )
    examples, stats = load_corpus(Path(cfg.corpus), tokenizer, cfg.max_length, cfg.limit)
    if objectives & {"mlm_cand", "ecb"} and stats.candidates_kept == 0:
        raise PFTDataError(
            f"PFT corpus {cfg.corpus} has no usable candidate spans ({stats.candidates} read, "
            f"{stats.candidates_no_piece} on no word piece, {stats.candidates_cut_by_window} cut by "
            f"the window), so objective '{cfg.objective}' has nothing to predict"
        )
    train, heldout = split_heldout(examples, cfg.eval_fraction, cfg.eval_max, cfg.seed)
    vocab = MaskVocab.from_tokenizer(tokenizer)

    # ---- model: from the last checkpoint when resuming, else from the encoder
    resume_from = existing[-1] if (cfg.resume and existing) else None
    state = torch.load(resume_from / STATE_FILE, weights_only=False) if resume_from else None
    if state is not None:
        for key in RESUME_KEYS:
            if state["config"][key] != getattr(cfg, key):
                raise ValueError(
                    f"Cannot resume {resume_from}: '{key}' was {state['config'][key]!r}, now {getattr(cfg, key)!r}"
                )
        if state["step"] >= cfg.max_steps and _installed(output):
            return json.loads((output / LOG_FILE).read_text())  # nothing left to do
    torch.manual_seed(cfg.seed)  # a freshly added MLM head / the SBO head start from the seed
    model, head_info = load_masked_lm(str(resume_from) if resume_from else cfg.encoder)
    if state is not None:
        head_info = state["log"]["head"]  # what happened when the run started
    model.to(device).train()
    sbo_head = SpanBoundaryHead(model.config.hidden_size).to(device) if "sbo" in objectives else None

    # ---- optimizer: AdamW without decay on biases and LayerNorm weights (BERT recipe)
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
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, cfg.max_steps)
    # Mixed precision only on CUDA: bf16 where supported (no scaler needed), else fp16 + scaler.
    amp_dtype = torch.bfloat16 if use_cuda and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=use_cuda and amp_dtype == torch.float16)

    log = {
        "objective": cfg.objective, "config": asdict(cfg), "head": head_info,
        "corpus": stats.to_dict(), "train_examples": len(train), "heldout_examples": len(heldout),
        "device": str(device), "steps": 0, "train": [], "eval": [], "resumed_at": [], "finished": False,
        "batches_without_targets": 0,
    }
    step = 0
    if state is not None:
        model.train()
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        if sbo_head is not None:
            sbo_head.load_state_dict(state["sbo_head"])
        step = state["step"]
        keys = ("train", "eval", "resumed_at", "wall_s", "tokens", "batches_without_targets")
        log.update({k: state["log"][k] for k in keys})
        log["resumed_at"].append(step)

    def checkpoint() -> None:
        state_out = {
            "step": step, "config": asdict(cfg), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "log": log,
            "sbo_head": sbo_head.state_dict() if sbo_head is not None else None,
        }
        save_checkpoint(output, step, model, tokenizer, state_out, log, cfg.keep_checkpoints)
        _write_json_atomic(output / LOG_FILE, log)

    # ---- the loop: one iteration = one optimizer step over grad_accum micro-batches
    wall, tokens = log.get("wall_s", 0.0), log.get("tokens", 0)
    window_tokens, window_start, window_losses = 0, time.perf_counter(), []
    if heldout and step == 0:
        log["eval"].append({"step": 0, **evaluate(model, sbo_head, heldout, objectives, vocab, cfg, device)})
    bar = tqdm(total=cfg.max_steps, initial=step, disable=not cfg.progress, desc=f"pft {cfg.objective}")
    while step < cfg.max_steps:
        t0 = time.perf_counter()
        parts_sum: Dict[str, float] = {}
        for k in range(cfg.grad_accum):
            micro = step * cfg.grad_accum + k
            idx = _batch_indices(len(train), cfg.batch_size, cfg.seed, micro)
            batch = mask_batch([train[i] for i in idx], objectives, np.random.default_rng([cfg.seed, 1, micro]),
                               vocab, cfg.mask_ratio)
            torch.manual_seed(_step_seed(cfg.seed, micro))  # dropout, as a function of the step
            with torch.autocast(device.type, dtype=amp_dtype, enabled=use_cuda):
                loss, parts = compute_losses(model, sbo_head, batch, device)
            # Average over micro-batches so the step size does not depend on grad_accum.
            scaler.scale(loss / cfg.grad_accum).backward()
            for name, value in parts.items():
                parts_sum[name] = parts_sum.get(name, 0.0) + value.item() / cfg.grad_accum
            # No candidate fitted the budget in any sequence: counted, not hidden.
            log["batches_without_targets"] += 0 if parts else 1
            window_tokens += batch.n_tokens
            tokens += batch.n_tokens
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_([p for _, p in params], cfg.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        wall += time.perf_counter() - t0
        window_losses.append(parts_sum)
        bar.update(1)

        if step % cfg.log_every == 0 or step == cfg.max_steps:
            elapsed = time.perf_counter() - window_start
            # A step may lack an objective (e.g. no candidate fitted): average where present.
            names = sorted({n for w in window_losses for n in w})
            mean = {n: float(np.mean([w[n] for w in window_losses if n in w])) for n in names}
            entry = {"step": step, "loss": float(sum(mean.values())), "losses": mean,
                     "lr": scheduler.get_last_lr()[0], "tokens_per_s": window_tokens / max(elapsed, 1e-9)}
            log["train"].append(entry)
            bar.set_postfix(loss=f"{entry['loss']:.3f}", tok_s=f"{entry['tokens_per_s']:.0f}")
            window_tokens, window_start, window_losses = 0, time.perf_counter(), []
        if heldout and (step % cfg.eval_every == 0 or step == cfg.max_steps):
            log["eval"].append({"step": step, **evaluate(model, sbo_head, heldout, objectives, vocab, cfg, device)})
        log.update({"steps": step, "wall_s": wall, "tokens": tokens, "tokens_per_s": tokens / max(wall, 1e-9)})
        if step % cfg.save_every == 0 or step == cfg.max_steps:
            log["finished"] = step == cfg.max_steps
            checkpoint()
    bar.close()
    _install_final(output, model, tokenizer)
    # Written last: a run killed while installing is finished again by --resume.
    log.update({"finished": True, "installed": True})
    _write_json_atomic(output / LOG_FILE, log)
    return log
