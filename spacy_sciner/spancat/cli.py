"""``sciner calibrate``: choose the high-recall filter's threshold, the decision rule,
(with ``--also``) the checkpoint and (with ``--abbreviations``) ``sciner_abbreviations`` on dev
data."""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer

from ..cli import sciner_cli
from ..cli_util import check_input, check_output_dir, fail, save_pipeline, setup_device


@sciner_cli.command("calibrate")
def calibrate_cli(
    model_dir: Path = typer.Argument(..., help="Trained pipeline directory (e.g. training/model-best)"),
    dev_path: Path = typer.Argument(..., help="Dev DocBin (.spacy, or a directory of them) with gold spans"),
    output_dir: Path = typer.Argument(..., help="Where to save the calibrated pipeline (replaced if it holds one)"),
    also: List[Path] = typer.Option([], "--also", help="Another checkpoint to calibrate (e.g. training/model-last); the one with the best calibrated dev F is saved. Repeatable"),
    target_recall: float = typer.Option(0.99, "--target-recall", help="Fraction of reachable gold spans the filter keeps"),
    tune_threshold: bool = typer.Option(True, "--tune-threshold/--keep-threshold", help="Also choose the decision rule on dev: argmax, or a probability floor where it beats argmax"),
    tune_ents: bool = typer.Option(True, "--tune-ents/--ents-from-spans", help="With --tune-threshold: give doc.ents its own probability floor where that beats decoding doc.spans on dev doc.ents F"),
    component: Optional[str] = typer.Option(None, "--component", help="Component name (default: the only sciner_spancat)"),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU id, -1 for CPU"),
    batch_size: int = typer.Option(64, "--batch-size", help="Docs per batch"),
    abbreviations: str = typer.Option("off", "--abbreviations", help="Add sciner_abbreviations after the span categorizer: off, on, or auto (only if it raises the calibrated dev span F)"),
    gold_tokens: bool = typer.Option(False, "--gold-tokens", help="Read dev on its own tokens and sentences (spacy-sciner.GoldTokensCorpus.v1), for a pipeline trained that way"),
) -> None:
    """Calibrate a trained sciner_spancat on dev, print the report and save the pipeline.

    Dev docs are read like `spacy evaluate` reads them (spacy.Corpus), so the filter
    recall is measured on the same tokenization the pipeline will see; with --gold-tokens
    on the DocBin's own words (a pipeline trained with GoldTokensCorpus.v1). Arguments and
    the output directory are checked before the (long) calibration runs. With --also,
    every checkpoint is calibrated and the best on dev (calibrated micro F, ties: the
    first) is saved: `spacy train` does not score its last updates, model-last may be
    better than model-best. With --abbreviations auto, the saved pipeline gets
    sciner_abbreviations (defined short forms take their long form's label) only where
    that raises the calibrated pipeline's dev span F.
    """
    candidates = [model_dir, *also]
    for path in candidates:
        check_input(path)
    check_input(dev_path)
    check_output_dir(output_dir, "calibrated pipeline")
    if not 0.0 < target_recall <= 1.0:
        fail(f"--target-recall must be in (0, 1], got {target_recall}")
    if batch_size < 1:
        fail(f"--batch-size must be >= 1, got {batch_size}")
    from ..abbreviations import MODES

    if abbreviations not in MODES:
        fail(f"--abbreviations must be one of {', '.join(MODES)}, got '{abbreviations}'")
    setup_device(gpu_id)  # before loading anything: a bad --gpu-id fails at once
    best = None
    for path in candidates:
        nlp, report, name, examples = _calibrate(path, dev_path, component, target_recall, (tune_threshold, tune_ents),
                                                 batch_size, gold_tokens)
        if len(candidates) > 1:
            typer.echo(f"{path}: calibrated dev F {report.get('dev_f', float('nan')):.4f}")
        if best is None or report.get("dev_f", 0.0) > best[1].get("dev_f", 0.0):
            best = (nlp, report, path, name, examples)
    nlp, report, chosen, name, examples = best
    if len(candidates) > 1:
        report["selected_checkpoint"] = str(chosen)
        typer.echo(f"selected {chosen} (best calibrated dev F of {len(candidates)} checkpoints)")
    if abbreviations != "off":
        report["abbreviations"] = _choose_abbreviations(nlp, examples, name, abbreviations, batch_size)
    try:
        save_pipeline(nlp, output_dir)
    except OSError as err:
        fail(f"{output_dir}: cannot save the pipeline ({err.strerror or err})")
    typer.echo(json.dumps(report, indent=2))
    typer.echo(f"Saved calibrated pipeline to {output_dir}")


def _calibrate(model_dir: Path, dev_path: Path, component: Optional[str], target_recall: float,
               tune: Tuple[bool, bool], batch_size: int, gold_tokens: bool = False) -> Tuple[Any, Dict[str, Any], str, list]:
    """Load one checkpoint, calibrate its sciner_spancat on dev and print the report.
    ``tune``: (--tune-threshold, --tune-ents). Returns the pipeline, the report, the
    component's name and the dev examples."""
    tune_threshold, tune_ents = tune
    import spacy
    from spacy.training import Corpus

    from ..corpora.docbin import GoldTokensCorpus
    from .component import SciNERSpanCategorizer

    try:
        nlp = spacy.load(model_dir)
    except (OSError, ValueError) as err:
        fail(f"{model_dir}: cannot load the pipeline ({_first_line(err)})")
    names = [name for name, proc in nlp.pipeline if isinstance(proc, SciNERSpanCategorizer)]
    if component is not None:
        if component not in names:
            fail(f"'{component}' is not a sciner_spancat in {model_dir} (found: {names})")
        names = [component]
    if len(names) != 1:
        fail(f"Need exactly one sciner_spancat in {model_dir}, found {names}; use --component")
    pipe = nlp.get_pipe(names[0])
    try:
        examples = list((GoldTokensCorpus if gold_tokens else Corpus)(dev_path)(nlp))
    except (OSError, ValueError) as err:
        fail(f"{dev_path}: not a readable DocBin (.spacy) ({_first_line(err)})")
    if not examples:
        fail(f"{dev_path} holds no docs (expected a .spacy DocBin or a directory of them)")
    key = pipe.cfg["spans_key"]
    if not any(key in eg.reference.spans and len(eg.reference.spans[key]) for eg in examples):
        fail(f"{dev_path}: no gold spans in doc.spans[{key!r}] (the spans_key of '{names[0]}'): nothing to calibrate on")
    report = pipe.calibrate(
        examples, target_recall=target_recall, tune_threshold=tune_threshold, tune_ents=tune_ents, nlp=nlp,
        batch_size=batch_size,
    )
    report["dev_tokens"] = "gold" if gold_tokens else "spacy"  # which tokenization dev was read on
    typer.echo(
        f"filter threshold {report['filter_threshold']:.4g}: keeps {report['filter_recall']:.2%} of the "
        f"{report['n_gold_spans'] - report['n_gold_longer_than_max']} gold spans up to max_span_length "
        f"(target {target_recall:.2%}), {report['candidate_recall']:.2%} of all {report['n_gold_spans']}; "
        f"prunes {report['filtration_rate']:.2%} of {report['n_candidates']} candidate spans"
    )
    if tune_threshold:
        rule = "argmax" if report["threshold"] is None else f"probability floor {report['threshold']:.4g}"
        typer.echo(
            f"decision rule {rule}: dev P {report['dev_p']:.4f} R {report['dev_r']:.4f} F {report['dev_f']:.4f} "
            f"(argmax F {report['argmax_dev_f']:.4f}, best floor {report['floor_threshold']:.4g} F {report['floor_dev_f']:.4f})"
        )
    if "ents_dev_f" in report:
        way = "decode of doc.spans" if report["ents_threshold"] is None else f"own floor {report['ents_threshold']:.4g}"
        typer.echo(
            f"doc.ents {way}: dev P {report['ents_dev_p']:.4f} R {report['ents_dev_r']:.4f} F {report['ents_dev_f']:.4f} "
            f"(from doc.spans F {report['ents_dev_f_from_spans']:.4f}, best own floor F {report['ents_floor_dev_f']:.4f})"
        )
    return nlp, report, names[0], examples


def _choose_abbreviations(nlp, examples: list, name: str, mode: str, batch_size: int) -> Dict[str, Any]:
    """sciner_abbreviations after `name`, or not (abbreviations.choose_on_dev); prints why."""
    from ..abbreviations import choose_on_dev

    report = choose_on_dev(nlp, examples, after=name, mode=mode, batch_size=batch_size)
    if "note" in report:
        typer.echo(f"sciner_abbreviations: {report['note']}")
    else:
        typer.echo(
            f"sciner_abbreviations ({mode}): dev span F {report['dev_f_without']:.4f} without, "
            f"{report['dev_f_with']:.4f} with ({report['spans_added']} short forms added): "
            f"{'added' if report['added'] else 'not added'}"
        )
    return report


def _first_line(err: Exception) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0][:300]
