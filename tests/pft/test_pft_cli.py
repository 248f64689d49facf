import json
import logging

import pytest
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli

runner = CliRunner()


def test_pft_command_trains_and_reports(tmp_path, tiny_bert_dir, corpus_jsonl):
    out = tmp_path / "out"
    result = runner.invoke(sciner_cli, [
        "pft", str(corpus_jsonl), str(out), "--encoder", str(tiny_bert_dir), "--objective", "mlm_cand+ecb",
        "--max-steps", "3", "--batch-size", "4", "--save-every", "2", "--threads", "1", "--seed", "1",
        "--workers", "0",
    ])
    assert result.exit_code == 0, result.output
    assert "tokens/s whole run, " in result.output and "tokens/s after step 1 (steady state), 0 masking workers" in result.output
    assert "MLM head: ADDED" in result.output
    assert "candidates kept 96/96" in result.output
    assert "masked pieces per 1,000 tokens: mlm_cand " in result.output and ", ecb " in result.output
    log = json.loads((out / "pft_log.json").read_text())
    assert log["objective"] == "mlm_cand+ecb" and log["steps"] == 3 and log["config"]["seed"] == 1
    assert log["config"]["workers"] == 0 and log["steady_from_step"] == 1 and log["tokens_per_s_steady"] > 0
    assert (out / "config.json").exists() and (out / "vocab.txt").exists()


def test_pft_command_bad_input_exits_with_a_message(tmp_path, tiny_bert_dir):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a b", "tokens": ["a", "b"], "candidates": [[0, 9, "dict"]]}\n')
    result = runner.invoke(sciner_cli, ["pft", str(bad), str(tmp_path / "o"), "--encoder", str(tiny_bert_dir)])
    assert result.exit_code == 1
    assert f"{bad}:1: candidate" in result.output
    result = runner.invoke(sciner_cli, ["pft", str(bad), str(tmp_path / "o"), "--objective", "mlm_cand+sbo"])
    assert result.exit_code == 1 and "cannot be combined" in result.output


def test_missing_encoder_is_one_line_and_leaves_nothing(tmp_path, corpus_jsonl):
    out = tmp_path / "out"
    result = runner.invoke(sciner_cli, ["pft", str(corpus_jsonl), str(out), "--encoder", str(tmp_path / "no-such-enc")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"pft: Encoder folder not found: {tmp_path / 'no-such-enc'} (pass an existing checkpoint folder, "
        "a Hugging Face hub name or 'sciner-minilm')"
    ]
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--max-steps", "0"], "pft: PFT settings must be at least 1: --max-steps 0"),
    (["--save-every", "0", "--log-every", "0"], "pft: PFT settings must be at least 1: --save-every 0, --log-every 0"),
    (["--mask-ratio", "0"], "pft: --mask-ratio 0.0 must be in (0, 1]"),
    (["--warmup-ratio", "1.5"], "pft: --warmup-ratio 1.5 must be in [0, 1]"),
    (["--lr", "0"], "pft: --lr 0.0 must be positive"),
    (["--gpu-id", "99"], "--gpu-id 99 given but torch sees"),
    (["--max-length", "4096"], "pft: --max-length 4096 exceeds the"),
])
def test_bad_settings_stop_before_any_work(tmp_path, tiny_bert_dir, corpus_jsonl, args, message):
    out = tmp_path / "out"
    result = runner.invoke(sciner_cli, ["pft", str(corpus_jsonl), str(out), "--encoder", str(tiny_bert_dir), *args])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert message in result.output
    assert not out.exists()


def test_missing_corpus_and_bad_output_are_found_first(tmp_path, tiny_bert_dir):
    result = runner.invoke(sciner_cli, ["pft", str(tmp_path / "none.jsonl"), str(tmp_path / "o")])
    assert result.exit_code == 1 and f"PFT corpus not found: {tmp_path / 'none.jsonl'}" in result.output
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    corpus = blocker.with_name("c.jsonl")
    corpus.write_text('{"text": "a b", "candidates": [[0, 1]]}\n')
    result = runner.invoke(sciner_cli, ["pft", str(corpus), str(blocker / "out"), "--encoder", "no/such/enc"])
    assert result.exit_code == 1 and "a-file/out is not writable" in result.output  # before the encoder


def test_bad_corpus_leaves_no_output(tmp_path, tiny_bert_dir):
    bad = tmp_path / "no-candidates.jsonl"
    bad.write_text('{"text": "a b c"}\n' * 5)
    out = tmp_path / "out"
    result = runner.invoke(sciner_cli, ["pft", str(bad), str(out), "--encoder", str(tiny_bert_dir)])
    assert result.exit_code == 1 and "has no usable candidate spans" in result.output
    assert not out.exists()


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_train_warning_of_transformers_is_replaced_by_ours(tiny_bert_dir, caplog):
    """transformers' loggers do not propagate to caplog: a handler on the model-loading
    logger sees what passes its filters, i.e. what its stderr handler would print."""
    from spacy_sciner.pft.heads import load_masked_lm

    model_logger = logging.getLogger("transformers.modeling_utils")
    seen = Records()
    model_logger.addHandler(seen)
    try:
        load_masked_lm(str(tiny_bert_dir))
    finally:
        model_logger.removeHandler(seen)
    assert not any("You should probably TRAIN" in m for m in seen.messages), seen.messages
    assert any("has no MLM head: added one" in r.getMessage() for r in caplog.records)
    # Only around the load: the filter is gone afterwards.
    assert not model_logger.filters


def test_bad_heldout_split_is_refused_first(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    from spacy_sciner.pft.train import train_pft

    for bad in ({"eval_fraction": 1.0}, {"eval_fraction": -0.1}, {"eval_max": -1}):
        with pytest.raises(ValueError, match="eval_fraction .* must be in \\[0, 1\\) and eval_max"):
            train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, **bad))
    assert not (tmp_path / "o").exists()
