"""The runs of benchmarks/convergence.py: the systems and their evaluation settings, one
run's manifest under the state dir, its config, and its calls of `spacy sciner train
--resume` (merging a finished, stopped or interrupted call into the run). See
convergence.py's docstring for how a run stops and continues."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spancat_bench  # noqa: E402  (ROOT, DATA)
import convergence_assets  # noqa: E402  (floret vectors, spacy pretrain weights)
from convergence_callbacks import DEADLINE_ENV, STOP_MARKER, read_curve  # noqa: E402
from convergence_eval import train_env  # noqa: E402

ROOT = spancat_bench.ROOT
CALLBACKS = Path(__file__).resolve().parent / "convergence_callbacks.py"
# How a run trains: every call is `spacy sciner train --resume` on one output folder. Runs in
# the results recorded with "segments" instead of "calls" ran before it (up to commit 85c4a34):
# each segment a `spacy train` whose config sourced the components from the previous
# model-last, with fresh Adam moments and the data order restarted.
RUNNER = "sciner train --resume"
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
    # The default recipe evaluated and saved with the optimizer's parameter averages (thinc's
    # use_averages: an average over the last ~t/9 of t updates), the transformer's weights
    # included (spacy_sciner/training/averages.py; spaCy's use_params misses those).
    "sciner_spancat_hybrid_v2_avg": ("configs/sciner_spancat_hybrid.cfg", True),
    "spacy_spancat_avg": ("configs/spacy_spancat.cfg", True),  # the same for spaCy's spancat
}
# Settings of [components.sciner_spancat.model] that a system changes in its config: max pooling
# (SEPT, the default) + the first and last token's vectors (the boundary tokens, PURE-style) + a
# learned 32-d span-width embedding (Tri-Train §2.3.1).
SPAN_HEAD = {"sciner_spancat_hybrid_ends": {"reducer": "max_endpoints", "width_embedding": 32}}
# Systems whose pipeline starts with spaCy's sentencizer, also run on the training docs
# (annotating_components): the docs built from the text have no sentence starts otherwise.
SENTENCIZED = {"sciner_spancat_hybrid_sents"}
# Settings of [training.optimizer] that a system changes in its config.
OPTIMIZER = {"sciner_spancat_hybrid_v2_avg": {"use_averages": True}, "spacy_spancat_avg": {"use_averages": True}}
# Systems named for the encoder architecture their runs used (the others' runs so far: v1).
ENCODER_V2 = {"sciner_spancat_hybrid_v2", "sciner_spancat_hybrid_v2_weak", "sciner_spancat_hybrid_v2_goldtok",
              "sciner_spancat_hybrid_v2_pft", "spacy_spancat_pft", "sciner_spancat_hybrid_v2_avg",
              "spacy_spancat_avg"}
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
    """One dataset x system x seed under the state dir, with its manifest.

    RUN/config.cfg (written by the first call, the same for every later one), RUN/train
    (``sciner train``'s output: model-last, model-best, the checkpoint, curve.jsonl),
    RUN/train.log (every call's output), RUN/best-copy and RUN/marks (time marks)."""

    def __init__(self, state: Path, dataset: str, system: str, seed: int):
        self.dataset, self.system, self.seed = dataset, system, seed
        self.key = f"{dataset}/{system}/seed{seed}"
        self.dir = state / "runs" / dataset / f"{system}-seed{seed}"
        self.manifest_path = self.dir / "manifest.json"
        self.m = json.loads(self.manifest_path.read_text()) if self.manifest_path.exists() else {
            "dataset": dataset, "system": system, "seed": seed, "status": "new", "runner": RUNNER, "calls": [],
            "curve": [], "best": None, "evaluation": None,
        }

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.m, indent=1))
        tmp.replace(self.manifest_path)

    def path(self, checkpoint: str) -> Path:
        return checkpoint_path(self.dir, checkpoint)


def checkpoint_path(run_dir: Path, checkpoint: str) -> Path:
    """Where a checkpoint of a run is: model-best / model-last (in RUN/train; directly in RUN
    for a run of the segment runner) or marks/<m>."""
    if checkpoint in ("model-best", "model-last") and not (run_dir / checkpoint).exists():
        return run_dir / "train" / checkpoint
    return run_dir / checkpoint


def run_config(run: Run, args, corpus: Path) -> Path:
    """The run's config: the system's config with the run's settings (RUN/config.cfg)."""
    from spacy.util import load_config

    config_path, transformer = SYSTEMS[base_system(run.system)]
    cfg = load_config(ROOT / config_path, interpolate=False)
    st = run_settings(run, args, transformer)
    ef = st["eval_frequency"]
    T = cfg["training"]
    # spaCy's patience in updates; max_steps a multiple of ef, so that the last step is evaluated.
    T.update({"max_epochs": 0, "max_steps": max_steps(st), "eval_frequency": ef,
              "patience": st["patience_evals"] * ef, "seed": run.seed})
    cfg["system"]["seed"] = run.seed
    cfg["paths"]["train"], cfg["paths"]["dev"] = str(corpus / "train.spacy"), str(corpus / "dev.spacy")
    if base_system(run.system) in GOLD_PREPROC:
        # spaCy's own gold_preproc drops doc.spans (its sentences are Span.as_doc copies).
        for split in ("train", "dev"):
            cfg["corpora"][split] = {"@readers": "spacy-sciner.GoldTokensCorpus.v1", "path": f"${{paths.{split}}}"}
    T["logger"] = {"@loggers": "spacy-sciner.JSONLLogger.v1", "path": str(run.dir / "train" / "curve.jsonl"),
                   "progress_bar": False, "console_output": True}
    if transformer:
        T["batcher"]["size"] = st["batch_words"]
        T["optimizer"]["learn_rate"] = {"@schedules": "warmup_linear.v1", "warmup_steps": st["warmup_steps"],
                                        "total_steps": st["max_steps"], "initial_rate": st["lr"]}
    T["optimizer"].update(OPTIMIZER.get(base_system(run.system), {}))
    T["before_update"] = {
        "@callbacks": "sciner_convergence.budget.v1", "curve": str(run.dir / "train" / "curve.jsonl"),
        "stop_file": str(run.dir / STOP_MARKER), "model_last": str(run.dir / "train" / "model-last"),
        "eval_frequency": ef, "marks": list(args.marks), "run_dir": str(run.dir),
    }
    if transformer:
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
    if "vectors" in domain:  # [initialize] loads them into the vocab
        cfg["paths"]["vectors"] = domain["vectors"]
        cfg["components"]["tok2vec"]["model"]["embed"]["include_static_vectors"] = True
    if "init_tok2vec" in domain:
        cfg["paths"]["init_tok2vec"] = domain["init_tok2vec"]
    if domain:
        run.m["domain_assets"] = convergence_assets.build_seconds(domain, args.state / "assets" / run.dataset)
    out = run.dir / "config.cfg"
    out.parent.mkdir(parents=True, exist_ok=True)
    cfg.to_disk(out)
    return out


def max_steps(settings: dict) -> int:
    """The run's last update: max_steps rounded up to a multiple of the evaluation frequency."""
    ef = settings["eval_frequency"]
    return -(-settings["max_steps"] // ef) * ef


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


def train_call(run: Run, args, corpus: Path) -> str:
    """One call of `spacy sciner train --resume` (the first trains from scratch, a later one
    continues from the checkpoint of the last evaluation, exactly); merges its curve into the
    run. Returns the run's status: converged / max steps / stopped (time budget) / failed."""
    k = len(run.m["calls"])
    # The config is fixed by the first call: a resume with another one would be refused
    # (run_settings notes flags of this invocation that differ from the run's).
    if k and (run.dir / "config.cfg").exists():
        run_settings(run, args, SYSTEMS[base_system(run.system)][1])
        config = run.dir / "config.cfg"
    else:
        config = run_config(run, args, corpus)
    (run.dir / STOP_MARKER).unlink(missing_ok=True)
    # from_step: the last evaluation logged, where the checkpoint is (a kill between the log
    # line and the checkpoint's write leaves it one evaluation further; train.log says where).
    call = {"index": k, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_start": os.getloadavg()[0], "from_step": run.m["curve"][-1]["step"] if run.m["curve"] else None}
    run.m["calls"].append(call)
    run.m["status"] = "running"
    cmd = [sys.executable, "-m", "spacy", "sciner", "train", str(config), "--output", str(run.dir / "train"),
           "--resume", "--code", str(CALLBACKS), "--gpu-id", str(args.gpu_id)]
    # Recorded relative to the checkout it ran in (cwd): no machine's or worktree's folders.
    call.update({"command": " ".join(cmd[1:]).replace(str(ROOT) + "/", ""), "budget_minutes": args.max_minutes, "threads": args.threads or None})
    run.save()
    resumed = f"resumes after step {call['from_step']}" if call["from_step"] is not None else "from scratch"
    print(f"[{run.key}] call {k} ({resumed}): {' '.join(cmd[3:])}", flush=True)
    env = dict(train_env(args), **{DEADLINE_ENV: str(args.deadline or 0)})
    start = time.time()
    with open(run.dir / "train.log", "a") as log:
        log.write(f"\n==== call {k}, {call['started']} ====\n")
        log.flush()
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env).returncode
    return finish_call(run, rc, time.time() - start)


def finish_call(run: Run, rc, wall: float) -> str:
    """Merge the last call (finished, stopped, or found interrupted: rc None) into the run."""
    call = run.m["calls"][-1]
    stop = json.loads((run.dir / STOP_MARKER).read_text()) if (run.dir / STOP_MARKER).exists() else None
    # The logger drops lines after the checkpoint when a run resumes; until then the curve ends
    # at the last evaluation written, which a resume repeats exactly.
    before = len(run.m["curve"])
    run.m["curve"] = [{"step": r["step"], "seconds": round(r["seconds"], 3), "score": r["score"], "epoch": r["epoch"]}
                      for r in read_curve(run.dir / "train" / "curve.jsonl")]
    if run.m["curve"]:  # spaCy's model-best: the best score, the latest of ties
        top = max(run.m["curve"], key=lambda p: (p["score"] or 0.0, p["step"]))
        run.m["best"] = {**{k: top[k] for k in ("step", "seconds")}, "score": top["score"] or 0.0}
    last_step = run.m["curve"][-1]["step"] if run.m["curve"] else None
    call.update({"rc": rc, "wall_seconds": round(wall, 1), "load_end": os.getloadavg()[0],
                 "evals": len(run.m["curve"]) - before, "last_step": last_step})
    call["stop"] = call_status(run.m, rc, stop)
    run.m["status"] = "stopped" if call["stop"] in ("time budget", "interrupted") else call["stop"]
    if call["stop"] == "failed":
        log = run.dir / "train.log"
        call["log_tail"] = log.read_text()[-1500:] if log.exists() else ""
    call["finished"] = True
    run.save()
    return run.m["status"]


def call_status(m: dict, rc, stop) -> str:
    """How a call ended: converged / max steps (the loop's own end: rc 0, or a kill after the
    last evaluation, which a resume would end without an update) / time budget / interrupted
    (killed: rc None) / failed."""
    from spacy_sciner.training.loop import finished

    curve, settings = m["curve"], m["settings"]
    ended = rc == 0 or (rc is None and curve and finished(
        curve[-1]["step"], [(p["score"] or 0.0, p["step"]) for p in curve],
        {"patience": settings["patience_evals"] * settings["eval_frequency"], "max_steps": max_steps(settings)}))
    if ended:
        return "max steps" if curve and curve[-1]["step"] >= max_steps(settings) else "converged"
    if stop is not None:
        return stop["reason"]
    return "interrupted" if rc is None else "failed"


def recover(run: Run) -> None:
    """A call left unfinished by a killed session: merge what its curve holds; the next call
    resumes from its checkpoint."""
    calls = run.m.get("calls") or []
    if calls and not calls[-1].get("finished"):
        print(f"[{run.key}] recovering interrupted call {calls[-1]['index']}", flush=True)
        finish_call(run, None, 0.0)
