"""Does PFT with entity-candidate masking help the span categorizer? (Tri-Train's question)

For each data set, the span categorizer (configs/sciner_spancat.cfg) is trained from:
``none`` (the original encoder), PFT ``mlm_random``, PFT ``mlm_span+sbo`` and PFT
``mlm_cand+ecb``, each over several seeds; all PFT variants train on the same corpus (the
miner's ``build-corpus`` selection of auxiliary in-domain sentences: CS text for SciERC,
biomedical text for BioNLP13CG) with the same steps and prediction budget. Each pipeline is
calibrated on dev (``sciner calibrate``) and evaluated on test; the table reports mean ± std
of exact-span P/R/F over seeds.

Stages per (data set, variant, seed), each skipped when its output already exists, so an
interrupted comparison continues where it stopped (a killed PFT run resumes from its last
checkpoint; a killed training continues from its last evaluation, ``sciner train --resume``;
until 2026-12-07 a killed ``spacy train`` restarted that run):

    convert -> [slice] -> build-corpus -> pft -> sciner train -> calibrate -> spacy evaluate

The comparison as run (benchmarks/results/pft_compare.*): a low-resource setting, the first
600 training sentences of each set (dev: first 300, test: first 800; SciERC's dev and test are
smaller, so all of them), 6 epochs, model-last; one PFT run per variant (300 steps x 16
sentences on 5,000 aux sentences, seed 0) shared by the fine-tuning seeds 0, 1, 2; 6 PFT + 24
span categorizer runs. The two data sets ran as two processes with one thread each (1 h 41 min
on 2 cores at d607b8c; the re-run with the issue-8 code took ~2 h 30 min beside tests, with a
third process for BioNLP13CG seed 2, `--seeds 2`, and the first one restarted with `--seeds 0 1`):
    OMP_NUM_THREADS=1 python benchmarks/pft_compare.py --datasets scierc --threads 1 \
        --limit-train 600 --limit-dev 300 --limit-test 800 --train-epochs 6 \
        --out benchmarks/work/pft_compare_scierc          # and the same with bionlp13cg
    python benchmarks/pft_compare.py --datasets scierc bionlp13cg --limit-train 600 \
        --limit-dev 300 --limit-test 800 --train-epochs 6  # joins both: every run is reused
    ... --report-only                                      # the finished runs only, trains nothing
Defaults (all data, 5 epochs) are the full-size version: projected at 5-6 hours on 2 cores.
Smoke run (minutes; tiny encoder and slices, proves the workflow, numbers meaningless):
    python -c "from spacy_sciner.testing import make_tiny_bert; make_tiny_bert('benchmarks/work/tiny-bert')"
    python benchmarks/pft_compare.py --smoke --encoder benchmarks/work/tiny-bert
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from spacy_sciner.pft.stats import format_per_1k

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
VARIANTS = ("none", "mlm_random", "mlm_span+sbo", "mlm_cand+ecb")
# Data set -> (name for scripts/convert_dataset.py, auxiliary text folders in shared/data/aux).
DATASETS = {
    "scierc": ("scierc", ("CSAbstruct-text", "ACL-ARC-citations-text", "SciCite-text")),
    "bionlp13cg": ("bionlp13cg", ("AnatEM-text", "BC2GM-text", "CRAFT-text", "JNLPBA-text", "linnaeus-text", "Ex-PTM-text")),
}


def run(cmd: List[str], log: Path) -> None:
    """Run one stage, its output in ``log``; a failure names the stage and shows the tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"$ {' '.join(cmd)}", file=sys.stderr)
    with open(log, "w") as file_:
        done = subprocess.run(cmd, cwd=ROOT, stdout=file_, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"stage failed (exit {done.returncode}): {' '.join(cmd)}\nlog {log}:\n{tail}")


def slice_docbin(source: Path, target: Path, limit: int) -> None:
    """Keep the first ``limit`` docs (smoke runs); 0 keeps all."""
    import spacy
    from spacy.tokens import DocBin

    docs = list(DocBin().from_disk(source).get_docs(spacy.blank("en").vocab))
    DocBin(docs=docs[:limit] if limit else docs, store_user_data=True).to_disk(target)


def prepare_dataset(name: str, args, work: Path) -> Dict[str, Path]:
    """Convert the labeled set, slice it when asked, and build the PFT corpus from aux text."""
    convert_name, aux_dirs = DATASETS[name]
    full, data = work / "corpus-full", work / "corpus"
    if not (full / "test.spacy").exists():
        run([sys.executable, "scripts/convert_dataset.py", convert_name, str(args.data_dir), str(full)],
            work / "logs" / "convert.log")
    data.mkdir(parents=True, exist_ok=True)
    limits = {"train": args.limit_train, "dev": args.limit_dev, "test": args.limit_test}
    for split, limit in limits.items():
        if not (data / f"{split}.spacy").exists():
            slice_docbin(full / f"{split}.spacy", data / f"{split}.spacy", limit)
    aux = [Path(args.data_dir) / "aux" / d / "text.txt" for d in aux_dirs]
    if args.aux_lines:  # smoke runs: the first lines of each aux file
        subset = work / "aux-subset.txt"
        if not subset.exists():
            with open(subset, "w", encoding="utf8") as out:
                for path in aux:
                    with open(path, encoding="utf8") as file_:
                        out.writelines(line for _, line in zip(range(args.aux_lines), file_))
        aux = [subset]
    pft_corpus = work / "pft-corpus.spacy"
    if not pft_corpus.exists():
        run([sys.executable, "-m", "spacy_sciner", "build-corpus", *map(str, aux), "--output", str(pft_corpus),
             "--train", str(data / "train.spacy"), "--n", str(args.pft_sentences), "--mode", "top", "--weight", "entity", "--no-progress"],
            work / "logs" / "build-corpus.log")
    return {"train": data / "train.spacy", "dev": data / "dev.spacy", "test": data / "test.spacy", "pft": pft_corpus}


def train_steps(train: Path, args) -> int:
    """Optimizer steps of one span categorizer run: batches of ``--batch-words`` words x epochs.

    The learning-rate schedule (warm-up 10%, linear decay) is sized to the run, so a short run
    is not spent in the warm-up of the config's default 1,000-step schedule.
    """
    import spacy
    from spacy.tokens import DocBin

    words = sum(len(doc) for doc in DocBin().from_disk(train).get_docs(spacy.blank("en").vocab))
    steps = max(1, round(words / args.batch_words)) * args.train_epochs
    return min(steps, args.train_max_steps) if args.train_max_steps else steps


def run_variant(name: str, variant: str, seed: int, paths: Dict[str, Path], args, work: Path) -> Dict:
    """PFT (unless ``none``), train, calibrate and evaluate one (variant, seed); return its record."""
    run_dir = work / "runs" / variant.replace("+", "_") / f"seed{seed}"
    logs = run_dir / "logs"
    record: Dict = {"dataset": name, "variant": variant, "seed": seed}
    encoder = args.encoder
    if variant != "none":
        # One PFT encoder per variant (seed --pft-seed) shared by every fine-tuning seed, unless
        # --pft-per-seed: the seeds then measure fine-tuning variance around one PFT run.
        pft_seed = seed if args.pft_per_seed else args.pft_seed
        pft_dir = (run_dir if args.pft_per_seed else run_dir.parent) / "pft"
        pft_log = pft_dir / "pft_log.json"
        if not (pft_log.exists() and json.loads(pft_log.read_text()).get("installed")):
            cmd = [sys.executable, "-m", "spacy_sciner", "pft", str(paths["pft"]), str(pft_dir),
                   "--encoder", args.encoder, "--objective", variant, "--max-steps", str(args.pft_steps),
                   "--batch-size", str(args.pft_batch_size), "--lr", str(args.pft_lr), "--seed", str(pft_seed),
                   "--save-every", str(args.pft_save_every), "--eval-every", str(args.pft_save_every),
                   "--gpu-id", str(args.gpu_id), "--threads", str(args.threads)]
            run(cmd + (["--resume"] if (pft_dir / "checkpoints").exists() else []), logs / "pft.log")
        log = json.loads(pft_log.read_text())
        record["pft"] = {"seed": pft_seed, "steps": log["steps"], "wall_s": log["wall_s"], "tokens_per_s": log["tokens_per_s"],
                         "eval_loss_first": log["eval"][0]["loss"] if log["eval"] else None,
                         "eval_loss_last": log["eval"][-1]["loss"] if log["eval"] else None,
                         "corpus": log["corpus"], "masked_per_1k_tokens": log.get("masked_per_1k_tokens", {})}
        encoder = str(pft_dir.resolve())
    train_dir = run_dir / "train"
    # Finished = train_wall_s.txt, written only after training returned 0: model-last exists
    # from the step-0 evaluation on, so a killed run's model-last must not count as done.
    # `sciner train --resume` continues a killed run from its last evaluation (a checkpoint
    # at each; the wall time written is then the last call's).
    if not (run_dir / "train_wall_s.txt").exists():
        shutil.rmtree(run_dir / "model-calibrated", ignore_errors=True)  # from an unfinished earlier try
        (run_dir / "metrics.json").unlink(missing_ok=True)
        steps = train_steps(paths["train"], args)
        start = time.time()
        run([sys.executable, "-m", "spacy_sciner", "train", str(args.config), "--output", str(train_dir), "--resume",
             "--paths.train", str(paths["train"]), "--paths.dev", str(paths["dev"]),
             "--components.transformer.model.name", encoder, "--system.seed", str(seed),
             "--training.max_epochs", str(args.train_epochs), "--training.max_steps", str(args.train_max_steps),
             # With --select last, one evaluation at the end is enough (nothing is chosen by it).
             "--training.eval_frequency", str(args.train_eval_frequency or (steps if args.select == "last" else max(1, steps // 4))),
             "--training.patience", "0", "--training.batcher.size", str(args.batch_words),
             "--training.optimizer.learn_rate.total_steps", str(steps),
             "--training.optimizer.learn_rate.warmup_steps", str(max(1, steps // 10)),
             "--training.optimizer.learn_rate.initial_rate", str(args.train_lr), "--gpu-id", str(args.gpu_id)],
            logs / "train.log")
        (run_dir / "train_wall_s.txt").write_text(f"{time.time() - start:.1f}")
    # model-last by default: the schedule decays to zero at the last step, and one evaluation
    # at the end keeps each run short; --select best picks the training's best dev checkpoint.
    model = train_dir / f"model-{args.select}"
    if args.calibrate:
        calibrated = run_dir / "model-calibrated"
        if not (calibrated / "meta.json").exists():
            run([sys.executable, "-m", "spacy_sciner", "calibrate", str(model), str(paths["dev"]), str(calibrated),
                 "--gpu-id", str(args.gpu_id)], logs / "calibrate.log")
        model = calibrated
    metrics = run_dir / "metrics.json"
    if not metrics.exists():
        run([sys.executable, "-m", "spacy", "evaluate", str(model), str(paths["test"]), "--output", str(metrics),
             "--gpu-id", str(args.gpu_id)], logs / "evaluate.log")
    scores = json.loads(metrics.read_text())
    key = args.score_key
    record.update({m: scores[f"{key}_{m}"] for m in ("p", "r", "f")})
    wall = run_dir / "train_wall_s.txt"
    record["train_wall_s"] = float(wall.read_text()) if wall.exists() else None
    return record


def summarize(records: List[Dict]) -> List[Dict]:
    """Mean and (sample) std of P/R/F per data set and variant."""
    rows = []
    for name in dict.fromkeys(r["dataset"] for r in records):
        for variant in dict.fromkeys(r["variant"] for r in records if r["dataset"] == name):
            group = [r for r in records if r["dataset"] == name and r["variant"] == variant]
            row = {"dataset": name, "variant": variant, "seeds": [r["seed"] for r in group]}
            for m in ("p", "r", "f"):
                values = [100 * r[m] for r in group]
                row[m] = statistics.mean(values)
                row[f"{m}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
            # Paired by seed against "none": the same seed gives the same sampling and init
            # order, so the per-seed difference isolates the encoder's effect from seed noise.
            base = {r["seed"]: r["f"] for r in records if r["dataset"] == name and r["variant"] == "none"}
            deltas = [100 * (r["f"] - base[r["seed"]]) for r in group if r["seed"] in base]
            if variant != "none" and deltas:
                row["delta_f"] = statistics.mean(deltas)
                row["delta_f_std"] = statistics.stdev(deltas) if len(deltas) > 1 else 0.0
                row["wins"] = sum(round(d, 2) > 0 for d in deltas)
            pft = [r["pft"] for r in group if "pft" in r]
            if pft:
                row["pft_wall_s"] = pft[0]["wall_s"]
                row["pft_eval_loss"] = [pft[0]["eval_loss_first"], pft[0]["eval_loss_last"]]
                row["masked_per_1k_tokens"] = pft[0].get("masked_per_1k_tokens", {})
            row["train_wall_s"] = statistics.mean(r["train_wall_s"] or 0 for r in group)
            rows.append(row)
    return rows


def _shown(value):
    """Paths relative to the repository, so committed results name no machine's folders."""
    if isinstance(value, Path) or (isinstance(value, str) and value.startswith("/") and Path(value).exists()):
        return os.path.relpath(value, ROOT)
    return value


def previous_summary(rev: str, out: Path) -> Dict:
    """``{(data set, variant): mean F}`` from the results JSON committed at ``rev``, or {}."""
    if not rev:
        return {}
    rel = os.path.relpath(out.with_suffix(".json"), ROOT)
    shown = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode != 0:
        return {}
    return {(r["dataset"], r["variant"]): r["f"] for r in json.loads(shown.stdout)["summary"]}


def write_results(records: List[Dict], rows: List[Dict], args, out: Path) -> None:
    settings = {k: _shown(v) for k, v in vars(args).items()}
    before = previous_summary(args.before_rev, out)
    for row in rows:
        row["f_before"] = before.get((row["dataset"], row["variant"]))
    (out.with_suffix(".json")).write_text(json.dumps({"settings": settings, "runs": records, "summary": rows}, indent=2))
    md = [f"# PFT comparison ({'SMOKE: tiny slices, numbers meaningless' if args.smoke else 'full'})", "",
          f"Encoder `{_shown(args.encoder)}`; PFT {args.pft_steps} steps x batch {args.pft_batch_size} on "
          f"{args.pft_sentences} selected aux sentences; span categorizer {args.train_epochs} epochs"
          f"{f' / max {args.train_max_steps} steps' if args.train_max_steps else ''}; seeds {args.seeds}; "
          f"model-{args.select}, {'calibrated on dev; ' if args.calibrate else ''}exact-span scores on test (`{args.score_key}`).", "",
          f"PFT: {'one run per fine-tuning seed' if args.pft_per_seed else f'one run per variant (seed {args.pft_seed}), shared by all fine-tuning seeds'}. "
          f"Data: train {args.limit_train or 'all'} / dev {args.limit_dev or 'all'} / test {args.limit_test or 'all'} "
          f"first docs of each split. ΔF: F minus `none` F with the same seed (mean ± std); "
          f"wins: seeds where the variant beats `none`. F at {args.before_rev or '-'}: the mean F this "
          f"script committed at that revision (same protocol, older code). Masked per 1k: pieces each PFT "
          f"objective predicted per 1,000 input pieces over the whole run.", "",
          f"| data set | variant | seeds | P | R | F | F at {args.before_rev or '-'} | ΔF vs none | wins | masked per 1k | PFT held-out loss | PFT s | train s |",
          "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    missing = getattr(args, "missing", [])
    for r in rows:
        delta = f"{r['delta_f']:+.2f} ± {r['delta_f_std']:.2f}" if "delta_f" in r else ""
        wins = f"{r['wins']}/{len(r['seeds'])}" if "wins" in r else ""
        loss = r.get("pft_eval_loss")
        loss = f"{loss[0]:.2f} → {loss[1]:.2f}" if loss and None not in loss else ""
        old = f"{r['f_before']:.2f}" if r.get("f_before") is not None else "—"
        masked = format_per_1k(r.get("masked_per_1k_tokens", {})) if "masked_per_1k_tokens" in r else ""
        md.append(f"| {r['dataset']} | {r['variant']} | {len(r['seeds'])} | {r['p']:.2f} ± {r['p_std']:.2f} | "
                  f"{r['r']:.2f} ± {r['r_std']:.2f} | {r['f']:.2f} ± {r['f_std']:.2f} | {old} | {delta} | {wins} | "
                  f"{masked} | {loss} | {r.get('pft_wall_s', 0):.0f} | {r['train_wall_s']:.0f} |")
    if missing:
        md += ["", f"**Incomplete**: {len(missing)} runs not finished yet, so not in the table: {', '.join(missing)}. "
               "Rerun the same command to finish them (finished runs are reused)."]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        md += ["", "No PNG chart: matplotlib is not installed (`pip install matplotlib` and rerun; "
               "finished runs are skipped, so only the table and chart are redone)."]
    else:
        names = list(dict.fromkeys(r["dataset"] for r in rows))
        fig, ax = plt.subplots(figsize=(2 + 3 * len(names), 4))
        width = 0.8 / len(VARIANTS)
        for i, variant in enumerate(VARIANTS):
            vals = [next((r for r in rows if r["dataset"] == n and r["variant"] == variant), None) for n in names]
            ax.bar([j + i * width for j in range(len(names))], [v["f"] if v else 0 for v in vals], width,
                   yerr=[v["f_std"] if v else 0 for v in vals], label=variant, capsize=3)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names)
        ax.set_ylabel("test F1 (exact spans)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out.with_suffix(".png"), dpi=120)
        md += ["", f"![F1 by variant]({out.with_suffix('.png').name})"]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["scierc", "bionlp13cg"], choices=sorted(DATASETS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--encoder", default="sciner-minilm")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "sciner_spancat.cfg")
    parser.add_argument("--data-dir", type=Path, default=DATA)
    parser.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "pft_compare")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pft_compare")
    parser.add_argument("--pft-sentences", type=int, default=5000, help="aux sentences selected by build-corpus")
    parser.add_argument("--pft-steps", type=int, default=300)
    parser.add_argument("--pft-batch-size", type=int, default=16)
    parser.add_argument("--pft-lr", type=float, default=5e-5)
    parser.add_argument("--pft-save-every", type=int, default=100)
    parser.add_argument("--train-epochs", type=int, default=5)
    parser.add_argument("--train-max-steps", type=int, default=0)
    parser.add_argument("--train-eval-frequency", type=int, default=0, help="0 = one evaluation at the end with --select last, four with --select best")
    parser.add_argument("--train-lr", type=float, default=1e-4)
    parser.add_argument("--batch-words", type=int, default=500)
    parser.add_argument("--pft-seed", type=int, default=0, help="seed of the one PFT run per variant")
    parser.add_argument("--pft-per-seed", action="store_true", help="a separate PFT run for every fine-tuning seed")
    parser.add_argument("--select", choices=("last", "best"), default="last", help="model-last or model-best")
    parser.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--score-key", default="spans_sc", help="prefix of _p/_r/_f in spacy evaluate output")
    parser.add_argument("--limit-train", type=int, default=0, help="first N train docs (0 = all)")
    parser.add_argument("--limit-dev", type=int, default=0, help="first N dev docs (0 = all)")
    parser.add_argument("--limit-test", type=int, default=0, help="first N test docs (0 = all)")
    parser.add_argument("--aux-lines", type=int, default=0, help="first N lines of each aux file (0 = all)")
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--before-rev", default="d607b8c", help="git revision whose committed results give the 'F at' column ('' = none)")
    parser.add_argument("--report-only", action="store_true",
                        help="only report the finished runs (the others are listed as not finished); trains nothing")
    parser.add_argument("--smoke", action="store_true", help="tiny slices and steps; results go to *_smoke.*")
    args = parser.parse_args()
    if args.smoke:
        args.datasets, args.seeds = args.datasets[:1], args.seeds[:1]
        args.limit_train, args.limit_dev, args.limit_test, args.aux_lines = 60, 30, 30, 200
        args.pft_sentences, args.pft_steps, args.pft_batch_size, args.pft_save_every = 200, 6, 8, 3
        args.train_epochs, args.train_max_steps, args.train_eval_frequency = 1, 10, 5
        args.work = args.work.with_name(args.work.name + "_smoke")
        args.out = args.out.with_name(args.out.name + "_smoke")
    if Path(args.encoder).exists():  # a local folder: absolute, so pipeline configs stay valid anywhere
        args.encoder = str(Path(args.encoder).resolve())
    if not args.config.exists():
        raise SystemExit(f"span categorizer config not found: {args.config}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records, args.missing = [], []
    for name in args.datasets:
        work = args.work / name
        paths = prepare_dataset(name, args, work)
        for seed in args.seeds:
            for variant in args.variants:
                run_dir = work / "runs" / variant.replace("+", "_") / f"seed{seed}"
                if args.report_only and not ((run_dir / "metrics.json").exists() and (run_dir / "train_wall_s.txt").exists()):
                    args.missing.append(f"{name}/{variant}/seed{seed}")
                    continue
                record = run_variant(name, variant, seed, paths, args, work)
                records.append(record)
                print(f"{name} {variant} seed {seed}: P {record['p']:.4f} R {record['r']:.4f} F {record['f']:.4f}",
                      file=sys.stderr)
    write_results(records, summarize(records), args, args.out)


if __name__ == "__main__":
    main()
