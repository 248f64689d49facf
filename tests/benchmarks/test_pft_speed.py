"""benchmarks/pft_speed.py on a tiny random BERT and a few SciERC documents: every variant
times the same sentences, and the report holds each measurement it claims."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import pft_speed  # noqa: E402


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """main() sets torch's thread count (--threads): give the rest of the suite its own back."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def scierc_docs(shared_data, tmp_path):
    """The first 6 SciERC training documents (31 sentences)."""
    lines = Path(shared_data, "scierc", "train.json").read_text(encoding="utf8").splitlines()[:6]
    path = tmp_path / "train.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def test_pft_speed_runs_every_variant_on_the_same_batches(tiny_bert_dir, scierc_docs, tmp_path):
    out = tmp_path / "out" / "speed"
    result = pft_speed.main(["--encoder", str(tiny_bert_dir), "--data", str(scierc_docs), "--rounds", "2",
                             "--steps", "2", "--batch-size", "4", "--threads", "1", "--loader-batches", "3",
                             "--step-workers", "0", "--out", str(out)])
    assert json.loads(out.with_suffix(".json").read_text()) == json.loads(json.dumps(result))
    assert set(result["tokens_per_s"]) == set(pft_speed.VARIANTS)
    # 2 rounds x 2 steps of the same 8 sentences for each variant, stock or ours, in-step or loader
    assert len(set(result["timed_tokens"].values())) == 1 and result["timed_tokens"]["stock"] > 2 * 2 * 4
    assert all(v > 0 for v in result["tokens_per_s_steady"].values())
    assert result["steady_from_round"] == 1
    # random masking predicts about 15% of the pieces (the budget), counted over all 31 sentences
    rates = result["masking_rates_scierc"]
    assert rates["sentences"] == 31 and rates["masked_per_1k_tokens"]["mlm_random"]["mlm_random"] > 100
    assert set(result["loader_throughput"]) == {0, 1, 2}
    markdown = out.with_suffix(".md").read_text()
    for name in pft_speed.VARIANTS:
        assert f"| {name} |" in markdown
    assert "Data pipeline alone" in markdown and "31 SciERC train windows" in markdown


@pytest.mark.parametrize("argv, message", [
    (["--rounds", "0"], "at least 1"),
    (["--loader-batches", "1"], "at least 2"),
    (["--data", "no/such.json"], "no such file"),
])
def test_pft_speed_rejects_bad_settings_at_once(argv, message, capsys):
    with pytest.raises(SystemExit):
        pft_speed.main(argv)
    assert message in capsys.readouterr().err


def test_pft_speed_names_the_data_that_is_too_short(tiny_bert_dir, scierc_docs, tmp_path):
    with pytest.raises(SystemExit, match=r"train.json has 31 sentences; --steps 9 needs 40"):
        pft_speed.main(["--encoder", str(tiny_bert_dir), "--data", str(scierc_docs), "--steps", "9",
                        "--batch-size", "4", "--out", str(tmp_path / "x")])
