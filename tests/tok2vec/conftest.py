"""Fixtures for the CNN and hybrid token representation tests of sciner_spancat."""
import sys
from pathlib import Path

import pytest

# The tiny training set and helpers are those of the sciner_spancat tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "spancat"))

from spancat_helpers import make_examples, train  # noqa: E402
from tok2vec_helpers import make_cnn_nlp, make_hybrid_nlp  # noqa: E402


@pytest.fixture(scope="session")
def trained_cnn_nlp():
    """tok2vec (small CNN) + sciner_spancat with a listener, overfitted on TRAIN_DATA."""
    nlp = make_cnn_nlp()
    train(nlp, make_examples(nlp), steps=100, learn_rate=0.01)
    return nlp


@pytest.fixture(scope="session")
def trained_hybrid_nlp(tiny_bert_dir):
    """transformer (tiny BERT) + sciner_spancat on the hybrid tok2vec, overfitted on TRAIN_DATA."""
    nlp = make_hybrid_nlp(tiny_bert_dir)
    train(nlp, make_examples(nlp))
    return nlp
