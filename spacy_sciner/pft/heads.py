"""Load an encoder with a masked-LM head, the SpanBERT boundary head, and the PFT losses.

The vocabulary projection is the most expensive part of a masked-LM step on a small
encoder (MiniLM: 384 x 30,522 per position, about as many FLOPs as the six layers), and
only masked positions need it. ``compute_losses`` therefore runs the bare encoder, gathers
the hidden states at the masked positions and applies the MLM head to those rows only.
"""
import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, List, Tuple

import torch
from torch import nn

from ..encoders import resolve_encoder
from .masking import MaskedBatch

logger = logging.getLogger(__name__)

# Any one of these makes a folder usable by AutoTokenizer (BERT/WordPiece, BPE, SentencePiece).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")
# Attribute of the MLM head module in the masked-LM classes we support (BERT: cls,
# RoBERTa/XLM-R/ELECTRA-generator style: lm_head).
HEAD_ATTRIBUTES = ("cls", "lm_head")
# Model types whose BPE tokenizer needs add_prefix_space for pre-split words.
PREFIX_SPACE_TYPES = {"roberta", "xlm-roberta", "longformer", "bart", "gpt2", "camembert"}


class PFTModelError(ValueError):
    """An encoder that PFT cannot train (no tokenizer files, no masked-LM class, ...)."""


def check_tokenizer_files(path: Path) -> None:
    """Raise a clear error when a local checkpoint folder has no tokenizer files.

    path (Path): A local model folder.
    """
    if not any((path / name).exists() for name in TOKENIZER_FILES):
        raise PFTModelError(
            f"Encoder folder {path} has no tokenizer files (none of "
            f"{', '.join(TOKENIZER_FILES)}). Copy the tokenizer of its base model into it "
            "(tokenizer.save_pretrained) or point --encoder at a complete checkpoint."
        )


def load_tokenizer(name: str):
    """Load the fast tokenizer of an encoder name or folder (resolved like configs do).

    An encoder that cannot be loaded is reported in one line (``PFTModelError``), not as
    the chain of tracebacks transformers raises from the hub client.
    """
    from transformers import AutoConfig, AutoTokenizer

    path = resolve_encoder(name)
    if Path(path).is_dir():
        check_tokenizer_files(Path(path))
    elif _looks_like_path(name):
        raise PFTModelError(f"Encoder folder not found: {name} (pass an existing checkpoint folder, "
                            "a Hugging Face hub name or 'sciner-minilm')")
    try:
        model_type = AutoConfig.from_pretrained(path).model_type
        kwargs = {"add_prefix_space": True} if model_type in PREFIX_SPACE_TYPES else {}
        return AutoTokenizer.from_pretrained(path, use_fast=True, **kwargs)
    except (OSError, ValueError) as err:
        first = " ".join(str(err).split()).split(". ")[0]
        raise PFTModelError(f"Cannot load encoder '{name}': {first}") from None


def _looks_like_path(name: str) -> bool:
    """Whether a missing encoder was meant as a folder (a hub name is ``org/model``)."""
    return name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1


def max_positions(name: str) -> int:
    """Longest input (in pieces, specials included) the encoder's position embeddings allow.

    RoBERTa-style models start positions after the padding index, so two are unusable.
    """
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(resolve_encoder(name))
    offset = config.pad_token_id + 1 if config.model_type in PREFIX_SPACE_TYPES else 0
    return config.max_position_embeddings - offset


def load_masked_lm(name: str) -> Tuple[nn.Module, Dict]:
    """Load ``AutoModelForMaskedLM``; add (and report) an MLM head when the checkpoint has none.

    Sentence-embedding checkpoints such as all-MiniLM-L6-v2 ship only the encoder.
    Transformers then builds the head (transform: dense + GELU + LayerNorm; decoder tied to
    the input embeddings, plus a bias) with fresh weights; we check the tie and log it.

    name (str): Encoder alias, hub name or local folder.
    RETURNS (Tuple[nn.Module, Dict]): The model and ``{"mlm_head_added": bool,
        "missing_keys": [...], "encoder_path": str}``.
    """
    from transformers import AutoModelForMaskedLM

    path = resolve_encoder(name)
    try:
        with _without_train_warning():
            model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
    except ValueError as err:
        raise PFTModelError(f"Encoder '{name}' has no masked-LM class in transformers: {err}") from err
    head = mlm_head(model)
    head_names = {f"{attr}." for attr in HEAD_ATTRIBUTES}
    missing_head = [k for k in info["missing_keys"] if any(k.startswith(p) for p in head_names)]
    # Missing encoder weights mean the checkpoint is not what the user thinks it is.
    missing_other = [k for k in info["missing_keys"] if k not in missing_head]
    if missing_other:
        raise PFTModelError(f"Encoder '{name}' lacks encoder weights: {missing_other[:5]} ...")
    added = bool(missing_head)
    if added:
        model.tie_weights()
        logger.warning(
            "Encoder '%s' has no MLM head: added one (transform + decoder tied to the input "
            "embeddings), freshly initialised weights: %s", name, ", ".join(missing_head)
        )
    # Encoder weights the masked-LM class does not use (BERT's pooler) are carried into every
    # saved checkpoint, so AutoModel loads the result without freshly initialised parts.
    prefix = f"{model.base_model_prefix}."
    unused = [k for k in info["unexpected_keys"] if k.startswith(prefix)]
    model.pft_carried_weights = _read_weights(Path(path), unused, prefix) if unused else {}
    decoder = model.get_output_embeddings()
    tied = decoder is not None and decoder.weight is model.get_input_embeddings().weight
    return model, {
        "encoder_path": path,
        "mlm_head_added": added,
        "missing_keys": missing_head,
        "decoder_tied_to_embeddings": tied,
        "head_module": type(head).__name__,
        "carried_weights": sorted(model.pft_carried_weights),
    }


class _DropTrainWarning(logging.Filter):
    """Drop transformers' "newly initialized ... You should probably TRAIN this model".

    For PFT a fresh MLM head is expected, and ``load_masked_lm`` reports it in its own
    words (and fails on any other missing weight); the advice to fine-tune would mislead.
    Its other warnings, such as weights whose shapes did not match, pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("are newly initialized:" in message and "You should probably TRAIN" in message)


@contextmanager
def _without_train_warning():
    """Install ``_DropTrainWarning`` on transformers' model-loading logger for a block."""
    model_logger = logging.getLogger("transformers.modeling_utils")
    drop = _DropTrainWarning()
    model_logger.addFilter(drop)
    try:
        yield
    finally:
        model_logger.removeFilter(drop)


def _read_weights(path: Path, keys: List[str], prefix: str) -> Dict[str, torch.Tensor]:
    """Read ``keys`` (model names; files may store them without ``prefix``) from a local checkpoint."""
    if not path.is_dir():
        return {}  # a hub name: nothing to carry without reading the cache ourselves
    stored: Dict[str, torch.Tensor] = {}
    for file_ in sorted(path.glob("*.safetensors")):
        from safetensors.torch import load_file

        stored.update(load_file(file_))
    if not stored and (path / "pytorch_model.bin").exists():
        stored = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    out = {}
    for key in keys:
        value = stored.get(key, stored.get(key[len(prefix):]))
        if value is not None:
            out[key] = value
    return out


def mlm_head(model: nn.Module) -> nn.Module:
    """The module that maps hidden states to vocabulary logits (BERT ``cls``, RoBERTa ``lm_head``)."""
    for attr in HEAD_ATTRIBUTES:
        if isinstance(getattr(model, attr, None), nn.Module):
            return getattr(model, attr)
    raise PFTModelError(
        f"{type(model).__name__} has no MLM head attribute among {HEAD_ATTRIBUTES}; "
        "PFT supports the BERT and RoBERTa masked-LM families"
    )


class SpanBoundaryHead(nn.Module):
    """SpanBERT's SBO: predict each masked span piece from its boundaries and its offset.

    y_i = f([x_{s-1}; x_{e+1}; p_{i-s}]) with f a two-layer GELU + LayerNorm MLP; the
    vocabulary projection is shared with the MLM head (as in SpanBERT), so only f and the
    offset embeddings are new parameters.

    hidden_size (int): Encoder width.
    max_offset (int): Offsets beyond this share the last embedding.
    """

    def __init__(self, hidden_size: int, max_offset: int = 64, layer_norm_eps: float = 1e-12):
        super().__init__()
        self.max_offset = max_offset
        self.offsets = nn.Embedding(max_offset, hidden_size)
        self.mlp = nn.Sequential(
            nn.Linear(3 * hidden_size, hidden_size),
            nn.GELU(),
            nn.LayerNorm(hidden_size, eps=layer_norm_eps),
            nn.Linear(hidden_size, hidden_size),
            nn.GELU(),
            nn.LayerNorm(hidden_size, eps=layer_norm_eps),
        )

    def forward(self, left: torch.Tensor, right: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        pos = self.offsets(offset.clamp(max=self.max_offset - 1))
        return self.mlp(torch.cat([left, right, pos], dim=-1))


def compute_losses(
    model: nn.Module, sbo_head, batch: MaskedBatch, device: torch.device
) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Encoder forward, then the vocabulary projection at the masked positions only.

    model (nn.Module): An ``AutoModelForMaskedLM`` model.
    sbo_head (Optional[SpanBoundaryHead]): Present when ``sbo`` is an objective.
    batch (MaskedBatch): From ``mask_batch``.
    device (torch.device): Where the model lives.
    RETURNS (Tuple[torch.Tensor, Dict[str, torch.Tensor]]): The total loss (sum of the
        per-objective means) and each objective's mean loss.
    """
    # Every index the loss needs is on the host already (``MaskedBatch.selection``), and the
    # copies from pinned memory are asynchronous: nothing here waits for the device, so the
    # host can queue the next micro-batch while this one runs.
    batch = batch.to(device)
    hidden = model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    flat = hidden.reshape(-1, hidden.shape[-1])
    head = mlm_head(model)
    losses: Dict[str, torch.Tensor] = {}
    if len(batch.positions):
        logits = head(flat[batch.positions])
        token_losses = nn.functional.cross_entropy(logits.float(), batch.labels, reduction="none")
        # Gathering by index gives the same rows, in the same order, as the boolean mask the
        # selection was made from, so each mean is bitwise what ``token_losses[mask]`` gave.
        for name, index in batch.selection.items():
            losses[name] = token_losses[index].mean()
    if sbo_head is not None and batch.sbo_left is not None and len(batch.sbo_left):
        states = sbo_head(flat[batch.sbo_left], flat[batch.sbo_right], batch.sbo_offset)
        losses["sbo"] = nn.functional.cross_entropy(head(states).float(), batch.sbo_labels)
    if not losses:
        # A batch without any target (no candidate fitted): a zero that still has a graph.
        return flat.sum() * 0.0, losses
    return torch.stack(list(losses.values())).sum(), losses


def head_report_lines(info: Dict) -> List[str]:
    """Human-readable lines about the MLM head for the CLI output."""
    if not info["mlm_head_added"]:
        return [f"MLM head: loaded from {info['encoder_path']}"]
    return [
        f"MLM head: ADDED (checkpoint had none; new weights {', '.join(info['missing_keys'])})",
        f"decoder tied to input embeddings: {info['decoder_tied_to_embeddings']}",
    ]
