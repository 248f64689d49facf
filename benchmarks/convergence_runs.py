"""The runs of benchmarks/convergence.py: the systems and their evaluation settings, one
run's manifest under the state dir, and its `spacy train` segments (the segment's config,
merging a finished, stopped or interrupted segment into the run). See convergence.py's
docstring for how a run stops and continues."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spancat_bench  # noqa: E402  (ROOT, DATA)
import convergence_assets  # noqa: E402  (floret vectors, spacy pretrain weights)
from convergence_callbacks import STOP_MARKER, read_curve, replace_dir  # noqa: E402
from convergence_eval import train_env  # noqa: E402

ROOT = spancat_bench.ROOT
CALLBACKS = Path(__file__).resolve().parent / "convergence_callbacks.py"
SYSTEMS = {
    # name: (config, needs the transformer)
    "spacy_ner_cnn": ("configs/spacy_ner_cnn.cfg", False),
    "spacy_ner": ("configs/spacy_ner.cfg", True),
    "spacy_spancat": ("configs/spacy_spancat.cfg", True),
    "sciner_spancat": ("configs/sciner_spancat.cfg", True),
    "sciner_spancat_cnn": ("configs/sciner_spancat_cnn.cfg", False),
    "sciner_spancat_hybrid": ("configs/sciner_spancat_hybrid.cfg", True),
    # Domain pretraining of the CNN side (convergence_assets.py): floret vectors and/or spacy pretrain.
    "spacy_ner_cnn_floret": ("configs/spacy_ner_cnn.cfg", False),
    "sciner_spancat_cnn_floret": ("configs/sciner_spancat_cnn.cfg", False),
    "sciner_spancat_cnn_pretrain": ("configs/sciner_spancat_cnn.cfg", False),
    "sciner_spancat_cnn_floret_pretrain": ("configs/sciner_spancat_cnn.cfg", False),
    # Span representation ablation (SPAN_HEAD below): the hybrid with a different span vector.
    "sciner_spancat_hybrid_ends": ("configs/sciner_spancat_hybrid.cfg", True),
    # Documents of several sentences (scierc_doc): the hybrid behind spaCy's rule-based
    # sentencizer, so that candidates and negatives follow sentences (SENTENCIZED below).
    "sciner_spancat_hybrid_sents": ("configs/sciner_spancat_hybrid.cfg", True),
    # The default recipe after the configs moved to spacy-sciner.TransformerModel.v2 (the encoder
    # on length-sorted sub-batches, commit bf300b6): every earlier run used v1 (one encoder call
    # per batch); its own name keeps the two apart in the tables.
    "sciner_spancat_hybrid_v2": ("configs/sciner_spancat_hybrid.cfg", True),
    # The default recipe on a weak-pretrained encoder (issue 12's NER-BERT pretraining used as
    # domain pretraining, issue 9): --encoder names the folder `export-encoder` wrote, e.g. the
    # one pretrained on fewshot.py's weak corpus of the full training set (the set's own
    # training entities + candidates mined from its aux text); the run records the path.
    "sciner_spancat_hybrid_v2_weak": ("configs/sciner_spancat_hybrid.cfg", True),
    # The default recipe and spaCy's spancat, both on a PFT encoder (Tri-Train's MLM_CAND + ECB on
    # the domain's aux text, `sciner pft`; issue 9's domain pretraining of the transformer side):
    # --encoder names the PFT checkpoint folder. The pair keeps the comparison fair: the same
    # encoder, data, schedule and selection rule for both.
    "sciner_spancat_hybrid_v2_pft": ("configs/sciner_spancat_hybrid.cfg", True),
    "spacy_spancat_pft": ("configs/spacy_spancat.cfg", True),
    # Trained and selected on the data set's own tokens (spacy-sciner.GoldTokensCorpus.v1, i.e.
    # spaCy's gold_preproc keeping doc.spans, for train and dev) instead of spaCy's tokenization
    # of the text: the setting in which the benchmark's gold-token test scores match training
    # (tokenization_eval.py measures the other one).
    "sciner_spancat_hybrid_v2_goldtok": ("configs/sciner_spancat_hybrid.cfg", True),
    "spacy_spancat_goldtok": ("configs/spacy_spancat.cfg", True),
}
# Settings of [components.sciner_spancat.model] that a system changes in its config: max pooling
# (SEPT, the default) + the first and last token's vectors (the boundary tokens, PURE-style) + a
# learned 32-d span-width embedding (Tri-Train §2.3.1).
SPAN_HEAD = {"sciner_spancat_hybrid_ends": {"reducer": "max_endpoints", "width_embedding": 32}}
# Systems whose pipeline starts with spaCy's sentencizer, also run on the training docs
# (annotating_components): the docs built from the text have no sentence starts otherwise.
SENTENCIZED = {"sciner_spancat_hybrid_sents"}
# Systems named for the encoder architecture their runs used (the others' runs so far: v1).
ENCODER_V2 = {"sciner_spancat_hybrid_v2", "sciner_spancat_hybrid_v2_weak", "sciner_spancat_hybrid_v2_goldtok",
              "sciner_spancat_hybrid_v2_pft", "spacy_spancat_pft"}
# Systems that train and pick model-best on the corpus's own words (GoldTokensCorpus.v1).
GOLD_PREPROC = {"sciner_spancat_hybrid_v2_goldtok", "spacy_spancat_goldtok"}
# Systems that need an encoder other than the default (--encoder; checked before any training).
OWN_ENCODER = {"sciner_spancat_hybrid_v2_weak", "sciner_spancat_hybrid_v2_pft", "spacy_spancat_pft"}
# Steps between dev evaluations: (transformer systems, CNN systems). Transformer: about two
# evaluations per epoch at 500-word batches (SciERC ~1.9k train sentences, BioNLP13CG
# ~3k); CNN: spaCy's stock 200 (its batches compound from 100 to 1000 words).
EVAL_FREQUENCY = {"scierc": (50, 200), "bionlp13cg": (100, 200), "demo": (2, 2)}
EVAL_FREQUENCY_DEFAULT = (100, 200)
PATIENCE_EVALS = (5, 8)  # transformer; CNN (8 x 200 = spaCy's stock patience of 1600 steps)
# Fixed-budget variants of the transformer systems, "<system>_decay<N>": the same config with the
# learning rate warming up and then decaying linearly to 0 at step N, where the run ends (no
# early stopping; model-best on dev as for every run). This is fewshot.py's schedule; the
# default runs decay to 0 at --max-steps (20,000), so their rate is nearly constant when
# patience stops them, and an annealed end may be worth more than the extra steps.
# "<system>_decay<N>_lr<X>" (e.g. sciner_spancat_hybrid_decay2000_lr2e-4): the same with peak
# rate X instead of --lr, its own runs and rows (a learning-rate choice made on dev).
DECAY_VARIANT = re.compile(r"^(?P<base>.+)_decay(?P<steps>[1-9][0-9]*)(?:_lr(?P<lr>[1-9](?:\.[0-9]+)?e-[0-9]+))?$")


def base_system(name: str) -> str:
    """The system of SYSTEMS a (possibly variant) system name trains."""
    m = DECAY_VARIANT.match(name)
    return m["base"] if m and m["base"] in SYSTEMS else name


def decay_steps(name: str):
    """N of a "<system>_decay<N>" variant, or None for a plain system."""
    m = DECAY_VARIANT.match(name)
    return int(m["steps"]) if m and m["base"] in SYSTEMS else None


def variant_lr(name: str):
    """X of a "<system>_decay<N>_lr<X>" variant, or None."""
    m = DECAY_VARIANT.match(name)
    return float(m["lr"]) if m and m["base"] in SYSTEMS and m["lr"] else None


def known_system(name: str) -> bool:
    """A system of SYSTEMS, or a decay variant of one of its transformer systems."""
    base = base_system(name)
    return base in SYSTEMS and (base == name or SYSTEMS[base][1])


# ---------------------------------------------------------------------------- runs


class Run:
    """One dataset x system x seed under the state dir, with its manifest."""

    def __init__(self, state: Path, dataset: str, system: str, seed: int):
        self.dataset, self.system, self.seed = dataset, system, seed
        self.key = f"{dataset}/{system}/seed{seed}"
        self.dir = state / "runs" / dataset / f"{system}-seed{seed}"
        self.manifest_path = self.dir / "manifest.json"
        self.m = json.loads(self.manifest_path.read_text()) if self.manifest_path.exists() else {
            "dataset": dataset, "system": system, "seed": seed, "status": "new", "segments": [],
            "curve": [], "best": None, "resume_checks": [], "evaluation": None,
        }

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.m, indent=1))
        tmp.replace(self.manifest_path)

    @property
    def offset(self):
        """(global step, global seconds) of model-last, or None before the first segment."""
        return (self.m["curve"][-1]["step"], self.m["curve"][-1]["seconds"]) if self.m["curve"] else None


def run_config(run: Run, args, corpus: Path, seg_dir: Path) -> Path:
    """The segment's config: the system's config with the run's settings; on a continued
    run every component sourced from the saved model-last."""
    from spacy.util import load_config

    config_path, transformer = SYSTEMS[base_system(run.system)]
    cfg = load_config(ROOT / config_path, interpolate=False)
    st = run_settings(run, args, transformer)
    ef, patience = st["eval_frequency"], st["patience_evals"] * st["eval_frequency"]
    T = cfg["training"]
    offset = run.offset
    step_offset = offset[0] if offset else -1
    max_steps = -(-st["max_steps"] // ef) * ef  # a multiple of ef: the last step is evaluated
    T.update({"max_epochs": 0, "max_steps": max_steps - max(step_offset, 0), "eval_frequency": ef, "patience": 0, "seed": run.seed})
    cfg["system"]["seed"] = run.seed
    cfg["paths"]["train"], cfg["paths"]["dev"] = str(corpus / "train.spacy"), str(corpus / "dev.spacy")
    if base_system(run.system) in GOLD_PREPROC:  # every segment: the corpora are not sourced
        # spaCy's own gold_preproc drops doc.spans (its sentences are Span.as_doc copies).
        for split in ("train", "dev"):
            cfg["corpora"][split] = {"@readers": "spacy-sciner.GoldTokensCorpus.v1", "path": f"${{paths.{split}}}"}
    T["logger"] = {"@loggers": "spacy-sciner.JSONLLogger.v1", "path": str(seg_dir / "curve.jsonl"),
                   "progress_bar": False, "console_output": True}
    if transformer:
        T["batcher"]["size"] = st["batch_words"]
        T["optimizer"]["learn_rate"] = {"@schedules": "warmup_linear.v1", "warmup_steps": st["warmup_steps"],
                                        "total_steps": st["max_steps"], "initial_rate": st["lr"]}
    # Shift the schedules by the steps done; the first update of a continued run at lr 0.
    T["optimizer"]["learn_rate"] = {"@schedules": "sciner_convergence.shifted.v1", "offset": step_offset,
                                    "first": 0.0 if offset else None, "schedule": T["optimizer"]["learn_rate"]}
    T["batcher"]["size"] = {"@schedules": "sciner_convergence.shifted.v1", "offset": step_offset,
                            "first": None, "schedule": T["batcher"]["size"]}
    best = run.m["best"] or {"score": -1.0, "step": 0}
    T["before_update"] = {
        "@callbacks": "sciner_convergence.stopper.v1", "curve": str(seg_dir / "curve.jsonl"),
        "stop_file": str(seg_dir / STOP_MARKER), "checkpoint": str(seg_dir / "checkpoint"),
        "model_last": str(seg_dir / "model-last"), "eval_frequency": ef,
        "deadline": args.deadline, "patience_steps": patience, "best_score": best["score"],
        "best_step": best["step"], "step_offset": step_offset,
        "seconds_offset": offset[1] if offset else 0.0, "marks": list(args.marks), "run_dir": str(run.dir),
    }
    if offset:  # continue from the saved weights: every component sourced from model-last
        for name in cfg["nlp"]["pipeline"]:
            cfg["components"][name] = {"source": str(run.dir / "model-last")}
    elif transformer:
        cfg["components"]["transformer"]["model"]["name"] = st["encoder"]
        if base_system(run.system) in SPAN_HEAD:
            cfg["components"]["sciner_spancat"]["model"].update(SPAN_HEAD[base_system(run.system)])
        if base_system(run.system) in SENTENCIZED:
            cfg["nlp"]["pipeline"] = ["sentencizer", *cfg["nlp"]["pipeline"]]
            cfg["components"]["sentencizer"] = {"factory": "sentencizer"}
            T["annotating_components"] = ["sentencizer"]
            # Its sents_f would otherwise weigh half of the score that picks model-best.
            T["score_weights"].update({"sents_f": 0.0, "sents_p": 0.0, "sents_r": 0.0})
    elif args.smoke:  # a small CNN for the smoke test
        cfg["components"]["tok2vec"]["model"]["encode"].update({"width": 32, "depth": 1})
    domain = convergence_assets.overrides(base_system(run.system), run.dataset, config_path, args.state, spancat_bench.DATA, args.smoke,
                                          pretrain_epochs=st.get("pretrain_epochs", 5))
    if "vectors" in domain:  # every segment: [initialize] loads them into the vocab
        cfg["paths"]["vectors"] = domain["vectors"]
        if not offset:
            cfg["components"]["tok2vec"]["model"]["embed"]["include_static_vectors"] = True
    if "init_tok2vec" in domain and not offset:  # a continued segment has its own trained weights
        cfg["paths"]["init_tok2vec"] = domain["init_tok2vec"]
    if domain and not offset:
        run.m["domain_assets"] = convergence_assets.build_seconds(domain, args.state / "assets" / run.dataset)
    out = seg_dir / "config.cfg"
    cfg.to_disk(out)
    return out


def run_settings(run: Run, args, transformer: bool) -> dict:
    """The run's training settings: fixed by its first segment (a continued run keeps them,
    whatever this invocation's flags say, with a note when they differ)."""
    fixed = decay_steps(run.system)  # a fixed-budget variant: no patience, ends at its N
    fresh = {"config": SYSTEMS[base_system(run.system)][0], "eval_frequency": eval_frequency(args, run.dataset, transformer),
             "patience_evals": 0 if fixed else args.patience_evals or PATIENCE_EVALS[0 if transformer else 1],
             "max_steps": fixed or args.max_steps, "seed": run.seed}
    if transformer:
        fresh.update({"encoder": args.encoder, "lr": variant_lr(run.system) or args.lr, "warmup_steps": args.warmup_steps,
                      "batch_words": args.batch_words, "schedule": "warmup_linear to 0 at max_steps"})
    if convergence_assets.DOMAIN_PRETRAINING.get(base_system(run.system), (False, False))[1]:
        fresh["pretrain_epochs"] = args.pretrain_epochs
    if not run.m.get("settings"):
        run.m["settings"] = fresh
    elif run.m["settings"] != fresh:
        diff = {k: v for k, v in fresh.items() if run.m["settings"].get(k) != v}
        print(f"[{run.key}] note: continuing with the run's own settings, not {diff}", flush=True)
    return run.m["settings"]


def eval_frequency(args, dataset: str, transformer: bool) -> int:
    if args.eval_frequency:
        return args.eval_frequency
    return EVAL_FREQUENCY.get(dataset, EVAL_FREQUENCY_DEFAULT)[0 if transformer else 1]


def train_segment(run: Run, args, corpus: Path) -> str:
    """One `spacy train` segment; merges its curve and checkpoints into the run. Returns
    the run's status: converged / max steps / stopped (time budget) / failed."""
    k = len(run.m["segments"])
    seg_dir = run.dir / f"segment-{k}"
    shutil.rmtree(seg_dir, ignore_errors=True)
    seg_dir.mkdir(parents=True)
    if run.offset and (run.dir / "model-best").exists():  # the callback's best-so-far copy
        replace_dir(run.dir / "model-best", run.dir / "best-copy")
        (run.dir / "best-copy" / "best.json").write_text(json.dumps({k: run.m["best"][k] for k in ("step", "seconds", "score")}))
    config = run_config(run, args, corpus, seg_dir)
    segment = {"index": k, "dir": str(seg_dir), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "load_start": os.getloadavg()[0], "step_offset": run.offset[0] if run.offset else 0,
               "seconds_offset": run.offset[1] if run.offset else 0.0, "from": "model-last" if run.offset else "scratch"}
    run.m["segments"].append(segment)
    run.m["status"] = "running"
    cmd = [sys.executable, "-m", "spacy", "train", str(config), "--output", str(seg_dir), "--code", str(CALLBACKS),
           "--gpu-id", str(args.gpu_id)]
    # Recorded relative to the checkout it ran in (cwd): no machine's or worktree's folders.
    segment.update({"command": " ".join(cmd[1:]).replace(str(ROOT) + "/", ""), "budget_minutes": args.max_minutes, "threads": args.threads or None})
    run.save()
    print(f"[{run.key}] segment {k} ({segment['from']}, step {segment['step_offset']}): {' '.join(cmd[3:])}", flush=True)
    start = time.time()
    with open(seg_dir / "train.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=train_env(args)).returncode
    return finish_segment(run, seg_dir, rc, time.time() - start)


def finish_segment(run: Run, seg_dir: Path, rc, wall: float) -> str:
    """Merge a segment (finished, stopped or found interrupted) into the run."""
    segment = run.m["segments"][-1]
    records = read_curve(seg_dir / "curve.jsonl")
    stop = json.loads((seg_dir / STOP_MARKER).read_text()) if (seg_dir / STOP_MARKER).exists() else None
    model, fp = seg_dir / "model-last", None
    if rc is None or (rc != 0 and stop is None):  # killed or crashed: the last safe copy
        ckpt = seg_dir / "checkpoint" if (seg_dir / "checkpoint" / "checkpoint.json").exists() else seg_dir / "checkpoint-old"
        if not (ckpt / "checkpoint.json").exists():
            records = []
        else:
            saved = json.loads((ckpt / "checkpoint.json").read_text())
            records = [r for r in records if r["step"] <= saved["step"]]
            model, fp = ckpt, saved.get("fingerprint")
    elif stop is not None:
        records = [r for r in records if r["step"] <= stop["step"]]
        fp = stop.get("fingerprint")
    step0, sec0 = segment["step_offset"], segment["seconds_offset"]
    if records and segment["from"] == "model-last":
        check, records = records[0], records[1:]
        saved = run.m["curve"][-1]["score"]
        resumed = json.loads((seg_dir / "resume.json").read_text()) if (seg_dir / "resume.json").exists() else {}
        fps = (run.m.get("last_fingerprint"), resumed.get("fingerprint"))
        same_weights = None if None in fps else abs(fps[0] - fps[1]) <= 1e-9 * max(1.0, abs(fps[0]))
        run.m["resume_checks"].append({
            "segment": segment["index"], "saved_score": saved, "first_eval": check["score"],
            "saved_fingerprint": fps[0], "resumed_fingerprint": fps[1], "same_weights": same_weights,
            "equal": check["score"] == saved and same_weights is not False})
        sec0 -= check["seconds"]
    points = [{"step": r["step"] + step0, "seconds": round(r["seconds"] + sec0, 3), "score": r["score"],
               "segment": segment["index"], "epoch": r["epoch"]} for r in records]
    if points and model.exists():
        top = max(points, key=lambda p: (p["score"] or 0.0, p["step"]))  # spaCy's model-best: the latest tie
        if run.m["best"] is None or (top["score"] or 0.0) > run.m["best"]["score"]:
            # The segment's model-best is its best evaluation (its resume check never is:
            # that one scores the saved model-last, at most the best so far).
            replace_dir(model if top is points[-1] else seg_dir / "model-best", run.dir / "model-best")
            run.m["best"] = {**{k: top[k] for k in ("step", "seconds", "segment")}, "score": top["score"] or 0.0}
        run.m["curve"].extend(points)
        replace_dir(model, run.dir / "model-last")
        run.m["last_fingerprint"] = fp  # of the weights now in model-last (None after max steps: final)
    segment.update({"rc": rc, "wall_seconds": round(wall, 1), "load_end": os.getloadavg()[0], "evals": len(points),
                    "stop": stop["reason"] if stop else ("max steps" if rc == 0 else "interrupted or failed")})
    if stop and stop["reason"] == "converged":
        run.m["status"] = "converged"
    elif rc == 0:
        run.m["status"] = "max steps"
    elif stop:
        run.m["status"] = "stopped"
    else:
        run.m["status"] = "failed" if rc is not None else "stopped"
        segment["log_tail"] = (seg_dir / "train.log").read_text()[-1500:] if (seg_dir / "train.log").exists() else ""
    for name in ("model-last", "model-best", "checkpoint", "checkpoint-old", "checkpoint-tmp"):
        shutil.rmtree(seg_dir / name, ignore_errors=True)  # kept once, at the run level
    segment["finished"] = True
    run.save()
    return run.m["status"]


def recover(run: Run) -> None:
    """A segment left unfinished by a killed session: merge what was checkpointed."""
    segs = run.m["segments"]
    if segs and not segs[-1].get("finished"):
        print(f"[{run.key}] recovering interrupted segment {segs[-1]['index']}", flush=True)
        finish_segment(run, Path(segs[-1]["dir"]), None, 0.0)
