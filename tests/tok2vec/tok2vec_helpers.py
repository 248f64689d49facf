"""Small CNN-only and hybrid sciner_spancat pipelines for tests (seconds to train)."""
from typing import Any, Dict

import spacy
from spancat_helpers import make_nlp


def cnn_config(width: int = 32, depth: int = 2) -> Dict[str, Any]:
    """A small spacy.Tok2Vec.v2 (MultiHashEmbed NORM/PREFIX/SUFFIX/SHAPE, MaxoutWindowEncoder)."""
    return {
        "@architectures": "spacy.Tok2Vec.v2",
        "embed": {
            "@architectures": "spacy.MultiHashEmbed.v2",
            "width": width,
            "attrs": ["NORM", "PREFIX", "SUFFIX", "SHAPE"],
            "rows": [500, 100, 250, 250],
            "include_static_vectors": False,
        },
        "encode": {
            "@architectures": "spacy.MaxoutWindowEncoder.v2",
            "width": width,
            "depth": depth,
            "window_size": 1,
            "maxout_pieces": 3,
        },
    }


def make_cnn_nlp(width: int = 32) -> spacy.Language:
    """tok2vec (CNN) + sciner_spancat reading it through a Tok2VecListener; no transformer."""
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec", config={"model": cnn_config(width)})
    listener = {"@architectures": "spacy.Tok2VecListener.v1", "width": width, "upstream": "*"}
    nlp.add_pipe(
        "sciner_spancat", config={"learn_rate_scale": 1.0, "model": {"hidden_width": 32, "tok2vec": listener}}
    )
    return nlp


def make_hybrid_nlp(tiny_bert_dir, cnn_width: int = 16) -> spacy.Language:
    """transformer (tiny BERT) + sciner_spancat on spacy-sciner.HybridTok2Vec.v1 with an inline CNN."""
    hybrid = {
        "@architectures": "spacy-sciner.HybridTok2Vec.v1",
        "transformer": {
            "@architectures": "spacy-transformers.TransformerListener.v1",
            "grad_factor": 1.0,
            "upstream": "*",
            "pooling": {"@layers": "reduce_mean.v1"},
        },
        "cnn": cnn_config(cnn_width),
    }
    return make_nlp(tiny_bert_dir, model={"hidden_width": 32, "tok2vec": hybrid})
