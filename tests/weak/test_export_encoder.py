"""``sciner export-encoder``: a trained pipeline's transformer as a Hugging Face checkpoint
(round trip through AutoModel/AutoTokenizer, the head swap to another label set, the CLI
and its errors), on a tiny random BERT."""
from pathlib import Path

import sys

import pytest
import spacy
import torch
from spacy.util import fix_random_seed
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.weak.export import EXPORT_INFO, export_encoder

# The tiny pipeline (transformer on a given encoder + sciner_spancat) of the spancat tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spancat"))
from spancat_helpers import make_examples, make_nlp  # noqa: E402

SOURCE_DATA = [
    ("the support vector machine beats neural nets", [(1, 4, "Method"), (5, 7, "Method")]),
    ("we use the penn treebank corpus", [(3, 6, "Material")]),
    ("bleu measures translation quality", [(0, 1, "Metric"), (2, 3, "Task")]),
]
# The head swap's target labels share none with the source pipeline's.
TARGET_DATA = [
    ("mutations in brca1 cause breast cancer", [(2, 3, "Gene"), (4, 6, "Disease")]),
    ("tp53 loss is frequent in glioma", [(0, 1, "Gene"), (5, 6, "Disease")]),
]
SENTENCE = "we train a support vector machine on the penn treebank"


def update(nlp, optimizer, examples, steps):
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)


def initialize(nlp, examples, learn_rate=0.01):
    fix_random_seed(0)
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = learn_rate
    return optimizer


def hf_state(nlp, name="transformer"):
    return nlp.get_pipe(name).model.transformer.state_dict()


@pytest.fixture(scope="module")
def source(tiny_bert_dir, tmp_path_factory):
    """A pipeline trained a few steps (so its encoder differs from the tiny BERT), saved."""
    nlp = make_nlp(tiny_bert_dir)
    examples = make_examples(nlp, SOURCE_DATA)
    update(nlp, initialize(nlp, examples), examples, steps=4)
    path = tmp_path_factory.mktemp("export") / "pipeline"
    nlp.to_disk(path)
    return nlp, path


@pytest.fixture(scope="module")
def exported(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "encoder"
    info = export_encoder(source[1], out)
    return out, info


def invoke(*args):
    return CliRunner().invoke(sciner_cli, ["export-encoder", *map(str, args)])


def test_round_trip_weights_and_outputs(source, exported, tiny_bert_dir):
    from transformers import AutoModel, AutoTokenizer

    nlp, _ = source
    out, info = exported
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt", EXPORT_INFO} <= {
        p.name for p in out.iterdir()
    }
    assert info["component"] == "transformer" and info["model_class"] == "BertModel"
    model = AutoModel.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    pipeline_state, exported_state = hf_state(nlp), model.state_dict()
    original = AutoModel.from_pretrained(tiny_bert_dir).state_dict()
    assert set(exported_state) == set(pipeline_state)
    for key, tensor in pipeline_state.items():
        assert torch.equal(exported_state[key], tensor), key
    # The fine-tuned weights, not the ones the pipeline started from.
    name = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(exported_state[name], original[name])
    # Same word pieces and the same hidden states as the pipeline's transformer.
    trf_data = nlp(SENTENCE)._.trf_data
    encoding = tokenizer([SENTENCE], return_tensors="pt")
    assert encoding["input_ids"].tolist() == trf_data.wordpieces.input_ids.tolist()
    with torch.no_grad():
        hidden = model(**encoding).last_hidden_state.numpy()
    expected = trf_data.model_output.last_hidden_state
    assert hidden.shape == expected.shape
    assert abs(hidden - expected).max() < 1e-5


def test_head_swap_to_other_labels(exported):
    """A new pipeline named after the export starts from its weights and learns new labels
    with a fresh sciner_spancat head."""
    from transformers import AutoModel

    out, _ = exported
    nlp = make_nlp(out)
    examples = make_examples(nlp, TARGET_DATA)
    optimizer = initialize(nlp, examples, learn_rate=0.005)
    assert set(nlp.get_pipe("sciner_spancat").labels) == {"Gene", "Disease"}
    start, saved = hf_state(nlp), AutoModel.from_pretrained(out).state_dict()
    assert all(torch.equal(start[key], saved[key]) for key in saved)
    update(nlp, optimizer, examples, steps=5)
    doc = nlp(TARGET_DATA[0][0])
    assert {span.label_ for span in doc.spans["sc"]} <= {"Gene", "Disease"}
    # The encoder is fine-tuned further: the weights moved from the export.
    name = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(hf_state(nlp)[name], saved[name])


def test_cli_happy_path_and_force(source, tmp_path, tree):
    _, pipeline = source
    out = tmp_path / "enc" / "weak"
    result = invoke(pipeline, out)
    assert result.exit_code == 0, result.output
    assert "Saved the encoder of 'transformer' (BertModel" in result.output
    assert "--components.transformer.model.name" in result.output
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert tree(tmp_path / "enc") == ["weak", *sorted(f"weak/{p.name}" for p in out.iterdir())]
    (out / "stale.txt").write_text("x")
    result = invoke(pipeline, out, "--force")
    assert result.exit_code == 0, result.output
    assert not (out / "stale.txt").exists() and (out / "config.json").is_file()


def test_cli_refuses_non_empty_output(source, tmp_path, assert_cli_error):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert_cli_error(invoke(source[1], out), str(out), "--force")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    file_out = tmp_path / "file"
    file_out.write_text("")
    assert_cli_error(invoke(source[1], file_out), "it is a file")
    assert_cli_error(invoke(source[1], source[1] / "encoder", "--force"), "holds the pipeline")


def test_cli_bad_pipelines(tmp_path, assert_cli_error):
    assert_cli_error(invoke(tmp_path / "missing", tmp_path / "out"), "missing", "not found")
    training = tmp_path / "training"
    (training / "model-best").mkdir(parents=True)
    (training / "model-best" / "config.cfg").write_text("")
    assert_cli_error(invoke(training, tmp_path / "out"), "no config.cfg", "model-best")
    no_trf = tmp_path / "no_trf"
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(no_trf)
    assert_cli_error(invoke(no_trf, tmp_path / "out"), "no transformer component", "supported:")
    assert_cli_error(invoke(no_trf, tmp_path / "out", "--component", "sentencizer"), "factory 'sentencizer'")
    assert not (tmp_path / "out").exists()


def test_cli_inline_tok2vec_transformer(tiny_bert_dir, tmp_path, assert_cli_error):
    inline = tmp_path / "inline"
    inline.mkdir()
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", config={"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner",
        "extra_state_tokens": False, "hidden_width": 16, "maxout_pieces": 2, "use_upper": False,
        "tok2vec": {
            "@architectures": "spacy-transformers.Tok2VecTransformer.v3", "name": str(tiny_bert_dir),
            "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96},
            "pooling": {"@layers": "reduce_mean.v1"}, "grad_factor": 1.0, "tokenizer_config": {"use_fast": True},
        },
    }})
    nlp.config.to_disk(inline / "config.cfg")
    assert_cli_error(invoke(inline, tmp_path / "out"), "['ner']", "inline Tok2VecTransformer", "supported:")


def test_cli_unreadable_weights_leave_nothing(source, tmp_path, assert_cli_error):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(source[1], broken)
    (broken / "transformer" / "model").write_bytes(b"not msgpack")
    assert_cli_error(invoke(broken, tmp_path / "new" / "out"), "cannot load the component 'transformer'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]
    (broken / "transformer" / "model").unlink()
    assert_cli_error(invoke(broken, tmp_path / "out"), "no weights of 'transformer'")


def test_shipped_config_fine_tunes_from_the_export(exported, tmp_path):
    """`spacy train configs/sciner_spancat.cfg --components.transformer.model.name OUT_DIR`
    (what the project's --vars.encoder sets): init_nlp starts from the exported weights."""
    from spacy.tokens import DocBin
    from spacy.training.initialize import init_nlp
    from spacy.util import load_config
    from transformers import AutoModel

    out, _ = exported
    blank = spacy.blank("en")
    docbin = DocBin(docs=[eg.reference for eg in make_examples(blank, TARGET_DATA)])
    docbin.to_disk(tmp_path / "target.spacy")
    config_path = Path(__file__).resolve().parents[2] / "configs" / "sciner_spancat.cfg"
    overrides = {
        "components.transformer.model.name": str(out),
        "paths.train": str(tmp_path / "target.spacy"),
        "paths.dev": str(tmp_path / "target.spacy"),
    }
    nlp = init_nlp(load_config(config_path, overrides=overrides, interpolate=False))
    assert set(nlp.get_pipe("sciner_spancat").labels) == {"Gene", "Disease"}
    saved = AutoModel.from_pretrained(out).state_dict()
    start = hf_state(nlp)
    assert all(torch.equal(start[key], saved[key]) for key in saved)
    losses = nlp.update(make_examples(nlp, TARGET_DATA), losses={})
    assert losses["sciner_spancat"] > 0
