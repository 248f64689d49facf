"""``sciner pft``: pre-fine-tune an encoder on a candidate corpus from the command line."""
from pathlib import Path
from typing import Optional

import typer

from ..cli import sciner_cli


@sciner_cli.command("pft")
def pft_cli(
    corpus: Path = typer.Argument(..., help="Candidate corpus: DocBin (.spacy) with doc.spans['candidates'] or JSONL"),
    output_dir: Path = typer.Argument(..., help="Output folder: final HF checkpoint, pft_log.json, checkpoints/"),
    encoder: str = typer.Option("sciner-minilm", "--encoder", "-e", help="Encoder alias, hub name or local folder"),
    objective: str = typer.Option("mlm_cand+ecb", "--objective", "-o", help="mlm_cand, ecb, mlm_random, mlm_span, sbo joined by '+'"),
    max_steps: int = typer.Option(1000, "--max-steps", help="Optimizer steps"),
    batch_size: int = typer.Option(16, "--batch-size", "-b", help="Sequences per micro-batch"),
    grad_accum: int = typer.Option(1, "--grad-accum", help="Micro-batches per optimizer step"),
    lr: float = typer.Option(5e-5, "--lr", help="Peak learning rate (AdamW)"),
    warmup_ratio: float = typer.Option(0.06, "--warmup-ratio", help="Share of steps with linear warm-up"),
    mask_ratio: float = typer.Option(0.15, "--mask-ratio", help="Prediction budget: share of pieces per sequence"),
    max_length: int = typer.Option(128, "--max-length", help="Window in word pieces; longer sentences are split at word boundaries"),
    eval_every: int = typer.Option(200, "--eval-every", help="Held-out loss every N steps"),
    save_every: int = typer.Option(200, "--save-every", help="Atomic checkpoint every N steps"),
    log_every: int = typer.Option(10, "--log-every", help="Log mean losses and tokens/s every N steps"),
    seed: int = typer.Option(0, "--seed", help="Seed of data order, masking and dropout"),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="CUDA device (mixed precision); -1 = CPU"),
    threads: int = typer.Option(0, "--threads", help="torch CPU threads (0 = torch default)"),
    workers: Optional[int] = typer.Option(None, "--workers", help="Masking worker processes (default: 2 with --gpu-id, 0 on CPU); results do not depend on it"),
    limit: Optional[int] = typer.Option(None, "--limit", help="Read only the first N sentences (smoke runs)"),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint in OUTPUT_DIR"),
) -> None:
    """Pre-fine-tune an encoder (Tri-Train PFT): masked candidates + boundary prediction."""
    from .data import PFTDataError
    from .heads import PFTModelError, head_report_lines
    from .stats import format_per_1k
    from .train import PFTConfig, PFTIOError, train_pft

    cfg = PFTConfig(
        corpus=str(corpus), output=str(output_dir), encoder=encoder, objective=objective,
        max_steps=max_steps, batch_size=batch_size, grad_accum=grad_accum, lr=lr,
        warmup_ratio=warmup_ratio, mask_ratio=mask_ratio, max_length=max_length,
        eval_every=eval_every, save_every=save_every, log_every=log_every, seed=seed, gpu_id=gpu_id,
        threads=threads, workers=workers, limit=limit, resume=resume,
    )
    try:
        log = train_pft(cfg)
    except (PFTDataError, PFTModelError, PFTIOError, ValueError) as err:
        typer.secho(f"pft: {err}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    for line in head_report_lines(log["head"]):
        typer.echo(line)
    stats = log["corpus"]
    typer.echo(
        f"corpus: {stats['sentences']} sentences -> {log['train_examples']} train / "
        f"{log['heldout_examples']} held-out windows; candidates kept {stats['candidates_kept']}"
        f"/{stats['candidates']} (no word piece: {stats['candidates_no_piece']}, cut by window: "
        f"{stats['candidates_cut_by_window']}); split sentences: {stats['split_sentences']}; "
        f"batches without targets: {log['batches_without_targets']}"
    )
    rates = format_per_1k(log.get("masked_per_1k_tokens", {}))
    typer.echo(f"masked pieces per 1,000 tokens: {rates} (budget {mask_ratio:.0%} of the content pieces)")
    last_eval = log["eval"][-1] if log["eval"] else None
    steady = log.get("tokens_per_s_steady")
    steady_text = (f"{steady:.0f} tokens/s after step {log['steady_from_step']} (steady state)"
                   if steady is not None else "steady state not reached (too few steps)")
    typer.echo(
        f"steps {log['steps']}, {log.get('tokens_per_s', 0):.0f} tokens/s whole run, {steady_text}, "
        f"{log.get('workers', 0)} masking workers"
        + (f", held-out loss {log['eval'][0]['loss']:.3f} -> {last_eval['loss']:.3f}" if last_eval else "")
    )
    typer.echo(f"checkpoint: {output_dir} (log: {output_dir / 'pft_log.json'})")
