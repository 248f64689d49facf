"""The PFT comparison's summary: mean ± std over seeds and paired per-seed differences."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "pft_compare.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("pft_compare", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(variant, seed, f, pft=True):
    record = {"dataset": "scierc", "variant": variant, "seed": seed, "p": f, "r": f, "f": f, "train_wall_s": 10.0}
    if pft and variant != "none":
        record["pft"] = {"wall_s": 5.0, "eval_loss_first": 3.0, "eval_loss_last": 2.0}
    return record


def test_summary_pairs_seeds_against_none(compare):
    records = [_run("none", 0, 0.40), _run("none", 1, 0.50), _run("none", 2, 0.45),
               _run("mlm_cand+ecb", 0, 0.42), _run("mlm_cand+ecb", 1, 0.49), _run("mlm_cand+ecb", 2, 0.48)]
    rows = {r["variant"]: r for r in compare.summarize(records)}
    assert rows["none"]["f"] == pytest.approx(45.0)
    assert rows["none"]["f_std"] == pytest.approx(5.0)
    assert "delta_f" not in rows["none"]
    cand = rows["mlm_cand+ecb"]
    # per-seed differences +2, -1, +3 -> mean 4/3, two wins of three
    assert cand["delta_f"] == pytest.approx(4 / 3)
    assert cand["delta_f_std"] == pytest.approx(2.0816659994661326)
    assert cand["wins"] == 2
    assert cand["pft_eval_loss"] == [3.0, 2.0]


def test_summary_counts_a_tie_as_no_win(compare):
    records = [_run("none", 0, 0.40), _run("mlm_random", 0, 0.40 + 1e-12)]
    row = [r for r in compare.summarize(records) if r["variant"] == "mlm_random"][0]
    assert row["wins"] == 0
    assert row["delta_f_std"] == 0.0


def test_train_steps_follow_words_and_epochs(compare, tmp_path):
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = [nlp.make_doc("one two three four five") for _ in range(200)]  # 1,000 words
    DocBin(docs=docs).to_disk(tmp_path / "train.spacy")

    class Args:
        batch_words, train_epochs, train_max_steps = 100, 3, 0

    assert compare.train_steps(tmp_path / "train.spacy", Args) == 30
    Args.train_max_steps = 7
    assert compare.train_steps(tmp_path / "train.spacy", Args) == 7


def test_report_shows_masking_rates_and_the_earlier_f(compare, tmp_path, monkeypatch):
    records = [_run("none", 0, 0.40), _run("mlm_cand+ecb", 0, 0.42)]
    records[1]["pft"]["masked_per_1k_tokens"] = {"mlm_cand": 91.25, "ecb": 40.0}
    monkeypatch.setattr(compare, "previous_summary", lambda rev, out: {("scierc", "none"): 30.27})

    args = SimpleNamespace(
        smoke=False, encoder="enc", pft_steps=300, pft_batch_size=16, pft_sentences=5000, train_epochs=6,
        train_max_steps=0, seeds=[0], select="last", calibrate=True, score_key="spans_sc", pft_per_seed=False,
        pft_seed=0, limit_train=600, limit_dev=300, limit_test=800, before_rev="d607b8c")
    compare.write_results(records, compare.summarize(records), args, tmp_path / "cmp")
    lines = (tmp_path / "cmp.md").read_text().splitlines()
    assert "F at d607b8c" in next(line for line in lines if line.startswith("| data set"))
    none_row = next(line for line in lines if "| none |" in line)
    cand_row = next(line for line in lines if "| mlm_cand+ecb |" in line)
    assert "| 30.27 |" in none_row
    assert "| — |" in cand_row  # no earlier result for this variant
    assert "mlm_cand 91.2, ecb 40.0" in cand_row
    assert "Incomplete" not in "\n".join(lines)
    args.missing = ["scierc/none/seed1"]
    compare.write_results(records, compare.summarize(records), args, tmp_path / "cmp")
    assert "**Incomplete**: 1 runs not finished yet, so not in the table: scierc/none/seed1" in (tmp_path / "cmp.md").read_text()


def test_a_killed_training_is_rerun_not_taken_as_finished(compare, tmp_path, monkeypatch):
    """Training writes model-last at its step-0 evaluation: a run killed after that must
    train again (sciner train --resume: from its last checkpoint) and drop the
    calibration/metrics of the untrained model, not be scored."""
    import spacy
    from spacy.tokens import DocBin

    DocBin(docs=[spacy.blank("en").make_doc("a b c d e")]).to_disk(tmp_path / "train.spacy")
    run_dir = tmp_path / "work" / "runs" / "none" / "seed0"
    (run_dir / "train" / "model-last").mkdir(parents=True)
    (run_dir / "train" / "model-last" / "meta.json").write_text("{}")  # left by the killed run
    (run_dir / "model-calibrated").mkdir()
    (run_dir / "metrics.json").write_text('{"spans_sc_p": 0, "spans_sc_r": 0, "spans_sc_f": 0}')
    commands = []

    def fake_run(cmd, log):
        commands.append(cmd)
        if "calibrate" in cmd:
            Path(cmd[6]).mkdir(parents=True, exist_ok=True)
            (Path(cmd[6]) / "meta.json").write_text("{}")
        if "evaluate" in cmd:
            Path(cmd[cmd.index("--output") + 1]).write_text('{"spans_sc_p": 0.5, "spans_sc_r": 0.5, "spans_sc_f": 0.5}')

    monkeypatch.setattr(compare, "run", fake_run)
    args = SimpleNamespace(encoder="enc", config=Path("c.cfg"), train_epochs=1, train_max_steps=0, batch_words=100,
                           train_eval_frequency=0, select="last", train_lr=1e-4, gpu_id=-1, calibrate=True,
                           score_key="spans_sc")
    paths = {"train": tmp_path / "train.spacy", "dev": tmp_path / "dev.spacy", "test": tmp_path / "test.spacy"}
    record = compare.run_variant("scierc", "none", 0, paths, args, tmp_path / "work")
    assert [c[2:4] for c in commands] == [["spacy_sciner", "train"], ["spacy_sciner", "calibrate"], ["spacy", "evaluate"]]
    assert "--resume" in commands[0]
    assert record["f"] == 0.5 and (run_dir / "train_wall_s.txt").exists()
    commands.clear()
    compare.run_variant("scierc", "none", 0, paths, args, tmp_path / "work")
    assert commands == []  # finished: nothing reruns
