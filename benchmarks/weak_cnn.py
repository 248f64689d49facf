"""Weak pretraining of the span model (issue 12): zero-shot against the gazetteer, and the
pretrained weights that fewshot.py fine-tunes from: the CNN tok2vec (``cnn_weak``) or, with
--encoder, the transformer (export-encoder folder: ``weak_fine`` / ``weak_coarse``).

Per data set (a biomedical set with a shipped type map: ncbi_disease, bc5cdr, bionlp13cg):

1. The corpus, converted as convergence.py does (cached in the state dir).
2. Weak labels: scripts/weak_label.py on the first --lines aux lines of the domain
   (scripts/aux.py's files, round robin) with the data set's type map (``auto``). Only aux
   text is labeled; dev and test are never read.
3. Per granularity (fine, coarse): ``sciner weak-config configs/sciner_spancat_cnn.cfg``
   (``--negatives plain``, weak-config's default: any non-weak span is a negative;
   ``avoid``: only spans overlapping no weak span; balanced |E|^0.7 sampling,
   model-best chosen on the held-out 10% of the WEAK data), ``spacy train`` for --steps
   updates, ``sciner export-tok2vec`` of model-best -> WORK/<ds>/cnn-weak-<row name>.bin.
   Row names: ``fine-plain`` (the weak labels' misses become negatives, but sub- and
   super-spans of a weak span are negatives too, so boundaries can be learned) and ``fine``
   (avoid: the partial-annotation variant; no boundary negatives).
4. Zero-shot, where the weak label set equals the target's (NCBI-disease: Disease): the weak
   model-best as it is (argmax rule, no gold calibration, no gold training), the same with
   ``sciner_abbreviations`` after it (defined short forms take their long form's label), the
   same model calibrated (`sciner calibrate`: filter and decision threshold) on the held-out weak
   data, never on gold dev, against plain gazetteer matching with the same type map on the
   same test text (and the gazetteer with label-weak's ``--abbreviations`` rule), all scored by exact labelled spans (spancat_bench.evaluate; the gazetteer
   by label-weak's noise report).

Writes benchmarks/results/weak_cnn.{json,md}; a finished step is skipped on a rerun.

    python benchmarks/weak_cnn.py --datasets ncbi_disease --granularities fine --threads 1
    python benchmarks/fewshot.py --datasets ncbi_disease --systems spacy_ner_cnn cnn cnn_weak \\
        --cnn-weak '{work_weak}/{dataset}/cnn-weak-fine-plain.bin'
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import spacy
from spacy.tokens import DocBin
from spacy.util import load_config, registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convergence  # noqa: E402  (get_corpus, train_env, Parser)
import spancat_bench  # noqa: E402  (evaluate, DATA)
from convergence_report import portable  # noqa: E402

ROOT = spancat_bench.ROOT
TARGET_LABELS = {"ncbi_disease": {"Disease"}, "bc5cdr": {"Chemical", "Disease"}}


def run(cmd, log: Path, env) -> float:
    """Run `cmd` with its output in `log`; the wall seconds. A failure names the log."""
    start = time.time()
    with open(log, "w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env).returncode
    if rc:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        sys.exit(f"{' '.join(map(str, cmd[:4]))} failed (rc {rc}), see {log}:\n" + "\n".join(tail))
    return round(time.time() - start, 1)


def aux_files(dataset: str) -> list:
    spec = __import__("importlib.util").util.spec_from_file_location("aux", ROOT / "scripts" / "aux.py")
    aux = __import__("importlib.util").util.module_from_spec(spec)
    spec.loader.exec_module(aux)
    return [spancat_bench.DATA / "aux" / name / "text.txt" for name in aux.DOMAIN[dataset]]


def label(ds: str, corpus: Path, work: Path, args, env, res: dict) -> Path:
    """Step 2: the weak DocBin of the domain's aux text (--abbreviations: weak-abbr.spacy,
    short forms of labeled long forms labeled too)."""
    sfx = "-abbr" if args.abbreviations else ""
    out, report = work / f"weak{sfx}.spacy", work / f"weak_label{sfx}.json"
    if not out.exists():
        cmd = [sys.executable, "scripts/weak_label.py", ds, *map(str, aux_files(ds)), "--type-map", "auto",
               "--gazetteer-dir", str(spancat_bench.DATA / "gazetteers" / "openbel"),
               "--train", str(corpus / "train.spacy"), "--lines", str(args.lines), "--text", str(work / "weak_text.txt"),
               "--output", str(out), "--report", str(report), "--n-process", "1",
               *(["--abbreviations"] if args.abbreviations else [])]
        res[f"label_seconds{sfx}"] = run(cmd, work / f"label{sfx}.log", env)
    report = json.loads(report.read_text())
    res[f"weak_corpus{sfx}"] = {"lines": args.lines, "labels": report.get("labels"), "labeling": report.get("labeling")}
    return out


def variant_name(granularity: str, negatives: str, transformer: bool = False, abbreviations: bool = False) -> str:
    """fine, coarse (negatives outside weak spans) or fine-plain, coarse-plain; "trf-" first
    for the transformer span model, "-abbr" last for weak labels with abbreviations."""
    name = ("trf-" if transformer else "") + (granularity if negatives == "avoid" else f"{granularity}-plain")
    return name + ("-abbr" if abbreviations else "")


def pretrain(ds: str, weak: Path, work: Path, granularity: str, negatives: str, args, env) -> dict:
    """Step 3: weak pretraining of the CNN span model; its tok2vec weights. negatives:
    "avoid" (negatives overlap no weak span) or "plain" (any non-weak span; weak-config's default)."""
    trf = args.encoder != "cnn"
    name = variant_name(granularity, negatives, trf, args.abbreviations)
    base = "sciner_spancat.cfg" if trf else "sciner_spancat_cnn.cfg"
    out, cfg = work / f"pretrain-{name}", work / f"{'trf' if trf else 'cnn'}_weak_{granularity}_{negatives}.cfg"
    weights = work / (f"encoder-{name}" if trf else f"cnn-weak-{name}.bin")
    info_path = work / f"pretrain-{name}.json"
    if info_path.exists():
        return json.loads(info_path.read_text())
    run([sys.executable, "-m", "spacy_sciner", "weak-config", str(ROOT / "configs" / base), str(cfg),
         "--granularity", granularity, "--max-steps", str(args.steps), "--negatives", negatives],
        work / f"config-{granularity}-{negatives}.log", env)
    seconds = run([sys.executable, "-m", "spacy", "train", str(cfg), "--output", str(out), "--paths.weak", str(weak),
                   "--system.seed", str(args.seed), "--training.eval_frequency", str(args.eval_frequency),
                   "--training.logger.progress_bar", "false",
                   *(["--components.transformer.model.name", args.encoder] if trf else [])],
                  work / f"pretrain-{name}.log", env)
    export = ["export-encoder", str(out / "model-best"), str(weights), "--force"] if trf else \
        ["export-tok2vec", str(out / "model-best"), str(weights)]
    run([sys.executable, "-m", "spacy_sciner", *export], work / f"export-{name}.log", env)
    meta = json.loads((out / "model-best" / "meta.json").read_text())
    info = {"granularity": granularity, "negatives": negatives, "name": name, "abbreviations": args.abbreviations, "base_config": f"configs/{base}",
            "encoder": args.encoder, "steps": args.steps, "eval_frequency": args.eval_frequency, "seed": args.seed,
            "train_seconds": seconds, "heldout_weak_scores": meta.get("performance", {}),
            "labels": meta.get("labels", {}), "weights": str(weights.relative_to(ROOT) if weights.is_relative_to(ROOT) else weights),
            "load_avg_at_end": round(os.getloadavg()[0], 2)}
    info_path.write_text(json.dumps(info, indent=2))
    return info


def gazetteer_baseline(ds: str, corpus: Path, work: Path, env, abbreviations: bool = False, split: str = "test") -> dict:
    """Plain gazetteer matching (the same type map) on the test (or dev) text, exact labelled
    spans; with `abbreviations`, label-weak's abbreviation rule on top."""
    sfx = "-abbr" if abbreviations else ""
    report = work / f"gazetteer_{split}{sfx}.json"
    if not report.exists():
        type_map = ROOT / "configs" / "weak" / f"{ds}.tsv"
        run([sys.executable, "-m", "spacy_sciner", "label-weak", str(corpus / f"{split}.spacy"), "-t", str(type_map),
             "--gazetteer-dir", str(spancat_bench.DATA / "gazetteers" / "openbel"), "--gold", str(corpus / f"{split}.spacy"),
             "--report", str(report), "-o", str(work / f"gazetteer_{split}{sfx}.spacy"), "--no-progress",
             *(["--abbreviations"] if abbreviations else [])], work / f"gazetteer_{split}{sfx}.log", env)
    row = json.loads(report.read_text())["noise"]["ALL"]
    return {"spans_p": row["p_exact"] / 100, "spans_r": row["r_exact"] / 100, "spans_f": row["f_exact"] / 100,
            "gold_spans": row["gold"]}


def heldout_docbin(cfg: Path, weak: Path, out: Path) -> int:
    """Write the held-out 10% of the weak data (the pretraining config's dev reader, so the
    same sentences, rules and relabeling) as a DocBin whose spans are in "sc"; returns its size."""
    config = load_config(cfg, overrides={"paths.weak": str(weak)}, interpolate=True)
    reader = registry.resolve({"reader": config["corpora"]["dev"]})["reader"]
    docs = DocBin(store_user_data=False)
    for eg in reader(spacy.blank(config["nlp"]["lang"])):
        docs.add(eg.reference)
    docs.to_disk(out)
    return len(docs)


def zero_shot(ds: str, corpus: Path, work: Path, pre: dict, env, weak: Path = None) -> dict:
    """Step 4: the weak model on test, next to the gazetteer: as it is (argmax) and, with
    `weak`, after `sciner calibrate` on the held-out WEAK data (threshold chosen without gold)."""
    labels = {label for names in pre["labels"].values() for label in names}
    if labels != TARGET_LABELS.get(ds):
        target = sorted(TARGET_LABELS[ds]) if ds in TARGET_LABELS else "not all covered by the type map"
        return {"skipped": f"n/a: weak labels {sorted(labels)} ≠ target labels ({target})"}
    name = pre.get("name", pre["granularity"])
    model = work / f"pretrain-{name}" / "model-best"
    res = {"model": spancat_bench.evaluate(ds, "sciner_spancat", corpus, work, model=model),
           "gazetteer": gazetteer_baseline(ds, corpus, work, env),
           "gazetteer_abbreviations": gazetteer_baseline(ds, corpus, work, env, abbreviations=True)}
    abbr = spancat_bench.with_abbreviations(model, work / f"zero-shot-{name}-abbr")
    res["model_abbreviations"] = spancat_bench.evaluate(ds, "sciner_spancat", corpus, work, model=abbr)
    # Whether to use sciner_abbreviations is decided on dev (test only reports): the same four.
    res["dev"] = {"model": spancat_bench.evaluate(ds, "sciner_spancat", corpus, work, model=model, split="dev"),
                  "model_abbreviations": spancat_bench.evaluate(ds, "sciner_spancat", corpus, work, model=abbr, split="dev"),
                  "gazetteer": gazetteer_baseline(ds, corpus, work, env, split="dev"),
                  "gazetteer_abbreviations": gazetteer_baseline(ds, corpus, work, env, abbreviations=True, split="dev")}
    if weak is not None:
        cal = work / f"zero-shot-{name}-weak-calibrated"
        heldout = work / f"heldout-{pre['granularity']}{'-abbr' if pre.get('abbreviations') else ''}.spacy"
        if not (cal / "meta.json").exists():
            trf = pre.get("encoder", "cnn") != "cnn"
            cfg = work / f"{'trf' if trf else 'cnn'}_weak_{pre['granularity']}_{pre['negatives']}.cfg"
            heldout_docbin(cfg, weak, heldout)
            run([sys.executable, "-m", "spacy_sciner", "calibrate", str(model), str(heldout), str(cal)],
                work / f"calibrate-{name}.log", env)
        res["weak_heldout_docs"] = len(DocBin().from_disk(heldout))
        res["model_weak_calibrated"] = spancat_bench.evaluate(ds, "sciner_spancat", corpus, work, model=cal)
    return res


def save(path: Path, ds: str, res: dict, meta: dict) -> None:
    """Merge one data set's results into those on disk and rewrite them. The file is read again
    just before writing because two runs on different data sets (or encoders) may be running at
    once: writing a snapshot taken at start would drop the other run's rows.
    """
    out = path.with_suffix(".json")
    results = json.loads(out.read_text()) if out.exists() else {"datasets": {}}
    results.update(meta)
    disk = results["datasets"].setdefault(ds, {})
    for key, value in res.items():
        if isinstance(value, dict) and isinstance(disk.get(key), dict):
            disk[key].update(value)
        else:
            disk[key] = value
    write_results(results, path)


def fmt(s: dict) -> str:
    """Precision / recall / **F** of a span score, in percent."""
    return f"{100 * s['spans_p']:.1f} / {100 * s['spans_r']:.1f} / **{100 * s['spans_f']:.1f}**"


def write_results(results: dict, path: Path) -> None:
    # Committed results name no machine's folders (weights under ~/.cache become "~/...").
    path.with_suffix(".json").write_text(portable(json.dumps(results, indent=2)) + "\n")
    lines = ["# Weak pretraining of the span model: zero-shot", "",
             f"Weak corpus: the first {results['lines']} aux lines of each domain, labeled with the data set's type map "
             f"(scripts/weak_label.py). `sciner weak-config` of configs/sciner_spancat_cnn.cfg (CNN, no transformer) or, `trf-` rows, configs/sciner_spancat.cfg (transformer): negatives only outside weak "
             f"spans (`-plain`: any non-weak span), |E|^0.7 type sampling, model-best on the held-out 10% of the weak data; seed {results['seed']}, "
             f"{results['threads']} thread(s) per training. Zero-shot: that model-best on test as it is (argmax, "
             "no gold calibration or training) and calibrated (`sciner calibrate`) on the held-out weak data instead of gold dev, "
             "against plain gazetteer matching with the same type map; exact labelled spans. "
             "`+ abbreviations`: the model with `sciner_abbreviations` after it, the gazetteer with label-weak's "
             "`--abbreviations` (a defined short form takes its long form's label; rows `-abbr`: the weak labels too).", "",
             "| dataset | weak types, negatives | weak spans | updates | train min | held-out weak F | zero-shot P / R / F "
             "| zero-shot + abbreviations | zero-shot, weak-calibrated P / R / F | gazetteer P / R / F | gazetteer + abbreviations |",
             "|---|---|---:|---:|---:|---:|---|---|---|---|---|"]
    for ds, res in results["datasets"].items():
        for g, pre in res.get("pretrain", {}).items():
            corpus = res.get("weak_corpus-abbr" if pre.get("abbreviations") else "weak_corpus", {})
            n_spans = (corpus.get("labeling") or {}).get("spans", "—")
            zs = res.get("zero_shot", {}).get(g, {})
            # the weak types are not the target's (coarse types; a type map covering part of
            # the target labels): no zero-shot score; the JSON keeps the labels compared
            model = fmt(zs["model"]) if "model" in zs else ("n/a: weak types ≠ target types" if "skipped" in zs else "—")
            cal, gaz, abbr, gaz_abbr = (fmt(zs[k]) if k in zs else "—" for k in (
                "model_weak_calibrated", "gazetteer", "model_abbreviations", "gazetteer_abbreviations"))
            held = pre["heldout_weak_scores"].get("spans_sc_f")
            held = f"{100 * held:.1f}" if held is not None else "—"
            lines.append(f"| {ds} | {g} | {n_spans} | {pre.get('steps', '—')} | {pre['train_seconds'] / 60:.1f} | "
                         f"{held} | {model} | {abbr} | {cal} | {gaz} | {gaz_abbr} |")
    dev_rows = [(ds, g, zs["dev"]) for ds, res in results["datasets"].items()
                for g, zs in res.get("zero_shot", {}).items() if "dev" in zs]
    if dev_rows:
        lines += ["", "Dev F (exact labelled spans), where the choice of `sciner_abbreviations` is made (test only reports):", ""]
        lines += [f"* {ds} {g}: model {100 * d['model']['spans_f']:.1f}, + abbreviations "
                  f"{100 * d['model_abbreviations']['spans_f']:.1f}; gazetteer {100 * d['gazetteer']['spans_f']:.1f}, "
                  f"+ abbreviations {100 * d['gazetteer_abbreviations']['spans_f']:.1f}" for ds, g, d in dev_rows]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = convergence.Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=["ncbi_disease"], choices=["ncbi_disease", "bc5cdr", "bionlp13cg"])
    p.add_argument("--granularities", nargs="+", default=["fine"], choices=["fine", "coarse"])
    p.add_argument("--negatives", nargs="+", default=["plain"], choices=["avoid", "plain"],
                   help="avoid: negatives overlap no weak span (partial annotation); plain: any non-weak span")
    p.add_argument("--encoder", default="cnn", help="cnn (configs/sciner_spancat_cnn.cfg), or a transformer "
                   "name or path for configs/sciner_spancat.cfg (e.g. sciner-minilm; exported with export-encoder)")
    p.add_argument("--lines", type=int, default=30000, help="Aux lines to label")
    p.add_argument("--abbreviations", action="store_true", help="Weak labels with label-weak --abbreviations "
                   "(weak-abbr.spacy; rows named ...-abbr)")
    p.add_argument("--steps", type=int, default=2000, help="Weak pretraining updates")
    p.add_argument("--eval-frequency", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--gpu-id", type=int, default=-1)
    p.add_argument("--state", type=Path, default=convergence.STATE)
    p.add_argument("--work", type=Path, default=Path.home() / ".cache" / "spacy-sciner" / "weak_cnn")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "weak_cnn")
    args = p.parse_args(argv)
    if args.lines < 1 or args.steps < 1 or args.eval_frequency < 1:
        p.error("--lines, --steps and --eval-frequency must be positive")
    if not spancat_bench.DATA.is_dir():
        p.error(f"data folder {spancat_bench.DATA} not found (see README, 'Data')")
    env = convergence.train_env(args)
    out = args.results.with_suffix(".json")
    results = json.loads(out.read_text()) if out.exists() else {"datasets": {}}
    results.update({"lines": args.lines, "steps": args.steps, "seed": args.seed, "threads": args.threads})
    for ds in args.datasets:
        work = args.work / ds
        work.mkdir(parents=True, exist_ok=True)
        corpus = convergence.get_corpus(ds, args.state)
        res = results["datasets"].setdefault(ds, {})
        weak = label(ds, corpus, work, args, env, res)
        for g, neg in itertools.product(args.granularities, args.negatives):
            name = variant_name(g, neg, args.encoder != "cnn", args.abbreviations)
            print(f"[{ds}] weak pretraining ({name}, {args.steps} updates)", flush=True)
            pre = res.setdefault("pretrain", {})[name] = pretrain(ds, weak, work, g, neg, args, env)
            res.setdefault("zero_shot", {})[name] = zero_shot(ds, corpus, work, pre, env, weak)
            save(args.results, ds, res, {k: results[k] for k in ("lines", "steps", "seed", "threads")})
            print(f"[{ds}] {name}: {json.dumps(res['zero_shot'][name])[:400]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
