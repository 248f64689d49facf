"""Fixtures for the sciner_spancat tests."""
import pytest
from spancat_helpers import make_examples, make_nlp, train


@pytest.fixture(scope="session", autouse=True)
def single_torch_thread():
    """The CI machine has 2 shared cores; torch's default threads make tiny models ~50x slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)



@pytest.fixture(scope="session")
def trained_nlp(tiny_bert_dir):
    """A pipeline overfitted on TRAIN_DATA (shared: training costs a few seconds)."""
    nlp = make_nlp(tiny_bert_dir)
    train(nlp, make_examples(nlp))
    return nlp
