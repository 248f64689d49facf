"""``spacy-sciner.JSONLLogger.v1``: spaCy's console table plus one JSON line per evaluation.

Each evaluation appends one line to ``path`` (and flushes it), for learning curves of
dev score against updates and wall time::

    {"step": 200, "epoch": 1, "seconds": 41.27, "score": 0.312, "words": 98211,
     "scores": {"spans_sc_f": 0.312, "spans_sc_per_type.Method.f": 0.4, ...},
     "losses": {"sciner_spancat": 1532.1, "tok2vec": 12.5}}

``seconds`` is wall time since the logger was set up at the start of training (float,
unlike spaCy's rounded ``info["seconds"]``); ``scores`` are the evaluation's
``other_scores`` flattened (nested per-type scores with dotted keys); ``losses`` are
summed since the previous evaluation, as spaCy reports them. The file is emptied when
training starts, except where ``sciner train --resume`` continues a run: then lines are
appended and ``seconds`` go on from the checkpoint's. Its folder is created and its writability checked when the config is
resolved, before any initialization or training.
"""
import json
import math
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, Optional, Tuple, Union

from spacy.training.loggers import console_logger
from spacy.util import registry

from ..outputs import check_output_path


@registry.loggers("spacy-sciner.JSONLLogger.v1")
def jsonl_logger(
    path: Optional[Union[str, Path]] = None,
    progress_bar: bool = False,
    console_output: bool = True,
) -> Callable:
    """Log like ``spacy.ConsoleLogger.v2`` and append one JSON line per evaluation.

    path (Optional[Union[str, Path]]): The JSON-lines file; None: console only.
    progress_bar (bool): Show the console logger's progress bar to the next evaluation.
    console_output (bool): Print the console table.
    RETURNS (Callable): The logger setup function that ``spacy train`` calls.
    """
    console = console_logger(progress_bar=progress_bar, console_output=console_output)
    path = check_writable(path) if path is not None else None

    def setup_printer(nlp, stdout: IO = sys.stdout, stderr: IO = sys.stderr) -> Tuple[Callable, Callable]:
        from . import loop  # a run resumed by `sciner train` goes on with its curve and clock

        log_console, finalize_console = console(nlp, stdout, stderr)
        resumed = loop.RESUMED
        start = time.perf_counter() - (resumed["seconds"] if resumed else 0.0)
        if path is not None and resumed:
            keep_until(path, resumed["step"])
        stream = path.open("a" if resumed else "w", encoding="utf8") if path is not None else None

        def log_step(info: Optional[Dict[str, Any]]) -> None:
            seconds = time.perf_counter() - start
            log_console(info)
            if info is None or stream is None:
                return
            record = info_record(info, seconds)
            stream.write(json.dumps(record, ensure_ascii=False) + "\n")
            stream.flush()

        def finalize() -> None:
            finalize_console()
            if stream is not None:
                stream.close()

        return log_step, finalize

    return setup_printer


def keep_until(path: Path, step: int) -> None:
    """Drop the lines after ``step`` (evaluations a killed run logged after its checkpoint)."""
    if not path.is_file():
        return
    lines = [line for line in path.read_text(encoding="utf8").splitlines()
             if line.strip() and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf8")


def check_writable(path: Union[str, Path]) -> Path:
    """Create the file's folder and check that the file can be written, so that a bad
    path fails before training instead of at the first evaluation.

    path (Union[str, Path]): The log file.
    RETURNS (Path): The path.
    """
    path = Path(path)
    try:
        check_output_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf8"):
            pass
    except ValueError as err:
        raise ValueError(f"spacy-sciner.JSONLLogger.v1: {err}") from None
    except OSError as err:
        raise ValueError(f"spacy-sciner.JSONLLogger.v1: cannot write {path}: {err.strerror or err}") from None
    return path


def info_record(info: Dict[str, Any], seconds: float) -> Dict[str, Any]:
    """The JSON record of one evaluation's ``info`` (see the module docstring).

    info (Dict[str, Any]): What spaCy's training loop passes to the logger.
    seconds (float): Wall time since training started.
    RETURNS (Dict[str, Any]): A JSON-serializable record.
    """
    return {
        "step": int(info["step"]),
        "epoch": int(info["epoch"]),
        "seconds": round(seconds, 3),
        "score": as_number(info.get("score")),
        "words": int(info.get("words", 0)),
        "scores": flatten(info.get("other_scores") or {}),
        "losses": {name: as_number(loss) for name, loss in (info.get("losses") or {}).items()},
    }


def flatten(scores: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    """Nested score dicts as one level with dotted keys; numbers as floats, NaN as None."""
    flat: Dict[str, Any] = {}
    for key, value in scores.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = as_number(value)
    return flat


def as_number(value: Any) -> Any:
    """A float for numbers (numpy included), None for NaN/inf and None, else unchanged."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return number if math.isfinite(number) else None
