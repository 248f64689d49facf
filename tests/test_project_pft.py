"""The project's `pft_all` workflow end to end, reduced: mine -> build-corpus -> pft -> train
from the PFT checkpoint (train-pft, whatever `encoder` says) -> calibrate -> evaluate.

It runs the commands of project.yml in a copy of the project on the shipped demo sample, with
the first lines of the real CS aux files (a small data_dir built from ../shared/data), a tiny
random BERT as the base encoder and a few PFT steps.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import spacy

ROOT = Path(__file__).resolve().parent.parent
CS_AUX = ("CSAbstruct-text", "ACL-ARC-citations-text", "SciCite-text")


def test_aux_runs_python_commands_with_its_own_interpreter(tmp_path):
    """With the venv not activated, the first `python` on PATH is another interpreter
    (here a stub that fails): the command after `--` must use aux.py's own."""
    for name in CS_AUX:
        (tmp_path / "aux" / name).mkdir(parents=True)
        (tmp_path / "aux" / name / "text.txt").write_text("Some text .\n")
    stub_bin = tmp_path / "bin"
    stub_bin.mkdir()
    for name in ("python", "python3"):
        stub = stub_bin / name
        stub.write_text("#!/bin/sh\necho wrong python >&2\nexit 3\n")
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stub_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [sys.executable, str(ROOT / "scripts" / "aux.py"), "demo", str(tmp_path), "--",
           "python", "-c", "import sys; print(sys.executable); print(len(sys.argv) - 1)", "{AUX}"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-2:] == [sys.executable, "3"]  # this interpreter, 3 aux files


def test_pft_all_workflow_trains_from_the_pft_checkpoint(tmp_path, tiny_bert_dir, project_with_aux):
    project, data_dir = project_with_aux(150)
    cmd = [sys.executable, "-m", "spacy", "project", "run", "pft_all", str(project),
           "--vars.dataset", "demo", "--vars.data_dir", str(data_dir), "--vars.base_encoder", str(tiny_bert_dir),
           "--vars.pft_sentences", "120", "--vars.pft_steps", "4",
           "--vars.pft_batch_size", "8", "--vars.n_process", "1", "--vars.max_epochs", "1", "--vars.min_steps", "0",
           "--vars.eval_frequency", "5", "--vars.warmup_steps", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=project, timeout=1200)
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
    # mine and build-corpus read the aux text of the demo's domain.
    assert (project / "mined" / "demo" / "candidates.tsv").stat().st_size > 0
    corpus = list(spacy.tokens.DocBin().from_disk(project / "pft" / "demo" / "corpus.spacy")
                  .get_docs(spacy.blank("en").vocab))
    assert 0 < len(corpus) <= 120 and any(doc.spans["candidates"] for doc in corpus)
    # PFT ran the default objective on that corpus for the steps asked.
    log = json.loads((project / "pft" / "demo" / "encoder" / "pft_log.json").read_text())
    assert log["objective"] == "mlm_cand+ecb" and log["steps"] == 4
    # The span categorizer was trained from the PFT checkpoint, and evaluated.
    trained = spacy.util.load_config(project / "training" / "demo" / "model-best" / "config.cfg")
    assert trained["components"]["transformer"]["model"]["name"] == "pft/demo/encoder"
    metrics = json.loads((project / "metrics" / "demo.json").read_text())
    assert {"spans_sc_p", "spans_sc_r", "spans_sc_f"} <= set(metrics)
