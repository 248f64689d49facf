"""benchmarks/blas_ops.py: blis against numpy's BLAS, gemm and a saved pipeline, same output checked."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "spancat"))
sys.path.insert(0, str(ROOT / "tests" / "tok2vec"))
import blas_ops  # noqa: E402
from spancat_helpers import make_examples, train  # noqa: E402
from tok2vec_helpers import make_cnn_nlp  # noqa: E402


@pytest.fixture
def cnn_model(tmp_path, shared_data):
    """A small trained tok2vec (CNN) + sciner_spancat pipeline on disk."""
    nlp = make_cnn_nlp()
    train(nlp, make_examples(nlp), steps=20)
    nlp.to_disk(tmp_path / "model")
    texts = tmp_path / "texts.txt"
    lines = [eg.reference.text for eg in make_examples(nlp)]
    texts.write_text("\n".join((lines * 30)[:30]) + "\n", encoding="utf8")
    return tmp_path / "model", texts


def test_times_both_variants_and_checks_the_output(cnn_model, tmp_path):
    model, texts = cnn_model
    out = tmp_path / "out"
    import shutil

    from spacy.tokens import DocBin

    nlp = make_cnn_nlp()
    DocBin(docs=[eg.reference for eg in make_examples(nlp)] * 10).to_disk(tmp_path / "train.spacy")
    second = tmp_path / "second"
    shutil.copytree(model, second)
    report = blas_ops.main(["--model", str(model), str(second), "--names", "first", "second", "--data", str(texts), "--sentences", "20", "--rounds", "2",
                            "--batch-size", "8", "--shapes", "[[300, 48, 32]]", "--train-data",
                            str(tmp_path / "train.spacy"), "--updates", "3", "--batch-words", "20", "--out", str(out)])
    (row,) = report["gemm"]
    assert row["shape"] == [300, 48, 32] and row["blis_s"] > 0 and row["numpy_s"] > 0
    assert row["max_abs_diff"] <= 1e-4 * row["max_abs_value"]  # the same products, rounded differently
    pipe, other = report["pipelines"]  # one entry per --model, in order
    assert other["model"] == str(second) and other["words"] == pipe["words"]
    assert pipe["pipeline"] == ["tok2vec", "sciner_spancat"] and pipe["texts"] == 20
    assert all(len(seconds) == 2 for seconds in pipe["seconds"].values())
    assert pipe["speedup"] == pipe["words_per_s"]["numpy"] / pipe["words_per_s"]["blis"]
    assert pipe["same_output"] is True
    updates, _ = report["updates"]
    assert updates["model"] == str(model) and updates["updates"] == 3 and all(len(s) == 2 and min(s) > 0 for s in updates["seconds"].values())
    assert updates["speedup"] == updates["s_per_update"]["blis"] / updates["s_per_update"]["numpy"]
    assert json.loads((out / "blas_ops.json").read_text())["pipelines"][0]["words"] == pipe["words"]
    md = (out / "blas_ops.md").read_text()
    assert "same spans and ents with both: yes" in md
    summary = [line for line in md.splitlines() if line.startswith("| first (tok2vec, sciner_spancat) |")]
    assert len(summary) == 1 and f"({pipe['speedup']:.2f}x)" in summary[0] and summary[0].endswith("| yes |")


def test_model_needs_texts_and_a_pipeline(tmp_path, capsys):
    with pytest.raises(SystemExit):
        blas_ops.main(["--model", str(tmp_path), "--out", str(tmp_path / "o")])
    assert "--model needs --data" in capsys.readouterr().err
    texts = tmp_path / "t.txt"
    texts.write_text("A text.\n")
    with pytest.raises(SystemExit):
        blas_ops.main(["--model", str(tmp_path), "--data", str(texts), "--out", str(tmp_path / "o")])
    assert "no config.cfg there" in capsys.readouterr().err
    (tmp_path / "config.cfg").write_text("")
    with pytest.raises(SystemExit):
        blas_ops.main(["--model", str(tmp_path), "--names", "a", "b", "--data", str(texts), "--out", str(tmp_path / "o")])
    assert "--names: 2 names for 1 --model pipelines" in capsys.readouterr().err
