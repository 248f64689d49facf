"""Output files of every command: checked before the work, written atomically.

A run can take minutes, so a path that cannot be written is reported before it starts
(``check_output_path``), and a run that fails or is interrupted while writing leaves
neither a partial file nor a stray temporary one (``atomic_outputs``).
"""
import contextlib
import os
from pathlib import Path
from typing import Iterator, List, Union

PathLike = Union[str, Path]


def check_output_path(path: PathLike) -> None:
    """Raise ValueError with a one-line message if ``path`` cannot be written.

    Missing parent directories are fine (they are created when the output is written), as
    long as the nearest existing one is a writable directory.

    path (PathLike): The output file.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"cannot write {path}: it is a directory")
    writable_ancestor(path.parent, f"cannot write {path}")


def writable_ancestor(path: PathLike, context: str) -> Path:
    """The nearest existing folder at or above ``path``, which must be a writable
    directory (so that ``path`` can be created below it); else ValueError.

    path (PathLike): A folder that may not exist yet.
    context (str): Start of the error message, e.g. "cannot write out.tsv".
    RETURNS (Path): The existing ancestor.
    """
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{context}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{context}: directory {existing} is not writable")
    return existing


def _temporary(path: PathLike) -> str:
    # Beside the target (os.replace cannot cross file systems), with the target's suffix
    # last, so that writers choosing the format by suffix choose the same one.
    return f"{path}.tmp{os.getpid()}{Path(path).suffix}"


@contextlib.contextmanager
def atomic_outputs(*paths: PathLike) -> Iterator[List[str]]:
    """Temporary paths that replace ``paths`` when the block succeeds.

    All are written before any is replaced, so outputs that belong together (a table and
    its report) appear together. Missing parent directories are created. If the block
    fails, the temporary files and the directories created are removed, and the targets
    keep their old content.

    paths (PathLike): The output files.
    YIELDS (List[str]): One temporary path per output, to write instead of it.
    """
    tmps = [_temporary(path) for path in paths]
    created = _missing_directories(paths)
    try:
        for directory in created:
            directory.mkdir(exist_ok=True)
        yield tmps
        for tmp, path in zip(tmps, paths):
            os.replace(tmp, path)
    except BaseException:
        for leftover in tmps:
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


def _missing_directories(paths) -> List[Path]:
    """The directories to create for ``paths``, parents first."""
    missing: List[Path] = []
    for path in paths:
        parent = Path(path).absolute().parent
        chain = []
        while not parent.exists() and parent not in missing:
            chain.append(parent)
            parent = parent.parent
        missing.extend(reversed(chain))
    return missing
