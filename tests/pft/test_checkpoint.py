from dataclasses import asdict, replace

import pytest
import torch
import torch.serialization

from spacy_sciner.pft import train as train_module
from spacy_sciner.pft.checkpoint import (
    RESUME_KEYS,
    STATE_FILE,
    check_resume,
    load_state,
    restore_scaler,
    resume_mismatches,
)
from spacy_sciner.pft.train import PFTConfig, train_pft

SCHEDULE_AND_SPLIT = {"max_steps": 9, "lr": 1e-4, "warmup_ratio": 0.2, "limit": 40, "eval_fraction": 0.2, "eval_max": 3}


def test_resume_keys_cover_the_schedule_and_the_heldout_split():
    assert set(SCHEDULE_AND_SPLIT) <= set(RESUME_KEYS)
    saved = asdict(PFTConfig(corpus="c", output="o"))
    for key, value in SCHEDULE_AND_SPLIT.items():
        assert resume_mismatches(saved, {**saved, key: value}) == [f"'{key}' was {saved[key]!r}, now {value!r}"]
    # Settings that do not change the run (logging, checkpointing, threads) may differ.
    assert resume_mismatches(saved, {**saved, "log_every": 1, "save_every": 7, "threads": 2, "resume": True}) == []


def test_resume_refusal_names_every_differing_setting_in_one_line(tmp_path):
    saved = asdict(PFTConfig(corpus="c", output="o"))
    with pytest.raises(ValueError) as err:
        check_resume(tmp_path / "step-00000004", saved, {**saved, "lr": 1e-3, "eval_max": 5})
    message = str(err.value)
    assert "\n" not in message
    assert "'lr' was 5e-05, now 0.001" in message and "'eval_max' was 256, now 5" in message


def test_resume_with_another_schedule_is_refused_before_reading_the_corpus(
    tmp_path, tiny_bert_dir, corpus_jsonl, pft_config, monkeypatch
):
    out = tmp_path / "o"
    cfg = pft_config(corpus_jsonl, out, tiny_bert_dir, max_steps=4, save_every=2)
    train_pft(cfg)
    (out / "pft_log.json").unlink()  # as if killed before the end: resume would train again

    def no_corpus(*args, **kwargs):
        raise AssertionError("the corpus was read before the settings were checked")

    monkeypatch.setattr(train_module, "load_corpus", no_corpus)
    for key, value in SCHEDULE_AND_SPLIT.items():
        with pytest.raises(ValueError, match=f"Cannot resume .*step-00000004: '{key}' was"):
            train_pft(replace(cfg, resume=True, **{key: value}))


def save_as_if_on_gpu(state, path, monkeypatch):
    """torch.save with every storage tagged as a CUDA one, as a GPU run writes it."""
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save(state, path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_gpu_checkpoint_loads_on_the_cpu(tmp_path, monkeypatch):
    state = {"step": 4, "optimizer": {"state": {0: {"exp_avg": torch.ones(3)}}}, "scaler": {}}
    save_as_if_on_gpu(state, tmp_path / STATE_FILE, monkeypatch)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(tmp_path / STATE_FILE, weights_only=False)  # what resume did before
    loaded = load_state(tmp_path)
    assert loaded["step"] == 4 and loaded["optimizer"]["state"][0]["exp_avg"].device.type == "cpu"


def test_an_empty_scaler_state_is_skipped():
    """A CPU or bf16 run saves the state of a disabled scaler: {}."""
    assert torch.amp.GradScaler("cpu", enabled=False).state_dict() == {}
    enabled = torch.amp.GradScaler("cpu", init_scale=1024.0, enabled=True)
    with pytest.raises(RuntimeError, match="empty"):
        enabled.load_state_dict({})  # what resume did before
    restore_scaler(enabled, {})
    assert enabled.get_scale() == 1024.0
    restore_scaler(enabled, {**enabled.state_dict(), "scale": 8.0})
    assert enabled.get_scale() == 8.0
