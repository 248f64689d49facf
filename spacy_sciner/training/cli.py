"""``spacy sciner train``: ``spacy train`` that resumes a killed run where it stopped."""
import sys
from pathlib import Path
from typing import Optional

import typer
from spacy.cli._util import import_code, parse_config_overrides, show_validation_error
from wasabi import msg

from ..cli import sciner_cli
from ..cli_util import setup_device


@sciner_cli.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., help="Config file (as for spacy train)", exists=True, dir_okay=False),
    output_path: Path = typer.Option(..., "--output", "-o", help="Output directory: model-best, model-last, checkpoint"),
    code_path: Optional[Path] = typer.Option(None, "--code", "-c", help="Python file with registered functions"),
    use_gpu: int = typer.Option(-1, "--gpu-id", "-g", help="GPU ID or -1 for CPU"),
    resume: bool = typer.Option(False, "--resume", help="Continue the unfinished run in OUTPUT from its last checkpoint (a fresh run where there is none)"),
) -> None:
    """Train a pipeline like ``spacy train`` (same config, overrides and outputs), writing a
    checkpoint at each evaluation. With ``--resume``, an unfinished run in OUTPUT continues
    from its last evaluation with the same weights, optimizer state, data position and random
    states (on the CPU it ends as an uninterrupted run would); where OUTPUT holds no
    checkpoint or a finished run, training starts afresh. A resume with other settings, or
    with an input file (corpus, encoder, vectors) changed on disk, is refused with the
    differences named. Extra ``--section.key value`` arguments override the config."""
    import_code(code_path)
    setup_device(use_gpu)  # one line, not spaCy's traceback, where the GPU cannot be used
    overrides = parse_config_overrides(ctx.args)
    sys.exit(run(config_path, output_path, overrides=overrides, use_gpu=use_gpu, resume=resume))


def run(config_path: Path, output_path: Path, *, overrides: dict, use_gpu: int = -1, resume: bool = False) -> int:
    """Train, or resume an unfinished run; RETURNS the exit code."""
    import spacy
    from spacy.training.initialize import init_nlp
    from spacy.util import load_config

    from . import checkpoint
    from .loop import train

    with show_validation_error(config_path):
        config = load_config(config_path, overrides=overrides, interpolate=False)
    problem = corpus_problem(config)
    if problem:
        return error(problem)
    run_id = {"config": config.to_str(), "inputs": checkpoint.input_fingerprints(config)}
    found = checkpoint.read(output_path) if resume else None
    if found is not None and found[1]["finished"]:
        msg.info(f"{output_path}: its run finished (update {found[1]['step']}); training afresh")
        found = None
    if found is not None:
        differ = (checkpoint.config_mismatches(found[1]["config"], config)
                  + checkpoint.input_mismatches(found[1]["inputs"], run_id["inputs"]))
        if differ:
            return error(f"cannot resume {found[0]}: {'; '.join(differ)}. Rerun with the settings and inputs of "
                         f"the checkpoint, or start over: without --resume, or after deleting {found[0]}")
    output_path.mkdir(parents=True, exist_ok=True)
    if found is not None:
        msg.divider("Loading the checkpoint")
        nlp = spacy.load(found[0] / checkpoint.MODEL)
        resume_from = found[1]
    else:
        msg.divider("Initializing pipeline")
        with show_validation_error(config_path, hint_fill=False):
            nlp = init_nlp(config, use_gpu=use_gpu)
        resume_from = None
    msg.divider("Training pipeline")
    train(nlp, output_path, run_id=run_id, use_gpu=use_gpu, resume_from=resume_from)
    return 0


def error(message: str) -> int:
    """Print ``error: message`` on stderr (the sciner commands' one-line errors); RETURNS 1."""
    typer.secho(f"error: {message}", fg="red", err=True)
    return 1


def corpus_problem(config) -> Optional[str]:
    """What is wrong with the training and dev corpora's paths (unset, missing), or None:
    checked before anything loads, where spaCy would stop with a traceback."""
    flat = config.interpolate()
    for role in ("train_corpus", "dev_corpus"):
        dotted = flat.get("training", {}).get(role, "")
        section, raw = flat, config
        for part in dotted.split("."):
            section = section.get(part, {}) if isinstance(section, dict) else {}
            raw = raw.get(part, {}) if isinstance(raw, dict) else {}
        if not isinstance(section, dict) or "path" not in section:
            continue  # a reader without a path (one that builds its data): its own checks apply
        path, source = section["path"], str(raw.get("path", ""))
        # "${paths.train}" -> --paths.train: the override the user passes
        flag = "--" + (source[2:-1] if source.startswith("${") and source.endswith("}") else f"{dotted}.path")
        if path in (None, ""):
            return f"{dotted}.path is not set: pass {flag} FILE"
        if not Path(path).exists():
            return f"{dotted}.path: {path} does not exist (pass {flag} FILE)"
    return None
