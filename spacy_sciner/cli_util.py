"""What every ``sciner`` command does the same way with its inputs and outputs.

* Errors are one line, ``error: ...`` naming the file (and line), on stderr, exit
  status 1, no traceback (``fail``).
* Output paths are checked *before* the work (``check_output_file``,
  ``check_output_dir``): a command that would run for an hour and then find that it
  cannot write its result stops at once instead.
* Outputs are written under a temporary name beside the target and renamed into place
  (``atomic_output_file``, ``save_pipeline``), so a failure leaves nothing partial
  behind. Files use the shared helpers of ``spacy_sciner.outputs``.
"""
import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator, List, NoReturn, Optional, Union

import typer

from .outputs import atomic_outputs, check_output_path, writable_ancestor

PathLike = Union[str, Path]


def fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with status 1."""
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(1)


GPU_HINT = ("install the CUDA build of torch and the matching cupy-cuda12x or cupy-cuda13x "
            "(README, 'Installing torch: CPU or GPU'), or run on the CPU with --gpu-id -1")


def gpu_problem(gpu_id: int) -> Optional[str]:
    """Why ``--gpu-id gpu_id`` cannot run on this machine; None where it can (and for -1).

    Checked before any work: spaCy's own answer (``require_gpu``) is a traceback, and a
    ``spacy train`` launched by a workflow only gets there after loading everything. The
    transformer runs in torch and spaCy's ops in CuPy, so both must see the device.
    """
    if gpu_id < 0:
        return None
    import torch
    from thinc.util import gpu_is_available, has_cupy

    if not torch.cuda.is_available():
        return f"--gpu-id {gpu_id}: torch {torch.__version__} sees no CUDA device; {GPU_HINT}"
    if gpu_id >= torch.cuda.device_count():
        return f"--gpu-id {gpu_id}: torch sees only {torch.cuda.device_count()} CUDA device(s) (ids from 0)"
    if not has_cupy:
        return f"--gpu-id {gpu_id}: CuPy is not installed (spaCy's GPU ops need it); {GPU_HINT}"
    if not gpu_is_available():
        return f"--gpu-id {gpu_id}: CuPy is installed but finds no usable GPU (CUDA version mismatch?); {GPU_HINT}"
    return None


def setup_device(gpu_id: int) -> None:
    """spaCy's ``setup_gpu`` (GPU ``gpu_id``, or the CPU for -1), failing with one line
    (``gpu_problem``) where the GPU cannot be used."""
    from spacy.cli._util import setup_gpu

    problem = gpu_problem(gpu_id)
    if problem:
        fail(problem)
    setup_gpu(gpu_id)


def check_input(path: PathLike) -> Path:
    """Fail unless `path` exists (file or directory). RETURNS (Path): `path`."""
    path = Path(path)
    if not path.exists():
        fail(f"{path}: not found")
    return path


def _check_creatable(path: Path, what: str) -> None:
    """Fail unless the missing parents of `path` can be created and `path` written."""
    try:
        writable_ancestor(path.parent, f"cannot write the {what} {path}")
    except ValueError as err:
        fail(str(err))


def check_output_file(path: PathLike) -> Path:
    """Fail now if the file `path` cannot be written later (it is a directory, or its
    nearest existing parent is a file or not writable). Missing parents are fine: they
    are created on writing.

    RETURNS (Path): `path` as a Path.
    """
    try:
        check_output_path(path)
    except ValueError as err:
        fail(str(err))
    return Path(path)


def check_output_dir(path: PathLike, what: str = "output directory", markers: List[str] = ("config.cfg", "meta.json")) -> Path:
    """Fail now if the directory `path` cannot be written later.

    An existing directory is replaced as a whole, so it must be empty or look like an
    earlier output (hold one of `markers`): a typo must never wipe an unrelated folder.

    RETURNS (Path): `path` as a Path.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        fail(f"cannot write the {what} {path}: it is a file")
    if path.is_dir() and any(path.iterdir()) and not any((path / m).exists() for m in markers):
        fail(f"cannot write the {what} {path}: it exists, is not empty and holds no {' or '.join(markers)}: refusing to replace it")
    _check_creatable(path, what)
    return path


def _temp_sibling(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


@contextlib.contextmanager
def atomic_output_file(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path`; on an error it
    and any parent folders created for it are removed, and `path` is left as it was."""
    with atomic_outputs(path) as (tmp,):
        yield Path(tmp)


def save_pipeline(nlp, output_dir: PathLike) -> Path:
    """``nlp.to_disk`` into a temporary directory, then swap it in for `output_dir`
    (replacing an earlier output as a whole). On an error nothing is left behind: no
    temporary directory, no parent folder created for it, the earlier output kept."""
    output_dir = Path(output_dir)
    first_created = _first_missing(output_dir.parent)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp, old = _temp_sibling(output_dir, "tmp"), _temp_sibling(output_dir, "old")
    done = False
    try:
        nlp.to_disk(tmp)
        if output_dir.exists():
            os.replace(output_dir, old)
            try:
                os.replace(tmp, output_dir)
            except OSError:
                os.replace(old, output_dir)  # put the earlier output back
                raise
        else:
            os.replace(tmp, output_dir)
        done = True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
        if not done and first_created is not None:
            shutil.rmtree(first_created, ignore_errors=True)
    return output_dir


def _first_missing(path: Path) -> Optional[Path]:
    """The outermost missing folder on the way to `path` (None if `path` exists)."""
    path = path.absolute()
    missing = None
    while not path.exists() and path != path.parent:
        missing, path = path, path.parent
    return missing


def load_docbin(path: PathLike, vocab) -> list:
    """The docs of the DocBin at `path`, or a one-line error naming it."""
    from spacy.tokens import DocBin

    path = Path(path)
    if path.is_dir():
        fail(f"{path}: is a directory, expected a .spacy (DocBin) file")
    try:
        return list(DocBin().from_disk(path).get_docs(vocab))
    except FileNotFoundError:
        fail(f"{path}: file not found")
    except (ValueError, OSError) as err:
        fail(f"{path}: not a readable DocBin (.spacy) file ({str(err).splitlines()[0][:200]})")
