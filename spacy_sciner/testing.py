"""Helpers for tests and smoke runs: a tiny random BERT checkpoint, written offline.

The tokenizer files are copied from the shipped MiniLM checkpoint (a real WordPiece
vocabulary), the weights are random and small (2 layers, 32 dims), so a test can train,
save and load an encoder in seconds without any download.
"""
import shutil
from pathlib import Path
from typing import Union

from .encoders import minilm_path

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def make_tiny_bert(
    path: Union[str, Path], hidden_size: int = 32, num_layers: int = 2, seed: int = 0
) -> Path:
    """Write a tiny randomly initialised BERT checkpoint (config, weights, tokenizer).

    path (Union[str, Path]): Output directory (created).
    hidden_size (int): Width of the encoder.
    num_layers (int): Number of transformer layers.
    seed (int): Seed of the random initialisation.
    RETURNS (Path): The directory, loadable with ``AutoModel.from_pretrained`` and by
        spacy-transformers as ``name``.
    """
    import torch
    from transformers import BertConfig, BertModel

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    source = minilm_path()
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, path / name)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        intermediate_size=hidden_size * 2,
        max_position_embeddings=512,
    )
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(path)
    return path
