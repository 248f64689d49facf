"""``sciner export-encoder``: a trained pipeline's transformer as a Hugging Face checkpoint.

    python -m spacy_sciner export-encoder training/weak/model-best encoders/weak
    python -m spacy train configs/sciner_spancat.cfg --components.transformer.model.name encoders/weak ...
    spacy project run all . --vars.encoder encoders/weak

The folder holds the weights of the pipeline's (fine-tuned) transformer, its config and its
tokenizer files, written with ``save_pretrained``, so ``AutoModel.from_pretrained`` and
``AutoTokenizer.from_pretrained`` load it and a new pipeline starts from it with a fresh
``sciner_spancat`` head (the NER-BERT "head swap" after weak pretraining). A small
``sciner_export.json`` records where it came from.

Supported: a pipeline with a shared ``transformer`` component (spacy-transformers'
factory, with ``spacy-sciner.TransformerModel.v1`` or ``spacy-transformers.TransformerModel.v3``).
A transformer embedded inside another component (``spacy-transformers.Tok2VecTransformer``)
is not. The pipeline's config is checked before the pipeline is loaded.
"""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer

from ..cli import sciner_cli
from ..cli_util import fail, save_pipeline
from ..outputs import writable_ancestor

TRANSFORMER_FACTORY = "transformer"
SUPPORTED = (
    "supported: a pipeline with a shared 'transformer' component (spacy-transformers, "
    "architecture spacy-sciner.TransformerModel.v1/v2 or spacy-transformers.TransformerModel.v3)"
)
EXPORT_INFO = "sciner_export.json"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else type(err).__name__)[:300]


def _inline_transformers(config: Dict[str, Any]) -> List[str]:
    """Names of the components whose model holds an inline Tok2VecTransformer."""
    found = []

    def walk(node) -> bool:
        if isinstance(node, dict):
            arch = node.get("@architectures", "")
            if isinstance(arch, str) and "Tok2VecTransformer" in arch:
                return True
            return any(walk(value) for value in node.values())
        return False

    for name, block in config.get("components", {}).items():
        if isinstance(block, dict) and walk(block.get("model", {})):
            found.append(name)
    return found


def find_transformer_component(model_dir: Path, component: Optional[str] = None) -> str:
    """The name of the transformer component to export, read from ``config.cfg`` alone.

    model_dir (Path): A spaCy pipeline folder (``nlp.to_disk`` output).
    component (Optional[str]): The component to export; None: the only component made by
        spacy-transformers' ``transformer`` factory.
    RETURNS (str): The component name.
    RAISES (ValueError): One-line message when the folder is no pipeline or holds no
        supported transformer component.
    """
    from spacy.util import load_config

    if not model_dir.exists():
        raise ValueError(f"{model_dir}: not found")
    if not model_dir.is_dir():
        raise ValueError(f"{model_dir}: is a file, expected a spaCy pipeline folder")
    cfg_path = model_dir / "config.cfg"
    if not cfg_path.is_file():
        hint = [p.name for p in (model_dir / "model-best", model_dir / "model-last") if (p / "config.cfg").is_file()]
        extra = f" (did you mean {model_dir / hint[0]}?)" if hint else ""
        raise ValueError(f"{model_dir}: not a spaCy pipeline folder (no config.cfg){extra}")
    try:
        config = load_config(cfg_path, interpolate=False)
    except Exception as err:  # thinc raises several types for a broken config
        raise ValueError(f"{cfg_path}: cannot read the pipeline config ({_first_line(err)})")
    pipeline = list(config.get("nlp", {}).get("pipeline", []))
    components = config.get("components", {})
    factories = {name: components.get(name, {}).get("factory") for name in pipeline}
    transformers = [name for name in pipeline if factories[name] == TRANSFORMER_FACTORY]
    if component is not None:
        if component not in pipeline:
            raise ValueError(f"{model_dir}: no component '{component}' in the pipeline {pipeline}; {SUPPORTED}")
        if factories[component] != TRANSFORMER_FACTORY:
            raise ValueError(
                f"{model_dir}: component '{component}' is made by factory '{factories[component]}', "
                f"not 'transformer'; {SUPPORTED}"
            )
        return component
    if len(transformers) == 1:
        return transformers[0]
    if len(transformers) > 1:
        raise ValueError(f"{model_dir}: several transformer components {transformers}: choose one with --component")
    inline = _inline_transformers(config)
    if inline:
        raise ValueError(
            f"{model_dir}: component(s) {inline} embed an inline Tok2VecTransformer, which "
            f"export-encoder does not export; {SUPPORTED}"
        )
    raise ValueError(f"{model_dir}: no transformer component in the pipeline {pipeline}; {SUPPORTED}")


def load_encoder(model_dir: Path, component: str) -> Tuple[Any, Any, Dict[str, Any]]:
    """Load only the transformer component of a pipeline and return its HF objects.

    The component is built from its block of ``config.cfg`` and filled from its folder,
    so the other components' code is never imported (an export works even where a
    custom component of the pipeline is not installed).

    model_dir (Path): The pipeline folder.
    component (str): The transformer component (see ``find_transformer_component``).
    RETURNS (Tuple[Any, Any, Dict[str, Any]]): The Hugging Face model (the very module the
        pipeline runs, fine-tuned weights included), its tokenizer and provenance info.
    RAISES (ValueError): One-line message when loading fails or no HF model is inside.
    """
    import spacy
    from spacy.util import load_config

    if not (model_dir / component / "model").is_file():
        raise ValueError(f"{model_dir}: no weights of '{component}' (expected {model_dir / component / 'model'})")
    try:
        config = load_config(model_dir / "config.cfg", interpolate=True)
        block = dict(config["components"][component])
        factory = block.pop("factory")
        nlp = spacy.blank(config["nlp"]["lang"])
        pipe = nlp.add_pipe(factory, name=component, config=block)
        pipe.from_disk(model_dir / component, exclude=["vocab"])
    except Exception as err:  # spaCy, thinc, msgpack and torch raise many types
        raise ValueError(f"{model_dir}: cannot load the component '{component}' ({_first_line(err)})")
    model = pipe.model
    hf_model = getattr(model, "transformer", None)
    tokenizer = getattr(model, "tokenizer", None)
    if hf_model is None or tokenizer is None or not hasattr(hf_model, "save_pretrained"):
        raise ValueError(f"{model_dir}: component '{component}' holds no Hugging Face model and tokenizer; {SUPPORTED}")
    try:
        meta = json.loads((model_dir / "meta.json").read_text(encoding="utf8"))
    except (OSError, ValueError):
        meta = {}
    info = {
        "source_pipeline": str(model_dir.resolve()),
        "component": component,
        "source_encoder": model.attrs.get("name"),
        "pipeline_meta": {key: meta.get(key) for key in ("lang", "name", "version", "labels")},
        "model_class": type(hf_model).__name__,
    }
    return hf_model, tokenizer, info


class _Checkpoint:
    """A Hugging Face checkpoint with ``to_disk``, so that ``save_pipeline`` (temporary
    folder, then rename; nothing left behind on an error) writes it."""

    def __init__(self, hf_model, tokenizer, info: Dict[str, Any]):
        self.hf_model, self.tokenizer, self.info = hf_model, tokenizer, info

    def to_disk(self, path) -> None:
        from transformers import AutoConfig, AutoTokenizer

        path = Path(path)
        path.mkdir(parents=True)
        self.hf_model.save_pretrained(str(path), safe_serialization=True)
        self.tokenizer.save_pretrained(str(path))
        (path / EXPORT_INFO).write_text(json.dumps(self.info, indent=2, default=str) + "\n", encoding="utf8")
        # What a fine-tuning run reads first; fail here rather than there.
        AutoConfig.from_pretrained(str(path))
        AutoTokenizer.from_pretrained(str(path))


def check_export_dir(out_dir: Path, model_dir: Path, force: bool) -> None:
    """Raise ValueError (one line) unless ``out_dir`` may receive the checkpoint.

    out_dir (Path): The output folder; if it exists and is not empty, only with ``force``.
    model_dir (Path): The source pipeline, which the output must neither be nor contain.
    force (bool): Replace a non-empty ``out_dir`` as a whole.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"cannot write the encoder folder {out_dir}: it is a file")
    src, dst = model_dir.resolve(), out_dir.resolve()
    if dst == src or dst in src.parents or src in dst.parents:
        raise ValueError(f"cannot write the encoder folder {out_dir}: it is, or is inside, or holds the pipeline {model_dir}")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise ValueError(f"cannot write the encoder folder {out_dir}: it exists and is not empty (use --force to replace it)")
    writable_ancestor(out_dir.parent, f"cannot write the encoder folder {out_dir}")


def export_encoder(model_dir: Path, out_dir: Path, component: Optional[str] = None, force: bool = False) -> Dict[str, Any]:
    """Write the transformer of a pipeline as a Hugging Face checkpoint folder, atomically.

    model_dir (Path): The trained pipeline folder.
    out_dir (Path): The checkpoint folder (replaced as a whole with ``force``).
    component (Optional[str]): The transformer component; None: the only one.
    force (bool): Replace a non-empty ``out_dir``.
    RETURNS (Dict[str, Any]): The provenance info written to ``sciner_export.json``, with
        the parameter count.
    RAISES (ValueError): One-line message on bad input (checked before loading where possible).
    """
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    name = find_transformer_component(model_dir, component)
    check_export_dir(out_dir, model_dir, force)
    hf_model, tokenizer, info = load_encoder(model_dir, name)
    info["n_parameters"] = int(sum(p.numel() for p in hf_model.parameters()))
    try:
        save_pipeline(_Checkpoint(hf_model, tokenizer, info), out_dir)
    except OSError as err:
        raise ValueError(f"{out_dir}: cannot write the encoder ({err.strerror or err})")
    return info


@sciner_cli.command("export-encoder")
def export_encoder_cli(
    model_dir: Path = typer.Argument(..., help="Trained pipeline folder (e.g. training/weak/model-best)"),
    out_dir: Path = typer.Argument(..., help="Output Hugging Face checkpoint folder (weights, config, tokenizer)"),
    component: Optional[str] = typer.Option(None, "--component", help="Transformer component (default: the only one)"),
    force: bool = typer.Option(False, "--force", "-F", help="Replace OUT_DIR if it exists and is not empty"),
) -> None:
    """Export a pipeline's fine-tuned transformer as a Hugging Face checkpoint folder.

    Load it with AutoModel/AutoTokenizer.from_pretrained(OUT_DIR), or fine-tune a new
    pipeline from it (fresh sciner_spancat head) with
    --components.transformer.model.name OUT_DIR or, in the project, --vars.encoder OUT_DIR.
    """
    try:
        info = export_encoder(model_dir, out_dir, component=component, force=force)
    except ValueError as err:
        fail(str(err))
    typer.echo(
        f"Saved the encoder of '{info['component']}' ({info['model_class']}, "
        f"{info['n_parameters']:,} parameters) from {model_dir} to {out_dir}"
    )
    typer.echo(f"Fine-tune from it: --components.transformer.model.name {out_dir} (project: --vars.encoder {out_dir})")
