"""Domain pretraining assets of the CNN systems in benchmarks/convergence.py (issue 9 item 3).

Per data set, built once and cached in the convergence state dir, each resumable:

* ``aux.txt``: the domain's unlabeled aux text (scripts/aux_text.py);
* ``vectors/``: floret vectors trained on it (``sciner train-vectors`` defaults);
* ``pretrain-<config>[-floret]/model<N>.bin``: ``spacy pretrain`` of the config's CNN tok2vec
  (characters objective; with the floret vectors when the system uses them, because the
  pretrained tok2vec must be the one trained). A killed pretraining resumes from its last
  epoch file.

``assets.json`` records how long each took, so that a system's cost includes them.
"""
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parent.parent
# system -> (static floret vectors, spacy pretrain weights)
DOMAIN_PRETRAINING = {
    "spacy_ner_cnn_floret": (True, False),
    "sciner_spancat_cnn_floret": (True, False),
    "sciner_spancat_cnn_pretrain": (False, True),
    "sciner_spancat_cnn_floret_pretrain": (True, True),
}
# Smoke sizes (tests): a few hundred aux lines, tiny vectors, one pretraining epoch.
SMOKE = {"aux_lines": 300, "dim": 16, "vector_epochs": 1, "pretrain_epochs": 1}


def _record(folder: Path, name: str, seconds: float, add: bool = False) -> None:
    path = folder / "assets.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = round(seconds + (data.get(name, 0.0) if add else 0.0), 1)
    path.write_text(json.dumps(data, indent=2))


def _unrecorded_seconds(out: Path, folder: Path, name: str) -> float:
    """Time of an earlier pretraining call that was killed before it could record itself:
    from its config.cfg (written at its start) to its last epoch file. Exact when that call
    ran uninterrupted; 0 if the time is already recorded or nothing was saved."""
    recorded = folder / "assets.json"
    if recorded.exists() and f"{name}_s" in json.loads(recorded.read_text()):
        return 0.0
    saved = list(out.glob("model*.bin"))
    if not saved or not (out / "config.cfg").exists():
        return 0.0
    return max(p.stat().st_mtime for p in saved) - (out / "config.cfg").stat().st_mtime


def _call(cmd, log: Path, append: bool = False) -> None:
    with open(log, "a" if append else "w") as out:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    if rc:
        tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        sys.exit(f"{' '.join(map(str, cmd[1:4]))} failed (see {log}): {tail[0]}")


def aux_text(dataset: str, folder: Path, data_dir: Path, smoke: bool) -> Path:
    """The domain's aux text in one file (all lines; SMOKE's in smoke mode)."""
    out = folder / "aux.txt"
    if not out.exists():
        limit = SMOKE["aux_lines"] if smoke else 0
        _call([sys.executable, "scripts/aux_text.py", dataset, str(data_dir), str(out), "--limit", str(limit)],
              folder / "aux_text.log")
    return out


def vectors(dataset: str, folder: Path, data_dir: Path, smoke: bool) -> Path:
    """floret vectors on the aux text, as a vectors-only spaCy pipeline."""
    out = folder / "vectors"
    if not (out / "vectors_log.json").exists():
        text = aux_text(dataset, folder, data_dir, smoke)
        extra = ["--dim", str(SMOKE["dim"]), "--epochs", str(SMOKE["vector_epochs"])] if smoke else []
        start = time.time()
        _call([sys.executable, "-m", "spacy_sciner", "train-vectors", str(text), str(out), *extra], folder / "vectors.log")
        _record(folder, "vectors_s", time.time() - start)
    return out


def pretrained_tok2vec(dataset: str, config: str, with_vectors: bool, folder: Path, data_dir: Path,
                       smoke: bool, epochs: int = 5, small_cnn: bool = False) -> Path:
    """``spacy pretrain`` weights of ``config``'s tok2vec after ``epochs`` epochs (resumed)."""
    epochs = SMOKE["pretrain_epochs"] if smoke else epochs
    name = f"pretrain-{Path(config).stem}{'-floret' if with_vectors else ''}"
    out = folder / name
    final = out / f"model{epochs - 1}.bin"
    if final.exists():
        return final
    text = aux_text(dataset, folder, data_dir, smoke)
    cmd = [sys.executable, "-m", "spacy", "pretrain", str(ROOT / config), str(out), "--paths.raw_text", str(text),
           "--pretraining.max_epochs", str(epochs)]
    if with_vectors:
        cmd += ["--paths.vectors", str(vectors(dataset, folder, data_dir, smoke)),
                "--components.tok2vec.model.embed.include_static_vectors", "true"]
    if small_cnn:
        cmd += ["--components.tok2vec.model.encode.width", "32", "--components.tok2vec.model.encode.depth", "1"]
    done = sorted(out.glob("model*.bin"), key=lambda p: int(p.stem[5:]) if p.stem[5:].isdigit() else -1)
    done = [p for p in done if p.stem[5:].isdigit()]
    if done:  # resume after the last finished epoch; the pretraining time adds up over calls
        last = int(done[-1].stem[5:])
        cmd += ["--resume-path", str(done[-1]), "--epoch-resume", str(last + 1)]
        _record(folder, f"{name}_s", _unrecorded_seconds(out, folder, name), add=True)
    start = time.time()
    _call(cmd, folder / f"{name}.log", append=bool(done))
    _record(folder, f"{name}_s", time.time() - start, add=bool(done))
    if not final.exists():
        sys.exit(f"spacy pretrain wrote no {final} (see {folder / f'{name}.log'})")
    return final


def overrides(system: str, dataset: str, config: str, state: Path, data_dir: Path, smoke: bool,
              pretrain_epochs: int = 5) -> Dict[str, str]:
    """``{"vectors": dir, "init_tok2vec": file}`` for a domain-pretrained system, else {}:
    the weights after ``pretrain_epochs`` epochs of spacy pretrain (more epochs continue)."""
    if system not in DOMAIN_PRETRAINING:
        return {}
    use_vectors, use_pretrain = DOMAIN_PRETRAINING[system]
    folder = state / "assets" / dataset
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    if use_vectors:
        out["vectors"] = str(vectors(dataset, folder, data_dir, smoke))
    if use_pretrain:
        out["init_tok2vec"] = str(pretrained_tok2vec(dataset, config, use_vectors, folder, data_dir, smoke,
                                                     epochs=pretrain_epochs, small_cnn=smoke))
    return out


def build_seconds(domain: Dict[str, str], folder: Path) -> Dict[str, float]:
    """Build time of each asset in ``domain`` (an ``overrides`` result), from assets.json:
    ``{"vectors": s, "pretrain": s}`` — a cost of the system that its training time omits."""
    path = folder / "assets.json"
    built = json.loads(path.read_text()) if path.exists() else {}
    out = {}
    if "vectors" in domain:
        out["vectors"] = built.get("vectors_s")
    if "init_tok2vec" in domain:
        out["pretrain"] = built.get(f"{Path(domain['init_tok2vec']).parent.name}_s")
    return out
