"""`use_averages`: the optimizer's parameter averages swapped in for torch weights too."""
import numpy
import pytest
import torch
from thinc.api import Adam, Linear, PyTorchWrapper, chain

from spacy_sciner.training.averages import torch_shims, use_averages


class Pipeline:
    """What use_averages reads of a Language: its pipeline and its use_params."""

    def __init__(self, model):
        self.pipeline = [("pipe", type("Pipe", (), {"model": model})())]
        self.model = model

    def use_params(self, params):
        return self.model.use_params(params)


@pytest.fixture
def trained():
    """A torch layer chained with a thinc layer, 6 updates with averages kept."""
    torch.manual_seed(0)
    model = chain(PyTorchWrapper(torch.nn.Linear(4, 3)), Linear(2, 3))
    X = numpy.linspace(-1, 1, 8, dtype="f").reshape(2, 4)
    model.initialize(X=X)
    optimizer = Adam(0.1, use_averages=True)
    for _ in range(6):
        Y, backprop = model.begin_update(X)
        backprop(Y - 1)
        model.finish_update(optimizer)
    return Pipeline(model), optimizer, X


def torch_weights(nlp):
    return {k: v.detach().numpy().copy() for k, v in torch_shims(nlp)[0]._model.state_dict().items()}


def test_thinc_alone_leaves_the_torch_weights(trained):
    """Why the module exists: thinc's use_params swaps the thinc layer, not the torch one."""
    nlp, optimizer, X = trained
    before = torch_weights(nlp)
    with nlp.use_params(optimizer.averages):
        inside = torch_weights(nlp)
    assert all(numpy.array_equal(before[k], inside[k]) for k in before)


def test_averages_replace_torch_and_thinc_weights_and_are_restored(trained):
    nlp, optimizer, X = trained
    shim, linear = torch_shims(nlp)[0], nlp.model.layers[1]
    before, Y = torch_weights(nlp), nlp.model.predict(X)
    before_W = linear.get_param("W").copy()
    with use_averages(nlp, optimizer.averages):
        inside = torch_weights(nlp)
        for name in ("weight", "bias"):
            numpy.testing.assert_array_equal(inside[name], optimizer.averages[(shim.id, name)])
            assert not numpy.array_equal(inside[name], before[name])  # averages are not the last weights
        numpy.testing.assert_array_equal(linear.get_param("W"), optimizer.averages[(linear.id, "W")])
        assert not numpy.allclose(nlp.model.predict(X), Y)
    after = torch_weights(nlp)
    assert all(numpy.array_equal(before[k], after[k]) for k in before)
    numpy.testing.assert_array_equal(linear.get_param("W"), before_W)
    numpy.testing.assert_array_equal(nlp.model.predict(X), Y)


def test_weights_are_restored_after_an_error(trained):
    nlp, optimizer, _ = trained
    before = torch_weights(nlp)
    with pytest.raises(RuntimeError):
        with use_averages(nlp, optimizer.averages):
            raise RuntimeError("evaluation failed")
    assert all(numpy.array_equal(before[k], v) for k, v in torch_weights(nlp).items())


@pytest.mark.parametrize("averages", [None, {}])
def test_no_averages_change_nothing(trained, averages):
    nlp, _, X = trained
    Y = nlp.model.predict(X)
    with use_averages(nlp, averages):
        numpy.testing.assert_array_equal(nlp.model.predict(X), Y)
