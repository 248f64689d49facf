"""spacy-sciner.TransformerModel.v2: the encoder on length-sorted sub-batches of wordpiece
rows gives one call's outputs and gradients (up to float rounding), in a pipeline too."""
import copy

import pytest
import spacy
import torch
from spacy.tokens import Span
from spacy.training import Example
from spacy.util import fix_random_seed
from spacy_transformers.span_getters import configure_strided_spans

from spacy_sciner.encoder_buckets import length_buckets
from spacy_sciner.encoders import build_transformer_model, build_transformer_model_v2

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
TEXTS = ["short one .", "a much longer sentence with many more words in it than the others here .",
         "mid length text of words", "x", "another fairly long one with several tokens in it ."] * 3


def test_length_buckets_group_similar_lengths_under_the_cap():
    lengths = [5, 20, 3, 9, 4, 30]
    groups = length_buckets(lengths, 12)
    assert sorted(i for g in groups for i in g) == list(range(6))
    assert groups == [[2, 4], [0], [3], [1], [5]]  # shortest first; 20 and 30 exceed 12: alone
    for g in groups:
        assert len(g) == 1 or max(lengths[i] for i in g) * len(g) <= 12
    assert length_buckets(lengths, 10_000) == [[2, 4, 0, 3, 1, 5]]
    assert length_buckets([], 8) == []


def models(tiny_bert_dir, max_padded=40):
    spans = configure_strided_spans(128, 96)
    one = build_transformer_model(str(tiny_bert_dir), spans, {"use_fast": True}, dict(NO_DROPOUT))
    parts = build_transformer_model_v2(str(tiny_bert_dir), spans, {"use_fast": True}, dict(NO_DROPOUT),
                                       max_padded_wordpieces=max_padded)
    one.initialize()
    parts.initialize()
    parts.from_bytes(one.to_bytes())  # the same weights
    return one, parts


def encoder_calls(model) -> list:
    """Batch shapes the Hugging Face model is called with (a forward hook)."""
    shapes = []
    hf = model.layers[0].shims[0]._model
    hf.register_forward_pre_hook(lambda m, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    return shapes


def test_outputs_and_gradients_are_one_calls(tiny_bert_dir):
    one, parts = models(tiny_bert_dir)
    calls = encoder_calls(parts)
    docs = [spacy.blank("en")(t) for t in TEXTS]
    out1, bp1 = one.begin_update(docs)
    out2, bp2 = parts.begin_update(docs)
    assert len(calls) > 1 and all(rows * width <= 40 or rows == 1 for rows, width in calls)
    a, b = out1.model_output.last_hidden_state, out2.model_output.last_hidden_state
    assert a.shape == b.shape
    real = torch.as_tensor(out1.wordpieces.attention_mask).bool()
    assert torch.allclose(a[real], b[real], atol=1e-5)
    assert torch.allclose(out1.model_output.pooler_output, out2.model_output.pooler_output, atol=1e-5)
    grad = torch.randn_like(a) * real.unsqueeze(-1)
    for out, bp in ((out1, bp1), (out2, bp2)):
        d_out = copy.copy(out)
        d_out.model_output = type(out.model_output)(last_hidden_state=grad.clone())
        bp(d_out)
    params = [list(m.layers[0].shims[0]._model.parameters()) for m in (one, parts)]
    grads = [(x.grad, y.grad) for x, y in zip(*params) if x.grad is not None]
    assert len(grads) > 10
    for x, y in grads:
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-4 * float(x.abs().max()) + 1e-6)


def pipeline(tiny_bert_dir, architecture: str, **extra):
    nlp = spacy.blank("en")
    model = {"@architectures": architecture, "name": str(tiny_bert_dir), "transformer_config": NO_DROPOUT,
             "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96}, **extra}
    nlp.add_pipe("transformer", config={"model": model})
    nlp.add_pipe("sciner_spancat", config={"model": {"hidden_width": 32}})
    return nlp


def test_a_pipeline_trains_and_predicts_as_with_one_call(tiny_bert_dir, tmp_path):
    results = []
    for architecture, extra in (("spacy-sciner.TransformerModel.v1", {}),
                                ("spacy-sciner.TransformerModel.v2", {"max_padded_wordpieces": 40})):
        nlp = pipeline(tiny_bert_dir, architecture, **extra)
        examples = []
        for text in TEXTS[:5]:
            ref = nlp.make_doc(text)
            ref.spans["sc"] = [Span(ref, 0, 1, label="X"), Span(ref, max(len(ref) - 2, 0), len(ref), label="Y")]
            examples.append(Example(nlp.make_doc(text), ref))
        fix_random_seed(0)
        optimizer = nlp.initialize(lambda: examples)
        losses = [nlp.update(examples, sgd=optimizer, losses={})["sciner_spancat"] for _ in range(4)]
        docs = list(nlp.pipe(TEXTS))
        results.append((losses, [[(s.start, s.end, s.label_, round(float(p), 4)) for s, p in
                                  zip(d.spans["sc"], d.spans["sc"].attrs["scores"])] for d in docs]))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-4)
    assert results[0][1] == results[1][1]
    # Saved and loaded, the pipeline still runs the encoder in parts.
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    calls = encoder_calls(loaded.get_pipe("transformer").model)
    list(loaded.pipe(TEXTS))
    assert len(calls) > 1
    # ... and one call per batch where the setting is overridden at loading (the README's GPU advice).
    one_call = spacy.load(tmp_path / "model", config={"components.transformer.model.max_padded_wordpieces": 0})
    calls = encoder_calls(one_call.get_pipe("transformer").model)
    list(one_call.pipe(TEXTS, batch_size=64))
    assert len(calls) == 1


def test_bad_settings_are_clear_errors(tiny_bert_dir):
    spans = configure_strided_spans(128, 96)
    with pytest.raises(ValueError, match="mixed_precision = false"):
        build_transformer_model_v2(str(tiny_bert_dir), spans, mixed_precision=True, max_padded_wordpieces=256)
    with pytest.raises(ValueError, match=">= 0"):
        build_transformer_model_v2(str(tiny_bert_dir), spans, max_padded_wordpieces=-1)
