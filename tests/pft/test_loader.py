"""The PFT data loader: worker count and resume change nothing; steady-state speed; loss reads.

Worker tests start real DataLoader workers (forkserver): a few seconds each.
"""
import os

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from spacy_sciner.pft import train as train_module
from spacy_sciner.pft.data import load_corpus
from spacy_sciner.pft.heads import load_tokenizer
from spacy_sciner.pft.loader import MicroBatches, PackedExamples, micro_batches
from spacy_sciner.pft.masking import MaskVocab, parse_objective
from spacy_sciner.pft.train import steady_warmup_steps, train_pft

FIELDS = ("input_ids", "attention_mask", "positions", "labels", "objective")


def weights(path):
    return load_file(os.path.join(path, "model.safetensors"))


def same_batch(a, b):
    return (all(torch.equal(getattr(a, f), getattr(b, f)) for f in FIELDS) and a.n_tokens == b.n_tokens
            and a.selection.keys() == b.selection.keys()
            and all(torch.equal(a.selection[k], b.selection[k]) for k in a.selection))


@pytest.fixture
def examples(tiny_bert_dir, corpus_jsonl):
    tokenizer = load_tokenizer(str(tiny_bert_dir))
    return load_corpus(corpus_jsonl, tokenizer, 32)[0], MaskVocab.from_tokenizer(tokenizer)


def test_packed_examples_are_the_examples(examples):
    train, _ = examples
    packed = PackedExamples(train)
    assert len(packed) == len(train) and [packed[i] for i in range(len(train))] == train


def test_micro_batches_do_not_depend_on_workers_or_start(examples):
    train, vocab = examples
    objectives = parse_objective("mlm_cand+ecb")

    def served(data, workers, start):
        dataset = MicroBatches(data, objectives, vocab, batch_size=5, seed=3, mask_ratio=0.15, start=start, stop=24)
        return list(micro_batches(dataset, workers, pin_memory=False))

    # 24 micro-batches of 5 from 48 examples: two and a half epochs, so epoch changes too.
    inline = served(train, 0, 0)
    assert len(inline) == 24 and inline[0].selection
    two_workers = served(PackedExamples(train), 2, 0)
    assert len(two_workers) == 24 and all(same_batch(a, b) for a, b in zip(inline, two_workers))
    # A run resumed at micro-batch 7 gets micro-batches 7.. exactly (here with one worker).
    resumed = served(PackedExamples(train), 1, 7)
    assert len(resumed) == 17 and all(same_batch(a, b) for a, b in zip(inline[7:], resumed))


def test_worker_count_and_resume_change_nothing(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config, monkeypatch):
    settings = dict(max_steps=6, grad_accum=2, save_every=3, eval_every=3, log_every=1, seed=2)
    inline = train_pft(pft_config(corpus_jsonl, tmp_path / "w0", tiny_bert_dir, workers=0, **settings))
    assert inline["workers"] == 0
    real_save = train_module.save_checkpoint

    def save_then_die(output, step, *args):
        real_save(output, step, *args)
        if step == 3:
            raise KeyboardInterrupt  # killed right after the first checkpoint

    monkeypatch.setattr(train_module, "save_checkpoint", save_then_die)
    out = tmp_path / "w2"
    with pytest.raises(KeyboardInterrupt):
        train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, workers=2, **settings))
    monkeypatch.setattr(train_module, "save_checkpoint", real_save)
    # Another worker count is not a resume mismatch: it cannot change the result.
    resumed = train_pft(pft_config(corpus_jsonl, out, tiny_bert_dir, workers=1, resume=True, **settings))
    assert resumed["resumed_at"] == [3] and resumed["workers"] == 1
    a, b = weights(tmp_path / "w0"), weights(out)
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    assert [e["losses"] for e in inline["train"]] == [e["losses"] for e in resumed["train"]]
    assert inline["eval"] == resumed["eval"]
    # Each process segment has its own warm-up step: 5 steady steps straight, 2 + 2 resumed.
    assert inline["steady_steps"] == 5 and resumed["steady_steps"] == 4


def test_steady_speed_and_deferred_loss_reads(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config, monkeypatch):
    real_losses = train_module.compute_losses
    calls = []  # per micro-batch: its tokens and its loss parts read at once, as the old loop did

    def recording(model, sbo_head, batch, device):
        loss, parts = real_losses(model, sbo_head, batch, device)
        if model.training:
            calls.append((batch.n_tokens, {name: value.item() for name, value in parts.items()}))
        return loss, parts

    monkeypatch.setattr(train_module, "compute_losses", recording)
    log = train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, workers=0, max_steps=20,
                               grad_accum=2, log_every=3, save_every=20, eval_every=20))
    assert len(calls) == 40
    # The logged window means equal the old per-micro-batch .item() arithmetic, bit for bit.
    steps = []
    for s in range(20):
        parts_sum = {}
        for _, parts in calls[2 * s : 2 * s + 2]:
            for name, value in parts.items():
                parts_sum[name] = parts_sum.get(name, 0.0) + value / 2
        steps.append(parts_sum)
    ends = [3, 6, 9, 12, 15, 18, 20]
    assert [e["step"] for e in log["train"]] == ends
    for entry, start, end in zip(log["train"], [0] + ends, ends):
        window = steps[start:end]
        names = sorted({n for w in window for n in w})
        assert entry["losses"] == {n: float(np.mean([w[n] for w in window if n in w])) for n in names}
    # Steady state: the first 10% of the steps (2 of 20) are warm-up.
    assert log["steady_from_step"] == steady_warmup_steps(20) == 2
    tokens = [n for n, _ in calls]
    assert log["tokens"] == sum(tokens) and log["steady_tokens"] == sum(tokens[4:]) and log["steady_steps"] == 18
    assert 0 < log["steady_wall_s"] < log["wall_s"]
    assert log["tokens_per_s_steady"] == log["steady_tokens"] / log["steady_wall_s"]


def test_too_short_a_run_has_no_steady_speed(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    log = train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, max_steps=1, workers=0))
    assert log["tokens_per_s_steady"] is None and log["steady_steps"] == 0 and log["tokens_per_s"] > 0


def test_negative_workers_are_refused(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    with pytest.raises(ValueError, match="--workers -1 must be at least 0"):
        train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, workers=-1))
    assert not (tmp_path / "o").exists()
