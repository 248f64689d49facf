"""Same seed -> same trained weights (the project's reproducibility rule), for
sciner_spancat on a CNN tok2vec, on a transformer, and on the hybrid representation.

Training draws from two sources: thinc's initial weights (numpy's global random state,
fixed by ``fix_random_seed``) and the component's negative-sampling generator (its
``seed`` setting, reset by ``initialize``). Both must be pinned for a rerun to give the
same model; a different global seed must give a different one (so the check can fail)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tok2vec"))

from spancat_helpers import make_examples, make_nlp, train  # noqa: E402
from tok2vec_helpers import make_cnn_nlp, make_hybrid_nlp  # noqa: E402


def _trained_bytes(make, seed):
    """Weights of every pipe after a few seeded updates, dropout and negative sampling on."""
    nlp = make()
    train(nlp, make_examples(nlp), steps=8, seed=seed, drop=0.1)
    return {name: pipe.model.to_bytes() for name, pipe in nlp.pipeline}


@pytest.mark.parametrize("kind", ["cnn", "transformer", "hybrid"])
def test_same_seed_same_weights(kind, tiny_bert_dir):
    make = {
        "cnn": make_cnn_nlp,
        "transformer": lambda: make_nlp(tiny_bert_dir, negatives_per_doc=4),
        "hybrid": lambda: make_hybrid_nlp(tiny_bert_dir),
    }[kind]
    first = _trained_bytes(make, seed=0)
    assert _trained_bytes(make, seed=0) == first
    other = _trained_bytes(make, seed=1)
    assert other["sciner_spancat"] != first["sciner_spancat"]
