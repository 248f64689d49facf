"""benchmarks/convergence.py in its --smoke mode (tiny random BERT, demo data, a few steps)."""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import convergence  # noqa: E402
import convergence_runs  # noqa: E402


@pytest.fixture
def run(capsys):
    """Call the script's main in this process (its trainings are subprocesses); returns
    the printed output and exit code."""

    def call(*args, check=True):
        try:
            rc = convergence.main([str(a) for a in args])
        except SystemExit as err:
            rc = err.code
        out = capsys.readouterr()
        if check:
            assert rc == 0, f"rc {rc}\n{out.out[-3000:]}\n{out.err[-3000:]}"
        return SimpleNamespace(returncode=rc, stdout=out.out, stderr=out.err)

    return call


def load(results: Path) -> dict:
    return json.loads((results / "convergence.json").read_text())["runs"]


def test_smoke_end_to_end(tmp_path, run):
    """Train (transformer path, tiny BERT) to convergence, calibrate on dev, test F, report."""
    results = tmp_path / "results"
    res = run("--smoke", "--state", tmp_path / "state", "--results", results, "--systems", "sciner_spancat")
    assert "[demo/sciner_spancat/seed0] converged" in res.stdout
    runs = load(results)
    r = runs["demo/sciner_spancat/seed0"]
    assert r["status"] == "converged"
    steps = [p["step"] for p in r["curve"]]
    assert len(steps) >= 2 and steps == sorted(set(steps))
    assert r["best"]["step"] in steps
    assert 0.0 <= r["evaluation"]["spans_f"] <= 1.0 and "calibration_log" in r["evaluation"]
    assert set(r["summary"]["dev_f_at_minutes"]) == {"0.05", "0.1", "0.5"}
    # Converged within 30 s of training: the best checkpoint at 0.5 min is the final one.
    assert r["summary"]["test_spans_f_at_minutes"]["0.5"] == r["evaluation"]["spans_f"]
    assert (results / "convergence.md").read_text().count("| demo | sciner_spancat |") == 1
    try:
        import matplotlib  # noqa: F401  (the [bench] extra, not [test])
    except ImportError:  # the JSON and Markdown are written anyway, and the reason printed
        assert not (results / "convergence.png").exists() and "matplotlib not installed" in res.stdout
    else:
        assert (results / "convergence.png").stat().st_size > 0 and (results / "convergence_demo.png").exists()
    # The run state is outside the results: a later call reuses the finished run.
    again = run("--smoke", "--state", tmp_path / "state", "--results", results, "--systems", "sciner_spancat")
    assert "] call " not in again.stdout


def test_budget_stop_resume_and_merge(tmp_path, run):
    """A run stopped by its time budget continues with `sciner train --resume` from the
    checkpoint of its last evaluation and ends as an uninterrupted run of the same system and
    seed does: the same curve (steps, scores) and the same model-best weights. Results from
    other runs already in the JSON stay."""
    state, results = tmp_path / "state", tmp_path / "results"
    results.mkdir()
    other = {"dataset": "elsewhere", "system": "spacy_ner", "seed": 0, "status": "converged", "curve": [],
             "segments": [], "best": None, "resume_checks": [], "evaluation": None, "summary": {}}
    (results / "convergence.json").write_text(json.dumps({"runs": {"elsewhere/spacy_ner/seed0": other}}))
    common = ["--smoke", "--results", results, "--systems", "spacy_ner_cnn", "--eval-frequency", "3", "--no-evaluate"]
    first = run(*common, "--state", state, "--max-minutes", "0.001")
    assert "stopped" in first.stdout
    r = load(results)["demo/spacy_ner_cnn/seed0"]
    assert r["status"] == "stopped" and r["calls"][0]["stop"] == "time budget"
    saved = r["curve"][-1]
    run_dir = state / "runs" / "demo" / "spacy_ner_cnn-seed0"
    assert (run_dir / "train" / "checkpoint" / "state.pkl").exists()

    second = run(*common, "--state", state, "--patience-evals", "3")
    assert f"call 1 (resumes after step {saved['step']})" in second.stdout
    # The run keeps the settings of its first call (a resume with others would be refused).
    assert "continuing with the run's own settings, not {'patience_evals': 3}" in second.stdout
    runs = load(results)
    r = runs["demo/spacy_ner_cnn/seed0"]
    assert r["status"] == "converged" and [c["stop"] for c in r["calls"]] == ["time budget", "converged"]
    assert r["curve"][:len(r["curve"]) - r["calls"][1]["evals"]][-1]["step"] == saved["step"]
    steps, seconds = [p["step"] for p in r["curve"]], [p["seconds"] for p in r["curve"]]
    assert steps == sorted(set(steps)) and seconds == sorted(seconds) and steps[-1] > saved["step"]
    assert "Resuming after update" in (run_dir / "train.log").read_text()
    assert "elsewhere/spacy_ner/seed0" in runs  # merged, not overwritten
    assert "| demo | spacy_ner_cnn | 0 | converged | 2 |" in (results / "convergence.md").read_text()

    # The same run uninterrupted, in a state dir of its own.
    run(*common, "--state", tmp_path / "whole", "--results", tmp_path / "whole-results")
    whole = load(tmp_path / "whole-results")["demo/spacy_ner_cnn/seed0"]
    assert [(p["step"], p["score"]) for p in whole["curve"]] == [(p["step"], p["score"]) for p in r["curve"]]
    assert whole["best"]["step"] == r["best"]["step"]
    best = lambda root: root / "runs" / "demo" / "spacy_ner_cnn-seed0" / "train" / "model-best"  # noqa: E731
    for part in ("tok2vec/model", "ner/model"):
        assert (best(state) / part).read_bytes() == (best(tmp_path / "whole") / part).read_bytes(), part


def test_budget_stop_and_resume_of_a_transformer_run_equals_an_uninterrupted_one(tmp_path, run):
    """The same for sciner_spancat on the tiny BERT (a fixed budget of 12 updates, stopped after
    its first evaluation): equal curves and equal weights of the torch encoder and the head in
    model-last and model-best (compared loaded: spacy-transformers' files are not byte-stable)."""
    import numpy
    import spacy

    common = ["--smoke", "--systems", "sciner_spancat_decay12", "--eval-frequency", "3", "--no-evaluate"]
    cut, whole = tmp_path / "cut", tmp_path / "whole"
    assert "stopped" in run(*common, "--state", cut, "--results", cut / "r", "--max-minutes", "0.001").stdout
    assert "call 1 (resumes after step 0)" in run(*common, "--state", cut, "--results", cut / "r").stdout
    # sciner train continued from the checkpoint (a fresh run would also match the uninterrupted one)
    assert "Resuming after update 0" in (cut / "runs" / "demo" / "sciner_spancat_decay12-seed0" / "train.log").read_text()
    run(*common, "--state", whole, "--results", whole / "r")
    curves = [[(p["step"], p["score"]) for p in load(root / "r")["demo/sciner_spancat_decay12/seed0"]["curve"]]
              for root in (cut, whole)]
    assert curves[0] == curves[1] and curves[0][-1][0] == 12
    for name in ("model-last", "model-best"):
        a, b = (spacy.load(root / "runs" / "demo" / "sciner_spancat_decay12-seed0" / "train" / name) for root in (cut, whole))
        ta, tb = (nlp.get_pipe("transformer").model.transformer.state_dict() for nlp in (a, b))
        assert all(bool((ta[k] == tb[k]).all()) for k in ta), name
        for x, y in zip(a.get_pipe("sciner_spancat").model.walk(), b.get_pipe("sciner_spancat").model.walk()):
            for param in x.param_names:
                if x.has_param(param):
                    numpy.testing.assert_array_equal(x.get_param(param), y.get_param(param))


def test_call_status():
    """How a call ended, from its exit code, the budget marker and the curve: a process killed
    after its last evaluation has nothing left to train (a resume would not update)."""
    settings = {"patience_evals": 2, "eval_frequency": 3, "max_steps": 10}  # last step: 12
    curve = lambda *pts: [{"step": s, "score": f} for s, f in pts]  # noqa: E731
    status = convergence_runs.call_status
    assert status({"curve": curve((0, 0.1), (3, 0.2)), "settings": settings}, 0, None) == "converged"
    assert status({"curve": curve((0, 0.1), (12, 0.2)), "settings": settings}, 0, None) == "max steps"
    assert status({"curve": curve((0, 0.1), (3, 0.2)), "settings": settings}, 1, {"reason": "time budget"}) == "time budget"
    assert status({"curve": curve((0, 0.1), (3, 0.2)), "settings": settings}, 1, None) == "failed"
    assert status({"curve": curve((0, 0.1), (3, 0.2)), "settings": settings}, None, None) == "interrupted"
    # killed after an evaluation that ended it: by patience (2 x 3 updates without gain), by max_steps
    assert status({"curve": curve((0, 0.3), (3, 0.2), (6, 0.2)), "settings": settings}, None, None) == "converged"
    assert status({"curve": curve((0, 0.1), (12, 0.2)), "settings": settings}, None, None) == "max steps"
    assert status({"curve": [], "settings": settings}, None, None) == "interrupted"


def test_run_of_the_old_segment_runner_is_not_continued(tmp_path, run):
    """A stopped run whose state the segment runner wrote fails with a message, and is kept."""
    run_dir = tmp_path / "state" / "runs" / "demo" / "spacy_ner_cnn-seed0"
    run_dir.mkdir(parents=True)
    manifest = {"dataset": "demo", "system": "spacy_ner_cnn", "seed": 0, "status": "stopped", "segments": [],
                "curve": [], "best": None, "resume_checks": [], "evaluation": None}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    res = run("--smoke", "--state", tmp_path / "state", "--results", tmp_path / "results", "--systems", "spacy_ner_cnn",
              "--no-evaluate", check=False)
    assert res.returncode == 1 and "segment runner" in res.stdout and "--restart" in res.stdout
    assert json.loads((run_dir / "manifest.json").read_text()) == manifest


def test_domain_pretrained_cnn_uses_vectors_and_pretrained_weights(tmp_path, run, shared_data):
    """floret vectors and spacy pretrain weights (built from aux text, cached in the state dir)
    reach the run's config; the next call resumes from its checkpoint with the same config."""
    import spacy

    state, results = tmp_path / "state", tmp_path / "results"
    system = "sciner_spancat_cnn_floret_pretrain"
    common = ["--smoke", "--state", state, "--results", results, "--systems", system, "--eval-frequency", "3",
              "--no-evaluate"]
    run(*common, "--max-minutes", "0.001")
    assets = state / "assets" / "demo"
    assert len((assets / "aux.txt").read_text().splitlines()) == 300
    weights = assets / "pretrain-sciner_spancat_cnn-floret" / "model0.bin"
    assert weights.exists() and set(json.loads((assets / "assets.json").read_text())) == {
        "vectors_s", "pretrain-sciner_spancat_cnn-floret_s"}
    run_dir = state / "runs" / "demo" / f"{system}-seed0"
    config = (run_dir / "config.cfg").read_text()
    assert f"init_tok2vec = \"{weights}\"" in config and "include_static_vectors = true" in config
    nlp = spacy.load(run_dir / "train" / "model-last")
    assert nlp.vocab.vectors.mode == "floret" and nlp.vocab.vectors.shape == (50000, 16)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    built = json.loads((assets / "assets.json").read_text())
    assert manifest["domain_assets"] == {"vectors": built["vectors_s"], "pretrain": built["pretrain-sciner_spancat_cnn-floret_s"]}
    assert "domain pretraining, built once per data set" in (results / "convergence.md").read_text()
    # The next call resumes the run from its checkpoint with the same config (the weights are its own).
    run(*common)
    assert (run_dir / "config.cfg").read_text() == config
    assert json.loads((run_dir / "manifest.json").read_text())["calls"][1]["from_step"] is not None
    assert "Resuming after update" in (run_dir / "train.log").read_text()


def test_bad_arguments_fail_in_one_line(tmp_path, run):
    for args, needle in [(["--systems", "nope"], "unknown system 'nope'"),
                         (["--datasets", "nope"], "unknown dataset 'nope'"),
                         (["--max-steps", "0"], "--max-steps must be positive"),
                         (["--max-minutes", "-1"], "--max-minutes must be >= 0")]:
        res = run("--smoke", "--state", tmp_path, *args, check=False)
        assert res.returncode == 2 and needle in res.stderr and len(res.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "runs").exists()


def test_pretraining_time_adds_up_over_resumed_calls(tmp_path):
    """A pretraining killed after its first epoch never recorded its time: the resumed call
    adds it (config.cfg written at the start -> last epoch file) to its own."""
    import os

    import convergence_assets as assets

    out = tmp_path / "pretrain-x"
    out.mkdir()
    (out / "config.cfg").write_text("")
    (out / "model0.bin").write_bytes(b"")
    os.utime(out / "config.cfg", (1000.0, 1000.0))
    os.utime(out / "model0.bin", (1759.0, 1759.0))
    assert assets._unrecorded_seconds(out, tmp_path, "pretrain-x") == 759.0
    assets._record(tmp_path, "pretrain-x_s", 759.0, add=True)
    assets._record(tmp_path, "pretrain-x_s", 100.0, add=True)
    assert json.loads((tmp_path / "assets.json").read_text()) == {"pretrain-x_s": 859.0}
    # once recorded, a later resume does not count the first call again
    assert assets._unrecorded_seconds(out, tmp_path, "pretrain-x") == 0.0


def test_running_runs_do_not_replace_recorded_results(tmp_path):
    """A run another process is still training (status "running") is left out of the
    results: a recorded result under the same key stays, and no half-done row appears."""
    from convergence_report import write_results

    state, results = tmp_path / "state", tmp_path / "results"
    results.mkdir()

    def manifest(dataset, status):
        return {"dataset": dataset, "system": "spacy_ner_cnn", "seed": 0, "status": status, "curve": [],
                "segments": [], "best": None, "resume_checks": [], "evaluation": None}

    (results / "convergence.json").write_text(json.dumps({"runs": {"old/spacy_ner_cnn/seed0": manifest("old", "stopped")}}))
    for dataset in ("old", "new"):  # "old" restarted from scratch, "new" never finished
        (state / "runs" / dataset / "spacy_ner_cnn-seed0").mkdir(parents=True)
        (state / "runs" / dataset / "spacy_ner_cnn-seed0" / "manifest.json").write_text(json.dumps(manifest(dataset, "running")))
    args = SimpleNamespace(marks=[15.0], smoke=True, encoder="x")
    write_results(state, results, args)
    runs = load(results)
    assert set(runs) == {"old/spacy_ner_cnn/seed0"} and runs["old/spacy_ner_cnn/seed0"]["status"] == "stopped"
    assert "running" not in (results / "convergence.md").read_text()
    (state / "runs" / "new" / "spacy_ner_cnn-seed0" / "manifest.json").write_text(json.dumps(manifest("new", "converged")))
    write_results(state, results, args)
    assert load(results)["new/spacy_ner_cnn/seed0"]["status"] == "converged"


def test_failed_runs_whose_state_is_deleted_leave_the_results(tmp_path):
    """A failed run deleted to start over drops out of convergence.json; a failed run whose
    state is still there stays (its log says why), and so does a finished run whose state
    was lost with another machine."""
    from convergence_report import write_results

    state, results = tmp_path / "state", tmp_path / "results"
    results.mkdir()

    def manifest(dataset, status):
        return {"dataset": dataset, "system": "spacy_ner_cnn", "seed": 0, "status": status, "curve": [],
                "segments": [], "best": None, "resume_checks": [], "evaluation": None}

    recorded = {f"{ds}/spacy_ner_cnn/seed0": manifest(ds, status)
                for ds, status in (("deleted", "failed"), ("kept", "failed"), ("lost", "converged"))}
    (results / "convergence.json").write_text(json.dumps({"runs": recorded}))
    (state / "runs" / "kept" / "spacy_ner_cnn-seed0").mkdir(parents=True)
    write_results(state, results, SimpleNamespace(marks=[15.0], smoke=True, encoder="x"))
    assert set(load(results)) == {"kept/spacy_ner_cnn/seed0", "lost/spacy_ner_cnn/seed0"}


def test_results_name_no_machine_folders(tmp_path):
    """An encoder under the home folder is written "~/..." in the JSON and the Markdown alike."""
    from convergence_report import write_results

    state, results = tmp_path / "state", tmp_path / "results"
    results.mkdir()
    encoder = str(Path.home() / ".cache" / "x" / "encoder")
    run = {"dataset": "d", "system": "sciner_spancat_hybrid_v2_pft_decay2000", "seed": 0, "status": "max steps",
           "curve": [], "segments": [], "best": None, "resume_checks": [], "evaluation": None,
           "settings": {"encoder": encoder}}
    (results / "convergence.json").write_text(json.dumps({"runs": {"d/sciner_spancat_hybrid_v2_pft_decay2000/seed0": run}}))
    write_results(state, results, SimpleNamespace(marks=[15.0], smoke=True, encoder="sciner-minilm"))
    for name in ("convergence.json", "convergence.md"):
        text = (results / name).read_text()
        assert "~/.cache/x/encoder" in text and str(Path.home()) + "/" not in text, name


def test_portable_paths_name_no_machine_folder():
    """Results name paths relative to the checkout: inside it, beside it ("../"), or under "~"."""
    from convergence_report import portable

    root = Path(convergence.__file__).resolve().parent.parent
    text = portable(f"{root}/benchmarks/work/a {root.parent}/cache/w/b.bin {Path.home()}/.cache/c")
    # a folder beside a checkout that lies under the home folder is written "~/..." (home rule first)
    home = Path.home()
    beside = f"~/{(root.parent / 'cache').relative_to(home)}" if root.parent.is_relative_to(home) else "../cache"
    assert text == f"benchmarks/work/a {beside}/w/b.bin ~/.cache/c"
    assert portable("/usr/lib/x sciner-minilm") == "/usr/lib/x sciner-minilm"
    # a path after a line break inside a JSON string (a calibration log) too
    assert portable(json.dumps(f"log\n{root}/m")) == json.dumps("log\nm")


def test_an_evaluation_of_another_best_checkpoint_is_stale():
    """A run evaluated while stopped, then continued to a better checkpoint, is evaluated again."""
    stale_evaluation = convergence.stale_evaluation
    best = {"step": 1400}
    assert stale_evaluation({"evaluation": None, "best": best, "status": "stopped"})
    assert stale_evaluation({"evaluation": {"best_step": 1200}, "best": best, "status": "converged"})
    assert not stale_evaluation({"evaluation": {"best_step": 1400}, "best": best, "status": "converged"})
    # Recorded before best_step was kept: stale once the status has changed.
    assert stale_evaluation({"evaluation": {"status_at_evaluation": "stopped"}, "best": best, "status": "converged"})
    assert not stale_evaluation({"evaluation": {"status_at_evaluation": "stopped"}, "best": best, "status": "stopped"})


def test_decay_variant_trains_a_fixed_budget_to_zero_rate(tmp_path, run):
    """A decay variant ends at its N (status "max steps", no patience) with the rate at 0 there,
    is evaluated like its system, and gets its own run and row next to the plain one."""
    results = tmp_path / "results"
    res = run("--smoke", "--state", tmp_path / "state", "--results", results, "--systems", "sciner_spancat_decay6")
    assert "[demo/sciner_spancat_decay6/seed0] max steps" in res.stdout
    r = load(results)["demo/sciner_spancat_decay6/seed0"]
    assert r["settings"]["max_steps"] == 6 and r["settings"]["patience_evals"] == 0
    assert r["settings"]["config"] == "configs/sciner_spancat.cfg"
    assert [p["step"] for p in r["curve"]][-1] == 6
    assert "calibration_log" in r["evaluation"]  # sciner_spancat's decision rule, chosen on dev
    from spacy.util import load_config

    cfg = load_config(tmp_path / "state" / "runs" / "demo" / "sciner_spancat_decay6-seed0" / "config.cfg",
                      interpolate=False)
    assert cfg["training"]["optimizer"]["learn_rate"]["total_steps"] == 6 and cfg["training"]["patience"] == 0
    assert "| demo | sciner_spancat_decay6 |" in (results / "convergence.md").read_text()
    # The span-vector ablation trains, calibrates and evaluates end to end, and says what it changed.
    run("--smoke", "--state", tmp_path / "state", "--results", results, "--systems", "sciner_spancat_hybrid_ends_decay6")
    ends = load(results)["demo/sciner_spancat_hybrid_ends_decay6/seed0"]
    assert ends["status"] == "max steps" and 0.0 <= ends["evaluation"]["spans_f"] <= 1.0
    report = (results / "convergence.md").read_text()
    assert '  - span vector: [components.sciner_spancat.model] {"reducer": "max_endpoints", "width_embedding": 32}' in report
    assert report.count("span vector:") == 1  # not for the plain system
    bad = run("--smoke", "--state", tmp_path / "state", "--systems", "spacy_ner_cnn_decay6", check=False)
    assert bad.returncode == 2 and "unknown system 'spacy_ner_cnn_decay6'" in bad.stderr
