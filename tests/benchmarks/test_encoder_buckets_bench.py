"""benchmarks/encoder_buckets.py: updates/s and words/s by max_padded_wordpieces (tiny BERT, demo set)."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import encoder_buckets  # noqa: E402


def test_times_each_value_on_the_same_batches(tiny_bert_dir, shared_data, tmp_path):
    out = tmp_path / "encoder_buckets"
    report = encoder_buckets.main(["--dataset", "demo", "--encoder", str(tiny_bert_dir), "--values", "0", "16",
                                   "--updates", "2", "--rounds", "1", "--train-sentences", "20", "--dev-sentences", "10", "--batch-words", "60",
                                   "--state", str(tmp_path / "state"), "--results", str(out)])
    assert report["updates_per_round"] == 2 and report["dev_sentences"] == 10
    assert [r["max_padded_wordpieces"] for r in report["rows"]] == [0, 16]
    for row in report["rows"]:
        assert row["seconds_per_update"] > 0 and row["words_per_s"] > 0 and len(row["all_seconds_per_update"]) == 1
    assert json.loads(out.with_suffix(".json").read_text())["meta"]["rounds"] == 1
    assert "| 16 |" in out.with_suffix(".md").read_text()
    assert report["padding"]["train_batches"] >= 1.0 and report["padding"]["test_batches_of_64"] >= 1.0


def test_the_baseline_value_comes_first(tmp_path):
    with pytest.raises(SystemExit):
        encoder_buckets.main(["--values", "256", "0", "--results", str(tmp_path / "x")])


def test_padded_per_real_counts_each_group_padded_to_its_longest():
    def tokenizer(texts):  # one wordpiece per character
        return {"input_ids": [list(t) for t in texts]}

    assert encoder_buckets.padded_per_real(tokenizer, [["ab", "abcd"], ["abc"]]) == (2 * 4 + 3) / (2 + 4 + 3)
    assert encoder_buckets.padded_per_real(tokenizer, [["ab", "cd"]]) == 1.0
