"""Helpers for the sciner_spancat tests: a tiny transformer pipeline and data."""
import spacy
from spacy.util import fix_random_seed
from spacy.tokens import Doc, Span
from spacy.training import Example

# Nested and overlapping gold on purpose: "support vector machine" holds "support vector".
TRAIN_DATA = [
    ("the support vector machine beats neural nets", [(1, 4, "Method"), (1, 3, "Other"), (5, 7, "Method")]),
    ("we use the penn treebank corpus", [(3, 5, "Material"), (3, 6, "Material")]),
    ("bleu measures translation quality", [(0, 1, "Metric"), (2, 3, "Task")]),
]


def make_nlp(tiny_bert_dir, **spancat_config) -> spacy.Language:
    """A blank English pipeline: transformer (tiny random BERT) + sciner_spancat."""
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "transformer",
        config={
            "model": {
                "@architectures": "spacy-sciner.TransformerModel.v1",
                "name": str(tiny_bert_dir),
                "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96},
            }
        },
    )
    config = {"model": {"hidden_width": 32}}
    config.update(spancat_config)
    nlp.add_pipe("sciner_spancat", config=config)
    return nlp


def make_examples(nlp, data=TRAIN_DATA, key="sc"):
    """Examples whose reference docs carry the gold spans in doc.spans[key]."""
    examples = []
    for text, spans in data:
        ref = Doc(nlp.vocab, words=text.split())
        ref.spans[key] = [Span(ref, s, e, label=label) for s, e, label in spans]
        examples.append(Example(nlp.make_doc(text), ref))
    return examples


def train(nlp, examples, steps=150, learn_rate=0.002, seed=0, drop=0.0):
    """Initialize and update; a high learning rate so a tiny set is learned in seconds.
    Seeded: thinc draws initial weights from numpy's global random state."""
    fix_random_seed(seed)
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = learn_rate
    losses = {}
    for _ in range(steps):
        losses = nlp.update(examples, sgd=optimizer, drop=drop, losses={})
    return losses


def predicted_spans(doc, key="sc"):
    return [(span.start, span.end, span.label_) for span in doc.spans[key]]
