"""One Markdown summary of several ``gpu_check.py`` reports (e.g. the runs of one GPU session).

    python benchmarks/gpu_check_summary.py benchmarks/results/gpu_check_h200

reads ``run*.json`` in that folder (``gpu_check.json`` files, renamed per run) and writes
``benchmarks/results/gpu_check_h200.md`` beside it: the ``nlp.pipe`` ratios of every run,
config and code, the stage timings, mixed precision and PFT. Which commit each code is comes
from the report's ``--label`` ("commit REV ... old code REV"); without one, "current" and
"old code". Where one pipeline was timed in several runs (``--speed-only`` reruns wrapped as
reports with ``--wrap``), a second table gives the median ratio over those runs.
``readme_tables.py`` copies the summary into docs/gpu.md.

    python benchmarks/gpu_check_summary.py --wrap SPEED.json --config sciner_spancat \
        --machine-from REPORT.json --label "commit REV; ..." --to FOLDER/run4_plain_a.json
"""
import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Dict, List


def code_names(label: str) -> Dict[str, str]:
    """``{"current": ..., "old_code": ...}`` from a report's label."""
    current = re.search(r"\bcommit (\w+)", label)
    old = re.search(r"\bold code (\w+)", label)
    return {"current": current.group(1) if current else "current", "old_code": old.group(1) if old else "old code"}


def speed_rows(run: str, report: dict) -> List[str]:
    config, names = report["args"].get("config", "sciner_spancat"), code_names(report.get("label", ""))
    rows = []
    for code in ("current", "old_code"):
        speed = report.get("speed", {}).get(code, {})
        for key in sorted((k for k in speed if k.startswith("batch_")), key=lambda k: -int(k[6:])):
            row = speed[key]
            rows.append(f"| {run} | {config} | {names[code]} | {key[6:]} | {row['transformer_wps']:,.0f} | "
                        f"{row['pipeline_wps']:,.0f} | {row['ratio']:.2f} |")
    return rows


def stage_lines(run: str, report: dict) -> List[str]:
    config, names = report["args"].get("config", "sciner_spancat"), code_names(report.get("label", ""))
    lines = []
    for code in ("current", "old_code"):
        stages = report.get("speed", {}).get(code, {}).get("stages")
        if stages:
            lines.append(f"- {run}, {config}, {names[code]}: "
                         + ", ".join(f"{k} {v:.3f}" for k, v in stages.items() if k != "profile"))
            calls = stages.get("profile", {}).get("calls")
            if calls:
                launches = sum(n for k, n in calls.items() if "Launch" in k)
                syncs = sum(n for k, n in calls.items() if "Synchronize" in k)
                copies = sum(n for k, n in calls.items() if k.startswith("cudaMemcpy"))
                lines.append(f"  - span component, one profiled pass of {stages['profile']['batches']} batches: "
                             f"{launches:,} kernel launches, {copies:,} copies, {syncs:,} synchronisations")
    return lines


def median_rows(reports: Dict[str, dict]) -> List[str]:
    """Median ratio per config, code and batch size over the runs that timed it more than once."""
    ratios: Dict[tuple, List[float]] = {}
    for report in reports.values():
        config, names = report["args"].get("config", "sciner_spancat"), code_names(report.get("label", ""))
        for code in ("current", "old_code"):
            for key, row in report.get("speed", {}).get(code, {}).items():
                if key.startswith("batch_"):
                    ratios.setdefault((config, names[code], int(key[6:])), []).append(row["ratio"])
    rows = [f"| {config} | {code} | {batch} | {len(r)} | {', '.join(f'{x:.2f}' for x in r)} | {statistics.median(r):.2f} |"
            for (config, code, batch), r in sorted(ratios.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[0][2]))
            if len(r) > 1]
    if not rows:
        return []
    return ["", "Ratio by config and code over every run that timed it (runs as above; the pipelines of different runs differ):", "",
            "| config | code | batch | timings | ratios | median |", "|---|---|---|---|---|---|", *rows]


def wrap(speed: Path, config: str, machine_from: Path, label: str, to: Path) -> Path:
    """A ``--speed-only`` result as a gpu_check report (for the summary): its config, a
    label naming the commit, the machine of a report from the same session."""
    report = {"label": label, "machine": json.loads(machine_from.read_text())["machine"],
              "args": {"config": config, "speed_only": str(speed)}, "errors": {},
              "speed": {"current": json.loads(speed.read_text())}}
    to.write_text(json.dumps(report, indent=2))
    return to


def summary(folder: Path) -> str:
    reports = {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("run*.json"))}
    if not reports:
        raise SystemExit(f"gpu_check_summary: no run*.json in {folder}")
    machine = next(iter(reports.values()))["machine"]
    out = [f"# gpu_check summary: {folder.name}", "",
           f"GPU {machine.get('gpu', 'none')}, torch {machine['torch']}, Python {machine['python']}; "
           f"runs: " + "; ".join(f"{run} = {r.get('label') or 'no label'}" for run, r in reports.items()), "",
           "| run | config | code | batch | transformer words/s | pipeline words/s | ratio |",
           "|---|---|---|---|---|---|---|"]
    for run, report in reports.items():
        out += speed_rows(run, report)
    out += median_rows(reports)
    out += ["", "Stages (s over all texts at the larger batch size, synchronised after each):"]
    for run, report in reports.items():
        out += stage_lines(run, report)
    for run, report in reports.items():
        mp = report.get("mixed_precision")
        if mp:
            out += ["", f"Mixed precision ({run}; s/update on a second pass over the same batches):", "",
                    "| encoder | fp32 s/update | mixed s/update | mixed / fp32 | first pass fp32 / mixed | peak MiB fp32 / mixed |",
                    "|---|---|---|---|---|---|"]
            for size in dict.fromkeys(k.rsplit("_", 1)[0] for k in mp if k.endswith("_fp32") and "_vs_" not in k):
                a, b = mp[f"{size}_fp32"], mp[f"{size}_mixed"]
                out.append(f"| {size} | {a['s_per_update']:.4f} | {b['s_per_update']:.4f} | {mp[f'{size}_mixed_vs_fp32']:.2f} | "
                           f"{a['first_pass_s_per_update']:.4f} / {b['first_pass_s_per_update']:.4f} | "
                           f"{a['peak_gpu_memory_mib']:,.0f} / {b['peak_gpu_memory_mib']:,.0f} |")
        pft = report.get("pft")
        if pft:
            parts = [f"`{name}` {row['tokens_per_s_steady']:,.0f} (whole run {row['tokens_per_s']:,.0f})"
                     for name, row in pft.items() if isinstance(row, dict)]
            out += ["", f"PFT ({run}, {pft['mlm_random']['steps']} steps): steady-state tokens/s " + ", ".join(parts)
                    + (f"; candidate masking + ECB overhead {100 * pft['cand_ecb_overhead']:+.1f}%" if "cand_ecb_overhead" in pft else "")]
    return "\n".join(out) + "\n"


def main(argv=None) -> Path:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, nargs="?", help="A folder of gpu_check reports named run*.json")
    p.add_argument("--wrap", type=Path, help="A --speed-only result to write as a report (--to)")
    p.add_argument("--config", default="sciner_spancat")
    p.add_argument("--machine-from", type=Path)
    p.add_argument("--label", default="")
    p.add_argument("--to", type=Path)
    args = p.parse_args(argv)
    if args.wrap:
        if not (args.machine_from and args.to):
            p.error("--wrap needs --machine-from and --to")
        return wrap(args.wrap, args.config, args.machine_from, args.label, args.to)
    if args.folder is None:
        p.error("a folder of run*.json reports, or --wrap")
    out = args.folder.parent / f"{args.folder.name}.md"
    out.write_text(summary(args.folder))
    return out


if __name__ == "__main__":
    print(main())
