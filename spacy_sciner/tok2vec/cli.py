"""``sciner train-vectors``: floret vectors on unlabeled domain text, as a spaCy pipeline.

    python -m spacy_sciner train-vectors aux/a.txt aux/b.txt vectors/bio
    python -m spacy train configs/sciner_spancat_cnn.cfg --paths.vectors vectors/bio \\
        --components.tok2vec.model.embed.include_static_vectors true ...

``spacy project run vectors`` runs it on the data set's aux text (``scripts/aux.py``).
"""
from pathlib import Path
from typing import List

import typer

from ..cli import sciner_cli
from ..cli_util import fail
from ..outputs import writable_ancestor
from .vectors import FloretSettings, VectorsError, train_vectors


@sciner_cli.command("train-vectors")
def train_vectors_cli(
    paths: List[Path] = typer.Argument(..., help="Text files (one sentence or document per line), then the output folder"),
    dim: int = typer.Option(300, "--dim", help="Vector width"),
    epochs: int = typer.Option(5, "--epochs", help="Passes over the text"),
    min_count: int = typer.Option(5, "--min-count", help="Words seen fewer times get no word row (their subwords still count)"),
    minn: int = typer.Option(4, "--minn", help="Shortest character n-gram"),
    maxn: int = typer.Option(5, "--maxn", help="Longest character n-gram"),
    hash_count: int = typer.Option(2, "--hash-count", help="Rows per word and subword (1-4)"),
    bucket: int = typer.Option(50000, "--bucket", help="Rows of the vectors table"),
    model: str = typer.Option("cbow", "--model", help="cbow or skipgram"),
    threads: int = typer.Option(1, "--threads", help="floret threads; 1 = deterministic (same text, same vectors)"),
    lang: str = typer.Option("en", "--lang", help="Tokenizer language (use the pipeline's)"),
    limit: int = typer.Option(0, "--limit", help="First N non-empty lines only (0 = all)"),
) -> None:
    """Train floret vectors on text files and save them as a spaCy pipeline for --paths.vectors."""
    if len(paths) < 2:
        fail("give at least one text file and the output folder")
    *texts, output_dir = paths
    settings = FloretSettings(dim=dim, epochs=epochs, min_count=min_count, minn=minn, maxn=maxn,
                              hash_count=hash_count, bucket=bucket, model=model, threads=threads)
    try:
        settings.check()
        if output_dir.is_file():
            raise VectorsError(f"{output_dir}: is a file, expected an output folder")
        writable_ancestor(output_dir, f"cannot write {output_dir}")
        log = train_vectors([str(t) for t in texts], output_dir, settings, lang=lang, limit=limit)
    except (VectorsError, ValueError) as err:
        fail(str(err))
    read = log["read"]
    typer.echo(f"{log['lines']} lines, {log['tokens']} tokens ({read['empty_lines_skipped']} empty lines skipped, "
               f"{read['lines_with_invalid_utf8_replaced']} with invalid UTF-8 repaired)")
    typer.echo(f"floret: {log['floret_vocab']} words seen >= {min_count} times; table {log['table_shape'][0]} x "
               f"{log['table_shape'][1]}; {log['total_s']:.0f} s")
    typer.echo(f"vectors: {output_dir} (use --paths.vectors {output_dir} with "
               "--components.tok2vec.model.embed.include_static_vectors true)")
