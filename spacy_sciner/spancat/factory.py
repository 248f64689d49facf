"""The ``sciner_spancat`` factory and its default settings (the component is in
``component.py``)."""
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc
from thinc.api import Config, Model
from thinc.types import Floats2d, Ragged

from ..multiprocess import install_fork_guard
from ..scoring import DEFAULT_SPANS_KEY
from .candidates import Suggester

if TYPE_CHECKING:  # component.py imports this module
    from .component import SciNERSpanCategorizer

default_model_config = """
[model]
@architectures = "spacy-sciner.SpanCategorizer.v1"
hidden_width = 256
dropout = 0.1
reducer = "max"
width_embedding = 0
width_buckets = 16

[model.tok2vec]
@architectures = "spacy-transformers.TransformerListener.v1"
grad_factor = 1.0
upstream = "*"

[model.tok2vec.pooling]
@layers = "reduce_mean.v1"
"""
DEFAULT_SCINER_SPANCAT_MODEL = Config().from_str(default_model_config)["model"]


@Language.factory(
    "sciner_spancat",
    assigns=["doc.spans", "doc.ents"],
    default_config={
        "model": DEFAULT_SCINER_SPANCAT_MODEL,
        "spans_key": DEFAULT_SPANS_KEY,
        "max_span_length": 8,
        # ~250 negatives per SciERC abstract (SEPT's best) / ~5 sentences per abstract.
        "negatives_per_doc": 50,
        # null: negatives from every non-gold candidate. A list of reference doc.spans
        # keys (e.g. ["sc", "candidates"]): only from candidates overlapping none of their
        # spans - for partially annotated (weak) data, where an unlabeled span may be an
        # entity nobody labeled.
        "negatives_avoid": None,
        # null: argmax over labels + "no entity"; a float: a probability floor.
        "threshold": None,
        # null: every span of 1..max_span_length tokens (the max-pooling fast path).
        "suggester": None,
        "allow_punct_edges": False,
        "use_filter": True,
        "filter_threshold": None,
        "write_ents": True,
        # null: doc.ents is a non-overlapping decode of doc.spans; a float: of the spans whose
        # best label's probability is >= it (calibrate chooses it on dev doc.ents F).
        "ents_threshold": None,
        "chunk_size": 20000,
        # The MLP and filter start from scratch while the transformer is pretrained
        # (SciERC, 100 steps: calibrated dev F 0.274 at 10x vs 0.092 at 1x).
        "learn_rate_scale": 10.0,
        "seed": 0,
        "scorer": {"@scorers": "spacy-sciner.span_scorer.v1"},
    },
    default_score_weights={
        f"spans_{DEFAULT_SPANS_KEY}_f": 1.0,
        f"spans_{DEFAULT_SPANS_KEY}_p": 0.0,
        f"spans_{DEFAULT_SPANS_KEY}_r": 0.0,
        "ents_f": 0.0,
    },
)
def make_sciner_spancat(
    nlp: Language,
    name: str,
    model: Model[Tuple[List[Doc], Ragged], Floats2d],
    spans_key: str,
    max_span_length: int,
    negatives_per_doc: int,
    negatives_avoid: Optional[List[str]],
    threshold: Optional[float],
    suggester: Optional[Suggester],
    allow_punct_edges: bool,
    use_filter: bool,
    filter_threshold: Optional[float],
    write_ents: bool,
    ents_threshold: Optional[float],
    chunk_size: int,
    learn_rate_scale: float,
    seed: int,
    scorer: Optional[Callable],
) -> "SciNERSpanCategorizer":
    """Create a ``SciNERSpanCategorizer``; see the class for the arguments."""
    from .component import SciNERSpanCategorizer  # component.py imports this module

    # Also for pipelines on spacy-transformers' own architectures: workers of
    # nlp.pipe(n_process > 1) must not inherit torch's OpenMP pool (a deadlock).
    install_fork_guard()
    return SciNERSpanCategorizer(
        nlp.vocab, model, name, spans_key=spans_key, max_span_length=max_span_length,
        negatives_per_doc=negatives_per_doc, negatives_avoid=negatives_avoid, threshold=threshold,
        suggester=suggester,
        allow_punct_edges=allow_punct_edges, use_filter=use_filter,
        filter_threshold=filter_threshold, write_ents=write_ents, ents_threshold=ents_threshold, chunk_size=chunk_size,
        learn_rate_scale=learn_rate_scale, seed=seed, scorer=scorer,
    )
