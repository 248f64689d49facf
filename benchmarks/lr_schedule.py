"""Where the learning rate of the project's `train` step reaches 0: the config's own
total_steps (1,000) or the last update of the epoch budget (epochs x batches per epoch).

scripts/train.py raises total_steps to the budget's last update where that is later (a
large set would otherwise train its last epochs at rate 0) and keeps the config's 1,000 on
shorter runs. This script measures that choice on one data set: the project's train step
(scripts/train.py, the same seed, epochs, dev evaluations and warm-up) with total_steps =
the config's and with total_steps = the budget's last update, each followed by the
project's calibrate (model-best and model-last on dev, the better kept) and by `spacy
evaluate` on test. The choice is made on the calibrated dev F; test only reports.

    python benchmarks/lr_schedule.py                       # the demo: benchmarks/results/lr_schedule.{json,md}
    python benchmarks/lr_schedule.py --dataset scierc --max-epochs 15 --eval-frequency 200
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import train as train_script  # noqa: E402  (updates_per_epoch)


def run(cmd: list, log: Path) -> None:
    """Run a command from the repository root; its output goes to `log`; exit on failure."""
    with log.open("a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        rc = subprocess.call(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    if rc:
        sys.exit(f"failed ({rc}): {' '.join(cmd[:4])} ... — see {log}")


def one_schedule(name: str, total_steps: int, args, corpus: Path) -> dict:
    """Train, calibrate and evaluate with the rate reaching 0 at `total_steps`."""
    out = args.work / name
    log = out / "log.txt"
    out.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    config = ROOT / "configs" / f"{args.config}.cfg"
    t0 = time.time()
    run([sys.executable, "scripts/train.py", str(config), str(out / "training"),
         "--train", str(corpus / "train.spacy"), "--dev", str(corpus / "dev.spacy"), "--encoder", args.encoder,
         "--seed", str(args.seed), "--max-epochs", str(args.max_epochs), "--eval-frequency", str(args.eval_frequency),
         "--warmup-steps", str(args.warmup_steps), "--gpu-id", str(args.gpu_id),
         "--", "--training.optimizer.learn_rate.total_steps", str(total_steps)], log)
    train_seconds = time.time() - t0
    run([sys.executable, "-m", "spacy_sciner", "calibrate", str(out / "training" / "model-best"),
         str(corpus / "dev.spacy"), str(out / "calibrated"), "--also", str(out / "training" / "model-last"),
         "--gpu-id", str(args.gpu_id)], log)
    run([sys.executable, "-m", "spacy", "evaluate", str(out / "calibrated"), str(corpus / "test.spacy"),
         "--output", str(out / "test.json"), "--gpu-id", str(args.gpu_id)], log)
    cal = json.loads((out / "calibrated" / "sciner_spancat" / "cfg").read_text())["calibration"]
    test = json.loads((out / "test.json").read_text())
    return {"total_steps": total_steps, "train_seconds": round(train_seconds, 1),
            "selected_checkpoint": Path(cal["selected_checkpoint"]).name, "dev_f": cal["dev_f"],
            **{f"test_{k}": test[f"spans_sc_{k}"] for k in ("p", "r", "f")}, "test_ents_f": test["ents_f"]}


def write_markdown(res: dict, path: Path) -> None:
    s = res["settings"]
    lines = ["# Learning-rate schedule of the project's train step", "",
             f"{s['dataset']}, configs/{s['config']}.cfg, encoder {s['encoder']}, seed {s['seed']}, {s['max_epochs']} epochs "
             f"({s['updates_per_epoch']} updates each), dev evaluation every {s['eval_frequency']} updates, warm-up "
             f"{s['warmup_steps']}; calibrated on dev (model-best and model-last, the better kept); "
             f"{s['threads'] if s['threads'] != 'default' else 'library-default'} torch threads, load average {s['load'][0]:.1f} -> {s['load'][1]:.1f}. "
             "Chosen on dev F; test only reports.", "",
             "| rate reaches 0 at | total_steps | checkpoint kept | calibrated dev F | test span P / R / F | test ents F | train min |",
             "|---|---:|---|---:|---|---:|---:|"]
    for name, r in res["schedules"].items():
        lines.append(f"| {name} | {r['total_steps']} | {r['selected_checkpoint']} | {100 * r['dev_f']:.1f} | "
                     f"{100 * r['test_p']:.1f} / {100 * r['test_r']:.1f} / **{100 * r['test_f']:.1f}** | "
                     f"{100 * r['test_ents_f']:.1f} | {r['train_seconds'] / 60:.1f} |")
    lines += ["", f"Better on dev: {res['better_on_dev']}."]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="demo")
    p.add_argument("--config", default="sciner_spancat_hybrid")
    p.add_argument("--encoder", default="sciner-minilm")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-epochs", type=int, default=15, help="project.yml's max_epochs")
    p.add_argument("--eval-frequency", type=int, default=50, help="project.yml's eval_frequency")
    p.add_argument("--warmup-steps", type=int, default=50, help="project.yml's warmup_steps")
    p.add_argument("--gpu-id", type=int, default=-1)
    p.add_argument("--threads", type=int, default=0, help="torch/BLAS threads (0: library default)")
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "lr_schedule")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "lr_schedule")
    args = p.parse_args(argv)
    if args.threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    args.work = args.work / args.dataset
    corpus = args.work / "corpus"
    if not (corpus / "test.spacy").exists():
        args.work.mkdir(parents=True, exist_ok=True)
        run([sys.executable, "scripts/convert_dataset.py", args.dataset, "../shared/data", str(corpus)],
            args.work.parent / f"{args.dataset}-convert.log")
    from spacy.util import load_config

    config = load_config(ROOT / "configs" / f"{args.config}.cfg", interpolate=False)
    own = config["training"]["optimizer"]["learn_rate"]["total_steps"]
    per_epoch = train_script.updates_per_epoch(config, str(corpus / "train.spacy"))
    load = [os.getloadavg()[0]]
    schedules = {"the config's total_steps": one_schedule("config", own, args, corpus),
                 "the budget's last update": one_schedule("budget", per_epoch * args.max_epochs, args, corpus)}
    load.append(os.getloadavg()[0])
    better = max(schedules, key=lambda k: schedules[k]["dev_f"])
    res = {"settings": {"dataset": args.dataset, "config": args.config, "encoder": args.encoder, "seed": args.seed,
                        "max_epochs": args.max_epochs, "updates_per_epoch": per_epoch, "eval_frequency": args.eval_frequency,
                        "warmup_steps": args.warmup_steps, "threads": args.threads or "default", "load": load,
                        "date": time.strftime("%Y-%m-%d")},
           "schedules": schedules, "better_on_dev": better}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    name = args.results.name if args.dataset == "demo" else f"{args.results.name}_{args.dataset}"
    json_path = args.results.with_name(name + ".json")
    json_path.write_text(json.dumps(res, indent=1) + "\n")
    write_markdown(res, args.results.with_name(name + ".md"))
    print(args.results.with_name(name + ".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
