"""The report of benchmarks/spancat_bench.py: spancat.md from spancat.json, also from the
partial JSON of a run still going (``--report-only``), with the before/after column from a
committed revision's results.
"""
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def previous_results(rev: str) -> dict:
    """spancat.json as committed at ``rev`` (for the before/after column), or {}."""
    try:
        text = subprocess.run(["git", "show", f"{rev}:benchmarks/results/spancat.json"], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout
        return json.loads(text).get("accuracy", {})
    except (subprocess.CalledProcessError, json.JSONDecodeError, FileNotFoundError):
        return {}


def decision(r: dict) -> str:
    """The dev-chosen decision rule of a row, in words."""
    cal = r.get("calibration")
    if isinstance(cal, dict):
        return f"threshold {cal['threshold']:.3f} (dev F {100 * cal['dev_f']:.1f})"
    if isinstance(cal, str):
        match = [line for line in cal.splitlines() if line.startswith("decision rule")]
        return match[0].split(":")[0].replace("decision rule ", "") if match else "calibrated"
    return "model's own decoding"


def write_markdown(results: dict, path: Path) -> None:
    lines = [f"# sciner_spancat vs spaCy components (seed {results['seed']}, epochs {results['epochs']}, encoder {results['encoder']})", ""]
    lines.append(f"Machine: {results['machine']}. Load average at start / end: {results['load_start']} / {results['load_end']}.")
    lines += ["", "Protocol, the same for every row: the same train/dev/test sentences, seed, epochs and number of dev "
              f"evaluations ({results.get('evals', 4)} per run); `model-best` = the checkpoint `spacy train` picks on dev; decision "
              "thresholds chosen on dev only. Transformer rows: the same encoder, batcher "
              f"({results['batch_words']} words) and schedule (warmup_linear, 10% warm-up, peak lr {results['lr']}). "
              "`spacy_ner_cnn`: spaCy's stock CPU config (Adam lr 0.001, compounding batches), no transformer, no vectors.", ""]
    before = results.get("before", {})
    rev = results.get("before_rev", "")
    lines.append(f"| dataset | system | span P | span R | span F | span F at {rev} | flat ents F | seqeval F | decision (chosen on dev) | train s | load at end |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for ds, systems in results["accuracy"].items():
        for system, r in systems.items():
            old = before.get(ds, {}).get(system, {}).get("spans_f")
            lines.append(
                f"| {ds} | {system} | {100*r['spans_p']:.1f} | {100*r['spans_r']:.1f} | {100*r['spans_f']:.1f} | "
                f"{'—' if old is None else f'{100 * old:.1f}'} | {100*r['ents_f']:.1f} | {100*r['seqeval_f']:.1f} | {decision(r)} | "
                f"{r['train_seconds']:.0f} | {r.get('load_avg_1min_at_end', float('nan')):.1f} |"
            )
    if results.get("missing"):
        lines += ["", f"Not finished in time (no result): {', '.join(results['missing'])}."]
    for ds, sp in results.get("speed", {}).items():
        load = (f" Load average at start / end of the speed run: {sp['load_start']:.1f} / {sp['load_end']:.1f}."
                if "load_start" in sp else "")
        lines += ["", f"Inference on {sp['sentences']} sentences / {sp['words']} words ({ds}), batch size 64, one process (torch on both cores), "
                  f"median of {sp['rounds']} interleaved rounds after a warm-up pass of each pipeline.{load}", "",
                  "| pipeline | words/s (median) | each round | ratio vs transformer (medians) | ratio in each round |",
                  "|---|---:|---|---:|---|"]
        base = sp["words_per_s"]["transformer"]["all"]
        for name, r in sp["words_per_s"].items():
            rounds = ", ".join(f"{v:.0f}" for v in r["all"])
            ratios = ", ".join(f"{v / b:.2f}" for v, b in zip(r["all"], base))
            lines.append(f"| {name} | {r['median']:.0f} | {rounds} | {r['ratio_vs_transformer']:.2f} | {ratios} |")
    path.write_text("\n".join(lines) + "\n")


def report_only(args) -> None:
    """spancat.md from the results a (still running) benchmark has written so far: its
    JSON is rewritten after every evaluated system; those not in it are listed as missing."""
    path = args.results / "spancat.json"
    if not path.exists():
        raise SystemExit(f"--report-only: no {path} yet (a benchmark run writes it after its first system)")
    results = json.loads(path.read_text())
    results["missing"] = [f"{ds}/{system}" for ds in args.datasets for system in args.systems
                          if system not in results["accuracy"].get(ds, {})]
    results.setdefault("load_end", os.getloadavg()[0])  # now: the run has not ended
    speed_file = args.results / "spancat_speed.json"
    if not results.get("speed") and speed_file.exists():  # measured separately with --speed-only
        results["speed"] = {args.speed_dataset: json.loads(speed_file.read_text())}
    (args.results / "spancat.json").write_text(json.dumps(results, indent=2))
    write_markdown(results, args.results / "spancat.md")
    print((args.results / "spancat.md").read_text())
