"""spaCy's standard component tests for sciner_spancat without a transformer (a CNN
tok2vec through a Tok2VecListener) and on spacy-sciner.HybridTok2Vec.v1."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_sciner.tok2vec.hybrid import FROM_SCRATCH_ATTR

from spancat_helpers import TRAIN_DATA, make_examples, make_nlp, predicted_spans, train
from tok2vec_helpers import cnn_config, make_cnn_nlp, make_hybrid_nlp

ROOT = Path(__file__).resolve().parent.parent.parent
PIPELINES = ["trained_cnn_nlp", "trained_hybrid_nlp"]


def gold_of(data):
    return [sorted(spans) for _, spans in data]


@pytest.mark.parametrize("name, pipe_names", [
    ("sciner_spancat_cnn.cfg", ["tok2vec", "sciner_spancat"]),
    ("sciner_spancat_hybrid.cfg", ["transformer", "sciner_spancat"]),
])
def test_default_config_resolves(name, pipe_names):
    config = spacy.util.load_config(ROOT / "configs" / name)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    assert nlp.pipe_names == pipe_names
    upstream = nlp.get_pipe(pipe_names[0])
    assert upstream.listening_components == ["sciner_spancat"]
    tok2vec = nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec")
    if name == "sciner_spancat_cnn.cfg":
        assert tok2vec.name == "tok2vec-listener" and tok2vec.get_dim("nO") == 96
        assert nlp.get_pipe("sciner_spancat").cfg["learn_rate_scale"] == 1.0
    else:
        assert tok2vec.name == "sciner_hybrid_tok2vec"
        assert tok2vec.get_ref("cnn").get_dim("nO") == 96 and tok2vec.get_ref("cnn").attrs[FROM_SCRATCH_ATTR]
    # The [training] block (optimizer, batcher, the JSONL logger) resolves too.
    training = spacy.util.registry.resolve(nlp.config.interpolate()["training"])
    assert callable(training["logger"])


@pytest.mark.parametrize("fixture", PIPELINES)
def test_overfit_tiny_set(fixture, request):
    nlp = request.getfixturevalue(fixture)
    docs = list(nlp.pipe([text for text, _ in TRAIN_DATA]))
    assert [sorted(predicted_spans(doc)) for doc in docs] == gold_of(TRAIN_DATA)
    assert nlp.evaluate(make_examples(nlp))["spans_sc_f"] == 1.0


@pytest.mark.parametrize("fixture", PIPELINES)
def test_disk_round_trip(fixture, request, tmp_path):
    nlp = request.getfixturevalue(fixture)
    texts = [text for text, _ in TRAIN_DATA] + ["a support vector machine on the penn treebank"]
    before = list(nlp.pipe(texts))
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.pipe_names == nlp.pipe_names
    for a, b in zip(before, loaded.pipe(texts)):
        assert predicted_spans(a) == predicted_spans(b)
        numpy.testing.assert_allclose(a.spans["sc"].attrs["scores"], b.spans["sc"].attrs["scores"], rtol=1e-5)


@pytest.mark.parametrize("fixture", PIPELINES)
def test_empty_docs(fixture, request):
    nlp = request.getfixturevalue(fixture)
    docs = list(nlp.pipe(["", "bleu", TRAIN_DATA[2][0]]))
    assert len(docs[0].spans["sc"]) == 0
    assert sorted(predicted_spans(docs[2])) == sorted(TRAIN_DATA[2][1])


def _blas_threads():
    from threadpoolctl import threadpool_info

    return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}


@pytest.mark.parametrize("fixture,during", [("trained_hybrid_nlp", 1), ("trained_cnn_nlp", 3)])
def test_inference_holds_numpy_blas_to_one_thread_beside_a_transformer(fixture, during, request, monkeypatch):
    """numpy's BLAS threads, still spinning after a product, would take the cores from the
    transformer's next pass: beside one the component infers and updates with one BLAS
    thread, and gives the process its setting back; without a transformer it leaves the
    BLAS alone."""
    from threadpoolctl import threadpool_limits

    from spacy_sciner import ops
    from spacy_sciner.spancat import component

    nlp = request.getfixturevalue(fixture)
    # The libraries are found at the first use; an earlier test may have used it before
    # scipy's own BLAS was loaded (the component multiplies with numpy's, loaded first).
    ops._threadpool_controller.cache_clear()
    launch, seen = component.launch_spans, []

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return launch(*args, **kwargs)

    monkeypatch.setattr(component, "launch_spans", spy)
    texts = [text for text, _ in TRAIN_DATA]
    with threadpool_limits(3, user_api="blas"):  # the process's own setting (3: > 1 on any machine)
        docs = list(nlp.pipe(texts, batch_size=2))
        assert _blas_threads() == {3}
    assert len(seen) == 2 and all(threads == {during} for threads in seen)
    assert sorted(predicted_spans(docs[2])) == sorted(TRAIN_DATA[2][1])


@pytest.mark.parametrize("hybrid,during", [(True, 1), (False, 3)])
def test_updates_hold_numpy_blas_to_one_thread_beside_a_transformer(hybrid, during, tiny_bert_dir, monkeypatch):
    """The same for updates: the transformer's backward pass follows the component's."""
    from threadpoolctl import threadpool_limits

    from spacy_sciner import ops

    nlp = make_hybrid_nlp(tiny_bert_dir) if hybrid else make_cnn_nlp()  # fresh: updates change weights
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    ops._threadpool_controller.cache_clear()
    spancat, seen = nlp.get_pipe("sciner_spancat"), []
    get_loss = spancat.get_loss

    def spy(*args, **kwargs):  # called between the component's forward and backward passes
        seen.append(_blas_threads())
        return get_loss(*args, **kwargs)

    monkeypatch.setattr(spancat, "get_loss", spy)
    with threadpool_limits(3, user_api="blas"):
        losses = nlp.update(examples[:2])
        assert _blas_threads() == {3}
    assert seen == [{during}] and losses["sciner_spancat"] > 0


@pytest.mark.parametrize("hybrid", [False, True])
def test_update_with_empty_docs(hybrid, tiny_bert_dir):
    nlp = make_hybrid_nlp(tiny_bert_dir) if hybrid else make_cnn_nlp()
    examples = make_examples(nlp, TRAIN_DATA + [("", [])])
    losses = train(nlp, examples, steps=2)
    assert losses["sciner_spancat"] > 0
    assert len(list(nlp.pipe(["", TRAIN_DATA[0][0]]))[0].spans["sc"]) == 0


def test_hybrid_forward_backprop_shapes(tiny_bert_dir):
    nlp = make_hybrid_nlp(tiny_bert_dir, cnn_width=16)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    hybrid = nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec")
    cnn = hybrid.get_ref("cnn")
    assert hybrid.get_dim("nO") == 32 + 16  # tiny BERT width + CNN width
    docs = [eg.predicted for eg in examples]
    # Feed the listener as nlp.update does: the transformer runs, then its listeners.
    nlp.get_pipe("transformer").update(examples)
    vectors, backprop = hybrid.begin_update(docs)
    assert [v.shape for v in vectors] == [(len(doc), 48) for doc in docs]
    numpy.testing.assert_allclose(
        numpy.vstack([v[:, 32:] for v in vectors]), numpy.vstack(cnn.predict(docs)), rtol=1e-5, atol=1e-6
    )
    backprop([numpy.ones_like(v) for v in vectors])
    grads = [node.get_grad(name) for node in cnn.walk() for name in node.param_names if node.has_grad(name)]
    assert grads and any(numpy.abs(g).sum() > 0 for g in grads)
    # At inference the transformer part is what the transformer component wrote.
    processed = list(nlp.get_pipe("transformer").pipe(nlp.make_doc(text) for text, _ in TRAIN_DATA))
    predicted = hybrid.predict(processed)
    assert [v.shape for v in predicted] == [(len(doc), 48) for doc in processed]
    assert all(numpy.abs(v[:, :32]).sum() > 0 for v in predicted)


def test_hybrid_cnn_learns_at_the_head_rate(tiny_bert_dir):
    """The from-scratch CNN learns at learn_rate_scale x the base rate, like the head."""
    nlp = make_hybrid_nlp(tiny_bert_dir)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    pipe = nlp.get_pipe("sciner_spancat")
    cnn_ids = {node.id for node in pipe.model.get_ref("tok2vec").get_ref("cnn").walk()}
    calls = set()

    def fake_optimizer(key, weights, gradient, *, lr_scale=1.0):
        calls.add((key[0] in cnn_ids, lr_scale))
        return weights, gradient

    nlp.get_pipe("transformer").update(examples)
    pipe.update(examples, sgd=None)
    pipe.finish_update(fake_optimizer)
    assert calls == {(False, 10.0), (True, 10.0)}


def test_hybrid_with_cnn_listener(tiny_bert_dir):
    """The CNN may also come from a tok2vec component, through a Tok2VecListener."""
    hybrid = {
        "@architectures": "spacy-sciner.HybridTok2Vec.v1",
        "transformer": {"@architectures": "spacy-transformers.TransformerListener.v1", "upstream": "transformer",
                        "pooling": {"@layers": "reduce_mean.v1"}},
        "cnn": {"@architectures": "spacy.Tok2VecListener.v1", "width": 16, "upstream": "tok2vec"},
    }
    nlp = make_nlp(tiny_bert_dir, model={"hidden_width": 32, "tok2vec": hybrid})
    nlp.add_pipe("tok2vec", config={"model": cnn_config(16)}, first=True)
    losses = train(nlp, make_examples(nlp), steps=2)
    assert set(losses) == {"tok2vec", "transformer", "sciner_spancat"} and losses["tok2vec"] > 0
    assert nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec").get_dim("nO") == 48


@pytest.fixture(scope="module")
def demo_corpus(tmp_path_factory):
    """The shipped demo sample (assets/demo), converted as `project.yml` does."""
    out = tmp_path_factory.mktemp("demo-corpus")
    cmd = [sys.executable, "scripts/convert_dataset.py", "demo", "unused", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    return out


def test_spacy_train_cnn_config_on_demo(demo_corpus, tmp_path):
    """`spacy train configs/sciner_spancat_cnn.cfg`, a few steps: no transformer needed."""
    log = tmp_path / "logs" / "train.jsonl"
    cmd = [
        sys.executable, "-m", "spacy", "train", "configs/sciner_spancat_cnn.cfg", "--output", str(tmp_path / "out"),
        "--paths.train", str(demo_corpus / "train.spacy"), "--paths.dev", str(demo_corpus / "dev.spacy"),
        "--training.max_steps", "12", "--training.eval_frequency", "6", "--training.logger.path", str(log),
    ]
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    print(f"spacy train (12 steps, demo): {time.perf_counter() - start:.1f} s")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 6, 12]
    assert all(0 <= r["scores"]["spans_sc_f"] <= 1 for r in records)
    nlp = spacy.load(tmp_path / "out" / "model-best")
    assert nlp.pipe_names == ["tok2vec", "sciner_spancat"]
    doc = nlp(next(DocBin().from_disk(demo_corpus / "test.spacy").get_docs(nlp.vocab)).text)
    assert "sc" in doc.spans


def test_hybrid_batched_token_vectors_equal_the_model(trained_hybrid_nlp):
    """predict_token_vectors' hybrid fast path: the same numbers as the model's own
    predict, without its per-doc joins (and the fallback for a batch with an empty doc)."""
    from spacy_sciner.spancat.tokvecs import _hybrid_fast_path, predict_token_vectors

    nlp = trained_hybrid_nlp
    tok2vec, transformer = nlp.get_pipe("sciner_spancat").model.get_ref("tok2vec"), nlp.get_pipe("transformer")
    for texts in ([text for text, _ in TRAIN_DATA], [TRAIN_DATA[0][0], "", TRAIN_DATA[1][0]]):
        docs = [nlp.make_doc(text) for text in texts]
        transformer.set_annotations(docs, transformer.predict(docs))
        expected = numpy.concatenate([v for v in tok2vec.predict(docs) if len(v)])
        fast = predict_token_vectors(tok2vec, docs)
        assert fast.shape == (sum(len(d) for d in docs), tok2vec.get_dim("nO"))
        numpy.testing.assert_array_equal(fast, expected)
        assert (_hybrid_fast_path(tok2vec, docs) is None) == ("" in texts)  # taken, but not for an empty doc
