import json

import pytest

# Scientific sentences with hand-marked candidate spans (token offsets, end exclusive).
SENTENCES = [
    ("We propose a novel support vector machine for face recognition .", [(4, 7, "dict"), (8, 10, "phrase")]),
    ("Deep convolutional neural networks improve image classification accuracy .", [(0, 4, "dict"), (5, 7, "pattern")]),
    ("The hidden Markov model is used for speech recognition tasks .", [(1, 4, "dict"), (7, 9, "dict|phrase")]),
    ("Conditional random fields label each token of the input sequence .", [(0, 3, "dict"), (8, 10, "phrase")]),
]


def write_jsonl(path, n=48):
    with open(path, "w", encoding="utf8") as file_:
        for i in range(n):
            text, cands = SENTENCES[i % len(SENTENCES)]
            record = {"text": text, "tokens": text.split(), "candidates": [list(c) for c in cands]}
            file_.write(json.dumps(record) + "\n")
    return path


@pytest.fixture(scope="session")
def pft_sentences():
    """The hand-made sentences and candidates of the test corpus."""
    return SENTENCES


@pytest.fixture
def write_corpus():
    """The writer of the JSONL corpus, for tests that need another size."""
    return write_jsonl


@pytest.fixture
def corpus_jsonl(tmp_path):
    """A small JSONL candidate corpus (48 sentences, 2 candidates each)."""
    return write_jsonl(tmp_path / "corpus.jsonl")


@pytest.fixture
def pft_config():
    """Build a PFTConfig sized for the tiny BERT: a few fast steps on one thread."""
    return make_pft_config


def make_pft_config(corpus, output, encoder, **overrides):
    from spacy_sciner.pft.train import PFTConfig

    settings = dict(
        corpus=str(corpus), output=str(output), encoder=str(encoder), max_steps=8,
        batch_size=4, lr=1e-3, eval_every=4, save_every=4, log_every=2, threads=1,
        progress=False, eval_fraction=0.1,
    )
    settings.update(overrides)
    return PFTConfig(**settings)
