"""The pretraining workflows of project.yml train from what their own steps built.

`pft_all`, `weak_all` and `cnn_all` once ended with the plain `train` step, which reads the
`encoder` / `vectors` / `init_tok2vec` variables: run without them, an hour of pretraining was
silently left unused. Each now ends with its own train command; these checks keep those
commands in step with `train` and wired to the outputs of the steps before them. (The
workflows themselves run end to end in test_project_pft.py, test_project_weak.py and
test_project_cnn.py.)
"""
import shlex
from pathlib import Path

import pytest
import srsly

ROOT = Path(__file__).resolve().parent.parent
PROJECT = srsly.read_yaml(ROOT / "project.yml")
COMMANDS = {c["name"]: c for c in PROJECT["commands"]}

# workflow -> (its train command, {option it sets itself: (value, the step that writes it)})
OWN = {
    "pft_all": ("train-pft", {"--encoder": ("pft/${vars.dataset}/encoder", "pft")}),
    "weak_all": ("train-weak", {"--encoder": ("training/${vars.dataset}-weak/encoder", "export-encoder")}),
    "cnn_all": ("train-cnn", {"--vectors": ("vectors/${vars.dataset}", "vectors"),
                              "--init-tok2vec": ("pretrain/${vars.dataset}/model-last.bin", "pretrain-cnn")}),
}


def _options(command: dict) -> tuple:
    """(positional arguments, {option: value}) of a one-line `python scripts/train.py ...` script."""
    words = shlex.split(command["script"][0])
    assert words[:2] == ["python", "scripts/train.py"], words
    first = next(i for i, w in enumerate(words) if w.startswith("--"))
    options = dict(zip(words[first::2], words[first + 1::2]))
    return words[2:first], options


@pytest.mark.parametrize("workflow", sorted(OWN))
def test_pretraining_workflow_trains_from_its_own_product(workflow):
    name, own = OWN[workflow]
    steps = PROJECT["workflows"][workflow]
    assert "train" not in steps and name in steps
    _, options = _options(COMMANDS[name])
    for option, (value, producer) in own.items():
        assert steps.index(producer) < steps.index(name)
        assert options[option] == value
        # the value is (inside) an output of the producing step, and a dependency of training
        outputs = COMMANDS[producer].get("outputs", [])
        assert any(value == out or value.startswith(out + "/") or out.startswith(value + "/") for out in outputs), outputs
        assert any(value == dep or value.startswith(dep + "/") for dep in COMMANDS[name]["deps"])
    # the variables meant for `train` are not read: they cannot override the workflow's product
    assert "${vars.encoder}" not in COMMANDS[name]["script"][0]
    assert "${vars.vectors}" not in COMMANDS[name]["script"][0]
    assert "${vars.init_tok2vec}" not in COMMANDS[name]["script"][0]


@pytest.mark.parametrize("workflow", sorted(OWN))
def test_workflow_train_command_keeps_every_other_setting_of_train(workflow):
    name, own = OWN[workflow]
    train_args, train = _options(COMMANDS["train"])
    args, options = _options(COMMANDS[name])
    shared = {k: v for k, v in train.items() if k not in ("--encoder", "--vectors", "--init-tok2vec")}
    assert {k: v for k, v in options.items() if k not in own} == shared
    assert args[1] == train_args[1] == "training/${vars.dataset}"
    assert COMMANDS[name]["outputs"] == COMMANDS["train"]["outputs"]
    assert set(COMMANDS["train"]["deps"]) <= set(COMMANDS[name]["deps"])
    expected_config = "configs/${vars.cnn_config}.cfg" if workflow == "cnn_all" else train_args[0]
    assert args[0] == expected_config


def test_cnn_all_pretrains_the_tok2vec_it_trains():
    """Same config and vectors for spacy pretrain and for training: the weights must fit."""
    words = shlex.split(COMMANDS["pretrain-cnn"]["script"][0])
    assert words[2] == "configs/${vars.cnn_config}.cfg"
    assert words[words.index("--vectors") + 1] == "vectors/${vars.dataset}"
    assert PROJECT["vars"]["cnn_config"] == "sciner_spancat_cnn"
    assert (ROOT / "configs" / "sciner_spancat_cnn.cfg").is_file()
