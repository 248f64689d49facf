"""benchmarks/lr_schedule.py on the demo with a tiny random BERT and a short budget."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import lr_schedule  # noqa: E402


def test_both_schedules_train_calibrate_and_report(tmp_path):
    from spacy_sciner.testing import make_tiny_bert

    tiny = tmp_path / "tiny-bert"
    make_tiny_bert(tiny)
    results = tmp_path / "results" / "lr_schedule"
    assert lr_schedule.main(["--encoder", str(tiny), "--max-epochs", "2", "--eval-frequency", "5", "--warmup-steps", "2",
                             "--threads", "1", "--work", str(tmp_path / "work"), "--results", str(results)]) == 0
    res = json.loads(results.with_suffix(".json").read_text())
    per_epoch = res["settings"]["updates_per_epoch"]
    assert per_epoch > 0
    runs = res["schedules"]
    assert runs["the config's total_steps"]["total_steps"] == 1000
    assert runs["the budget's last update"]["total_steps"] == 2 * per_epoch
    for r in runs.values():
        assert 0.0 <= r["dev_f"] <= 1.0 and 0.0 <= r["test_f"] <= 1.0
        assert r["selected_checkpoint"] in ("model-best", "model-last")
    assert res["better_on_dev"] == max(runs, key=lambda k: runs[k]["dev_f"])
    # each training really used its schedule: the spacy train command line says so
    log = (tmp_path / "work" / "demo" / "budget" / "log.txt").read_text()
    assert f"--training.optimizer.learn_rate.total_steps {2 * per_epoch}" in log
    assert "| the budget's last update |" in results.with_suffix(".md").read_text()
