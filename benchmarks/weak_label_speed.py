"""Speed of ``sciner label-weak`` on all of ../shared/data/aux with the nine OpenBEL files,
and the noise report of the shipped type maps on NCBI-disease and BC5CDR test.

    python benchmarks/weak_label_speed.py [--n-process 2]

Writes benchmarks/results/weak_label.json and .md (numbers only from the runs below);
scratch files go to benchmarks/work/weak/. The load average is recorded before and after
the timed run: on a shared 2-core machine it says how much of the cores the run had.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
WORK = ROOT / "benchmarks" / "work" / "weak"
RESULTS = ROOT / "benchmarks" / "results"
OPENBEL = DATA / "gazetteers" / "openbel"
GOLD = {"NCBI-disease": "ncbi_disease.tsv", "BC5CDR": "bc5cdr.tsv"}


def sciner(*args) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "spacy_sciner", *map(str, args)],
                            capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"failed: {args}\n{result.stderr[-2000:]}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-process", type=int, default=2)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    texts = sorted((DATA / "aux").glob("*/text.txt"))
    n_lines = sum(1 for path in texts for _ in open(path, "rb"))
    load_before = os.getloadavg()
    start = time.perf_counter()
    run = sciner("label-weak", *texts, "-o", WORK / "aux_openbel.spacy", "-t",
                 ROOT / "configs/weak/openbel_fine.tsv", "--gazetteer-dir", OPENBEL,
                 "--n-process", args.n_process, "--no-progress", "--report",
                 WORK / "aux_openbel.json")
    seconds = time.perf_counter() - start
    load_after = os.getloadavg()
    labeling = json.loads((WORK / "aux_openbel.json").read_text())["labeling"]
    result = {
        "speed": {
            "command": "sciner label-weak <9 aux text.txt> -t configs/weak/openbel_fine.tsv "
                       f"--n-process {args.n_process}",
            "lines": n_lines, "seconds_wall": round(seconds, 1),
            "seconds_labeling": labeling["seconds"],
            "lines_per_s": round(n_lines / seconds), "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
            "spans": labeling["spans"], "labels": labeling["labels"],
        },
        "noise": {},
    }
    print(run.stdout.strip())
    for dataset, type_map in GOLD.items():
        gold = WORK / f"{dataset}-test.spacy"
        if not gold.exists():
            sciner("convert", DATA / dataset / "test.tsv", gold, "--format", "conll")
        report = WORK / f"noise_{dataset}.json"
        sciner("label-weak", "-t", ROOT / "configs/weak" / type_map, "--gazetteer-dir",
               OPENBEL, "--gold", gold, "--report", report)
        result["noise"][dataset] = json.loads(report.read_text())["noise"]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "weak_label.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "weak_label.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result) -> str:
    s = result["speed"]
    lines = ["# sciner label-weak: speed and noise", "",
             f"All of aux ({s['lines']:,} lines), nine OpenBEL files, `{s['command']}`: "
             f"**{s['seconds_wall']} s** wall ({s['seconds_labeling']} s labeling after "
             f"loading), {s['lines_per_s']:,} lines/s on {s['cpus']} CPUs, load average "
             f"{s['loadavg_before'][0]} before / {s['loadavg_after'][0]} after; "
             f"{s['spans']:,} weak spans.", ""]
    for dataset, report in result["noise"].items():
        lines += [f"Noise report, {dataset} test, `configs/weak/{GOLD[dataset]}`:", "",
                  "| type | weak | gold | P exact | R exact | F exact | P overlap | R overlap |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for label, row in report.items():
            lines.append(f"| {label} | {row['weak']} | {row['gold']} | {row['p_exact']} | "
                         f"{row['r_exact']} | {row['f_exact']} | {row['p_overlap']} | "
                         f"{row['r_overlap']} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
