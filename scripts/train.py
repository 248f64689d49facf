"""`spacy sciner train` (or `spacy pretrain`) with the project's settings, each passed only where the config has it.

    python scripts/train.py CONFIG OUTPUT --train T --dev D [--encoder E] [--vectors DIR]
        [--init-tok2vec FILE] [--seed S] [--max-epochs N] [--min-steps N] [--max-steps N] [--eval-frequency F]
        [--warmup-steps W] [--gpu-id G] [--small-train-words N] [--no-resume] [-- extra spacy train overrides]
    python scripts/train.py CONFIG OUTPUT --pretrain RAW_TEXT [--vectors DIR] [--max-epochs N]

project.yml's `train` step runs it so that one command trains every config of `configs/`
with `spacy sciner train` (spaCy's training loop and outputs, plus a checkpoint at each
evaluation: a killed step, run again, continues where it stopped; `--no-resume` starts over):
the encoder goes to `components.transformer.model.name` and the warm-up to the learning-rate
schedule only if the config has them (the CNN config has neither); `--vectors` (a folder from
`sciner train-vectors`) switches on the tok2vec's static vectors and `--init-tok2vec` loads
`spacy pretrain` weights, both refused with a clear message on a config without a `tok2vec`
component. Empty strings mean "not given", so project variables can default to "".
`--max-epochs` applies to epoch-budgeted configs (transformer), raised where it would make fewer
than `--min-steps` updates (a small training set), and their learning rate then decays
to 0 no earlier than their last update (total_steps raised to epochs x batches per epoch where
that is more than the config's); the CNN configs train until
dev F stops improving, as measured by benchmarks/convergence.py. `--max-steps` (> 0) caps
either kind, for a quick trial (the decay then ends at the cap where that is past the config's).
`configs/auto.cfg` (project.yml's default) names no file: it stands for the default hybrid,
or for the transformer-only config where the training set has fewer than `--small-train-words`
words (`resolve_auto`).
With `--pretrain RAW_TEXT` it runs `spacy pretrain` instead, with the same `--vectors`
(`--init-tok2vec` weights load only into the same tok2vec, static vectors included).
"""
import argparse
import subprocess
import sys
from pathlib import Path

from spacy.util import load_config


AUTO = {"large": "sciner_spancat_hybrid", "small": "sciner_spancat"}


def train_words(train: str):
    """Tokens in the training DocBin, or None where there is no such file (spacy train reports it)."""
    if not Path(train).is_file():
        return None
    import spacy
    from spacy.tokens import DocBin

    vocab = spacy.blank("xx").vocab
    return sum(len(doc) for doc in DocBin().from_disk(train).get_docs(vocab))


def resolve_auto(config: str, train: str, small_words: int) -> str:
    """The config that ``configs/auto.cfg`` stands for: the hybrid (transformer + character CNN,
    the highest dev F on full training sets: BioNLP13CG, SciERC, BioNLP11ID, 45k-82k words) or,
    for a training set under ``small_words`` words, ``sciner_spancat`` on the transformer alone:
    the hybrid's CNN, trained from scratch, needs more labeled text. Measured: CrossNER AI
    (3,782 words, 2,000 updates, seed 0) calibrated dev F 53.5 vs 59.1, test 52.6 vs 60.2; the
    few-shot benchmark, 10 to 500 sentences (up to 13.6k words), the hybrid lower on test and
    dev in every biomedical cell (docs/recipes.md, "Small training sets"). Any other config is kept."""
    path = Path(config)
    if path.stem != "auto" or path.is_file():
        return config
    words = train_words(train)
    size = "small" if words is not None and words < small_words else "large"
    chosen = path.with_name(AUTO[size] + ".cfg")
    print(f"{config}: {chosen} ({train}: {words if words is not None else 'unknown'} words, "
          f"{'fewer' if size == 'small' else 'not fewer'} than --small-train-words {small_words})", flush=True)
    return str(chosen)


def pretrain_overrides(config, args) -> list:
    """The overrides of `spacy pretrain` for ``config``: raw text, epochs, seed, vectors."""
    if "pretraining" not in config or not config["pretraining"]:
        sys.exit(f"{args.config} has no [pretraining] block (configs/sciner_spancat_cnn.cfg has one)")
    if not Path(args.pretrain).is_file():
        sys.exit(f"--pretrain {args.pretrain}: text file not found (the aux-text step writes it)")
    return ["--paths.raw_text", args.pretrain, "--pretraining.max_epochs", str(args.max_epochs),
            "--system.seed", str(args.seed), *vector_overrides(config, args)]


def vector_overrides(config, args) -> list:
    """Static vectors into the tok2vec's MultiHashEmbed, or [] without ``--vectors``."""
    if not args.vectors:
        return []
    embed = config.get("components", {}).get("tok2vec", {}).get("model", {}).get("embed", {})
    if "include_static_vectors" not in embed:
        sys.exit(f"--vectors {args.vectors}: {args.config} has no tok2vec with include_static_vectors "
                 f"(static vectors go into a tok2vec component: configs/sciner_spancat_cnn.cfg)")
    if not (Path(args.vectors) / "vocab" / "vectors").exists():
        sys.exit(f"--vectors {args.vectors}: not a vectors pipeline folder (make one with `sciner train-vectors`)")
    return ["--paths.vectors", args.vectors, "--components.tok2vec.model.embed.include_static_vectors", "true"]


def budget_overrides(config, args) -> list:
    """How long to train. An epoch-budgeted config (the transformer configs: max_epochs > 0)
    takes ``--max-epochs``. A config that trains until dev F stops improving (the CNN
    configs: max_epochs = 0, patience and max_steps in its [training] block, the recipe
    benchmarks/convergence.py measured) keeps its own stopping rule: an epoch count would cut
    it short. ``--max-steps`` (> 0) caps either kind (a quick trial run)."""
    training = config["training"]
    if training.get("max_epochs", 0) > 0:
        per_epoch = updates_per_epoch(config, args.train)
        epochs = epochs_for(args, per_epoch)
        total = epochs * per_epoch if per_epoch else None
        out = ["--training.max_epochs", str(epochs)]
        cap = getattr(args, "max_steps", 0)
        if cap > 0 and (total is None or total > cap):
            out += ["--training.max_steps", str(cap)]
            total = cap
        if per_epoch:  # benchmarks/project_run.py records this count (the line's end)
            capped = f" ({epochs * per_epoch}) capped by --max-steps" if total != epochs * per_epoch else ""
            print(f"{args.config}: {epochs} epochs x {per_epoch} batches{capped} = {total} updates", flush=True)
        elif cap > 0:
            print(f"{args.config}: {epochs} epochs, capped at --max-steps {cap}", flush=True)
        return out + decay_overrides(config, epochs, per_epoch, total)
    budget = f"patience {training.get('patience')} steps, max_steps {training.get('max_steps')}"
    if getattr(args, "max_steps", 0) > 0:
        print(f"{args.config}: trains by early stopping ({budget}); capped at --max-steps {args.max_steps}", flush=True)
        return ["--training.max_steps", str(args.max_steps)]
    print(f"{args.config}: trains by early stopping ({budget}); --max-epochs {args.max_epochs} not used "
          f"(--max-steps caps it)", flush=True)
    return []


def epochs_for(args, per_epoch) -> int:
    """``--max-epochs``, raised where that many epochs make fewer than ``--min-steps`` updates.
    A small training set (CrossNER AI: 100 sentences, 8 batches per epoch) would otherwise
    stop after ~120 updates with the learning rate still near its peak: there 15 epochs gave
    calibrated dev span F 41.7 (test 43.0); the same recipe annealed to 0 over 1,000 or 2,000
    updates (benchmarks/convergence.py) reached best dev F 53.6 and 55.4 (test 52.1 and 52.3),
    so the project's default is 2,000 (docs/recipes.md, "Small training sets")."""
    min_steps = getattr(args, "min_steps", 0)
    if not (per_epoch and min_steps and per_epoch * args.max_epochs < min_steps):
        return args.max_epochs
    epochs = -(-min_steps // per_epoch)  # ceil
    print(f"{args.config}: {args.max_epochs} epochs x {per_epoch} batches are fewer than --min-steps "
          f"{min_steps}: training {epochs} epochs ({epochs * per_epoch} updates)", flush=True)
    return epochs


def decay_overrides(config, epochs: int, per_epoch, total) -> list:
    """A warm-up + linear-decay learning rate must not reach 0 before the epoch budget ends:
    its ``total_steps`` becomes ``total``, the number of updates ``epochs`` epochs (``epochs_for``)
    of the training set make (batches of the config's batcher over its train reader; fewer
    under ``--max-steps``) where that is more than the config's own (1,000). On a set of BioNLP13CG's size (173 updates per epoch) 15 epochs
    are 2,595 updates, and the rate would otherwise sit at 0 for the last 60% of them. Shorter
    runs keep the config's 1,000, so the rate stays high to their end: on the demo (150
    updates) that was 2.1 points of calibrated dev F better than decaying to 0 at 150."""
    schedule = config["training"]["optimizer"].get("learn_rate")
    if not (isinstance(schedule, dict) and schedule.get("@schedules") == "warmup_linear.v1"):
        return []
    if not total or total <= schedule.get("total_steps", 0):
        return []
    budget = f"{epochs} epochs x {per_epoch} batches" if total == epochs * per_epoch else "--max-steps"
    print(f"learning rate to 0 at update {total} ({budget}), not at the config's {schedule['total_steps']}", flush=True)
    return ["--training.optimizer.learn_rate.total_steps", str(total)]


def updates_per_epoch(config, train: str):
    """Batches in one epoch of `train` (a DocBin) with the config's train reader and batcher;
    None where that cannot be counted here (no such file: spacy train reports it; a reader
    other than spacy.Corpus.v1, e.g. an endless sampler; a batch-size schedule)."""
    from spacy import registry, util

    reader = dict(config.get("corpora", {}).get("train", {}))
    batcher = dict(config["training"]["batcher"])
    if (not Path(train).is_file() or reader.get("@readers") != "spacy.Corpus.v1"
            or not isinstance(batcher.get("size"), int)):
        return None
    reader["path"] = train
    resolved = registry.resolve({"reader": reader, "batcher": batcher})
    nlp = util.get_lang_class(config["nlp"]["lang"])()
    return sum(1 for _ in resolved["batcher"](resolved["reader"](nlp)))


def overrides_for(config, args) -> list:
    """The `--section.key value` overrides of `spacy train` that apply to ``config``."""
    components = config.get("components", {})
    if not (args.train and args.dev):
        sys.exit("--train and --dev are required (except with --pretrain)")
    out = ["--paths.train", args.train, "--paths.dev", args.dev, "--system.seed", str(args.seed),
           *budget_overrides(config, args), "--training.eval_frequency", str(args.eval_frequency)]
    if args.encoder and "transformer" in components:
        out += ["--components.transformer.model.name", args.encoder]
    schedule = config["training"]["optimizer"].get("learn_rate")
    if args.warmup_steps and isinstance(schedule, dict) and "warmup_steps" in schedule:
        out += ["--training.optimizer.learn_rate.warmup_steps", str(args.warmup_steps)]
    out += vector_overrides(config, args)
    if args.init_tok2vec:
        if "tok2vec" not in components:
            sys.exit(f"--init-tok2vec {args.init_tok2vec}: {args.config} has no tok2vec component to load it into")
        if not Path(args.init_tok2vec).is_file():
            sys.exit(f"--init-tok2vec {args.init_tok2vec}: file not found (spacy pretrain writes OUT/model<epoch>.bin)")
        out += ["--paths.init_tok2vec", args.init_tok2vec]
    return out


def main(argv) -> int:
    extra = []
    if "--" in argv:
        argv, extra = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("output")
    p.add_argument("--train", default="")
    p.add_argument("--dev", default="")
    p.add_argument("--pretrain", default="", help="raw text file: run spacy pretrain instead of spacy train")
    p.add_argument("--encoder", default="")
    p.add_argument("--vectors", default="")
    p.add_argument("--init-tok2vec", default="")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-epochs", type=int, default=15)
    p.add_argument("--min-steps", type=int, default=0,
                   help="epoch-budgeted configs: more epochs where --max-epochs make fewer updates than this (0: none)")
    p.add_argument("--max-steps", type=int, default=0,
                   help="at most N updates, any config (0: the epoch budget, or an early-stopping config's own)")
    p.add_argument("--eval-frequency", type=int, default=200)
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--gpu-id", type=int, default=-1)
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="continue an unfinished run in OUTPUT from its last checkpoint (default; --no-resume starts over)")
    p.add_argument("--small-train-words", type=int, default=25000,
                   help="CONFIG configs/auto.cfg: the transformer-only config below this many training words")
    args = p.parse_args(argv)
    args.config = resolve_auto(args.config, args.train, args.small_train_words)
    if not Path(args.config).is_file():
        sys.exit(f"config not found: {args.config}")
    from spacy_sciner.cli_util import gpu_problem

    problem = gpu_problem(args.gpu_id)  # before spacy train loads anything (its own error is a traceback)
    if problem:
        sys.exit(f"error: {problem} (in a workflow: --vars.gpu_id)")
    config = load_config(args.config, interpolate=False)
    if args.pretrain:
        cmd = [sys.executable, "-m", "spacy", "pretrain", args.config, args.output,
               *pretrain_overrides(config, args), "--gpu-id", str(args.gpu_id), *extra]
    else:
        # `spacy sciner train`: spaCy's loop with a checkpoint at each evaluation; --resume
        # continues a killed run (rerun the step) and trains afresh otherwise.
        cmd = [sys.executable, "-m", "spacy_sciner", "train", args.config, "--output", args.output,
               *overrides_for(config, args), "--gpu-id", str(args.gpu_id), *(["--resume"] if args.resume else []), *extra]
    print("$ " + " ".join(cmd[1:]), flush=True)
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
