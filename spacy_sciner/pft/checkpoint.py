"""Checkpoints of a PFT run: atomic writes, the final model, and what a resume must match.

Layout of OUTPUT_DIR::

    config.json, model.safetensors, tokenizer files   # final model (AutoModel / spaCy load it)
    pft_log.json                                      # objective, steps, losses, tokens/s
    checkpoints/step-00000200/                        # last good checkpoints (model + state)
"""
import json
import os
import shutil
from pathlib import Path
from typing import Dict, List, Optional

import torch

from ..outputs import writable_ancestor

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.pt"
LOG_FILE = "pft_log.json"
# Settings that must not change between a run and its resumption: the data order, the
# masking, the held-out split (limit, eval_fraction, eval_max) and the learning-rate
# schedule (max_steps, lr, warmup_ratio) all derive from them, so a resume with other
# values would silently continue a different run.
RESUME_KEYS = (
    "encoder", "corpus", "objective", "batch_size", "grad_accum", "seed", "mask_ratio", "max_length",
    "max_steps", "lr", "warmup_ratio", "limit", "eval_fraction", "eval_max",
)


class PFTIOError(OSError):
    """Output could not be written; the message names the path and the last good checkpoint."""


def write_json_atomic(path: Path, data: Dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def check_output_writable(output: Path) -> None:
    """Fail early when the output folder could not be created or written, creating nothing.

    The folder is only created once the inputs are loaded, so a run that stops on a bad
    input leaves nothing behind; this check makes an unwritable output fail as early.
    """
    try:
        writable_ancestor(output, f"PFT output directory {output} is not writable")
    except ValueError as err:
        raise PFTIOError(str(err)) from None


def make_output(output: Path) -> None:
    """Create the output and checkpoint folders and prove that a file can be written there."""
    try:
        (output / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
        probe = output / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise PFTIOError(f"PFT output directory {output} is not writable: {err}") from err


def list_checkpoints(output: Path) -> List[Path]:
    """Complete checkpoints, oldest first (a rename makes each appear atomically)."""
    return sorted(p for p in (output / CHECKPOINTS).glob("step-*") if (p / STATE_FILE).exists())


def load_state(checkpoint: Path) -> Dict:
    """Read a checkpoint's trainer state onto the CPU.

    A checkpoint written on a GPU stores its optimizer tensors with a CUDA location, which
    a CPU-only machine cannot restore; ``load_state_dict`` later moves every tensor to the
    device of its parameter anyway.
    """
    return torch.load(checkpoint / STATE_FILE, map_location="cpu", weights_only=False)


def resume_mismatches(saved: Dict, current: Dict) -> List[str]:
    """The ``RESUME_KEYS`` settings that differ, as ``"'key' was X, now Y"``."""
    return [
        f"'{key}' was {saved.get(key)!r}, now {current.get(key)!r}"
        for key in RESUME_KEYS
        if saved.get(key) != current.get(key)
    ]


def check_resume(checkpoint: Path, saved: Dict, current: Dict) -> None:
    """Refuse to resume with other settings, naming every differing one on one line."""
    differ = resume_mismatches(saved, current)
    if differ:
        raise ValueError(
            f"Cannot resume {checkpoint}: {'; '.join(differ)}. Rerun with the settings of the "
            "checkpoint, or use a new output directory."
        )


def restore_scaler(scaler: "torch.amp.GradScaler", state: Optional[Dict]) -> None:
    """Load a GradScaler state unless it is empty.

    A disabled scaler (CPU, or bf16 on a GPU) saves ``{}``, which an enabled one (fp16 on
    a GPU without bf16) refuses to load; starting from a fresh scale is then right.
    """
    if state:
        scaler.load_state_dict(state)


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
    previous = list_checkpoints(output)
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
    for old in list_checkpoints(output)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def install_final(output: Path, model, tokenizer) -> None:
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


def installed(output: Path) -> bool:
    """Whether the final model was completely installed (the log says so only afterwards)."""
    try:
        return bool(json.loads((output / LOG_FILE).read_text()).get("installed"))
    except (OSError, ValueError):
        return False
