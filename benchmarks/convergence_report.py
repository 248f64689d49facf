"""Results of benchmarks/convergence.py: per-run summaries, convergence.{json,md,png}.

Rewritten after every run from the run manifests in the state dir, merged with the runs
already in the JSON (so results of other machines or sessions are kept).
"""
import json
import os
import re
import time
from pathlib import Path


def summarize(m: dict, marks: list) -> dict:
    curve, best = m.get("curve") or [], m.get("best")
    reached = {}
    for minutes in marks:
        upto = [p["score"] or 0.0 for p in curve if p["seconds"] <= minutes * 60]
        last = curve[-1]["seconds"] if curve else 0
        # None: the run has not been trained that long (and did not converge before).
        reached[f"{minutes:g}"] = max(upto) if upto and (last >= minutes * 60 or m.get("status") in ("converged", "max steps")) else None
    ev = m.get("evaluation") or {}
    # "calls" of `sciner train --resume`; "segments" in runs of the runner before it.
    segs = m.get("calls") or m.get("segments") or []
    return {
        "status": m.get("status"), "calls": len(segs), "evals": len(curve),
        "best_dev_f": best["score"] if best else None, "best_step": best["step"] if best else None,
        "best_seconds": best["seconds"] if best else None,
        "last_step": curve[-1]["step"] if curve else None,
        "train_seconds": curve[-1]["seconds"] if curve else 0.0,
        "wall_seconds": round(sum(s.get("wall_seconds", 0) for s in segs), 1),
        "load_avg": [[s.get("load_start"), s.get("load_end")] for s in segs],
        "dev_f_at_minutes": reached,
        "test_spans_f": ev.get("spans_f"), "test_ents_f": ev.get("ents_f"),
        "test_spans_f_at_minutes": {k: (ev.get("spans_f") if v.get("evaluation") == "final" else (v.get("evaluation") or {}).get("spans_f"))
                                    for k, v in (m.get("marks") or {}).items()},
        "resume_checks": m.get("resume_checks") or [],
    }


def write_results(state: Path, results_dir: Path, args) -> Path:
    """Rebuild convergence.{json,md,png} from every run in the state dir + the runs already
    in the JSON (so that runs from other machines or lost state stay), less failed runs whose
    state was deleted."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / "convergence.json"
    runs = json.loads(path.read_text()).get("runs", {}) if path.exists() else {}
    # A failed run whose state is gone (deleted to start it over) measured nothing to keep.
    runs = {k: m for k, m in runs.items() if m.get("status") != "failed"
            or (state / "runs" / m["dataset"] / f"{m['system']}-seed{m['seed']}").exists()}
    for manifest in sorted((state / "runs").glob("*/*/manifest.json")):
        m = json.loads(manifest.read_text())
        # A run still training (in another process, or killed mid-call) is no result:
        # it must not replace a recorded one, nor show up half-done in the tables.
        if m.get("status") == "running":
            continue
        runs[f"{m['dataset']}/{m['system']}/seed{m['seed']}"] = m
    for key, m in runs.items():  # summaries of merged runs too (marks may have changed)
        m["summary"] = summarize(m, args.marks)
    results = {"machine": f"{os.cpu_count()} CPU cores", "marks_minutes": args.marks, "smoke": args.smoke,
               "encoder": args.encoder if not args.smoke else "tiny random BERT (smoke)",
               "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": runs}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(portable(json.dumps(results, indent=1)))
    tmp.replace(path)
    write_markdown(results, results_dir / "convergence.md")
    write_plots(results, results_dir)
    return path


def portable(text: str) -> str:
    """Committed results name no machine's folders: paths in the checkout become relative to it,
    those under the home folder "~/...", and those in a folder beside the checkout (work kept
    next to it, like ../shared) "../..."."""
    root = Path(__file__).resolve().parent.parent

    def starting(path: Path, new: str, text: str) -> str:
        # only where a path starts (a parent folder named like "work" must not match inside
        # "benchmarks/work/a"), also after a JSON-escaped line break or tab ("...\\n" + path)
        return re.sub(r"(?:(?<=\\[nt])|(?<![\w./~-]))" + re.escape(f"{path}/"), new, text)

    text = starting(Path.home(), "~/", starting(root, "", text))
    # after the home rule, so that a checkout right under the home folder keeps "~/..."
    return text if root.parent == Path(root.anchor) else starting(root.parent, "../", text)


def pct(x):
    return "—" if x is None else f"{100 * x:.1f}"


def encoders_note(results: dict) -> str:
    """The encoders the runs used: the usual one, then each other one with the systems that used it.

    The header must hold for every row, not only for the last call's --encoder (a system such
    as sciner_spancat_hybrid_v2_weak runs on its own encoder)."""
    by_encoder: dict = {}
    for m in results["runs"].values():
        enc = m.get("settings", {}).get("encoder")
        if enc:
            by_encoder.setdefault(enc, set()).add(m["system"])
    if not by_encoder:
        return results["encoder"]
    usual = max(by_encoder, key=lambda e: len(by_encoder[e]))
    others = [f"{', '.join(sorted(systems))}: {enc}" for enc, systems in sorted(by_encoder.items()) if enc != usual]
    return "; ".join([usual] + others)


def write_markdown(results: dict, path: Path) -> None:
    marks = results["marks_minutes"]
    lines = [f"# Learning curves to convergence ({encoders_note(results)}; {results['machine']})", "",
             "Dev F (the system's spaCy score: spans_sc_f or ents_f) against updates and training-loop wall time; "
             "test span F of the best dev checkpoint after the dev-chosen decision rule. `dev / test F @ N min`: best dev F "
             "among evaluations within N minutes of training, and the test span F of that checkpoint (— : not trained that "
             "long, or not evaluated). Calls: the processes a run trained in (a budget-stopped or killed one goes on "
             "in the next); load average: 1-min at start/end of each.", "",
             "| dataset | system | seed | status | calls | best dev F | at step | at min | test span F | test ents F | "
             + " | ".join(f"dev / test F @ {m:g} min" for m in marks) + " | train min | load avg | resume check |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(marks) + "---:|---|---|"]
    for key, r in sorted(results["runs"].items()):
        s = r["summary"]
        checks = resume_note(r, s)
        best_min = "—" if s["best_seconds"] is None else f"{s['best_seconds'] / 60:.1f}"
        loads = "; ".join(f"{a:.1f}/{b:.1f}" for a, b in s["load_avg"] if a is not None and b is not None)
        lines.append(
            f"| {r['dataset']} | {r['system']} | {r['seed']} | {s['status']} | {s['calls']} | {pct(s['best_dev_f'])} | "
            f"{s['best_step'] if s['best_step'] is not None else '—'} | "
            f"{best_min} | "
            f"{pct(s['test_spans_f'])} | {pct(s['test_ents_f'])} | "
            + " | ".join(f"{pct(s['dev_f_at_minutes'].get(f'{m:g}'))} / {pct(s.get('test_spans_f_at_minutes', {}).get(f'{m:g}'))}" for m in marks)
            + f" | {s['train_seconds'] / 60:.1f} | {loads} | {checks} |")
    for ds in sorted({r["dataset"] for r in results["runs"].values()}):
        lines += ["", f"![{ds}](convergence_{ds}.png)"]
    from convergence_runs import ENCODER_V2, GOLD_PREPROC, OPTIMIZER, SENTENCIZED, SPAN_HEAD, base_system  # (here: convergence_runs imports spaCy)

    lines += ["", "## What ran", "",
              "Each run trains its config (saved beside it in the state dir) with these settings. Runs with calls: "
              "each call is `spacy sciner train --resume` on the run's output folder, a later call continuing from "
              "the checkpoint of the last evaluation (weights, Adam's moments, data position, schedules, random "
              "states: on the CPU the weights of an uninterrupted run). Runs with segments (up to commit 85c4a34): "
              "each segment one `spacy train`, a continued one sourcing every component from the previous "
              "model-last (fresh Adam moments, the data order restarted, schedules shifted by the steps done), "
              "its first evaluation checked against the saved score (resume check)."]
    for key, r in sorted(results["runs"].items()):
        lines += ["", f"- `{key}`: {json.dumps(r.get('settings', {}))}"]
        if base_system(r["system"]) in SPAN_HEAD:
            lines.append(f"  - span vector: [components.sciner_spancat.model] {json.dumps(SPAN_HEAD[base_system(r['system'])])}")
        if base_system(r["system"]) in SENTENCIZED:
            lines.append("  - pipeline: spaCy's sentencizer first, also annotating the training docs")
        if base_system(r["system"]) in OPTIMIZER:
            lines.append(f"  - optimizer: [training.optimizer] {json.dumps(OPTIMIZER[base_system(r['system'])])} "
                         "(evaluated and saved with the averages, the transformer's included)")
        if base_system(r["system"]) in ENCODER_V2:
            lines.append("  - encoder: spacy-sciner.TransformerModel.v2, max_padded_wordpieces 512 (the configs since "
                         "bf300b6); runs of the other systems here used v1, one encoder call per batch")
        if base_system(r["system"]) in GOLD_PREPROC:
            lines.append("  - corpora: spacy-sciner.GoldTokensCorpus.v1 (trained and selected on the data set's own words)")
        if r.get("domain_assets"):
            lines.append("  - domain pretraining, built once per data set before the first call (not in train min): "
                         + ", ".join(f"{k} {v / 60:.1f} min" if v is not None else f"{k} ? min"
                                     for k, v in r["domain_assets"].items()))
        for call in r.get("calls") or []:
            lines.append(f"  - call {call['index']} " + (f"resuming after step {call['from_step']}" if call.get("from_step") is not None else "from scratch")
                         + f", started {call.get('started', '?')}: {call.get('stop', '?')} after {call.get('wall_seconds', 0) / 60:.1f} min wall "
                         f"({call.get('evals', 0)} new evaluations, budget {str(call['budget_minutes']) + ' min' if call.get('budget_minutes') else 'none'}, "
                         f"load {call.get('load_start', 0):.1f} -> {call.get('load_end') or 0:.1f})")
        for seg in r.get("segments") or []:
            lines.append(f"  - segment {seg['index']} from {seg['from']} at step {seg['step_offset']}, started "
                         f"{seg.get('started', '?')}: {seg.get('stop', '?')} after {seg.get('wall_seconds', 0) / 60:.1f} min wall "
                         f"({seg.get('evals', 0)} new evaluations, budget {str(seg['budget_minutes']) + ' min' if seg.get('budget_minutes') else 'none'}, "
                         f"load {seg.get('load_start', 0):.1f} -> {seg.get('load_end') or 0:.1f})")
    path.write_text(portable("\n".join(lines) + "\n"))


def resume_note(run: dict, summary: dict) -> str:
    """The resume-check column: the segment runner's checks, or how a resumed call continued."""
    if summary["resume_checks"]:
        return ", ".join("ok" if c["equal"] else f"{c['saved_score']:.4f}≠{c['first_eval']:.4f}" for c in summary["resume_checks"])
    resumed = sum(1 for c in run.get("calls") or [] if c.get("from_step") is not None)
    return f"checkpoint ×{resumed}" if resumed else "—"


def write_plots(results: dict, results_dir: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # the [bench] extra; the JSON and Markdown are written anyway
        print("note: matplotlib not installed (pip install -e '.[bench]'): no PNG written", flush=True)
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["dataset"] for r in results["runs"].values()})
    if not datasets:
        return
    grid, axes_grid = plt.subplots(len(datasets), 2, figsize=(12, 4 * len(datasets)), squeeze=False)
    for row, ds in enumerate(datasets):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4))
        for target in (axes, axes_grid[row]):
            for key, r in sorted(results["runs"].items()):
                if r["dataset"] != ds or not r["curve"]:
                    continue
                label = f"{r['system']} (seed {r['seed']}, {r['status']})"
                ys = [100 * (p["score"] or 0.0) for p in r["curve"]]
                target[0].plot([p["step"] for p in r["curve"]], ys, marker=".", label=label)
                target[1].plot([p["seconds"] / 60 for p in r["curve"]], ys, marker=".", label=label)
            target[0].set_xlabel("updates")
            target[1].set_xlabel("training wall time (min)")
            for ax in target:
                ax.set_ylabel(f"{ds} dev F")
                ax.grid(alpha=0.3)
            if target[0].get_lines():
                target[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(results_dir / f"convergence_{ds}.png", dpi=100)
        plt.close(fig)
    grid.tight_layout()
    grid.savefig(results_dir / "convergence.png", dpi=100)
    plt.close(grid)
