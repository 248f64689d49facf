"""What a resumable ``sciner train`` run saves at each evaluation, and how it is read back.

Layout, next to spaCy's ``model-best``/``model-last``::

    OUTPUT/checkpoint/model/      # the pipeline's raw weights (nlp.to_disk)
    OUTPUT/checkpoint/state.pkl   # step, data position, optimizer, random states, dev results

A checkpoint is written into ``checkpoint.tmp`` and then swapped in by renames, so a kill
at any moment leaves either the old or the new checkpoint complete (``checkpoint.old`` is
read where the kill fell between the two renames). A finished run keeps only ``state.pkl``
(``finished``, the config), so that the weights are not stored twice.

thinc's optimizer keys its moments by ``(node id, parameter name)``, and node ids are
process-local counters: here each key is saved under a name that does not change between
processes, ``"<pipe>/n<i>/<param>"`` (``i``: the node's position in ``model.walk()``) or
``"<pipe>/s<j>/<param>"`` for a PyTorch shim's parameters (the transformer).
"""
import hashlib
import pickle
import random
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
from spacy.util import dict_to_dot
from thinc.api import Config, Optimizer, get_current_ops

CHECKPOINT = "checkpoint"
MODEL = "model"
STATE = "state.pkl"
_OPTIMIZER_DICTS = ("mom1", "mom2", "averages", "nr_update", "last_seen")


def param_keys(nlp) -> Dict[Tuple[int, str], str]:
    """Map every optimizer key of ``nlp``'s trainable models to a process-independent name."""
    keys: Dict[Tuple[int, str], str] = {}
    seen = set()
    for pipe_name, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if not hasattr(model, "walk"):
            continue
        shims = []
        for i, node in enumerate(model.walk()):
            if node.id in seen:  # a layer shared by two components keeps its first name
                continue
            seen.add(node.id)
            for name in node.param_names:
                keys.setdefault((node.id, name), f"{pipe_name}/n{i}/{name}")
            shims.extend(s for s in node.shims if s not in shims)
        for j, shim in enumerate(shims):
            torch_model = getattr(shim, "_model", None)
            for name, _ in getattr(torch_model, "named_parameters", lambda: [])():
                keys.setdefault((shim.id, name), f"{pipe_name}/s{j}/{name}")
    return keys


def optimizer_state(optimizer: Optimizer, keys: Dict[Tuple[int, str], str]) -> Dict[str, Any]:
    """The optimizer's moments, averages and update counts under ``keys``' names (numpy)."""
    ops = get_current_ops()
    state: Dict[str, Any] = {}
    for attr in _OPTIMIZER_DICTS:
        table = getattr(optimizer, attr)
        if table is None:
            state[attr] = None
            continue
        missing = [k for k in table if k not in keys]
        if missing:
            raise ValueError(f"Cannot checkpoint the optimizer: parameter {missing[0]} belongs to no "
                             f"component's model (optimizer.{attr})")
        state[attr] = {keys[k]: (v if isinstance(v, int) else ops.to_numpy(v)) for k, v in table.items()}
    state["radam_buffer"] = [[None if x is None else ops.to_numpy(x) if hasattr(x, "shape") else x for x in row]
                             for row in optimizer._radam_buffer]
    return state


def restore_optimizer(optimizer: Optimizer, state: Dict[str, Any], keys: Dict[Tuple[int, str], str],
                      steps: int) -> None:
    """Load ``state`` into a fresh ``optimizer`` and advance its schedules by ``steps`` updates."""
    ops = get_current_ops()
    by_name = {name: key for key, name in keys.items()}
    for attr in _OPTIMIZER_DICTS:
        saved = state[attr]
        if saved is None:
            continue
        unknown = [name for name in saved if name not in by_name]
        if unknown:
            raise ValueError(f"Cannot resume: the checkpoint's optimizer has a parameter '{unknown[0]}' "
                             "that the pipeline does not (a different architecture?)")
        table = getattr(optimizer, attr)
        for name, value in saved.items():
            table[by_name[name]] = value if isinstance(value, int) else ops.asarray(value)
    optimizer._radam_buffer = [[None if x is None else ops.asarray(x) if hasattr(x, "shape") else x for x in row]
                               for row in state["radam_buffer"]]
    for _ in range(steps):  # schedules are generators: replay them to the saved update
        optimizer.step_schedules()


def random_state(nlp) -> Dict[str, Any]:
    """Python's, numpy's and torch's global random states, and each component's numpy Generators."""
    state: Dict[str, Any] = {"python": random.getstate(), "numpy": numpy.random.get_state(), "pipes": {}}
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None:
        state["torch"] = torch.get_rng_state().numpy()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["torch_cuda"] = [s.numpy() for s in torch.cuda.get_rng_state_all()]
    for pipe_name, pipe in nlp.pipeline:
        for attr, value in getattr(pipe, "__dict__", {}).items():  # spaCy's Cython pipes have none
            if isinstance(value, numpy.random.Generator):  # e.g. sciner_spancat's negative sampler
                state["pipes"][f"{pipe_name}.{attr}"] = value.bit_generator.state
    return state


def restore_random(nlp, state: Dict[str, Any]) -> None:
    """Set the random states saved by ``random_state``."""
    random.setstate(state["python"])
    numpy.random.set_state(state["numpy"])
    if "torch" in state:
        import torch

        torch.set_rng_state(torch.from_numpy(state["torch"]))
        if "torch_cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([torch.from_numpy(s) for s in state["torch_cuda"]])
    for key, bit_state in state["pipes"].items():
        pipe_name, attr = key.rsplit(".", 1)
        getattr(nlp.get_pipe(pipe_name), attr).bit_generator.state = bit_state


def write(output: Path, state: Dict[str, Any], nlp=None) -> None:
    """Write ``state`` (and ``nlp``'s weights, if given) as the checkpoint, atomically."""
    final, tmp, old = (output / CHECKPOINT, output / f"{CHECKPOINT}.tmp", output / f"{CHECKPOINT}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if nlp is not None:
        nlp.to_disk(tmp / MODEL)
    with (tmp / STATE).open("wb") as file_:
        pickle.dump(state, file_, protocol=pickle.HIGHEST_PROTOCOL)
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def remove(output: Path) -> None:
    """Delete ``output``'s checkpoint (a fresh run starts)."""
    for name in (CHECKPOINT, f"{CHECKPOINT}.tmp", f"{CHECKPOINT}.old"):
        shutil.rmtree(output / name, ignore_errors=True)


def read(output: Path) -> Optional[Tuple[Path, Dict[str, Any]]]:
    """The checkpoint folder and its state, or None where ``output`` holds none."""
    for folder in (output / CHECKPOINT, output / f"{CHECKPOINT}.old"):
        if (folder / STATE).is_file():
            with (folder / STATE).open("rb") as file_:
                return folder, pickle.load(file_)
    return None


def config_mismatches(saved: str, current: Config) -> List[str]:
    """The settings in which ``current`` differs from the saved config, as ``"'key' was X, now Y"``."""
    before, after = dict_to_dot(Config().from_str(saved, interpolate=False)), dict_to_dot(current)
    return [f"'{key}' was {before.get(key)!r}, now {after.get(key)!r}"
            for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]


def input_fingerprints(config: Config) -> Dict[str, str]:
    """A content hash of every file or folder the config names (corpora, encoder, vectors...),
    so that a resume notices inputs rewritten in place (a converted corpus, an exported encoder).
    ``[training]`` is left out: the files it names are outputs (the logger's)."""
    out = {}
    for key, value in dict_to_dot(config.interpolate()).items():
        if not key.startswith("training.") and isinstance(value, str) and value and Path(value).exists():
            path = Path(value)
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            digest = hashlib.sha1()
            for file_ in files:
                digest.update(str(file_.relative_to(path) if path.is_dir() else "").encode())
                with file_.open("rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(chunk)
            out[f"{key} ({value})"] = digest.hexdigest()
    return out


def input_mismatches(saved: Dict[str, str], current: Dict[str, str]) -> List[str]:
    """The inputs whose content (or presence) changed since the checkpoint's run started."""
    return [f"{key} changed on disk" for key in sorted(set(saved) | set(current)) if saved.get(key) != current.get(key)]
