"""`sciner train`: spaCy's training loop with checkpoints that resume exactly."""
import json
import pickle
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import DocBin
from spacy.util import registry
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.training import checkpoint
from spacy_sciner.training.cli import run

ROOT = Path(__file__).resolve().parents[2]
CRASH = {"at": None}  # the update at which the test callback raises (a killed run)


@registry.callbacks("test_resume_crash.v1")
def make_crash():
    def crash(nlp, info):
        if info["step"] == CRASH["at"]:
            raise RuntimeError(f"simulated kill before update {info['step']}")
    return crash


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """40 demo sentences for training (several epochs in a few dozen updates) and 20 for dev."""
    import subprocess

    out = tmp_path_factory.mktemp("resume-corpus")
    subprocess.run([sys.executable, "scripts/convert_dataset.py", "demo", "unused", str(out)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(out / "train.spacy").get_docs(nlp.vocab))
    DocBin(docs=docs[:40], store_user_data=True).to_disk(out / "small_train.spacy")
    DocBin(docs=docs[40:60], store_user_data=True).to_disk(out / "small_dev.spacy")
    return out


def overrides(corpus, cfg, tiny_bert_dir, steps=24):
    out = {"paths.train": str(corpus / "small_train.spacy"), "paths.dev": str(corpus / "small_dev.spacy"),
           "training.max_steps": steps, "training.eval_frequency": 4, "training.max_epochs": 0,
           "training.before_update": {"@callbacks": "test_resume_crash.v1"}}
    if cfg == "sciner_spancat_hybrid":
        out.update({"components.transformer.model.name": str(tiny_bert_dir), "training.batcher.size": 300})
    elif cfg == "spacy_ner_cnn":  # spaCy's own ner (a Cython pipe), its config's batcher
        out.update({"components.tok2vec.model.encode.width": 32, "components.tok2vec.model.encode.depth": 1})
    else:  # a narrow CNN: seconds per run
        out.update({"components.tok2vec.model.encode.width": 32, "components.tok2vec.model.encode.depth": 1,
                    "training.batcher.size.start": 100, "training.batcher.size.stop": 200})
    return out


def train(cfg, output, over, resume=False, crash_at=None):
    CRASH["at"] = crash_at
    try:
        return run(ROOT / "configs" / f"{cfg}.cfg", output, overrides=over, resume=resume)
    finally:
        CRASH["at"] = None


def weights(path):
    """Every parameter of a saved pipeline, torch weights included, keyed by position."""
    nlp = spacy.load(path)
    out = {}
    for name, pipe in nlp.pipeline:
        for i, node in enumerate(pipe.model.walk()):
            for param in node.param_names:
                if node.has_param(param):
                    out[f"{name}/{i}/{param}"] = numpy.asarray(node.get_param(param))
            for j, shim in enumerate(node.shims):
                for key, value in shim._model.state_dict().items():
                    out[f"{name}/{i}/s{j}/{key}"] = value.numpy().copy()
    return out


def assert_same_weights(a, b):
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        numpy.testing.assert_array_equal(wa[key], wb[key], err_msg=key)


def test_uninterrupted_run_equals_spacy_train(corpus, tmp_path):
    """The loop makes spaCy's updates: same weights and the same dev results as `spacy train`."""
    from spacy.cli.train import train as spacy_train

    over = overrides(corpus, "sciner_spancat_cnn", None)
    spacy_train(ROOT / "configs" / "sciner_spancat_cnn.cfg", tmp_path / "spacy", overrides=over)
    assert train("sciner_spancat_cnn", tmp_path / "ours", over) == 0
    assert_same_weights(tmp_path / "spacy" / "model-last", tmp_path / "ours" / "model-last")
    assert_same_weights(tmp_path / "spacy" / "model-best", tmp_path / "ours" / "model-best")
    meta = [json.loads((tmp_path / d / "model-best" / "meta.json").read_text())["performance"] for d in ("spacy", "ours")]
    assert meta[0] == meta[1]


@pytest.mark.parametrize("cfg,crash_at", [("sciner_spancat_cnn", 14), ("sciner_spancat_hybrid", 7), ("spacy_ner_cnn", 10)])
def test_resumed_run_ends_as_an_uninterrupted_one(corpus, tmp_path, tiny_bert_dir, cfg, crash_at):
    """Killed after an evaluation, resumed: the same model-last, model-best and dev curve."""
    over = overrides(corpus, cfg, tiny_bert_dir)
    log = tmp_path / "{}.jsonl"
    logger = {"@loggers": "spacy-sciner.JSONLLogger.v1", "progress_bar": False}
    assert train(cfg, tmp_path / "full", {**over, "training.logger": {**logger, "path": str(log).format("full")}}) == 0
    over["training.logger"] = {**logger, "path": str(log).format("resumed")}
    with pytest.raises(RuntimeError, match="simulated kill"):
        train(cfg, tmp_path / "resumed", over, crash_at=crash_at)
    state = checkpoint.read(tmp_path / "resumed")[1]
    assert not state["finished"] and state["step"] == (crash_at - 1) // 4 * 4
    assert train(cfg, tmp_path / "resumed", over, resume=True) == 0
    assert_same_weights(tmp_path / "full" / "model-last", tmp_path / "resumed" / "model-last")
    assert_same_weights(tmp_path / "full" / "model-best", tmp_path / "resumed" / "model-best")
    curves = [[json.loads(line) for line in Path(str(log).format(n)).read_text().splitlines()] for n in ("full", "resumed")]
    assert [r["step"] for r in curves[1]] == [r["step"] for r in curves[0]] == list(range(0, 25, 4))
    assert [r["score"] for r in curves[1]] == [r["score"] for r in curves[0]]
    assert [r["losses"] for r in curves[1]] == [r["losses"] for r in curves[0]]
    assert max(r["epoch"] for r in curves[0]) >= 1  # the run crossed an epoch boundary
    seconds = [r["seconds"] for r in curves[1]]
    assert seconds == sorted(seconds)  # the clock goes on from the checkpoint's


def test_finished_run_keeps_no_second_copy_and_trains_afresh(corpus, tmp_path):
    over = overrides(corpus, "sciner_spancat_cnn", None, steps=4)
    assert train("sciner_spancat_cnn", tmp_path / "out", over) == 0
    assert sorted(p.name for p in (tmp_path / "out" / "checkpoint").iterdir()) == ["state.pkl"]
    assert checkpoint.read(tmp_path / "out")[1]["finished"]
    (tmp_path / "out" / "model-best" / "marker").write_text("old")
    assert train("sciner_spancat_cnn", tmp_path / "out", over, resume=True) == 0
    assert not (tmp_path / "out" / "model-best" / "marker").exists()


def test_resume_refuses_other_settings_and_changed_inputs(corpus, tmp_path, capsys):
    over = overrides(corpus, "sciner_spancat_cnn", None)
    with pytest.raises(RuntimeError):
        train("sciner_spancat_cnn", tmp_path / "out", over, crash_at=6)
    before = (tmp_path / "out" / "checkpoint" / "state.pkl").read_bytes()
    assert train("sciner_spancat_cnn", tmp_path / "out", {**over, "training.max_steps": 30}, resume=True) == 1
    out = capsys.readouterr().err
    assert "error: cannot resume" in out and "'training.max_steps' was 24, now 30" in out
    changed = tmp_path / "train_copy.spacy"
    changed.write_bytes((corpus / "small_dev.spacy").read_bytes())
    with pytest.raises(RuntimeError):
        train("sciner_spancat_cnn", tmp_path / "out2", {**over, "paths.train": str(changed)}, crash_at=6)
    changed.write_bytes((corpus / "small_train.spacy").read_bytes())  # rewritten in place
    assert train("sciner_spancat_cnn", tmp_path / "out2", {**over, "paths.train": str(changed)}, resume=True) == 1
    out = capsys.readouterr().err
    assert f"paths.train ({changed}) changed on disk" in out
    assert (tmp_path / "out" / "checkpoint" / "state.pkl").read_bytes() == before  # nothing touched


def test_fresh_run_removes_an_older_checkpoint(corpus, tmp_path):
    over = overrides(corpus, "sciner_spancat_cnn", None)
    with pytest.raises(RuntimeError):
        train("sciner_spancat_cnn", tmp_path / "out", over, crash_at=6)
    with pytest.raises(RuntimeError):  # without --resume: from update 0, so it dies before its first checkpoint
        train("sciner_spancat_cnn", tmp_path / "out", {**over, "training.max_steps": 30}, crash_at=0)
    assert checkpoint.read(tmp_path / "out") is None


def test_checkpoint_write_is_atomic(tmp_path):
    """A kill between the renames leaves `checkpoint.old`, which is read; a `.tmp` never is."""
    checkpoint.write(tmp_path, {"step": 1})
    (tmp_path / "checkpoint").rename(tmp_path / "checkpoint.old")  # killed after the first rename
    (tmp_path / "checkpoint.tmp").mkdir()
    (tmp_path / "checkpoint.tmp" / "state.pkl").write_bytes(pickle.dumps({"step": 2})[:5])  # half written
    folder, state = checkpoint.read(tmp_path)
    assert folder.name == "checkpoint.old" and state == {"step": 1}
    checkpoint.write(tmp_path, {"step": 3})
    assert checkpoint.read(tmp_path)[1] == {"step": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_cli_help_and_missing_config(tmp_path):
    runner = CliRunner()
    result = runner.invoke(sciner_cli, ["train", "--help"])
    assert result.exit_code == 0 and "--resume" in result.output
    result = runner.invoke(sciner_cli, ["train", str(tmp_path / "nope.cfg"), "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "does not exist" in result.output


@pytest.mark.parametrize("config,args,fragments", [
    ("sciner_spancat_cnn", [], ["corpora.train.path is not set: pass --paths.train FILE"]),
    ("sciner_spancat_cnn", ["--paths.train", "{demo}/train.spacy", "--paths.dev", "{tmp}/nope.spacy"],
     ["corpora.dev.path: {tmp}/nope.spacy does not exist (pass --paths.dev FILE)"]),
    ("sciner_spancat_weak", [], ["corpora.train.path is not set: pass --paths.weak FILE"]),
])
def test_cli_names_a_missing_corpus_before_any_work(corpus, tmp_path, assert_cli_error, config, args, fragments):
    """One `error:` line naming the setting to pass, no traceback, nothing created."""
    args = [a.format(demo=corpus, tmp=tmp_path) for a in args]
    result = CliRunner().invoke(sciner_cli, ["train", str(ROOT / "configs" / f"{config}.cfg"),
                                             "--output", str(tmp_path / "out"), *args])
    assert_cli_error(result, *[f.format(tmp=tmp_path) for f in fragments])
    assert not (tmp_path / "out").exists()


def test_resumed_weak_pretraining_ends_as_an_uninterrupted_one(tmp_path):
    """An endless, seeded stream (the weak corpus's balanced sampler, max_epochs = -1) resumes
    exactly too: its earlier passes are drawn again (seeded by the call) without training."""
    sys.path.insert(0, str(ROOT / "tests" / "weak"))
    from test_weak_corpus import corpus as weak_docs, write_docbin
    from spacy_sciner.weak.config import weak_config

    weak = write_docbin(tmp_path / "weak.spacy", weak_docs(spacy.blank("en"), n_types=2, per_type=12, n_distinct=10))
    cfg = weak_config(spacy.util.load_config(ROOT / "configs" / "sciner_spancat_cnn.cfg", interpolate=False), max_steps=16)
    cfg.to_disk(tmp_path / "w.cfg")
    over = {"paths.weak": str(weak), "training.eval_frequency": 3, "components.tok2vec.model.encode.width": 16,
            "components.tok2vec.model.encode.depth": 1, "training.before_update": {"@callbacks": "test_resume_crash.v1"},
            "training.batcher.size": 30}  # a few sentences per batch: several passes in 16 updates
    assert run(tmp_path / "w.cfg", tmp_path / "full", overrides=over) == 0
    CRASH["at"] = 11
    try:
        with pytest.raises(RuntimeError, match="simulated kill"):
            run(tmp_path / "w.cfg", tmp_path / "resumed", overrides=over)
    finally:
        CRASH["at"] = None
    state = checkpoint.read(tmp_path / "resumed")[1]
    assert state["step"] == 9 and len(state["position"]["orders"]) >= 2  # the stream had begun another pass
    assert run(tmp_path / "w.cfg", tmp_path / "resumed", overrides=over, resume=True) == 0
    assert_same_weights(tmp_path / "full" / "model-last", tmp_path / "resumed" / "model-last")


def test_jsonl_log_of_a_resumed_run_drops_lines_after_the_checkpoint(tmp_path):
    """A kill between an evaluation's log line and its checkpoint: that line is logged again."""
    from spacy_sciner.training.loggers import keep_until

    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s}) + "\n" for s in (0, 4, 8, 12)))
    keep_until(log, 8)
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [0, 4, 8]
    keep_until(tmp_path / "missing.jsonl", 8)  # nothing logged yet: nothing to do
    assert not (tmp_path / "missing.jsonl").exists()


def test_resume_after_the_last_evaluation_makes_no_extra_update(corpus, tmp_path, monkeypatch):
    """Killed after the last checkpoint, before the run was marked finished: a resume only
    marks it finished (no update past max_steps, model-last as the uninterrupted run's)."""
    over = overrides(corpus, "sciner_spancat_cnn", None, steps=8)
    assert train("sciner_spancat_cnn", tmp_path / "full", over) == 0
    write = checkpoint.write

    def killed_at_the_end(output, state, nlp=None):
        if state["finished"]:
            raise KeyboardInterrupt
        write(output, state, nlp)

    monkeypatch.setattr(checkpoint, "write", killed_at_the_end)
    with pytest.raises(KeyboardInterrupt):
        train("sciner_spancat_cnn", tmp_path / "cut", over)
    monkeypatch.setattr(checkpoint, "write", write)
    assert checkpoint.read(tmp_path / "cut")[1]["step"] == 8
    assert train("sciner_spancat_cnn", tmp_path / "cut", over, resume=True) == 0
    assert checkpoint.read(tmp_path / "cut")[1]["finished"]
    assert_same_weights(tmp_path / "full" / "model-last", tmp_path / "cut" / "model-last")


def test_averaged_transformer_is_saved_and_resumed(corpus, tmp_path, tiny_bert_dir):
    """use_averages = true: model-last holds the averages of the transformer's weights too (not
    only of spaCy's layers), and a resumed run ends as an uninterrupted one."""
    over = {**overrides(corpus, "sciner_spancat_hybrid", tiny_bert_dir, steps=12), "training.optimizer.use_averages": True}
    assert train("sciner_spancat_hybrid", tmp_path / "full", over) == 0
    with pytest.raises(RuntimeError, match="simulated kill"):
        train("sciner_spancat_hybrid", tmp_path / "cut", over, crash_at=9)
    folder, state = checkpoint.read(tmp_path / "cut")
    averages = state["optimizer"]["averages"]
    saved, raw = weights(tmp_path / "cut" / "model-last"), weights(folder / checkpoint.MODEL)
    # Every trained torch weight (the pooler gets no gradient: it has no average and stays as is).
    torch_keys = {k: f"transformer/s0/{k.split('/s0/', 1)[1]}" for k in saved if k.startswith("transformer/") and "/s0/" in k}
    torch_keys = {k: name for k, name in torch_keys.items() if name in averages}
    assert len(torch_keys) > 10
    for key, name in torch_keys.items():
        numpy.testing.assert_array_equal(saved[key], averages[name], err_msg=key)
    assert any(not numpy.array_equal(saved[k], raw[k]) for k in torch_keys)  # not the raw weights
    assert train("sciner_spancat_hybrid", tmp_path / "cut", over, resume=True) == 0
    assert_same_weights(tmp_path / "full" / "model-last", tmp_path / "cut" / "model-last")
    assert_same_weights(tmp_path / "full" / "model-best", tmp_path / "cut" / "model-best")
