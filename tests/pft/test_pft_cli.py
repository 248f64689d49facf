import json

from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli

runner = CliRunner()


def test_pft_command_trains_and_reports(tmp_path, tiny_bert_dir, corpus_jsonl):
    out = tmp_path / "out"
    result = runner.invoke(sciner_cli, [
        "pft", str(corpus_jsonl), str(out), "--encoder", str(tiny_bert_dir), "--objective", "mlm_cand+ecb",
        "--max-steps", "3", "--batch-size", "4", "--save-every", "2", "--threads", "1", "--seed", "1",
    ])
    assert result.exit_code == 0, result.output
    assert "MLM head: ADDED" in result.output
    assert "candidates kept 96/96" in result.output
    log = json.loads((out / "pft_log.json").read_text())
    assert log["objective"] == "mlm_cand+ecb" and log["steps"] == 3 and log["config"]["seed"] == 1
    assert (out / "config.json").exists() and (out / "vocab.txt").exists()


def test_pft_command_bad_input_exits_with_a_message(tmp_path, tiny_bert_dir):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a b", "tokens": ["a", "b"], "candidates": [[0, 9, "dict"]]}\n')
    result = runner.invoke(sciner_cli, ["pft", str(bad), str(tmp_path / "o"), "--encoder", str(tiny_bert_dir)])
    assert result.exit_code == 1
    assert f"{bad}:1: candidate" in result.output
    result = runner.invoke(sciner_cli, ["pft", str(bad), str(tmp_path / "o"), "--objective", "mlm_cand+sbo"])
    assert result.exit_code == 1 and "cannot be combined" in result.output
