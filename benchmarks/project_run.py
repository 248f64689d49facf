"""Run a project.yml workflow as a user would and record what it gave: each step's wall
time, the calibrated dev F the `calibrate` step chose, and the test scores of `evaluate`.

    python benchmarks/project_run.py scierc                # spacy project run all . --vars.dataset scierc
    python benchmarks/project_run.py demo --workflow demo --vars seed=1
    python benchmarks/project_run.py ncbi_disease --workflow weak_all --add-step evaluate-weak

The steps run one by one (`spacy project run STEP . --vars.dataset D ...`, what `spacy
project run WORKFLOW` does) so that each is timed; `--force` reruns steps whose outputs are
up to date. Writes benchmarks/results/project_run_<dataset>[_<var><value>...].json and .md; the commit, the
torch thread count and the load average before and after are recorded with the numbers,
because on a shared 2-core machine they say how much of the cores the run had.
`--add-step STEP` runs one step after a recorded run (a step added to the workflow since) and
adds it, with its date and commit, to that run's record.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import srsly

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
UPDATES = re.compile(r"= (\d+) updates\s*$")
# scripts/train.py's note on what config "auto" stood for
AUTO = re.compile(r"^configs/auto\.cfg: configs/(\w+)\.cfg \(")
# the package step's model card reads the same files: one reader of the calibration report
sys.path.insert(0, str(ROOT / "scripts" / "packaging"))
from model_card import SCORES, _find_calibration  # noqa: E402


def workflow_steps(workflow: str) -> List[str]:
    """The commands of one workflow of project.yml, in order."""
    project = srsly.read_yaml(ROOT / "project.yml")
    steps = project.get("workflows", {}).get(workflow)
    if not steps:
        sys.exit(f"project.yml: no workflow {workflow!r} (has: {', '.join(project.get('workflows', {}))})")
    return list(steps)


def updates_in(line: str) -> Optional[int]:
    """The update count scripts/train.py announces ("... = 2010 updates"), or None."""
    match = UPDATES.search(line)
    return int(match.group(1)) if match else None


def auto_config_in(line: str) -> Optional[str]:
    """The config that ``config`` "auto" stood for, from scripts/train.py's note, or None."""
    match = AUTO.search(line)
    return match.group(1) if match else None


def run_step(cmd: List[str]) -> Tuple[int, Optional[int], Optional[str]]:
    """Run one step, echoing its output, and return its exit code, the number of updates
    the train step announced and the config "auto" chose (None for the other steps)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", bufsize=1)
    updates = chosen = None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        found = updates_in(line)
        updates = found if found is not None else updates
        chosen = auto_config_in(line) or chosen
    return proc.wait(), updates, chosen


def weak_checkpoint_scores(dataset: str, root: Path = ROOT) -> Optional[Dict[str, float]]:
    """The scores pretrain-weak's model-best was chosen by (its held-out 10% of the weak
    corpus, from its meta.json), or None where the workflow did not weak-pretrain."""
    meta = root / "training" / f"{dataset}-weak" / "model-best" / "meta.json"
    if not meta.exists():
        return None
    performance = srsly.read_json(meta).get("performance") or {}
    return {k: v for k, v in performance.items() if isinstance(v, (int, float)) and not k.endswith("_loss")}


def record(dataset: str, overrides: Dict[str, str], timings: List[Dict[str, Any]],
           root: Path = ROOT, workflow: str = "all") -> Dict[str, Any]:
    """Collect the run's numbers from the files the workflow wrote (nothing typed by hand)."""
    report = _find_calibration(root / "training" / dataset / "model-calibrated") or {}
    ran = {t["step"] for t in timings}
    return {
        "dataset": dataset, "workflow": workflow, "vars": overrides, "steps": timings,
        "total_min": round(sum(t["seconds"] for t in timings) / 60, 1),
        "updates": next((t["updates"] for t in timings if "updates" in t), None),
        "config_chosen": next((t["config"] for t in timings if "config" in t), None),
        "test": _scores(root / "metrics" / f"{dataset}.json"),
        "calibrated_dev_f": report.get("dev_f"),
        "selected_checkpoint": report.get("selected_checkpoint"),
        "decision": report.get("decision"), "threshold": report.get("threshold"),
        "weak_model_best": weak_checkpoint_scores(dataset, root) if "pretrain-weak" in ran else None,
        "zero_shot": zero_shot_scores(dataset, root) if "evaluate-weak" in ran else None,
    }


def zero_shot_scores(dataset: str, root: Path = ROOT) -> Optional[Dict[str, float]]:
    """The test scores of the weak model as it is (evaluate-weak's metrics), or None."""
    return _scores(root / "metrics" / f"{dataset}-weak.json") or None


def _scores(path: Path) -> Dict[str, float]:
    """The span and ents scores of a `spacy evaluate --output` file ({} where there is none)."""
    metrics = srsly.read_json(path) if path.exists() else {}
    return {key: metrics[key] for key in SCORES if key in metrics}


def add_step(rec: Dict[str, Any], timing: Dict[str, Any], root: Path = ROOT) -> Dict[str, Any]:
    """A recorded run with one more step, run after it (a step added to the workflow since; its
    ``timing`` says when, on which commit): its timings kept, the scores read again."""
    steps = rec["steps"] + [timing]
    fresh = record(rec["dataset"], rec["vars"], steps, root, rec.get("workflow", "all"))
    return {**rec, "steps": steps, "total_min": fresh["total_min"], "zero_shot": fresh["zero_shot"]}


def _num(value: Any) -> str:
    """A threshold as it was chosen (0.699, not the 0.6990000000000001 a JSON round trip may give)."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _later(timing: Dict[str, Any]) -> str:
    later = timing.get("later")
    return f" (run later: {later['date']}, commit {later['commit']})" if later else ""


def markdown(rec: Dict[str, Any]) -> str:
    test = rec["test"]
    lines = [f"# `spacy project run {rec.get('workflow', 'all')}` on {rec['dataset']}", "",
             f"commit {rec['commit']}, torch threads {rec['threads']}, load average "
             f"{rec['load_before']:.1f} -> {rec['load_after']:.1f}, {rec['date']}; "
             f"vars: {json.dumps(rec['vars'])}", "",
             "| step | minutes | exit |", "|---|---|---|"]
    lines += [f"| {t['step']}{_later(t)} | {t['seconds'] / 60:.1f} | {t['returncode']} |" for t in rec["steps"]]
    trained = f", {rec['updates']:,} training updates" if rec.get("updates") else ""
    lines += ["", f"Total {rec['total_min']} min{trained}. Calibrated dev F "
              f"{100 * (rec['calibrated_dev_f'] or 0):.1f} ({rec['selected_checkpoint']}, "
              f"decision {rec['decision']} {_num(rec['threshold'])}); test span F "
              f"{100 * test.get('spans_sc_f', 0):.1f} (P {100 * test.get('spans_sc_p', 0):.1f} / "
              f"R {100 * test.get('spans_sc_r', 0):.1f}), ents F {100 * test.get('ents_f', 0):.1f}.", ""]
    weak = rec.get("weak_model_best")
    if weak:
        lines += ["Weak pretraining, model-best on the held-out 10% of the weak corpus: "
                  + ", ".join(f"{k} {100 * v:.1f}" for k, v in sorted(weak.items()) if k.endswith("_f")) + ".", ""]
    zero = rec.get("zero_shot")
    if zero:
        lines += [f"Zero-shot (that weak model on test as it is, no gold training): span F "
                  f"{100 * zero.get('spans_sc_f', 0):.1f} (P {100 * zero.get('spans_sc_p', 0):.1f} / "
                  f"R {100 * zero.get('spans_sc_r', 0):.1f}), ents F {100 * zero.get('ents_f', 0):.1f}.", ""]
    return "\n".join(lines)


def timed_step(step: str, cli_vars: List[str], force: bool) -> Dict[str, Any]:
    """Run one project step as `spacy project run STEP .` and return its timing record."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "spacy", "project", "run", step, ".", *cli_vars]
    code, updates, chosen = run_step(cmd + (["--force"] if force else []))
    timing = {"step": step, "seconds": round(time.perf_counter() - start, 1), "returncode": code}
    if updates is not None:
        timing["updates"] = updates
    if chosen is not None:
        timing["config"] = chosen
    print(f"[project_run] {step}: {timing['seconds']:.0f} s, exit {code}", flush=True)
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--workflow", default="all")
    parser.add_argument("--vars", nargs="*", default=[], help="more project vars, NAME=VALUE")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--add-step", metavar="STEP",
                        help="run only STEP, after a recorded run of the same workflow and vars, and add it to that record")
    args = parser.parse_args()
    overrides = {"dataset": args.dataset, **dict(v.split("=", 1) for v in args.vars)}
    cli_vars = [f"--vars.{k}={v}" for k, v in overrides.items()]
    # one file per data set and set of extra vars, so that a second seed does not replace the first
    # (and per workflow: a weak_all run is not an `all` run)
    suffix = "".join(f"_{k}{v}" for k, v in overrides.items() if k != "dataset").replace("/", "-")
    suffix = ("" if args.workflow == "all" else f"_{args.workflow}") + suffix
    out = RESULTS / f"project_run_{args.dataset}{suffix}"
    import torch

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    if args.add_step:
        if not out.with_suffix(".json").exists():
            sys.exit(f"--add-step: no recorded run {out.with_suffix('.json').name} to add {args.add_step} to")
        timing = timed_step(args.add_step, cli_vars, args.force)
        timing["later"] = {"date": time.strftime("%Y-%m-%d"), "commit": commit}
        rec = add_step(srsly.read_json(out.with_suffix(".json")), timing)
    else:
        load_before, timings = os.getloadavg()[0], []
        for step in workflow_steps(args.workflow):
            timings.append(timed_step(step, cli_vars, args.force))
            if timings[-1]["returncode"]:
                break
        rec = record(args.dataset, overrides, timings, workflow=args.workflow)
        rec.update(commit=commit, threads=torch.get_num_threads(), load_before=load_before,
                   load_after=os.getloadavg()[0], date=time.strftime("%Y-%m-%d"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    srsly.write_json(out.with_suffix(".json"), rec)
    out.with_suffix(".md").write_text(markdown(rec), encoding="utf8")
    print(markdown(rec))
    sys.exit(1 if any(t["returncode"] for t in rec["steps"]) else 0)


if __name__ == "__main__":
    main()
