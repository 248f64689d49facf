"""The project's `weak_all` workflow end to end, reduced: convert -> label-weak ->
pretrain-weak -> export-encoder -> train from the exported encoder (train-weak, with no
`encoder` given) -> calibrate -> evaluate.

It runs the commands of project.yml in a copy of the project on the shipped demo sample, with
the first lines of the real CS aux files (a small data_dir built from ../shared/data), a tiny
random BERT as the base encoder and a few weak pretraining steps. The demo's domain has no
gazetteer, so its weak labels come from the demo's own training entities (weak_type_map auto).
"""
import json
import subprocess
import sys
from pathlib import Path

import spacy
import srsly

ROOT = Path(__file__).resolve().parent.parent


def _docs(path):
    return list(spacy.tokens.DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))


def _norm(text):
    return " ".join(text.split())


def test_label_weak_command_reads_no_dev_or_test_file():
    """The labeling command's inputs (script and deps) are aux text, gazetteers and train."""
    project = srsly.read_yaml(ROOT / "project.yml")
    command = {c["name"]: c for c in project["commands"]}["label-weak"]
    text = " ".join(command["script"] + command.get("deps", []))
    assert "dev" not in text and "test" not in text, text
    assert "{AUX}" in text and "train.spacy" in text
    assert project["workflows"]["weak_all"] == [
        "convert", "label-weak", "pretrain-weak", "export-encoder", "train-weak", "calibrate", "evaluate",
        "evaluate-weak"]


def test_weak_all_workflow_pretrains_exports_and_fine_tunes(tmp_path, tiny_bert_dir, project_with_aux):
    project, data_dir = project_with_aux(300)
    encoder = "training/demo-weak/encoder"
    cmd = [sys.executable, "-m", "spacy", "project", "run", "weak_all", str(project),
           "--vars.dataset", "demo", "--vars.data_dir", str(data_dir),
           "--vars.base_encoder", str(tiny_bert_dir),
           "--vars.weak_lines", "600", "--vars.weak_steps", "4", "--vars.weak_eval_frequency", "2",
           "--vars.n_process", "1", "--vars.max_epochs", "1", "--vars.min_steps", "0", "--vars.eval_frequency", "5",
           "--vars.warmup_steps", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=project, timeout=1200)
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])

    # label-weak: the first 600 aux lines, typed by the demo's training entities, and none of
    # the labeled texts is a dev or test text.
    weak = _docs(project / "corpus" / "demo" / "weak.spacy")
    assert len(weak) == 600 and sum(len(d.spans["weak"]) for d in weak) > 0
    gold_labels = {s.label_ for d in _docs(project / "corpus" / "demo" / "train.spacy") for s in d.spans["sc"]}
    assert {s.label_ for d in weak for s in d.spans["weak"]} <= gold_labels
    assert all(s.kb_id_ == "train" for d in weak for s in d.spans["weak"])
    weak_texts = {_norm(d.text) for d in weak}
    for split in ("dev", "test"):
        held = {_norm(d.text) for d in _docs(project / "corpus" / "demo" / f"{split}.spacy")}
        assert not weak_texts & held, split
        # not even as a substring of a labeled line (one sentence inside an abstract)
        assert not any(h in w for h in held for w in weak_texts if len(h) > 40), split
    report = json.loads((project / "corpus" / "demo" / "weak_label.json").read_text())
    assert report["labeling"]["docs"] == 600
    assert report["abbreviations"] is False  # weak_abbreviations: false, passed through as "False"

    # pretrain-weak: the weak reader for both corpora, checkpoints chosen on the held-out weak part.
    weak_cfg = spacy.util.load_config(project / "training" / "demo-weak" / "model-best" / "config.cfg")
    assert weak_cfg["corpora"]["train"]["@readers"] == "spacy-sciner.WeakBalancedCorpus.v1"
    assert weak_cfg["corpora"]["dev"]["split"] == "heldout"
    assert weak_cfg["corpora"]["dev"]["path"] == weak_cfg["corpora"]["train"]["path"] == "${paths.weak}"
    assert weak_cfg["paths"]["weak"] == "corpus/demo/weak.spacy"
    assert weak_cfg["components"]["sciner_spancat"]["negatives_avoid"] is None  # plain negatives (measured better)
    assert weak_cfg["components"]["transformer"]["model"]["name"] == str(tiny_bert_dir)

    # export-encoder wrote a Hugging Face folder; train started from it with a fresh head on
    # the gold labels.
    assert (project / encoder / "config.json").is_file()
    trained = spacy.util.load_config(project / "training" / "demo" / "model-best" / "config.cfg")
    assert trained["components"]["transformer"]["model"]["name"] == encoder
    assert trained["corpora"]["train"]["@readers"] == "spacy.Corpus.v1"
    labels = spacy.load(project / "training" / "demo" / "model-calibrated").get_pipe("sciner_spancat").labels
    assert set(labels) == gold_labels

    metrics = json.loads((project / "metrics" / "demo.json").read_text())
    assert {"spans_sc_p", "spans_sc_r", "spans_sc_f"} <= set(metrics)
    # evaluate-weak: the weak model on test as it is (zero-shot), scored by the demo's labels
    zero_shot = json.loads((project / "metrics" / "demo-weak.json").read_text())
    assert {"spans_sc_p", "spans_sc_r", "spans_sc_f"} <= set(zero_shot)
    assert set(zero_shot["spans_sc_per_type"]) <= gold_labels
