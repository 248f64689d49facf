"""One table of every `spacy project run` that benchmarks/project_run.py recorded, beside
spaCy's stock CPU `ner` on the same data set, so that the project-run numbers (docs/recipes.md) are
written by a script, never typed by hand.

    python benchmarks/project_runs.py      # -> benchmarks/results/project_runs.{json,md}

Each row is one benchmarks/results/project_run_*.json: the seed and the update budget it ran
under (`min_steps` as passed, else project.yml's default at the recorded commit), the updates
trained (as scripts/train.py announced them; for runs recorded before project_run.py logged
that count, counted here from the current corpus/<dataset>/train.spacy with the same config,
reader and batcher: the conversion is deterministic; where that corpus is not on disk, the
count of the previous project_runs.json is kept), minutes, the calibrated dev F and the
test span F that `spacy evaluate` wrote. The stock `ner` column is the test span F of
benchmarks/convergence.py's `spacy_ner_cnn` runs (trained to convergence, patience), the mean
over its seeds.
"""
import argparse
import contextlib
import functools
import importlib.util
import io
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import srsly
from spacy.util import load_config

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


@functools.lru_cache(maxsize=None)
def project_vars(commit: str, root: Path = ROOT) -> Dict[str, Any]:
    """project.yml's vars at ``commit`` ({} where git cannot show it: a shallow clone)."""
    out = subprocess.run(["git", "show", f"{commit}:project.yml"], cwd=root, capture_output=True, text=True)
    return {} if out.returncode else (srsly.yaml_loads(out.stdout).get("vars") or {})


def budget(rec: Dict[str, Any], root: Path = ROOT) -> Dict[str, Any]:
    """The run's config, max_epochs, min_steps and max_steps: its own vars, else project.yml's
    defaults at its commit (min_steps and max_steps 0 before the vars existed)."""
    defaults = {"config": "sciner_spancat_hybrid", "max_epochs": 15, "min_steps": 0, "max_steps": 0,
                **project_vars(rec["commit"], root), **rec["vars"]}
    config = defaults["config"]
    if config == "auto":  # what it stood for, as the train step said (project_run.py records it)
        config = f"auto: {rec['config_chosen']}" if rec.get("config_chosen") else "auto"
    return {"config": config, "max_epochs": int(defaults["max_epochs"]), "min_steps": int(defaults["min_steps"]),
            "max_steps": int(defaults["max_steps"])}


def count_updates(dataset: str, plan: Dict[str, Any], root: Path = ROOT) -> Optional[int]:
    """Updates the train step makes under ``plan``, counted with scripts/train.py's own
    functions on corpus/<dataset>/train.spacy (None where that file or config is missing)."""
    config_path = root / "configs" / f"{plan['config'].removeprefix('auto: ')}.cfg"
    train = root / "corpus" / dataset / "train.spacy"
    if not (config_path.exists() and train.exists()):
        return None
    spec = importlib.util.spec_from_file_location("sciner_train_script", root / "scripts" / "train.py")
    train_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_script)
    per_epoch = train_script.updates_per_epoch(load_config(config_path, interpolate=False), str(train))
    if not per_epoch:
        return None
    args = argparse.Namespace(config=plan["config"], max_epochs=plan["max_epochs"], min_steps=plan["min_steps"])
    with contextlib.redirect_stdout(io.StringIO()):  # its "training N epochs" note is for a live run
        updates = train_script.epochs_for(args, per_epoch) * per_epoch
    return min(updates, plan["max_steps"]) if plan.get("max_steps") else updates


def stock_ner(convergence: Dict[str, Any], dataset: str) -> Optional[Dict[str, Any]]:
    """Mean test span F of convergence.py's spacy_ner_cnn runs on ``dataset`` and their seeds."""
    runs = [r for r in convergence.get("runs", {}).values()
            if r["dataset"] == dataset and r["system"] == "spacy_ner_cnn"
            and r.get("summary", {}).get("test_spans_f") is not None]
    if not runs:
        return None
    return {"f": statistics.mean(r["summary"]["test_spans_f"] for r in runs),
            "seeds": sorted(r["seed"] for r in runs)}


def row(rec: Dict[str, Any], name: str, convergence: Dict[str, Any], root: Path = ROOT) -> Dict[str, Any]:
    plan = budget(rec, root)
    # the fine-tuning step: train, or train-weak / train-cnn in the weak_all / cnn_all workflows
    train_min = sum(s["seconds"] for s in rec["steps"] if s["step"] in ("train", "train-weak", "train-cnn")) / 60
    logged = rec.get("updates")
    return {
        "file": name, "dataset": rec["dataset"], "workflow": rec.get("workflow", "all"), "seed": int(rec["vars"].get("seed", 0)),
        "commit": rec["commit"], "date": rec["date"], "threads": rec["threads"], **plan,
        "updates": logged if logged else count_updates(rec["dataset"], plan, root),
        "updates_logged": bool(logged), "train_min": round(train_min, 1), "total_min": rec["total_min"],
        "calibrated_dev_f": rec["calibrated_dev_f"], "test": rec["test"],
        "stock_ner": stock_ner(convergence, rec["dataset"]),
    }


def keep_earlier_counts(rows: List[Dict[str, Any]], previous: Path) -> None:
    """Fill an update count that could not be counted (no corpus/<dataset>/train.spacy on this
    machine) from the previous table's row of the same file, so that rerunning the table for
    another column does not lose it."""
    earlier = {r["file"]: r.get("updates") for r in srsly.read_json(previous)} if previous.exists() else {}
    for r in rows:
        if r["updates"] is None and earlier.get(r["file"]) is not None:
            r["updates"] = earlier[r["file"]]
            print(f"{r['file']}: no corpus/{r['dataset']}/train.spacy to count its updates; kept {r['updates']:,} "
                  f"from {previous.name}", file=sys.stderr)


def pct(value: Optional[float]) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def markdown(rows: List[Dict[str, Any]]) -> str:
    lines = ["# `spacy project run`: every recorded run", "",
             "Test span F as `spacy evaluate` scores it (spaCy's tokenization of the text); stock "
             "`ner`: benchmarks/convergence.py's `spacy_ner_cnn` trained to convergence, test span F "
             "on the data set's own words, mean over the seeds named. Updates marked * were counted "
             "afterwards from the corpus and the config (the run predates the logged count). "
             "Workflow `weak_all` trains from the weak-pretrained encoder (see README, `weak_all`).", "",
             "| data set | workflow | seed | config | budget | updates | commit | train min | total min "
             "| calibrated dev F | test span F (P / R) | stock `ner` | Δ | file |",
             "|---|---|---:|---|---|---:|---|---:|---:|---:|---|---:|---:|---|"]
    for r in rows:
        test, ner = r["test"], r["stock_ner"]
        updates = "—" if r["updates"] is None else f"{r['updates']:,}" + ("" if r["updates_logged"] else "*")
        plan = f"{r['max_epochs']} epochs" + (f", ≥ {r['min_steps']:,} updates" if r["min_steps"] else "")
        if r.get("max_steps"):  # the cap wins over both
            plan = (f"{r['max_steps']:,} updates" if r["min_steps"] >= r["max_steps"]
                    else f"{plan}, ≤ {r['max_steps']:,} updates")
        f = test.get("spans_sc_f")
        seeds = "seed" + ("s" if ner and len(ner["seeds"]) > 1 else "")
        ner_text = "—" if ner is None else f"{pct(ner['f'])} ({seeds} {', '.join(map(str, ner['seeds']))})"
        delta = "—" if ner is None or f is None else f"{100 * (f - ner['f']):+.1f}"
        lines.append(
            f"| {r['dataset']} | {r.get('workflow', 'all')} | {r['seed']} | {r['config']} | {plan} | {updates} | {r['commit']} "
            f"| {r['train_min']:.1f} | {r['total_min']:.1f} | {pct(r['calibrated_dev_f'])} "
            f"| **{pct(f)}** ({pct(test.get('spans_sc_p'))} / {pct(test.get('spans_sc_r'))}) "
            f"| {ner_text} | {delta} | `{r['file']}` |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    conv_path = args.results / "convergence.json"
    convergence = srsly.read_json(conv_path) if conv_path.exists() else {}
    paths = sorted(args.results.glob("project_run_*.json"))
    if not paths:
        sys.exit(f"no project_run_*.json in {args.results}: run benchmarks/project_run.py first")
    rows = [row(srsly.read_json(path), path.name, convergence) for path in paths]
    keep_earlier_counts(rows, args.results / "project_runs.json")
    rows.sort(key=lambda r: (r["dataset"], r["workflow"] != "all", r["min_steps"], r["seed"], r["commit"]))
    srsly.write_json(args.results / "project_runs.json", rows)
    (args.results / "project_runs.md").write_text(markdown(rows), encoding="utf8")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
