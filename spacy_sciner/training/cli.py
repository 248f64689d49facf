"""``spacy sciner train``: ``spacy train`` that resumes a killed run where it stopped."""
import sys
from pathlib import Path
from typing import Optional

import typer
from spacy.cli._util import import_code, parse_config_overrides, setup_gpu, show_validation_error
from wasabi import msg

from ..cli import sciner_cli


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
    setup_gpu(use_gpu)
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
    run_id = {"config": config.to_str(), "inputs": checkpoint.input_fingerprints(config)}
    found = checkpoint.read(output_path) if resume else None
    if found is not None and found[1]["finished"]:
        msg.info(f"{output_path}: its run finished (update {found[1]['step']}); training afresh")
        found = None
    if found is not None:
        differ = (checkpoint.config_mismatches(found[1]["config"], config)
                  + checkpoint.input_mismatches(found[1]["inputs"], run_id["inputs"]))
        if differ:
            msg.fail(f"Cannot resume {found[0]}: {'; '.join(differ)}. Rerun with the settings and inputs of the "
                     f"checkpoint, or start over: without --resume, or after deleting {found[0]}.")
            return 1
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
