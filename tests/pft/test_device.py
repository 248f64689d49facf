"""--gpu-id decides the device, the bf16 check and autocast, checked on a CPU machine by
standing in for torch.cuda's device queries."""
import pytest
import torch

from spacy_sciner.pft import device as device_module
from spacy_sciner.pft.device import amp_dtype, autocast, make_scaler, resolve_device


@pytest.fixture
def two_gpus(monkeypatch):
    """Device 0 is a V100 (no native bf16), device 1 an A100; records set_device calls."""
    current = []
    capability = {0: (7, 0), 1: (8, 0)}
    monkeypatch.setattr(device_module.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device_module.torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(device_module.torch.cuda, "set_device", current.append)
    monkeypatch.setattr(device_module.torch.cuda, "get_device_capability", lambda i=None: capability[i])
    return current


def test_bf16_check_asks_the_chosen_gpu(two_gpus):
    assert amp_dtype(1) == torch.bfloat16
    assert amp_dtype(0) == torch.float16
    assert amp_dtype(-1) is None


def test_the_chosen_gpu_becomes_current(two_gpus):
    assert resolve_device(1) == torch.device("cuda:1")
    assert two_gpus == [1]  # autocast and implicit CUDA tensors then use device 1
    with pytest.raises(ValueError, match="only 2 CUDA device"):
        resolve_device(2)
    assert resolve_device(-1) == torch.device("cpu")


def test_no_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(device_module.torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="--gpu-id 0 given but torch sees no CUDA device"):
        resolve_device(0)


def test_cpu_runs_without_autocast_and_scaler():
    with autocast(torch.device("cpu"), None):
        assert not torch.is_autocast_enabled("cpu")
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    assert not make_scaler(None).is_enabled() and not make_scaler(torch.bfloat16).is_enabled()
