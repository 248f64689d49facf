"""Weak-pretraining configs derived from any training config, and the CNN side's head swap.

``weak_config`` turns a gold training config (``configs/sciner_spancat.cfg``,
``configs/sciner_spancat_cnn.cfg``, ...) into its weak-pretraining twin: both corpora read the
weak DocBin through ``spacy-sciner.WeakBalancedCorpus.v1`` (balanced type sampling for
training, the fixed held-out 10% of the WEAK data for checkpoint selection), and training runs
for a number of steps rather than epochs. Negatives: "plain" (default) draws them from any span
that is not a weak span, so sub- and super-spans of a weak span teach boundaries; "avoid"
(``negatives_avoid``) only from spans overlapping no weak span, the partial-annotation reading.
Measured (benchmarks/results/weak_cnn.md, NCBI-disease, CNN): "avoid" left the model without
boundary negatives, F 23.2 on the held-out weak data and 16.2 zero-shot on test, against 88.7
and 23.8 for "plain", so "plain" is the default. Everything
else (model, optimizer, batcher) stays the base config's, so the weak model is the one that
is fine-tuned afterwards. ``configs/sciner_spancat_weak.cfg`` is this function's output for
``configs/sciner_spancat.cfg`` (a test checks it).

Head swap: a transformer is exported with ``sciner export-encoder``; a CNN tok2vec with
``sciner export-tok2vec`` into the weights file that ``--paths.init_tok2vec`` loads (the
format ``spacy pretrain`` writes), so the gold model starts from it with a fresh head.
"""
import copy
from pathlib import Path

import typer
from thinc.api import Config

from ..cli import sciner_cli
from ..cli_util import fail
from ..outputs import check_output_path

WEAK_READER = "spacy-sciner.WeakBalancedCorpus.v1"
SPAN_FACTORY = "sciner_spancat"


def weak_config(base: Config, *, granularity: str = "fine", max_steps: int = 2000, negatives: str = "plain") -> Config:
    """The weak-pretraining twin of a training config (loaded with ``interpolate=False``).

    base (Config): A training config with ``sciner_spancat`` components.
    granularity (str): "fine" or "coarse" (``[weak] granularity``).
    max_steps (int): Updates (the weak reader samples endlessly).
    negatives (str): "plain" (any non-weak span) or "avoid" (spans overlapping no weak span).
    RETURNS (Config): A new config; ``base`` is unchanged.
    """
    if granularity not in ("fine", "coarse"):
        raise ValueError(f"granularity must be 'fine' or 'coarse', not '{granularity}'")
    if negatives not in ("plain", "avoid"):
        raise ValueError(f"negatives must be 'plain' or 'avoid', not '{negatives}'")
    spancats = [name for name, block in base.get("components", {}).items() if block.get("factory") == SPAN_FACTORY]
    if not spancats:
        raise ValueError(f"the config has no {SPAN_FACTORY} component to pretrain on weak spans")
    cfg = Config(copy.deepcopy(dict(base)))
    paths = {key: value for key, value in cfg["paths"].items() if key not in ("train", "dev")}
    cfg["paths"] = {"weak": None, **paths}
    cfg["weak"] = {"granularity": granularity, "corpus_seed": 0}
    for name in spancats:
        key = cfg["components"][name].get("spans_key", "sc")
        cfg["components"][name]["negatives_avoid"] = [key] if negatives == "avoid" else None
    common = {"@readers": WEAK_READER, "path": "${paths.weak}"}
    shared = {"granularity": "${weak.granularity}", "corpus_seed": "${weak.corpus_seed}"}
    key = cfg["components"][spancats[0]].get("spans_key", "sc")
    cfg["corpora"]["train"] = {**common, "split": "train", "output_key": key, "seed": "${system.seed}",
                               "alpha": 0.7, **shared, "n_samples": 0}
    cfg["corpora"]["dev"] = {**common, "split": "heldout", "output_key": key, **shared}
    cfg["training"]["max_epochs"] = -1
    cfg["training"]["max_steps"] = max_steps
    schedule = cfg["training"]["optimizer"].get("learn_rate")
    if isinstance(schedule, dict) and "total_steps" in schedule:
        schedule["total_steps"] = "${training.max_steps}"
    return cfg


@sciner_cli.command("weak-config")
def weak_config_cli(
    base: Path = typer.Argument(..., help="A training config with a sciner_spancat component"),
    output: Path = typer.Argument(..., help="The weak-pretraining config to write"),
    granularity: str = typer.Option("fine", "--granularity", help="fine or coarse weak types"),
    max_steps: int = typer.Option(2000, "--max-steps", help="Weak pretraining updates"),
    negatives: str = typer.Option("plain", "--negatives", help="plain: any non-weak span; avoid: spans overlapping no weak span"),
) -> None:
    """Write the weak-pretraining twin of a training config (train it with --paths.weak WEAK.spacy)."""
    from spacy.util import load_config

    if not base.is_file():
        fail(f"{base}: not found")
    try:
        check_output_path(output)
        cfg = weak_config(load_config(base, interpolate=False), granularity=granularity, max_steps=max_steps,
                         negatives=negatives)
    except ValueError as err:
        fail(f"{base}: {err}")
    cfg.to_disk(output, interpolate=False)
    typer.echo(f"weak-pretraining config: {output} (spacy train {output} --paths.weak WEAK.spacy)")


@sciner_cli.command("export-tok2vec")
def export_tok2vec_cli(
    model_dir: Path = typer.Argument(..., help="A trained pipeline with a tok2vec component"),
    output: Path = typer.Argument(..., help="Weights file for --paths.init_tok2vec"),
    component: str = typer.Option("tok2vec", "--component", help="The tok2vec component to export"),
) -> None:
    """Write a pipeline's tok2vec weights as --paths.init_tok2vec loads them (spacy pretrain's format)."""
    import spacy

    if not (model_dir / "config.cfg").is_file():
        fail(f"{model_dir}: not a spaCy pipeline folder (no config.cfg)")
    nlp = spacy.load(model_dir)
    if component not in nlp.pipe_names:
        fail(f"{model_dir}: no component '{component}' (components: {', '.join(nlp.pipe_names)})")
    try:
        check_output_path(output)
    except ValueError as err:
        fail(str(err))
    tmp = output.with_name(f".{output.name}.tmp")
    tmp.write_bytes(nlp.get_pipe(component).model.to_bytes())
    tmp.replace(output)
    typer.echo(f"tok2vec weights of '{component}': {output} (train with --paths.init_tok2vec {output})")
