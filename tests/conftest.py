import os

import pytest

# Keep tests predictable on the 2-core machines; torch would otherwise oversubscribe.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import torch

    # Tiny test models gain nothing from threads; on a busy 2-core machine extra threads
    # only oversubscribe the cores (measured ~50x slower tiny-BERT updates under load).
    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a dependency
    pass

SHARED_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A tiny random BERT checkpoint directory (see spacy_sciner.testing)."""
    from spacy_sciner.testing import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data beside the repository (real benchmark data; read only)."""
    path = os.path.abspath(SHARED_DATA)
    if not os.path.isdir(path):
        raise RuntimeError(f"../shared/data not found at {path}: tests need it beside the repo")
    return path
