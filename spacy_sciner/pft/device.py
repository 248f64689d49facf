"""The device of a PFT run and its mixed precision, both taken from ``--gpu-id``."""
from typing import Optional

import torch


def resolve_device(gpu_id: int) -> torch.device:
    """The torch device for ``gpu_id`` (-1: CPU); a CUDA device also becomes the current one.

    Making it current means that autocast, the GradScaler and any tensor created without
    an explicit device use ``gpu_id`` too, not device 0.

    gpu_id (int): CUDA device index, or -1 for the CPU.
    RETURNS (torch.device): Where the model runs.
    """
    if gpu_id < 0:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(f"--gpu-id {gpu_id} given but torch sees no CUDA device")
    if gpu_id >= torch.cuda.device_count():
        raise ValueError(f"--gpu-id {gpu_id} given but torch sees only {torch.cuda.device_count()} CUDA device(s)")
    torch.cuda.set_device(gpu_id)
    return torch.device(f"cuda:{gpu_id}")


def amp_dtype(gpu_id: int) -> Optional[torch.dtype]:
    """Mixed-precision dtype for ``gpu_id``: bf16 where that GPU runs it natively, else fp16.

    The check names the device: ``torch.cuda.is_bf16_supported()`` asks the current
    device, which on a mixed machine need not be ``gpu_id``, and also reports emulated
    (slow) bf16 on older GPUs. Compute capability 8 (Ampere) and later run bf16 natively.

    gpu_id (int): CUDA device index, or -1 for the CPU.
    RETURNS (Optional[torch.dtype]): None on the CPU (no autocast).
    """
    if gpu_id < 0:
        return None
    major, _ = torch.cuda.get_device_capability(gpu_id)
    return torch.bfloat16 if major >= 8 else torch.float16


def autocast(device: torch.device, dtype: Optional[torch.dtype]):
    """Autocast on ``device`` with ``dtype``; disabled when ``dtype`` is None (the CPU)."""
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def make_scaler(dtype: Optional[torch.dtype]) -> "torch.amp.GradScaler":
    """Loss scaling, needed only for fp16 (bf16 has fp32's exponent range)."""
    return torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
