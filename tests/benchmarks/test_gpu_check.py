"""benchmarks/gpu_check.py on the CPU (--smoke: tiny random BERT, 40 SciERC sentences):
the prepared GPU check must run end to end wherever CI runs, and its report must hold
every measurement (a step that fails is reported, so the test fails on it)."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402


def test_gpu_check_smoke_on_cpu(tiny_bert_dir, shared_data, tmp_path):
    out = tmp_path / "out"
    report = gpu_check.main(["--smoke", "--encoder", str(tiny_bert_dir), "--data", f"{shared_data}/scierc",
                             "--out", str(out), "--work", str(tmp_path / "work"), "--profile", "--stages-every-batch"])
    assert report["errors"] == {}
    assert report["skipped"] == {"mixed_precision": "autocast is CUDA-only"}
    saved = json.loads((out / "gpu_check.json").read_text())
    assert saved["train"]["updates"] == 6 and saved["train"]["updates_per_s"] > 0
    resume = saved["resume"]  # cut off before update 4 of 6, resumed after the checkpoint at 3: exact on the CPU
    assert (resume["crashed_before"], resume["resumed_after"]) == (4, 3)
    assert resume["identical"] and resume["max_abs_diff"] == 0.0
    evaluation = saved["calibrate_evaluate"]
    assert 0.0 <= evaluation["spans_sc_f"] <= 1.0 and evaluation["speed"] > 0
    speed = saved["speed"]["current"]
    assert speed["code"] == "this checkout" and speed["sentences"] == 60
    for batch in ("batch_8", "batch_32"):
        row = speed[batch]
        assert row["pipeline_wps"] > 0 and row["ratio"] == row["pipeline_wps"] / row["transformer_wps"]
    stage_names = {"transformer", "token_vectors", "predict_rest", "set_annotations"}
    assert set(speed["stages"]) == stage_names | {"profile", "minor_faults"}
    assert set(speed["stages_batch_8"]) == stage_names | {"minor_faults"}  # --stages-every-batch: the smaller batch too
    assert all(seconds > 0 for seconds in (speed["stages_batch_8"]["transformer"], speed["stages"]["transformer"]))
    faults = speed["stages"]["minor_faults"]  # counted by the OS on Linux (CI's machines)
    assert set(faults) == {"transformer", "token_vectors", "predict", "set_annotations"} and all(isinstance(n, int) and n >= 0 for n in faults.values())
    profile = speed["stages"]["profile"]  # --profile: the span component's inference, 60 texts in batches of 32
    assert profile["batches"] == 2 and profile["calls"] == {}  # no CUDA runtime calls on the CPU
    top = profile["top_python_by_tottime"]
    assert len(top) == 20 and all(count >= 1 and 0 <= own_ms <= total_ms for _, count, own_ms, total_ms in top)
    assert [row[2] for row in top] == sorted((row[2] for row in top), reverse=True)
    assert speed["max_batch_items"] == 256  # the config's own (--max-batch-items not given)
    for objective in ("mlm_random", "mlm_cand+ecb"):
        pft = saved["pft"][objective]
        assert pft["steps"] == 12 and pft["tokens_per_s"] > 0 and pft["tokens_per_s_steady"] > 0
    assert "cand_ecb_overhead" in saved["pft"]
    markdown = (out / "gpu_check.md").read_text()
    assert "resumed after update 3: largest weight difference from an uninterrupted run 0 (identical)" in markdown
    assert "| current | 32 | 256 |" in markdown and "mlm_cand+ecb" in markdown and "Skipped: mixed_precision" in markdown
    assert "Span component, one profiled pass (2 batches), runtime calls: none recorded" in markdown
    assert not (out / "work").exists()  # scratch went to --work
    # An older checkout (--old-code) times a pipeline with settings it does not know:
    # they are dropped from a copy, which that code then loads.
    import shutil

    import spacy
    from spacy.util import load_config

    model = tmp_path / "newer"
    shutil.copytree(tmp_path / "work" / "calibrated", model)
    config = load_config(model / "config.cfg", interpolate=False)
    config["components"]["sciner_spancat"]["option_from_the_future"] = 1
    config.to_disk(model / "config.cfg")
    with pytest.raises(Exception, match="option_from_the_future"):
        spacy.load(model)
    copy = gpu_check.settings_known_here(str(model), tmp_path / "known")
    assert spacy.load(copy).pipe_names == ["transformer", "sciner_spancat"]
    assert gpu_check.settings_known_here(str(tmp_path / "work" / "calibrated"), tmp_path / "x") == str(tmp_path / "work" / "calibrated")
    # --speed-only times one pipeline, here with the transformer's sub-batches set for the timing.
    only = gpu_check.main(["--speed-only", str(tmp_path / "work" / "calibrated"), "--smoke", "--max-batch-items", "4096",
                           "--data", f"{shared_data}/scierc", "--out", str(tmp_path / "speed.json")])
    assert only["max_batch_items"] == 4096 and only["batch_8"]["pipeline_wps"] > 0
    assert json.loads((tmp_path / "speed.json").read_text())["max_batch_items"] == 4096


def test_gpu_check_config_names_a_configs_file_or_a_path(tmp_path):
    assert gpu_check.config_path("sciner_spancat_hybrid") == ROOT / "configs" / "sciner_spancat_hybrid.cfg"
    own = tmp_path / "mine.cfg"
    own.write_text("[nlp]\n")
    assert gpu_check.config_path(str(own)) == own
    with pytest.raises(SystemExit, match="no config 'nope'"):
        gpu_check.config_path("nope")


def test_gpu_check_summary_names_each_runs_commits(tmp_path):
    import gpu_check_summary

    row = {"transformer_wps": 1000.0, "pipeline_wps": 800.0, "ratio": 0.8}
    report = {"machine": {"torch": "2", "python": "3.12", "gpu": "G"}, "label": "commit abc1234; old code def5678",
              "args": {"config": "sciner_spancat_hybrid"},
              "speed": {"current": {"batch_256": row, "batch_64": row, "stages": {"transformer": 0.5}},
                        "old_code": {"batch_256": {**row, "ratio": 0.5}}}}
    folder = tmp_path / "gpu_run"
    folder.mkdir()
    (folder / "run1.json").write_text(json.dumps(report))
    (folder / "run2.json").write_text(json.dumps({**report, "label": ""}))
    text = gpu_check_summary.main([str(folder)]).read_text()
    assert "| run1 | sciner_spancat_hybrid | abc1234 | 256 | 1,000 | 800 | 0.80 |" in text
    assert "| run1 | sciner_spancat_hybrid | def5678 | 256 | 1,000 | 800 | 0.50 |" in text
    assert "| run2 | sciner_spancat_hybrid | current | 64 |" in text and "- run1, sciner_spancat_hybrid, abc1234: transformer 0.500" in text
    with pytest.raises(SystemExit, match="no run"):
        gpu_check_summary.main([str(tmp_path)])


def test_gpu_check_summary_wraps_speed_only_timings_and_takes_medians(tmp_path):
    """--wrap turns a --speed-only result into a report of the same machine; a config and
    code timed in several runs gets its ratios and their median; profile counts are summed."""
    import gpu_check_summary

    folder = tmp_path / "gpu_run"
    folder.mkdir()
    profile = {"batches": 11, "calls": {"cuLaunchKernel": 900, "cudaLaunchKernel": 100, "cudaMemcpyAsync": 20,
                                        "Memcpy HtoD (Pinned -> Device)": 20, "cudaStreamSynchronize": 7}}
    speed = {"batch_256": {"transformer_wps": 100.0, "pipeline_wps": 60.0, "ratio": 0.6},
             "stages": {"transformer": 0.9, "profile": profile}}
    report = {"machine": {"torch": "2", "python": "3.12", "gpu": "G"}, "label": "commit abc1234",
              "args": {"config": "sciner_spancat"}, "speed": {"current": speed}}
    (folder / "run1.json").write_text(json.dumps(report))
    for name, ratio in (("a", 0.9), ("b", 1.0)):
        timing = tmp_path / f"{name}.json"
        timing.write_text(json.dumps({"batch_256": {"transformer_wps": 100.0, "pipeline_wps": 100.0 * ratio, "ratio": ratio}}))
        gpu_check_summary.main(["--wrap", str(timing), "--config", "sciner_spancat", "--machine-from",
                                str(folder / "run1.json"), "--label", "commit abc1234; again", "--to",
                                str(folder / f"run2_{name}.json")])
    wrapped = json.loads((folder / "run2_a.json").read_text())
    assert wrapped["machine"]["gpu"] == "G" and wrapped["speed"]["current"]["batch_256"]["ratio"] == 0.9
    text = gpu_check_summary.main([str(folder)]).read_text()
    assert "| sciner_spancat | abc1234 | 256 | 3 | 0.60, 0.90, 1.00 | 0.90 |" in text
    assert "- run1, sciner_spancat, abc1234: transformer 0.900\n" in text  # the profile is no stage
    assert "one profiled pass of 11 batches: 1,000 kernel launches, 20 copies, 7 synchronisations" in text
    with pytest.raises(SystemExit):
        gpu_check_summary.main(["--wrap", str(tmp_path / "a.json")])  # no --machine-from / --to


def test_gpu_check_overrides_the_encoder_sub_batches_only_where_a_config_has_them(tmp_path):
    hybrid = gpu_check.config_path("sciner_spancat_hybrid")
    assert gpu_check.padded_override(hybrid, 0) == ["--components.transformer.model.max_padded_wordpieces", "0"]
    assert gpu_check.padded_override(hybrid, None) == []  # the config's own
    own = tmp_path / "v1.cfg"
    own.write_text('[components]\n\n[components.transformer]\nfactory = "transformer"\n\n'
                   '[components.transformer.model]\n@architectures = "spacy-sciner.TransformerModel.v1"\n')
    assert gpu_check.padded_override(own, 0) == []
    args = gpu_check.parse_args(["--gpu-id", "0", "--out", str(tmp_path)])
    assert (args.max_padded_wordpieces, args.max_batch_items) == (0, 4096)
    args = gpu_check.parse_args(["--out", str(tmp_path)])
    assert (args.max_padded_wordpieces, args.max_batch_items) == (None, None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the counter reads getrusage's ru_minflt (Linux)")
def test_minor_faults_count_fresh_pages():
    import mmap

    from gpu_check_parts import minor_faults

    # An anonymous mmap is fresh by construction. (A numpy array of the same size is not:
    # glibc raises its mmap threshold after freeing a large block, so a later 32 MB array
    # may reuse heap pages an earlier test already touched, and then nothing faults.)
    fresh = mmap.mmap(-1, 32 * 2**20)
    before = minor_faults()
    for offset in range(0, len(fresh), mmap.PAGESIZE):
        fresh[offset] = 1
    assert minor_faults() > before
    fresh.close()


def test_markdown_report_states_the_ratio_the_stages_imply_and_the_timed_pipeline():
    from gpu_check_parts import markdown_report

    stages = {"transformer": 6.0, "token_vectors": 0.5, "predict_rest": 0.4, "set_annotations": 0.1}
    report = {"machine": {}, "args": {"config": "sciner_spancat", "model": "/m/calibrated", "skip": "['train']"},
              "speed": {"current": {"stages": stages}}}
    text = markdown_report(report)
    assert "from the stages: 0.857" in text  # 6 / 7
    stages["minor_faults"] = {"transformer": 1200, "token_vectors": 0, "predict": 35, "set_annotations": 0}
    text = markdown_report(report)
    assert "from the stages: 0.857" in text  # the fault counts are not stages
    assert "Minor page faults per pass (median of the rounds): transformer 1,200, token_vectors 0, predict 35" in text
    assert "Config: `the given pipeline /m/calibrated`" in text
    report["speed"]["current"]["stages_batch_64"] = {"transformer": 6.0, "token_vectors": 1.5, "predict_rest": 1.5,
                                                     "set_annotations": 0.0}
    text = markdown_report(report)  # the smaller batch's breakdown first, with its own ratio
    assert text.index("Stages, current, batch 64") < text.index("Stages, current, largest batch")
    assert "from the stages: 0.667" in text and "from the stages: 0.857" in text
    report["args"] = {"config": "sciner_spancat_hybrid", "model": "None", "skip": "[]"}
    assert "Config: `sciner_spancat_hybrid`" in markdown_report(report)


def test_resume_check_measures_weight_differences(tiny_bert_dir, tmp_path):
    """gpu_check_resume.max_abs_diff sees a change in a thinc weight and in a torch weight."""
    sys.path[:0] = [str(ROOT / "tests" / "tok2vec"), str(ROOT / "tests" / "spancat")]
    from tok2vec_helpers import make_hybrid_nlp
    from gpu_check_resume import max_abs_diff
    from spancat_helpers import make_examples, train

    nlp = make_hybrid_nlp(tiny_bert_dir)
    train(nlp, make_examples(nlp), steps=1)
    nlp.to_disk(tmp_path / "a")
    assert max_abs_diff(tmp_path / "a", tmp_path / "a") == 0.0
    head = nlp.get_pipe("sciner_spancat").model.get_ref("output_layer")
    head.set_param("b", head.get_param("b") + 0.25)
    nlp.to_disk(tmp_path / "b")
    assert max_abs_diff(tmp_path / "a", tmp_path / "b") == pytest.approx(0.25)
    torch_model = nlp.get_pipe("transformer").model.transformer
    with __import__("torch").no_grad():
        next(torch_model.parameters()).add_(0.5)
    nlp.to_disk(tmp_path / "c")
    assert max_abs_diff(tmp_path / "a", tmp_path / "c") == pytest.approx(0.5)
