"""A `--gpu-id` this machine cannot honour fails at once with one line saying why and what
to install (``cli_util.gpu_problem``), in `sciner calibrate` and in the project's train step,
instead of spaCy's traceback after the pipeline loaded. torch and CuPy are patched, so the
tests say the same on a CPU machine and on a GPU machine."""
import sys
from pathlib import Path

import pytest
import torch
import thinc.util

from spacy_sciner.cli_util import gpu_problem

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train as train_script  # noqa: E402


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def cuda_without_cupy(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(thinc.util, "has_cupy", False)


def test_cpu_is_never_a_problem(no_cuda):
    assert gpu_problem(-1) is None


def test_no_cuda_names_torch_and_the_fix(no_cuda):
    problem = gpu_problem(0)
    assert problem.startswith("--gpu-id 0: torch ") and "sees no CUDA device" in problem
    assert "cupy-cuda12x" in problem and "--gpu-id -1" in problem


def test_cuda_without_cupy_and_a_missing_device(cuda_without_cupy):
    assert "CuPy is not installed" in gpu_problem(0)
    assert gpu_problem(2) == "--gpu-id 2: torch sees only 1 CUDA device(s) (ids from 0)"


def test_cupy_without_a_usable_gpu(cuda_without_cupy, monkeypatch):
    monkeypatch.setattr(thinc.util, "has_cupy", True)
    monkeypatch.setattr(thinc.util, "gpu_is_available", lambda: False)
    assert "CuPy is installed but finds no usable GPU" in gpu_problem(0)


def test_train_step_fails_before_spacy_train(no_cuda, monkeypatch):
    monkeypatch.setattr(train_script.subprocess, "call", lambda cmd: pytest.fail(f"launched {cmd}"))
    with pytest.raises(SystemExit) as exit_:
        train_script.main([str(ROOT / "configs" / "sciner_spancat_cnn.cfg"), "out", "--train", "t.spacy",
                           "--dev", "d.spacy", "--gpu-id", "0"])
    assert str(exit_.value.code).startswith("error: --gpu-id 0: torch ")
    assert str(exit_.value.code).endswith("(in a workflow: --vars.gpu_id)")
