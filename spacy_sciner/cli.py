"""Command line: ``spacy sciner <command>`` (via the ``spacy_cli`` entry point),
``python -m spacy_sciner <command>`` or the ``sciner`` console script.

Each seed system adds its sub-commands in its own module (``corpora/cli.py``,
``mining/cli.py``, ``pft/cli.py``, ``spancat/cli.py``; ``inspect_cli.py`` for
``render`` and ``debug-data``) by decorating functions with ``@sciner_cli.command``;
this module only assembles them, so that one broken module does not hide the others.
"""
import importlib

import typer
from spacy.cli import app as spacy_app

sciner_cli = typer.Typer(
    name="sciner",
    help="spacy-sciner: convert corpora, mine entity candidates, pre-fine-tune encoders, calibrate, inspect data and predictions.",
    no_args_is_help=True,
)



@sciner_cli.callback()
def _group() -> None:
    """spacy-sciner commands."""
    # A callback keeps `sciner` a command group even while it has one sub-command.


@sciner_cli.command("info")
def info_cli() -> None:
    """Print the package version and where the offline default encoder lives."""
    from . import __version__
    from .encoders import DEFAULT_ENCODER, resolve_encoder

    typer.echo(f"spacy-sciner {__version__}")
    typer.echo(f"default encoder '{DEFAULT_ENCODER}': {resolve_encoder(DEFAULT_ENCODER)}")


# Modules that register sub-commands on ``sciner_cli`` when imported.
COMMAND_MODULES = (
    "spacy_sciner.corpora.cli",
    "spacy_sciner.mining.cli",
    "spacy_sciner.pft.cli",
    "spacy_sciner.spancat.cli",
    "spacy_sciner.inspect_cli",
    "spacy_sciner.weak.cli",
    "spacy_sciner.weak.export",
    "spacy_sciner.weak.config",
    "spacy_sciner.tok2vec.cli",
    "spacy_sciner.training.cli",
)
for _module in COMMAND_MODULES:
    try:
        importlib.import_module(_module)
    except ModuleNotFoundError as err:
        # A seed system that is not built yet; anything else is a real error.
        if err.name != _module:
            raise

spacy_app.add_typer(sciner_cli, name="sciner")


def main() -> None:
    """Entry point of the ``sciner`` console script and ``python -m spacy_sciner``."""
    sciner_cli()
