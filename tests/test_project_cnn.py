"""The project's `cnn_all` workflow (CNN side with domain pretraining), reduced, and the
`scripts/train.py` wrapper that lets one `train` step run every config of configs/."""
import argparse
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.util import load_config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import project_run  # noqa: E402
import train as train_script  # noqa: E402


def _args(**kw):
    base = dict(config="c.cfg", train="t.spacy", dev="d.spacy", seed=0, max_epochs=3, min_steps=0, max_steps=0, eval_frequency=5,
                encoder="enc", warmup_steps=10, vectors="", init_tok2vec="", pretrain="")
    return argparse.Namespace(**{**base, **kw})


def _config(name):
    return load_config(ROOT / "configs" / f"{name}.cfg", interpolate=False)


def test_train_overrides_follow_the_config():
    trf = train_script.overrides_for(_config("sciner_spancat"), _args())
    assert "--components.transformer.model.name" in trf and "--training.optimizer.learn_rate.warmup_steps" in trf
    cnn = train_script.overrides_for(_config("sciner_spancat_cnn"), _args())
    # no transformer, a constant learning rate: neither override may reach spacy train
    assert "--components.transformer.model.name" not in cnn
    assert "--training.optimizer.learn_rate.warmup_steps" not in cnn
    assert cnn[:4] == ["--paths.train", "t.spacy", "--paths.dev", "d.spacy"]


def test_training_budget_follows_the_config(capsys):
    """Epoch-budgeted configs take --max-epochs; the CNN configs keep their early stopping
    (the measured recipe) unless --max-steps caps it, and say so."""
    trf = train_script.overrides_for(_config("sciner_spancat"), _args(max_epochs=7))
    assert trf[trf.index("--training.max_epochs") + 1] == "7" and "--training.max_steps" not in trf
    cnn = train_script.overrides_for(_config("sciner_spancat_cnn"), _args(max_epochs=7))
    assert "--training.max_epochs" not in cnn and "--training.max_steps" not in cnn
    assert "trains by early stopping (patience 1600 steps, max_steps 20000); --max-epochs 7 not used" in capsys.readouterr().out
    capped = train_script.overrides_for(_config("sciner_spancat_cnn"), _args(max_steps=30))
    assert capped[capped.index("--training.max_steps") + 1] == "30" and "--training.max_epochs" not in capped
    # --max-steps caps an epoch budget too (a quick trial): spacy train stops at whichever comes first
    capped = train_script.overrides_for(_config("sciner_spancat"), _args(max_epochs=7, max_steps=30))
    assert capped[capped.index("--training.max_steps") + 1] == "30"
    assert capped[capped.index("--training.max_epochs") + 1] == "7"


def test_max_steps_caps_an_epoch_budget_and_its_decay(tmp_path, capsys):
    """--max-steps below epochs x batches: spacy train stops there, the announced count (what
    benchmarks/project_run.py records) is the cap, and the learning rate reaches 0 at the cap
    (not at the uncapped epoch budget); a cap above the budget changes nothing."""
    from spacy.tokens import Doc, DocBin

    nlp = spacy.blank("en")
    DocBin(docs=[Doc(nlp.vocab, words=[f"w{i}"] * 100) for i in range(10)]).to_disk(tmp_path / "train.spacy")
    train = str(tmp_path / "train.spacy")  # 2 batches per epoch
    trf = train_script.overrides_for(_config("sciner_spancat_hybrid"), _args(train=train, max_epochs=7, min_steps=2001,
                                                                              max_steps=1500))
    assert trf[trf.index("--training.max_steps") + 1] == "1500"
    assert trf[trf.index("--training.optimizer.learn_rate.total_steps") + 1] == "1500"
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("c.cfg: 1001 epochs"))
    assert line == "c.cfg: 1001 epochs x 2 batches (2002) capped by --max-steps = 1500 updates"
    assert project_run.updates_in(line) == 1500
    assert "learning rate to 0 at update 1500 (--max-steps), not at the config's 1000" in out
    loose = train_script.overrides_for(_config("sciner_spancat_hybrid"), _args(train=train, max_epochs=7, max_steps=15))
    assert "--training.max_steps" not in loose and "c.cfg: 7 epochs x 2 batches = 14 updates" in capsys.readouterr().out


def test_auto_config_follows_the_training_set_size(tmp_path, capsys):
    """configs/auto.cfg (project.yml's default) names no file: below --small-train-words
    training words it is the transformer-only config, otherwise the hybrid; a config that
    exists is never replaced, and a missing training file leaves the hybrid (spacy train
    then reports the file)."""
    from spacy.tokens import Doc, DocBin

    nlp = spacy.blank("en")
    DocBin(docs=[Doc(nlp.vocab, words=["w"] * 30) for _ in range(10)]).to_disk(tmp_path / "train.spacy")
    auto, train = str(ROOT / "configs" / "auto.cfg"), str(tmp_path / "train.spacy")
    assert train_script.resolve_auto(auto, train, 301) == str(ROOT / "configs" / "sciner_spancat.cfg")
    assert "300 words, fewer than --small-train-words 301" in capsys.readouterr().out
    assert train_script.resolve_auto(auto, train, 300) == str(ROOT / "configs" / "sciner_spancat_hybrid.cfg")
    assert "300 words, not fewer than --small-train-words 300" in capsys.readouterr().out
    assert train_script.resolve_auto(auto, str(tmp_path / "none.spacy"), 10**6).endswith("sciner_spancat_hybrid.cfg")
    assert "unknown words" in capsys.readouterr().out
    cnn = str(ROOT / "configs" / "sciner_spancat_cnn.cfg")
    assert train_script.resolve_auto(cnn, train, 10**6) == cnn and capsys.readouterr().out == ""


def test_project_defaults_to_the_auto_config():
    project = srsly.read_yaml(ROOT / "project.yml")
    assert project["vars"]["config"] == "auto" and project["vars"]["small_train_words"] == 25000
    train = next(c for c in project["commands"] if c["name"] == "train")
    assert "--small-train-words ${vars.small_train_words}" in train["script"][0]
    assert "configs" in train["deps"]  # the folder: configs/auto.cfg is no file
    assert not (ROOT / "configs" / "auto.cfg").exists()


def test_learning_rate_does_not_reach_zero_before_the_epoch_budget_ends(tmp_path, capsys):
    """The transformer configs' warm-up + linear decay gets total_steps = epochs x batches per
    epoch (counted with the config's reader and batcher) where that exceeds the config's own."""
    from spacy.tokens import Doc, DocBin

    nlp = spacy.blank("en")
    # 10 docs of 100 words, 500-word batches (tolerance 0.2): 2 batches per epoch
    db = DocBin(docs=[Doc(nlp.vocab, words=[f"w{i}"] * 100) for i in range(10)])
    db.to_disk(tmp_path / "train.spacy")
    config = _config("sciner_spancat_hybrid")
    config["training"]["optimizer"]["learn_rate"]["total_steps"] = 10
    trf = train_script.overrides_for(config, _args(train=str(tmp_path / "train.spacy"), max_epochs=7))
    assert trf[trf.index("--training.optimizer.learn_rate.total_steps") + 1] == "14"
    assert "learning rate to 0 at update 14 (7 epochs x 2 batches), not at the config's 10" in capsys.readouterr().out
    # a budget within the config's total_steps (1,000) keeps it
    short = train_script.overrides_for(_config("sciner_spancat_hybrid"), _args(train=str(tmp_path / "train.spacy"), max_epochs=7))
    assert "--training.optimizer.learn_rate.total_steps" not in short
    # no file to count (spacy train reports it), or no warm-up + decay schedule: nothing changes
    assert "--training.optimizer.learn_rate.total_steps" not in train_script.overrides_for(config, _args())
    cnn = train_script.overrides_for(_config("sciner_spancat_cnn"), _args(train=str(tmp_path / "train.spacy")))
    assert "--training.optimizer.learn_rate.total_steps" not in cnn


def test_min_steps_raises_the_epochs_of_a_small_training_set(tmp_path, capsys):
    """Fewer updates than --min-steps in --max-epochs epochs: more epochs (rounded up), and the
    learning rate decays to 0 at the last of them; a larger set keeps --max-epochs, and the
    CNN configs (early stopping) ignore it."""
    from spacy.tokens import Doc, DocBin

    nlp = spacy.blank("en")
    db = DocBin(docs=[Doc(nlp.vocab, words=[f"w{i}"] * 100) for i in range(10)])  # 2 batches per epoch
    db.to_disk(tmp_path / "train.spacy")
    train = str(tmp_path / "train.spacy")
    trf = train_script.overrides_for(_config("sciner_spancat_hybrid"), _args(train=train, max_epochs=7, min_steps=2001))
    assert trf[trf.index("--training.max_epochs") + 1] == "1001"
    assert trf[trf.index("--training.optimizer.learn_rate.total_steps") + 1] == "2002"
    out = capsys.readouterr().out
    assert "7 epochs x 2 batches are fewer than --min-steps 2001: training 1001 epochs (2002 updates)" in out
    # the count benchmarks/project_run.py records
    assert "c.cfg: 1001 epochs x 2 batches = 2002 updates\n" in out
    # 7 x 2 updates reach --min-steps 14: unchanged; 0 switches it off
    for min_steps in (14, 0):
        kept = train_script.overrides_for(_config("sciner_spancat_hybrid"), _args(train=train, max_epochs=7, min_steps=min_steps))
        assert kept[kept.index("--training.max_epochs") + 1] == "7"
    cnn = train_script.overrides_for(_config("sciner_spancat_cnn"), _args(train=train, min_steps=2001))
    assert "--training.max_epochs" not in cnn


def test_vectors_and_init_tok2vec_are_checked_before_training(tmp_path):
    with pytest.raises(SystemExit, match="no tok2vec with include_static_vectors"):
        train_script.overrides_for(_config("sciner_spancat"), _args(vectors=str(tmp_path)))
    with pytest.raises(SystemExit, match="not a vectors pipeline folder"):
        train_script.overrides_for(_config("sciner_spancat_cnn"), _args(vectors=str(tmp_path)))
    with pytest.raises(SystemExit, match="file not found"):
        train_script.overrides_for(_config("sciner_spancat_cnn"), _args(init_tok2vec=str(tmp_path / "model4.bin")))
    with pytest.raises(SystemExit, match="no \\[pretraining\\] block"):
        train_script.pretrain_overrides(_config("sciner_spancat"), _args(pretrain=str(tmp_path / "aux.txt")))


def test_cnn_all_workflow_pretrains_and_trains_from_both(project_with_aux):
    project, data_dir = project_with_aux(200)
    cmd = [sys.executable, "-m", "spacy", "project", "run", "cnn_all", str(project),
           "--vars.dataset", "demo", "--vars.data_dir", str(data_dir),
           "--vars.vectors_dim", "16", "--vars.vectors_epochs", "1", "--vars.pretrain_epochs", "1",
           "--vars.max_steps", "10", "--vars.eval_frequency", "5"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=project, timeout=1200)
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
    assert len((project / "corpus" / "demo" / "aux.txt").read_text().splitlines()) == 600  # 3 CS files x 200
    log = srsly.read_json(project / "vectors" / "demo" / "vectors_log.json")
    assert log["lines"] == 600 and log["table_shape"] == [50000, 16]
    assert (project / "pretrain" / "demo" / "model0.bin").exists()
    # with no --vars.config / vectors / init_tok2vec given, train-cnn trained cnn_config from
    # the vectors and the last pretrain weights the workflow had just written
    trained = spacy.util.load_config(project / "training" / "demo" / "model-best" / "config.cfg")
    assert trained["paths"]["vectors"] == "vectors/demo"
    assert trained["paths"]["init_tok2vec"] == "pretrain/demo/model-last.bin"
    assert trained["components"]["sciner_spancat"]["model"]["tok2vec"]["@architectures"] == "spacy.Tok2VecListener.v1"
    nlp = spacy.load(project / "training" / "demo" / "model-calibrated")
    assert "transformer" not in nlp.pipe_names and nlp.vocab.vectors.shape == (50000, 16)
    metrics = srsly.read_json(project / "metrics" / "demo.json")
    assert "spans_sc_f" in metrics
    # the pretrain step also took the vectors (the tok2vec it pretrains must match the trained one)
    assert "--paths.vectors vectors/demo" in result.stdout
