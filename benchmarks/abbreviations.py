"""Does ``sciner_abbreviations`` help a trained pipeline? Dev and test span F of few-shot models
with and without it (issue 12; the zero-shot rows are in weak_cnn.py).

For every finished few-shot run of ``fewshot.py`` that matches --datasets / --sizes / --systems,
the calibrated pipeline (``model-calibrated``) is scored as it is and with
``sciner_abbreviations`` after ``sciner_spancat`` on the run's own evaluation sets (the
few-shot dev subset and test; ``spancat_bench.evaluate``: exact labelled spans). The component
has no weights and no threshold; whether to use it is read on dev, test only reports.

    python benchmarks/abbreviations.py --datasets ncbi_disease --sizes 500 --systems minilm weak_fine

Writes benchmarks/results/abbreviations.{json,md}.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
import spancat_bench  # noqa: E402  (evaluate, with_abbreviations, ROOT)

ROOT = spancat_bench.ROOT


def score_run(run: Path, ds: str, evalc: Path) -> dict:
    """Span P/R/F of one run's calibrated model, without and with the component, dev and test."""
    model = run / "model-calibrated"
    abbr = spancat_bench.with_abbreviations(model, run / "model-calibrated-abbr")
    res = {}
    for split in ("dev", "test"):
        for name, path in (("model", model), ("model_abbreviations", abbr)):
            s = spancat_bench.evaluate(ds, "sciner_spancat", evalc, run, model=path, split=split)
            res[f"{split}_{name}"] = {k: s[k] for k in ("spans_p", "spans_r", "spans_f")}
    return res


def summarize(runs: dict) -> dict:
    """Mean over seeds per (dataset, size, system) of each score, and the mean differences."""
    groups: dict = {}
    for key, res in runs.items():
        ds, size, system, _ = key.split("/")
        groups.setdefault((ds, size, system), []).append(res)
    out = {}
    for (ds, size, system), rows in sorted(groups.items()):
        cell = {"n": len(rows)}
        for split in ("dev", "test"):
            f0 = [r[f"{split}_model"]["spans_f"] for r in rows]
            f1 = [r[f"{split}_model_abbreviations"]["spans_f"] for r in rows]
            cell[split] = {"f": statistics.mean(f0), "f_abbreviations": statistics.mean(f1),
                           "delta": statistics.mean(b - a for a, b in zip(f0, f1)),
                           "better_seeds": sum(b > a for a, b in zip(f0, f1))}
        out[f"{ds}/{size}/{system}"] = cell
    return out


def markdown(summary: dict) -> str:
    lines = ["# sciner_abbreviations after a trained pipeline", "",
             "Few-shot runs of `fewshot.py` (calibrated on the few-shot dev subset), span F (exact labelled spans) "
             "without / with `sciner_abbreviations`, mean over fine-tuning seeds; Δ: mean per-seed difference, "
             "(k/n: seeds where it helped). Docs are sentences, as the data sets give them.", "",
             "| dataset | size | system | seeds | dev F | dev F + abbr | dev Δ | test F | test F + abbr | test Δ |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, c in summary.items():
        ds, size, system = key.split("/")
        cells = []
        for split in ("dev", "test"):
            d = c[split]
            cells += [f"{100 * d['f']:.1f}", f"{100 * d['f_abbreviations']:.1f}",
                      f"{100 * d['delta']:+.1f} ({d['better_seeds']}/{c['n']})"]
        lines.append(f"| {ds} | {size} | {system} | {c['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=["ncbi_disease"])
    p.add_argument("--sizes", nargs="+", default=["500"])
    p.add_argument("--systems", nargs="+", default=["minilm", "weak_fine"])
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "fewshot")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "abbreviations")
    args = p.parse_args(argv)
    out = args.results.with_suffix(".json")
    results = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    found = 0
    for ds in args.datasets:
        evalc = args.work / ds / "eval"
        for size in args.sizes:
            for system in args.systems:
                for run in sorted((args.work / ds / f"size{size}" / system).glob("seed*")):
                    if not (run / "done.json").exists():
                        continue
                    key = f"{ds}/{size}/{system}/{run.name}"
                    if key not in results["runs"]:
                        print(f"scoring {key}", flush=True)
                        results["runs"][key] = score_run(run, ds, evalc)
                    found += 1
    if not found:
        sys.exit(f"error: no finished few-shot run under {args.work} for {args.datasets} {args.sizes} {args.systems}")
    results["summary"] = summarize(results["runs"])
    args.results.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    args.results.with_suffix(".md").write_text(markdown(results["summary"]))
    print(markdown(results["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
