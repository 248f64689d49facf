"""One-command GPU check: train, calibrate, evaluate, inference and PFT speed, memory.

On a GPU machine (after ``scripts/gpu/setup_device.sh``; see docs/gpu.md)::

    python benchmarks/gpu_check.py --gpu-id 0 --encoder /tmp/encoders/minilm \\
        --big-encoder /tmp/encoders/bert-base --data .gpu/data/scierc --out $OUT

On the CPU, with small sizes (what CI runs through tests/benchmarks/test_gpu_check.py)::

    python benchmarks/gpu_check.py --smoke --encoder TINY_BERT_DIR --data ../shared/data/scierc --out /tmp/gc

Steps, each timed, each failure recorded without stopping the others:

1. ``spacy train configs/<--config>.cfg`` (default ``sciner_spancat``; the hybrid recipe is
   ``--config sciner_spancat_hybrid``) for ``--updates`` updates on SciERC;
2. ``sciner calibrate`` on dev; ``spacy evaluate`` on test;
3. ``nlp.pipe`` words/s of the calibrated pipeline against the bare transformer (the
   same pipeline with only ``transformer`` enabled) at two batch sizes, interleaved
   rounds, medians; a stage breakdown at the larger batch size (the same rounds; at both with
   ``--stages-every-batch``); with ``--old-code`` the
   same measurement with an older checkout of ``spacy_sciner`` first on ``PYTHONPATH``;
   with ``--profile`` a torch profile of the span component's inference (runtime calls:
   kernel launches, copies, synchronisations on a GPU);
4. ``sciner pft`` tokens/s (whole run and steady state) for ``mlm_random`` and
   ``mlm_cand+ecb`` (SciERC's gold entities as the candidates);
5. seconds per ``nlp.update`` with ``mixed_precision`` false vs true, for each encoder,
   and a torch profile of both (GPU only: autocast is CUDA-only in thinc);
6. peak GPU memory of the in-process steps;
7. ``resume``: ``sciner train`` cut off half-way and resumed, against an uninterrupted run
   (benchmarks/gpu_check_resume.py): the largest weight difference at the end.

Writes ``gpu_check.json`` and ``gpu_check.md`` to ``--out``. Random-weight encoders give
meaningless accuracy but real speed; say which card and which encoder gave each number.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Optional
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_check_parts import (  # noqa: E402
    markdown_report, pft_corpus, stage_breakdown, sync, train_speed, write_corpus,
)
from gpu_check_resume import step_resume  # noqa: E402


def run(cmd, log: Path, env=None) -> float:
    """Run a command (output to ``log``); return its wall seconds; raise with the log's tail."""
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd[:4]))} ... exited {proc.returncode}: {log.read_text()[-1500:]}")
    return time.perf_counter() - start


def step_train(args, corpus: Path, work: Path) -> dict:
    out = work / "train"
    jsonl = work / "train.jsonl"
    cmd = [
        sys.executable, "-m", "spacy", "train", str(config_path(args.config)), "--output", str(out),
        "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
        "--components.transformer.model.name", args.encoder, "--training.max_steps", str(args.updates),
        "--training.max_epochs", "0", "--training.eval_frequency", str(max(1, args.updates // 2)),
        "--training.optimizer.learn_rate.total_steps", str(args.updates),
        "--training.optimizer.learn_rate.warmup_steps", str(max(1, args.updates // 10)),
        "--training.logger.path", str(jsonl), "--training.logger.progress_bar", "false", "--gpu-id", str(args.gpu_id),
    ]
    cmd += padded_override(config_path(args.config), args.max_padded_wordpieces)
    seconds = run(cmd, work / "train.log")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    first, last = rows[0], rows[-1]
    # Between the two evaluations: updates/s with one dev evaluation included.
    rate = (last["step"] - first["step"]) / max(last["seconds"] - first["seconds"], 1e-9)
    return {"seconds": seconds, "updates": last["step"], "updates_per_s": rate, "dev_score": last["score"]}


def padded_override(config: Path, value: Optional[int]) -> list:
    """`spacy train` override of the encoder's max_padded_wordpieces where the config's
    transformer has the setting (spacy-sciner.TransformerModel.v2)."""
    from spacy.util import load_config

    model = load_config(config, interpolate=False).get("components", {}).get("transformer", {}).get("model", {})
    if value is None or "max_padded_wordpieces" not in model:
        return []
    return ["--components.transformer.model.max_padded_wordpieces", str(value)]


def config_path(name: str) -> Path:
    """``configs/<name>.cfg``, or ``name`` itself if it is a file."""
    path = Path(name) if Path(name).is_file() else ROOT / "configs" / f"{name}.cfg"
    if not path.is_file():
        raise SystemExit(f"gpu_check: no config {name!r} (looked for {path})")
    return path


def step_calibrate_evaluate(args, corpus: Path, work: Path) -> dict:
    model = work / "calibrated"
    cal = [sys.executable, "-m", "spacy_sciner", "calibrate", str(work / "train" / "model-last"),
           str(corpus / "dev.spacy"), str(model), "--gpu-id", str(args.gpu_id)]
    result = {"calibrate_seconds": run(cal, work / "calibrate.log")}
    ev = [sys.executable, "-m", "spacy", "evaluate", str(model), str(corpus / "test.spacy"),
          "--output", str(work / "metrics.json"), "--gpu-id", str(args.gpu_id)]
    result["evaluate_seconds"] = run(ev, work / "evaluate.log")
    metrics = json.loads((work / "metrics.json").read_text())
    result.update({k: metrics.get(k) for k in ("spans_sc_f", "ents_f", "speed")})
    return result


def pipe_speed(model: str, texts, batch_sizes, rounds: int, gpu_id: int, max_batch_items: Optional[int] = None,
               profile: bool = False, stages_every_batch: bool = False) -> dict:
    """words/s of nlp.pipe, bare transformer vs the whole pipeline, interleaved rounds;
    the transformer's sub-batches of at most `max_batch_items` padded tokens (None: the
    pipeline's own setting). The stage breakdown at the largest batch size under "stages";
    with `stages_every_batch` also at each smaller one, under "stages_batch_<size>"."""
    import spacy

    import spacy_sciner

    nlp = spacy.load(model)
    transformer = nlp.get_pipe("transformer")
    if max_batch_items:
        transformer.cfg["max_batch_items"] = max_batch_items
    words = sum(len(doc) for doc in nlp.tokenizer.pipe(texts))
    variants = {"transformer": ["transformer"], "pipeline": list(nlp.pipe_names)}
    code = Path(spacy_sciner.__file__).resolve().parent.parent
    result = {"words": words, "sentences": len(texts), "code": "this checkout" if code == ROOT else code.name,
              "max_batch_items": transformer.cfg["max_batch_items"]}
    for batch_size in batch_sizes:
        # Warm-up over every batch: each padded length is a new shape (kernel choice,
        # allocator pools); a first pass pays for them, whichever variant it is.
        for enable in variants.values():
            with nlp.select_pipes(enable=enable):
                list(nlp.pipe(texts, batch_size=batch_size))
        times = {name: [] for name in variants}
        for r in range(rounds):
            for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
                with nlp.select_pipes(enable=variants[name]):
                    sync(gpu_id)
                    start = time.perf_counter()
                    for _ in nlp.pipe(texts, batch_size=batch_size):
                        pass
                    sync(gpu_id)
                    times[name].append(time.perf_counter() - start)
        bare, full = (words / statistics.median(times[n]) for n in variants)
        result[f"batch_{batch_size}"] = {"transformer_wps": bare, "pipeline_wps": full, "ratio": full / bare}
    result["stages"] = stage_breakdown(model, texts, max(batch_sizes), gpu_id, rounds=rounds, profile=profile)
    for batch_size in sorted(set(batch_sizes))[:-1] if stages_every_batch else []:
        result[f"stages_batch_{batch_size}"] = stage_breakdown(model, texts, batch_size, gpu_id, rounds=rounds)
    return result


def step_speed(args, texts, model: Path, work: Path) -> dict:
    result = {"current": pipe_speed(str(model), texts, args.batch_sizes, args.rounds, args.gpu_id, args.max_batch_items,
                                    profile=args.profile, stages_every_batch=args.stages_every_batch)}
    if args.old_code:
        paths = [str(args.old_code.resolve()), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        out = work / "old_speed.json"
        cmd = [sys.executable, __file__, "--speed-only", str(model), "--gpu-id", str(args.gpu_id), "--out", str(out),
               "--rounds", str(args.rounds), "--batch-sizes", *map(str, args.batch_sizes), "--data", str(args.data),
               "--sentences", str(args.sentences)] + (["--max-batch-items", str(args.max_batch_items)] if args.max_batch_items else [])
        cmd += ["--stages-every-batch"] if args.stages_every_batch else []
        run(cmd, work / "old_speed.log", env=env)
        result["old_code"] = json.loads(out.read_text())
    return result


def step_pft(args, sentences, work: Path) -> dict:
    corpus = work / "pft.jsonl"
    pft_corpus(sentences, corpus)
    result = {}
    for objective in ("mlm_random", "mlm_cand+ecb"):
        out = work / f"pft_{objective.replace('+', '_')}"
        cmd = [sys.executable, "-m", "spacy_sciner", "pft", str(corpus), str(out), "--encoder", args.encoder,
               "--objective", objective, "--max-steps", str(args.pft_steps), "--batch-size", str(args.pft_batch),
               "--eval-every", str(10 ** 6), "--save-every", str(10 ** 6), "--gpu-id", str(args.gpu_id), "--seed", "0"]
        seconds = run(cmd, work / f"pft_{objective.replace('+', '_')}.log")
        log = json.loads((out / "pft_log.json").read_text())
        result[objective] = {"seconds": seconds, "tokens_per_s": log.get("tokens_per_s"),
                             "tokens_per_s_steady": log.get("tokens_per_s_steady"),
                             "steady_from_step": log.get("steady_from_step"), "steps": log.get("steps")}
    steady = [result[o]["tokens_per_s_steady"] for o in ("mlm_random", "mlm_cand+ecb")]
    if all(steady):
        result["cand_ecb_overhead"] = steady[0] / steady[1] - 1.0
    return result


def step_mixed_precision(args, train_docs_path: Path) -> dict:
    encoders = {"minilm": args.encoder, **({"bert-base": args.big_encoder} if args.big_encoder else {})}
    result = {}
    for size, encoder in encoders.items():
        for mixed in (False, True):
            result[f"{size}_{'mixed' if mixed else 'fp32'}"] = train_speed(
                config_path(args.config), encoder, train_docs_path, args.gpu_id, mixed,
                updates=args.mp_updates, profile=args.profile,
            )
        result[f"{size}_mixed_vs_fp32"] = result[f"{size}_mixed"]["s_per_update"] / result[f"{size}_fp32"]["s_per_update"]
    return result


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu-id", type=int, default=-1)
    p.add_argument("--encoder", default="sciner-minilm", help="Encoder for training, PFT and speed (name or folder)")
    p.add_argument("--config", default="sciner_spancat",
                   help="configs/<name>.cfg to train and time (a transformer + sciner_spancat config)")
    p.add_argument("--big-encoder", default=None, help="A second, larger encoder for the mixed-precision timing")
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scierc")
    p.add_argument("--out", type=Path, required=True, help="Results folder (or JSON file with --speed-only)")
    p.add_argument("--work", type=Path, default=None, help="Scratch folder (models, corpora, logs); default OUT/work")
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--sentences", type=int, default=2000, help="Sentences for the inference speed")
    p.add_argument("--batch-sizes", type=int, nargs=2, default=[64, 256])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--stages-every-batch", action="store_true",
                   help="The stage breakdown at each --batch-sizes value (default: the largest only)")
    p.add_argument("--max-batch-items", type=int, default=None,
                   help="The transformer's max_batch_items for the nlp.pipe timing (default: 4096 on a GPU, as in "
                        "the H100/H200 rows; on the CPU the pipeline's own, the configs' 256)")
    p.add_argument("--max-padded-wordpieces", type=int, default=None,
                   help="Training override of the encoder's max_padded_wordpieces (TransformerModel.v2 configs; "
                        "default: 0 on a GPU, one call per batch as in the H100/H200 rows; the config's on the CPU)")
    p.add_argument("--pft-steps", type=int, default=300)
    p.add_argument("--pft-batch", type=int, default=16)
    p.add_argument("--mp-updates", type=int, default=40)
    p.add_argument("--profile", action="store_true",
                   help="torch profiles: the span component's inference; on a GPU also the mixed-precision updates")
    p.add_argument("--old-code", type=Path, default=None, help="A folder holding an older spacy_sciner package")
    p.add_argument("--skip", nargs="*", default=[], help="Steps to skip: train resume calibrate_evaluate speed pft mixed_precision")
    p.add_argument("--speed-only", default=None, help="Only measure nlp.pipe speed of this pipeline (JSON to --out)")
    p.add_argument("--model", type=Path, default=None,
                   help="Time this trained pipeline instead of the one the check trains (with --skip train ...)")
    p.add_argument("--smoke", action="store_true", help="Small sizes, for the CPU and CI")
    p.add_argument("--label", default="", help="Free text stored in the report (e.g. the commit measured)")
    args = p.parse_args(argv)
    if args.gpu_id >= 0:  # one encoder call per batch and large sub-batches: what keeps a GPU busy
        args.max_padded_wordpieces = 0 if args.max_padded_wordpieces is None else args.max_padded_wordpieces
        args.max_batch_items = args.max_batch_items or 4096
    if args.smoke:
        args.updates, args.sentences, args.batch_sizes, args.rounds = 6, 60, [8, 32], 1
        args.pft_steps, args.pft_batch, args.mp_updates = 12, 4, 4
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    from spacy_sciner.corpora.scierc import read_scierc

    if args.gpu_id >= 0:
        import spacy
        from thinc.api import set_gpu_allocator

        set_gpu_allocator("pytorch")  # cupy allocates through torch: one pool, one peak
        spacy.require_gpu(args.gpu_id)
    if args.speed_only:
        texts = write_corpus(read_scierc, args.data, None, args.sentences)[1]
        model = settings_known_here(args.speed_only, Path(args.out).parent / "old_code_model")
        result = pipe_speed(model, texts, args.batch_sizes, args.rounds, args.gpu_id, args.max_batch_items,
                            stages_every_batch=args.stages_every_batch)
        args.out.write_text(json.dumps(result, indent=2))
        return result
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    corpus, texts, sentences = write_corpus(read_scierc, args.data, work / "corpus", args.sentences, smoke=args.smoke)
    report = {"label": args.label, "machine": machine(args.gpu_id), "args": {k: str(v) for k, v in vars(args).items()}, "errors": {}}
    steps = [
        ("train", lambda: step_train(args, corpus, work)),
        ("resume", lambda: step_resume(args, corpus, work, config_path(args.config))),
        ("calibrate_evaluate", lambda: step_calibrate_evaluate(args, corpus, work)),
        ("speed", lambda: step_speed(args, texts, args.model or work / "calibrated", work)),
        ("pft", lambda: step_pft(args, sentences, work)),
        ("mixed_precision", lambda: step_mixed_precision(args, corpus / "train.spacy")),
    ]
    for name, step in steps:
        if name in args.skip or (name == "mixed_precision" and args.gpu_id < 0):
            report.setdefault("skipped", {})[name] = "autocast is CUDA-only" if name not in args.skip else "--skip"
        else:
            run_step(report, name, step, args.gpu_id)
        # After every step: a run stopped at a time limit still leaves what it measured.
        (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2))
        (args.out / "gpu_check.md").write_text(markdown_report(report))
    print((args.out / "gpu_check.md").read_text())
    return report


def settings_known_here(model: str, copy_to: Path) -> str:
    """``model``, or a copy of it without the sciner_spancat settings that this code's
    factory does not take (an older checkout timing a pipeline trained by newer code;
    the settings it drops are training options, not inference ones)."""
    import shutil

    import spacy
    from spacy.util import load_config

    spacy.blank("en")  # loads the entry-point factories
    known = set(spacy.Language.get_factory_meta("sciner_spancat").default_config)
    config = load_config(Path(model) / "config.cfg", interpolate=False)
    block = config["components"]["sciner_spancat"]
    unknown = [key for key in block if key != "factory" and key not in known]
    if not unknown:
        return model
    shutil.rmtree(copy_to, ignore_errors=True)
    shutil.copytree(model, copy_to)
    for key in unknown:
        del block[key]
    config.to_disk(copy_to / "config.cfg")
    print(f"[gpu_check] sciner_spancat settings unknown to this code, dropped: {unknown}", flush=True)
    return str(copy_to)


def run_step(report: dict, name: str, step, gpu_id: int) -> None:
    """Run one step into ``report[name]``; a failure goes to ``report["errors"]``."""
    start = time.perf_counter()
    reset_peak_memory(gpu_id)
    try:
        report[name] = step()
    except Exception as err:  # recorded: the other steps still run
        report["errors"][name] = f"{type(err).__name__}: {err}"[-3000:]
    print(f"[gpu_check] {name}: {time.perf_counter() - start:.1f} s"
          f"{' FAILED: ' + report['errors'][name][:300] if name in report['errors'] else ''}", flush=True)
    if name in ("speed", "mixed_precision") and gpu_id >= 0:  # in this process
        report.setdefault("peak_gpu_memory_mib", {})[name] = peak_memory(gpu_id)


def machine(gpu_id: int) -> dict:
    info = {"python": platform.python_version(), "cpus": os.cpu_count(), "load_avg_1min": os.getloadavg()[0]}
    import torch

    info["torch"] = torch.__version__
    if gpu_id >= 0:
        info["gpu"] = torch.cuda.get_device_name(gpu_id)
    return info


def reset_peak_memory(gpu_id: int) -> None:
    if gpu_id >= 0:
        import torch

        torch.cuda.reset_peak_memory_stats(gpu_id)


def peak_memory(gpu_id: int) -> float:
    """MiB: cupy allocates through torch (``set_gpu_allocator``), so this counts both."""
    import torch

    return torch.cuda.max_memory_allocated(gpu_id) / 2**20


if __name__ == "__main__":
    main()
