"""Few-shot benchmark (issue 12, section 4): test F vs training size, per system.

For each data set (ncbi_disease, bc5cdr, bionlp13cg, scierc; converted like
scripts/convert_dataset.py), training size (10, 50, 100, 500 sentences, all) and system (a
named recipe, fewshot_parts.RECIPES), `spacy sciner train` (spaCy's training loop with a
checkpoint at each evaluation) runs once per fine-tuning seed on the SAME
sample of training sentences (drawn once with --sample-seed, indices written to the work
folder and reused by every system, seed and later call). Every system gets the same number
of updates for a training size (--steps); transformer systems also the same batcher and
schedule (warmup_linear, 10% warm-up). model-best on dev (dev limited to --dev-sentences, a
seeded sample: stated in the results), then `sciner calibrate` on dev for the sciner_spancat
systems, then test span F by spancat_bench.evaluate (exact labelled spans against all gold
spans; the CNN ner's doc.ents are scored the same way).

Systems: spacy_ner_cnn (configs/spacy_ner_cnn.cfg), minilm (sciner_spancat on sciner-minilm),
hybrid (the default recipe: sciner_spancat on sciner-minilm + a character-aware CNN),
pft (--pft: the pft_all workflow's encoder), weak_fine / weak_coarse (--weak-fine /
--weak-coarse: weak_all's export-encoder), cnn (sciner_spancat on the CNN tok2vec, no
transformer) and cnn_weak (--cnn-weak: its tok2vec weights pretrained on the weak labels,
`sciner weak-config` + `export-tok2vec`, loaded with --paths.init_tok2vec). Encoder paths may
hold {dataset} and {size}; a system whose encoder is not given or not found is skipped with a
'missing encoder' note.
SciERC has no gazetteer: its weak labels come from training entities, so its weak encoders
must be pretrained per sample (path with {size}); the script builds each sample's weak corpus
(the sample's own entities + candidates mined from CS aux text with the sample only) under
WORK/scierc/weak_inputs/size{N}/ with the pretraining commands (fewshot_parts.build_weak_inputs).

Resumable: a finished run leaves done.json and is skipped; a run cut off during training
continues from its last evaluation (`--resume`: the same weights at the end as without the
cut, on the CPU; `resumed` and `train_seconds` of the last call only are recorded); benchmarks/results/fewshot.{json,
md,png} are rewritten after every run; --max-minutes: no new run starts after the budget
(rerun to continue). Each run records its encoder and, for a local one, a fingerprint of its
weights (`encoder_sha`), so that a result stays tied to the weights after a folder is regenerated.

    python benchmarks/fewshot.py --pft 'pft/{dataset}/encoder' \\
        --weak-fine 'training/{dataset}-weak/encoder' scierc='{work}/scierc/weak_inputs/size{size}/encoder-fine' \\
        --weak-coarse 'training/{dataset}-weak-coarse/encoder' scierc='{work}/scierc/weak_inputs/size{size}/encoder-coarse'
    python benchmarks/fewshot.py --smoke --encoder TINY_BERT --work /tmp/fs --results /tmp/fs/results
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convergence  # noqa: E402  (get_corpus, train_env, Parser)
from convergence_report import portable  # noqa: E402
import fewshot_parts as parts  # noqa: E402
import spancat_bench  # noqa: E402  (evaluate)

ROOT = parts.ROOT
DATASETS = ["ncbi_disease", "bc5cdr", "bionlp13cg", "scierc"]
SIZES = ["10", "50", "100", "500", "all"]
STEPS = {"10": 100, "50": 200, "100": 300, "500": 600, "all": 2000}


def parse_args(argv=None):
    p = convergence.Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=None)
    p.add_argument("--sizes", nargs="+", default=None, help="Training sentences per sample, or 'all'")
    p.add_argument("--systems", nargs="+", default=None, help=f"Default: all of {', '.join(parts.RECIPES)}")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="Fine-tuning seeds")
    p.add_argument("--sample-seed", type=int, default=0, help="Seed of the training samples (the same for every system)")
    p.add_argument("--steps", nargs="+", default=None, help="Updates per size, e.g. 10=100 all=2000 (default %s)" % STEPS)
    p.add_argument("--evals", type=int, default=4, help="Dev evaluations per run (model-best)")
    p.add_argument("--dev-sentences", type=int, default=500, help="Dev limited to a seeded sample of N sentences (0: all)")
    p.add_argument("--test-sentences", type=int, default=0, help="Test limited to its first N sentences (0: all; smoke only)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-words", type=int, default=500)
    p.add_argument("--target-recall", type=float, default=0.99)
    p.add_argument("--encoder", default=None, help="the encoder of minilm and hybrid (default sciner-minilm; smoke: a tiny BERT folder)")
    for recipe in parts.RECIPES.values():
        if recipe.encoder_option:
            p.add_argument(f"--{recipe.encoder_option.replace('_', '-')}", nargs="+", default=None,
                           metavar="[DATASET=]PATH", help=recipe.help + " ({dataset} {size} {work} filled in)")
    p.add_argument("--weak-lines", type=int, default=20000, help="SciERC per-sample weak corpus: aux lines (0: all)")
    p.add_argument("--no-weak-inputs", action="store_true", help="Do not build the SciERC per-sample weak corpora")
    p.add_argument("--max-minutes", type=float, default=0, help="No new run starts after this many minutes (0: none)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--gpu-id", type=int, default=-1)
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "fewshot")
    p.add_argument("--results", type=Path, default=None, help="Default benchmarks/results (smoke: WORK/results)")
    p.add_argument("--report-only", action="store_true", help="Only rewrite the results from the finished runs")
    p.add_argument("--smoke", action="store_true", help="Sizes 10 20, seed 0, 2 steps, dev 20 / test 30 sentences")
    args = p.parse_args(argv)
    if args.smoke:
        args.datasets = args.datasets or ["scierc"]
        args.sizes = args.sizes or ["10", "20"]
        args.seeds = [0] if args.seeds == [0, 1, 2] else args.seeds
        args.steps = args.steps or ["2"]
        args.evals = 1
        args.dev_sentences = min(args.dev_sentences, 20)
        args.test_sentences = args.test_sentences or 30
        args.weak_lines = min(args.weak_lines, 200)
        args.batch_words = min(args.batch_words, 200)
        args.lr = 1e-3
        args.threads = args.threads or 1
        if not args.encoder:
            p.error("--smoke needs --encoder (a tiny BERT folder, e.g. spacy_sciner.testing.make_tiny_bert)")
    args.datasets = args.datasets or DATASETS
    args.sizes = args.sizes or SIZES
    args.systems = args.systems or list(parts.RECIPES)
    for size in args.sizes:
        if size != "all" and not (size.isdigit() and int(size) > 0):
            p.error(f"--sizes: '{size}' is neither a positive number nor 'all'")
    for system in args.systems:
        if system not in parts.RECIPES:
            p.error(f"unknown system '{system}' (known: {', '.join(parts.RECIPES)})")
    steps = dict(STEPS)
    for item in args.steps or []:
        size, _, value = item.rpartition("=")
        if not value.isdigit() or int(value) < 1:
            p.error(f"--steps: '{item}' is not SIZE=N or N (N >= 1)")
        if size:
            steps[size] = int(value)
        else:
            steps = {s: int(value) for s in args.sizes}
    args.steps_for = {s: steps.get(s, STEPS["all"]) for s in args.sizes}
    args.templates = {}
    for name, r in parts.RECIPES.items():
        if r.encoder_option and getattr(args, r.encoder_option):
            items = [item.partition("=") for item in getattr(args, r.encoder_option)]
            args.templates[name] = {(ds if sep else "*"): (path if sep else ds) for ds, sep, path in items}
    if args.encoder:  # the plain encoder of every transformer recipe without its own option
        for name, r in parts.RECIPES.items():
            if r.transformer and r.encoder_option is None:
                args.templates[name] = args.encoder
    args.results = args.results or (args.work / "results" if args.smoke else ROOT / "benchmarks" / "results")
    return args


def train_run(ds: str, size: str, recipe, seed: int, encoder, sample: dict, evalc: Path, run: Path, args) -> dict:
    """One `spacy sciner train` (+ calibrate) + test evaluation; writes done.json."""
    steps = args.steps_for[size]
    ef = max(1, steps // args.evals)
    steps = -(-steps // ef) * ef  # a multiple of the evaluation frequency: the last update is evaluated
    # `sciner train --resume`: spaCy's loop (the same updates), and a run cut off by the end of a
    # session continues from its last evaluation when the grid is run again.
    cmd = [sys.executable, "-m", "spacy_sciner", "train", str(ROOT / recipe.config), "--output", str(run), "--resume",
           "--paths.train", str(sample["path"]), "--paths.dev", str(evalc / "dev.spacy"),
           "--system.seed", str(seed), "--training.max_epochs", "0", "--training.max_steps", str(steps),
           "--training.eval_frequency", str(ef), "--training.patience", "0",
           "--training.logger.progress_bar", "false", "--gpu-id", str(args.gpu_id)]
    if recipe.transformer:
        cmd += ["--training.batcher.size", str(args.batch_words),
                "--training.optimizer.learn_rate.total_steps", str(steps),
                "--training.optimizer.learn_rate.warmup_steps", str(max(1, steps // 10)),
                "--training.optimizer.learn_rate.initial_rate", str(args.lr),
                "--components.transformer.model.name", str(encoder)]
    else:
        if encoder:  # weak-pretrained tok2vec weights (cnn_weak)
            cmd += ["--paths.init_tok2vec", str(encoder)]
        if args.smoke:  # a small CNN for the smoke test
            cmd += ["--components.tok2vec.model.encode.width", "32", "--components.tok2vec.model.encode.depth", "1"]
    run.mkdir(parents=True, exist_ok=True)
    env = convergence.train_env(args)
    start = time.time()
    with open(run / "train.log", "a") as log:
        before = log.tell()
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env).returncode
    if rc:
        raise RuntimeError(f"sciner train failed (rc {rc}), see {run / 'train.log'}")
    with open(run / "train.log", encoding="utf8", errors="replace") as log:
        log.seek(before)
        resumed = "Resuming after update" in log.read()  # this call continued a cut-off run
    info = {"train_seconds": round(time.time() - start, 1), "resumed": resumed, "steps": steps, "eval_frequency": ef,
            "encoder": encoder or None, "encoder_sha": parts.encoder_fingerprint(encoder) if encoder else None}
    manifest = Path(str(encoder)).parent / "weak_inputs.json" if recipe.weak and encoder else None
    if manifest and manifest.exists():  # a per-sample weak corpus: the type rule it was pretrained with
        info["weak_min_distinct"] = json.loads(manifest.read_text()).get("min_distinct", parts.DEFAULT_MIN_DISTINCT)
    model = run / "model-best"
    if recipe.kind == "sciner":
        cal = subprocess.run([sys.executable, "-m", "spacy_sciner", "calibrate", str(model), str(evalc / "dev.spacy"),
                              str(run / "model-calibrated"), "--also", str(run / "model-last"),
                              "--target-recall", str(args.target_recall)],
                             capture_output=True, text=True, cwd=ROOT, env=env)
        if cal.returncode:
            raise RuntimeError(f"calibrate failed: {(cal.stderr or cal.stdout)[-800:]}")
        info["calibration_log"] = cal.stdout[-1500:].replace(f"{ROOT}/", "")
        model = run / "model-calibrated"
    as_system = "spacy_ner_cnn" if recipe.kind == "ner" else "sciner_spancat"
    scores = spancat_bench.evaluate(ds, as_system, evalc, run, model=model)
    return {"dataset": ds, "size": size, "system": recipe.name, "seed": seed, "sample_sha": sample["sha"],
            "train_sentences": sample["n"], "scores": scores, **info, "load_avg_at_end": os.getloadavg()[0]}


def write_results(args, eval_meta: dict, skipped: dict) -> None:
    args.results.mkdir(parents=True, exist_ok=True)
    path = args.results / "fewshot.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    runs = old.get("runs", {})
    for done in sorted(args.work.glob("*/size*/*/seed*/done.json")):
        r = json.loads(done.read_text())
        runs[f"{r['dataset']}/{r['size']}/{r['system']}/seed{r['seed']}"] = r
    # every data set with runs, also those of earlier calls (their eval.json is in the work folder)
    for ds in sorted({r["dataset"] for r in runs.values()} - set(eval_meta)):
        meta_path = args.work / ds / "eval" / "eval.json"
        if meta_path.exists():
            eval_meta = {**eval_meta, ds: json.loads(meta_path.read_text())}
    dev_note = merge_dev_note(old.get("settings", {}).get("dev_note", ""), eval_meta)
    results = {
        # seeds, sizes and encoders of earlier calls stay: a call may add seeds, sizes or systems
        "settings": {"machine": f"{os.cpu_count()} CPU cores", "smoke": args.smoke,
                     "seeds": sorted({*old.get("settings", {}).get("seeds", []), *args.seeds}),
                     "sample_seed": args.sample_seed, "steps": {**old.get("settings", {}).get("steps", {}), **args.steps_for},
                     "evals_per_run": args.evals,
                     "dev_sentences": args.dev_sentences, "test_sentences": args.test_sentences, "dev_note": dev_note,
                     "lr": args.lr, "batch_words": args.batch_words, "target_recall": args.target_recall,
                     "encoders": merge_encoders(old.get("settings", {}).get("encoders", {}), args.templates),
                     "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "runs": runs, "summary": parts.summarize(runs),
        # a skip note stays until that system has a run there
        "skipped": {k: v for k, v in {**old.get("skipped", {}), **skipped}.items()
                    if not any(key.startswith(k + "/") for key in runs)},
    }
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # two calls may run side by side (one per core)
    tmp.write_text(portable(json.dumps(results, indent=1)))  # no machine's folders in the results
    tmp.replace(path)
    parts.write_markdown(results, args.results / "fewshot.md")
    parts.write_plot(results, args.results / "fewshot.png")


def merge_encoders(old: dict, new: dict) -> dict:
    """The encoder paths of earlier calls and of this one, per system and data set: a call for
    one data set keeps the paths another call gave for others ({system: {dataset or "*": path}})."""
    def as_dict(paths):  # --encoder gives minilm one path for every data set
        return dict(paths) if isinstance(paths, dict) else {"*": paths}

    merged = {system: as_dict(paths) for system, paths in old.items()}
    for system, paths in new.items():
        if paths:
            merged.setdefault(system, {}).update(as_dict(paths))
    return merged


def merge_dev_note(old_note: str, eval_meta: dict) -> str:
    """The dev/test sizes of every data set with runs: this call's (from eval.json) and,
    for data sets whose work folder is not here (runs of an earlier checkout), the
    earlier note's part, so that a new call never drops them."""
    parts_by_ds = {part.split(" ", 1)[0]: part for part in old_note.split("; ") if part and part != "—"}
    for ds, m in eval_meta.items():
        parts_by_ds[ds] = (f"{ds} {m['dev_used']} of {m['dev_total']} dev sentences (seeded sample), test "
                           f"{m['test_used']} of {m['test_total']}")
    return "; ".join(part for _, part in sorted(parts_by_ds.items())) or "—"


def main(argv=None) -> int:
    args = parse_args(argv)
    eval_meta, skipped, failed = {}, {}, 0
    if args.report_only:
        write_results(args, eval_meta, skipped)
        print(args.results / "fewshot.md")
        return 0
    deadline = time.time() + 60 * args.max_minutes if args.max_minutes else 0
    todo = len(args.datasets) * len(args.sizes) * len(args.systems) * len(args.seeds)
    n = 0
    for ds in args.datasets:
        corpus = convergence.get_corpus(ds, args.work)
        evalc, eval_meta[ds] = parts.eval_corpus(ds, corpus, args.work, args.dev_sentences, args.test_sentences, args.sample_seed)
        for size in args.sizes:
            sample = parts.get_sample(ds, corpus, args.work, "all" if size == "all" else int(size), args.sample_seed)
            weak_wanted = any(parts.RECIPES[s].weak for s in args.systems)
            if ds in parts.PER_SAMPLE_WEAK and weak_wanted and not args.no_weak_inputs:
                aux = [str(spancat_bench.DATA / "aux" / name / "text.txt") for name in convergence_aux(ds)]
                out = parts.build_weak_inputs(ds, sample, args.work, aux, args.weak_lines)
                print(f"[{ds}/{size}] per-sample weak corpus: {out}", flush=True)
            for system in args.systems:
                recipe = parts.RECIPES[system]
                encoder, note = parts.resolve_encoder(recipe, args.templates, ds, size, args.work)
                for seed in args.seeds:
                    n += 1
                    key = f"{ds}/{size}/{system}/seed{seed}"
                    if encoder is None and (recipe.transformer or recipe.encoder_option):
                        skipped[f"{ds}/{size}/{system}"] = note
                        print(f"[{n}/{todo}] {key}: skipped ({note})", flush=True)
                        continue
                    run = args.work / ds / f"size{size}" / system / f"seed{seed}"
                    if (run / "done.json").exists():
                        print(f"[{n}/{todo}] {key}: done before", flush=True)
                        continue
                    if deadline and time.time() > deadline:
                        print(f"[{n}/{todo}] {key}: not started (--max-minutes {args.max_minutes:g} used; rerun to continue)", flush=True)
                        continue
                    print(f"[{n}/{todo}] {key}: training ({sample['n']} sentences, sample {sample['sha']}, "
                          f"{args.steps_for[size]} steps)", flush=True)
                    try:
                        result = train_run(ds, size, recipe, seed, encoder, sample, evalc, run, args)
                    except Exception as err:  # reported; the other runs go on
                        failed += 1
                        print(f"[{n}/{todo}] {key}: FAILED: {err}", flush=True)
                        continue
                    (run / "done.json").write_text(json.dumps(result, indent=1))
                    print(f"[{n}/{todo}] {key}: test span F {result['scores']['spans_f']:.4f} "
                          f"({result['train_seconds']:.0f} s)", flush=True)
                    write_results(args, eval_meta, skipped)
    write_results(args, eval_meta, skipped)
    print(f"results: {args.results / 'fewshot.md'}", flush=True)
    return 1 if failed else 0


def convergence_aux(ds: str) -> list:
    """The aux text folders of the data set's domain (scripts/aux.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("aux", ROOT / "scripts" / "aux.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DOMAIN[ds]


if __name__ == "__main__":
    sys.exit(main())
