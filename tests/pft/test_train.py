import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from spacy_sciner.pft import train as train_module
from spacy_sciner.pft.heads import PFTModelError, load_masked_lm
from spacy_sciner.pft.train import PFTIOError, train_pft


def weights(path):
    return load_file(os.path.join(path, "model.safetensors"))


def test_mlm_head_is_added_when_missing(tiny_bert_dir):
    model, info = load_masked_lm(str(tiny_bert_dir))
    assert info["mlm_head_added"] is True
    assert "cls.predictions.transform.dense.weight" in info["missing_keys"]
    assert info["decoder_tied_to_embeddings"] is True
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


def test_tiny_bert_learns_and_checkpoint_loads_everywhere(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    out = tmp_path / "pft"
    # 12 held-out sentences: enough that the fixed held-out masking has both roles.
    log = train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, max_steps=40, eval_every=10, save_every=20,
                               eval_fraction=0.25))
    evals = [e["loss"] for e in log["eval"]]
    assert {"mlm_cand", "ecb"} <= set(log["eval"][0])
    assert evals[0] - evals[-1] > 1.0, evals  # the held-out loss falls
    assert log["finished"] and log["steps"] == 40 and log["head"]["mlm_head_added"]
    assert set(log["train"][-1]["losses"]) == {"mlm_cand", "ecb"} and log["tokens_per_s"] > 0
    assert json.loads((out / "pft_log.json").read_text())["steps"] == 40
    # The saved head is loaded back, so it is not "added" a second time.
    _, info = load_masked_lm(str(out))
    assert info["mlm_head_added"] is False
    # AutoModel loads the folder and has the trained encoder weights.
    from transformers import AutoModel, AutoTokenizer

    encoder, loading = AutoModel.from_pretrained(out, output_loading_info=True)
    assert loading["missing_keys"] == []  # the original pooler was carried over, not re-initialised
    trained = weights(out)
    assert torch.equal(trained["bert.pooler.dense.weight"], weights(tiny_bert_dir)["pooler.dense.weight"])
    assert torch.equal(encoder.embeddings.word_embeddings.weight, trained["bert.embeddings.word_embeddings.weight"])
    assert not torch.equal(trained["bert.embeddings.word_embeddings.weight"],
                           weights(tiny_bert_dir)["embeddings.word_embeddings.weight"])
    AutoTokenizer.from_pretrained(out)
    # spacy-transformers loads it by path through the project's architecture.
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {
        "@architectures": "spacy-sciner.TransformerModel.v1", "name": str(out),
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 64, "stride": 48},
    }})
    nlp.initialize()
    doc = nlp("Support vector machines classify images.")
    assert doc._.trf_data.tensors[0].shape[-1] == 32
    (shim,) = [shim for node in nlp.get_pipe("transformer").model.walk() for shim in node.shims]
    hf_model = shim._model
    assert torch.equal(hf_model.embeddings.word_embeddings.weight, trained["bert.embeddings.word_embeddings.weight"])


@pytest.mark.parametrize("objective", ["mlm_random", "mlm_span+sbo", "ecb"])
def test_baseline_objectives_train(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config, objective):
    log = train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, objective=objective, max_steps=4))
    assert set(log["train"][-1]["losses"]) == set(objective.split("+"))
    assert all(torch.isfinite(torch.tensor(e["loss"])) for e in log["eval"])


def test_same_seed_same_result(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    runs = [train_pft(pft_config(corpus_jsonl, tmp_path / f"r{i}", tiny_bert_dir, max_steps=4, seed=s))
            for i, s in enumerate([3, 3, 4])]
    w = [weights(tmp_path / f"r{i}") for i in range(3)]
    assert all(torch.equal(w[0][k], w[1][k]) for k in w[0])
    assert not all(torch.equal(w[0][k], w[2][k]) for k in w[0])
    assert runs[0]["eval"] == runs[1]["eval"]


def test_resume_after_sigkill_equals_uninterrupted_run(tmp_path, tiny_bert_dir, write_corpus, pft_config):
    corpus = write_corpus(tmp_path / "corpus.jsonl", n=64)
    settings = dict(max_steps=24, save_every=4, eval_every=6, log_every=1, seed=5, grad_accum=2, eval_fraction=0.05)
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "spacy_sciner", "pft", str(corpus), str(killed), "--encoder", str(tiny_bert_dir),
           "--max-steps", "24", "--batch-size", "4", "--lr", "1e-3", "--save-every", "4", "--eval-every", "6",
           "--threads", "1", "--seed", "5", "--grad-accum", "2", "--log-every", "1"]
    with open(tmp_path / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.time() + 600  # only guards against a hang: a loaded machine starts slowly
        while not (killed / "checkpoints" / "step-00000008").exists():
            assert proc.poll() is None and time.time() < deadline, (tmp_path / "stderr.txt").read_text()[-2000:]
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (killed / "config.json").exists()  # it really stopped before the end
    resumed = train_pft(pft_config(corpus, killed, tiny_bert_dir, resume=True, **settings))
    straight = train_pft(pft_config(corpus, tmp_path / "straight", tiny_bert_dir, **settings))
    a, b = weights(killed), weights(tmp_path / "straight")
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    assert resumed["resumed_at"] and resumed["resumed_at"][0] >= 8 and not straight["resumed_at"]
    # Per-step losses (log_every=1) and held-out losses match from the resume point on.
    at = resumed["resumed_at"][0]
    assert [e for e in resumed["train"] if e["step"] > at] and all(
        x["losses"] == y["losses"] for x, y in zip(resumed["train"], straight["train"]))
    assert [e["loss"] for e in resumed["eval"]] == [e["loss"] for e in straight["eval"]]
    # Only the last good checkpoints are kept, and no temporary folder is left behind.
    assert sorted(p.name for p in (killed / "checkpoints").iterdir()) == ["step-00000020", "step-00000024"]


def test_existing_checkpoints_need_resume(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, max_steps=4))
    with pytest.raises(PFTIOError, match="--resume"):
        train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, max_steps=4))
    with pytest.raises(ValueError, match="'seed' was 0, now 1"):
        train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, max_steps=8, seed=1, resume=True))


def test_checkpoint_dir_without_tokenizer_files(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_bert_dir / name, bare / name)
    with pytest.raises(PFTModelError, match=f"{bare} has no tokenizer files"):
        train_pft(pft_config(corpus_jsonl, tmp_path / "o", bare))


def test_unwritable_output_is_a_clear_error(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(PFTIOError, match="a-file/out is not writable"):
        train_pft(pft_config(corpus_jsonl, blocker / "out", tiny_bert_dir))


def test_disk_full_keeps_the_last_good_checkpoint(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config, monkeypatch):
    real_save = torch.save
    calls = []

    def save_until_disk_is_full(obj, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:  # the second checkpoint hits a full disk half-way
            with open(path, "wb") as file_:
                file_.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(train_module.torch, "save", save_until_disk_is_full)
    out = tmp_path / "o"
    with pytest.raises(PFTIOError, match=r"No space left on device.*last good checkpoint is .*step-00000004"):
        train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, max_steps=12, save_every=4))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000004"]
    monkeypatch.setattr(train_module.torch, "save", real_save)
    # The intact checkpoint resumes to the end.
    log = train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, max_steps=12, save_every=4, resume=True))
    assert log["resumed_at"] == [4] and log["steps"] == 12 and (out / "config.json").exists()


def test_kill_during_final_install_is_finished_by_resume(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config,
                                                         monkeypatch):
    real_install = train_module._install_final

    def killed_half_way(output, model, tokenizer):
        (output / "config.json").write_text("{}")  # one file landed, then the process died
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "_install_final", killed_half_way)
    out = tmp_path / "o"
    with pytest.raises(KeyboardInterrupt):
        train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, max_steps=4))
    monkeypatch.setattr(train_module, "_install_final", real_install)
    log = train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, max_steps=4, resume=True))
    assert log["installed"] and json.loads((out / "pft_log.json").read_text())["installed"]
    assert log["steps"] == 4 and log["tokens_per_s"] > 0 and log["tokens_per_s_steady"] > 0  # kept from the run
    load_masked_lm(str(out))  # a complete checkpoint now
    # A further --resume has nothing left to do and returns the same log.
    assert train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, max_steps=4, resume=True)) == log
