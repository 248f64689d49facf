"""``sciner_spancat``: the SEPT span categorizer as a spaCy pipeline component (its
factory and default settings are in ``factory.py``).

Training: every gold span of ``doc.spans[spans_key]`` (nested and overlapping allowed,
also spans longer than ``max_span_length``) plus ``negatives_per_doc`` random non-gold
spans of width <= ``max_span_length`` per doc, drawn from a generator seeded with
``seed`` (reset by ``initialize``); cross-entropy over the labels + "no entity" (class
index ``len(labels)``), and a binary cross-entropy for the high-recall filter head, both
through the shared transformer.

Inference only looks at the doc (never at a reference): the candidates (all spans of
width ``1..max_span_length``, or a ``suggester``'s spans; never spans with whitespace or,
by default, punctuation-only edge tokens, see ``candidates``) are scored in chunks of at
most ``chunk_size`` spans. With ``use_filter`` and a calibrated ``filter_threshold``
(``calibrate()`` or ``sciner calibrate``), spans whose filter probability is below the
threshold are dropped before the MLP. Until calibrated, the filter keeps every span.

Output:

* ``doc.spans[spans_key]``: every span whose argmax over the labels plus "no entity" is
  a label (``threshold`` null, the default), or, with a probability floor ``threshold``,
  whose best label's probability is >= it; nested and overlapping spans allowed;
  ``doc.spans[spans_key].attrs["scores"]`` holds the best labels' probabilities.
* ``doc.ents`` (if ``write_ents``): a non-overlapping subset of those spans, chosen
  greedily by score, highest first.

Calibration (dev data only): ``calibrate()`` sets ``filter_threshold`` to keep
``target_recall`` of the gold spans up to ``max_span_length`` and, optionally, replaces
argmax by the dev-F1-best probability floor when that floor beats argmax on dev; both and
the report live in ``cfg`` and are saved with the pipeline.

The output biases start at the log class prior of the sampled training distribution
(``initialize``): with ~94% "no entity" among sampled spans, a uniform start spends the
first updates learning that prior instead of the entities.
"""
from typing import Any, Callable, ContextManager, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, SpanGroup
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Model, NumpyOps, Optimizer, set_dropout_rate
from thinc.types import Floats2d, Ragged

from ..ops import blas_threads, use_numpy_blas
from ..scoring import DEFAULT_SPANS_KEY, score_spans_and_ents
from .candidates import Suggester, doc_candidates
from .decode import greedy_decode, make_spans
from .filter import choose_thresholds, collect_calibration_data
from .inference import (
    CandidateScores, LaunchedSpans, SpanPredictions, collect_spans, launch_spans, pipe_one_batch_ahead, score_all_spans,
)
from .sampling import (
    enumerate_batch, gold_spans, negative_pool, reference_spans, sample_training_spans, span_targets,
)
from .util import (
    check_settings, class_prior_biases, classifier_and_filter_loss, finish_update_scaled,
    sampled_class_counts,
)
from .workspace import Workspace


class SciNERSpanCategorizer(TrainablePipe):
    """Label spans with the SEPT span categorizer (see the module docstring)."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model[Tuple[List[Doc], Ragged], Floats2d],
        name: str = "sciner_spancat",
        *,
        spans_key: str = DEFAULT_SPANS_KEY,
        max_span_length: int = 8,
        negatives_per_doc: int = 50,
        negatives_avoid: Optional[List[str]] = None,
        threshold: Optional[float] = None,
        suggester: Optional[Suggester] = None,
        allow_punct_edges: bool = False,
        use_filter: bool = True,
        filter_threshold: Optional[float] = None,
        write_ents: bool = True,
        ents_threshold: Optional[float] = None,
        chunk_size: int = 20000,
        learn_rate_scale: float = 10.0,
        seed: int = 0,
        scorer: Optional[Callable] = score_spans_and_ents,
    ) -> None:
        """Initialize the component.

        vocab (Vocab): The shared vocabulary.
        model (Model): A ``spacy-sciner.SpanCategorizer.v1`` model.
        name (str): Component name, also the key of its loss.
        spans_key (str): ``doc.spans`` key for gold spans (training) and output.
        max_span_length (int): L, the longest span enumerated at inference.
        negatives_per_doc (int): Random non-gold spans trained on per doc.
        negatives_avoid (Optional[List[str]]): Reference ``doc.spans`` keys whose spans no
            negative may overlap (partially annotated data); None: no such restriction.
        threshold (Optional[float]): None: a span is output when the argmax over the
            labels plus "no entity" is a label. A float: when its best label's
            probability is >= threshold (a floor; ``calibrate`` may set one).
        suggester (Optional[Suggester]): spaCy-style suggester of candidate spans
            (e.g. ``spacy.ngram_suggester.v1``, ``spacy-sciner.candidate_suggester.v1``),
            used for training negatives and at inference; None: all spans 1..L.
        allow_punct_edges (bool): Let punctuation-only tokens start or end a candidate
            (whitespace tokens never do).
        use_filter (bool): Prune spans with the filter head before the MLP.
        filter_threshold (Optional[float]): Filter probability below which a span is
            pruned; None (uncalibrated) keeps every span. Set by ``calibrate``.
        write_ents (bool): Also write a non-overlapping decode to ``doc.ents``.
        ents_threshold (Optional[float]): None: ``doc.ents`` decodes the ``doc.spans``
            output. A float: it decodes the kept spans whose best label's probability
            is >= it, which may be fewer or more than the output spans (``calibrate``
            chooses it on dev ``doc.ents`` F where that beats decoding ``doc.spans``).
        chunk_size (int): Most spans scored at once, bounding memory on long docs.
        learn_rate_scale (float): Multiplier of the optimizer's learning rate for the
            span head (pooling, MLP and filter, trained from scratch). The tok2vec
            sub-model, listener or inline transformer, always learns at the base rate.
        seed (int): Seed of the negative-sampling random generator.
        scorer (Optional[Callable]): The scoring method.
        """
        check_settings(max_span_length, negatives_per_doc, threshold, filter_threshold, chunk_size, ents_threshold)
        if not float(learn_rate_scale) > 0:
            raise ValueError(f"Invalid sciner_spancat settings: learn_rate_scale must be > 0, got {learn_rate_scale!r}")
        self.vocab = vocab
        # On the CPU, numpy's BLAS multiplies several times faster than thinc's blis (ops.py).
        use_numpy_blas(model)
        self.model = model
        self.name = name
        self.scorer = scorer
        self.suggester = suggester
        # Large CPU temporaries kept from batch to batch (workspace.py: no page faults per batch).
        self._workspace = Workspace()
        # Beside a transformer, numpy's BLAS threads (still spinning after a product) would
        # take the cores from its next forward or backward pass: inference and updates hold
        # them to one (ops.py; see _blas).
        self._blas_limit = 1 if any(node.name == "transformer-listener" for node in model.walk()) else None
        self.cfg: Dict[str, Any] = {
            "labels": [],
            "spans_key": spans_key,
            "max_span_length": max_span_length,
            "negatives_per_doc": negatives_per_doc,
            "negatives_avoid": list(negatives_avoid) if negatives_avoid is not None else None,
            "threshold": threshold,
            "allow_punct_edges": allow_punct_edges,
            "use_filter": use_filter,
            "filter_threshold": filter_threshold,
            "write_ents": write_ents,
            "ents_threshold": ents_threshold,
            "chunk_size": chunk_size,
            "learn_rate_scale": learn_rate_scale,
            "seed": seed,
            "calibration": {},
        }
        self._rng = numpy.random.default_rng(seed)

    @property
    def key(self) -> str:
        """RETURNS (str): The ``doc.spans`` key read in training and written in output."""
        return str(self.cfg["spans_key"])

    @property
    def labels(self) -> Tuple[str, ...]:
        """RETURNS (Tuple[str, ...]): The entity labels; class ``len(labels)`` is "no entity"."""
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        """RETURNS (List[str]): The labels, for ``spacy init labels``."""
        return list(self.labels)

    @property
    def _label_map(self) -> Dict[str, int]:
        return {label: i for i, label in enumerate(self.labels)}

    def add_label(self, label: str) -> int:
        """Add a label before ``initialize`` (the softmax is not resizable afterwards).

        label (str): The label.
        RETURNS (int): 0 if the label was already present, otherwise 1.
        """
        if not isinstance(label, str) or not label:
            raise ValueError(f"Labels of '{self.name}' must be non-empty strings, got {label!r}")
        if label in self.labels:
            return 0
        output_layer = self.model.get_ref("output_layer")
        if output_layer.has_dim("nO") and output_layer.get_dim("nO") == len(self.labels) + 1:
            raise ValueError(
                f"Cannot add label '{label}' to '{self.name}': the model is already "
                f"initialized with {len(self.labels)} labels. Add labels before initialize()."
            )
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        return 1

    def predict(self, docs: Iterable[Doc]) -> SpanPredictions:
        """The output spans of the docs: candidates up to ``max_span_length`` that the
        filter keeps (once calibrated) and the decision rule accepts. Decided on the
        model's device; only the output spans come back to the host.

        docs (Iterable[Doc]): The docs, already processed by the transformer.
        RETURNS (SpanPredictions): The spans, their label indices and scores.
        """
        return collect_spans(self._launch(list(docs)))

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """Annotate a stream of docs, one batch ahead: batch i + 1 (the upstream
        transformer's forward pass and this component's scoring) is queued on the device
        before waiting for batch i's spans, so that on a GPU the host's work on one batch
        (tokenization, alignment, Span objects) overlaps the device's work on the next.
        On the CPU nothing is queued and this is ``TrainablePipe.pipe``. Docs come out in
        order; a batch that fails goes to the error handler (by default: raised).

        stream (Iterable[Doc]): The docs.
        batch_size (int): Docs per batch.
        YIELDS (Doc): The annotated docs.
        """
        error_handler = self.get_error_handler()
        yield from pipe_one_batch_ahead(
            stream, batch_size, self._launch, lambda docs, launched: self.set_annotations(docs, collect_spans(launched)),
            lambda docs, err: error_handler(self.name, self, docs, err),
        )

    def _launch(self, docs: List[Doc]) -> LaunchedSpans:
        prune = bool(self.cfg["use_filter"]) and self.cfg["filter_threshold"] is not None
        with self._blas():
            return launch_spans(
                self.model, docs, n_labels=len(self.labels),
                max_span_length=int(self.cfg["max_span_length"]), chunk_size=int(self.cfg["chunk_size"]),
                threshold=self.cfg["threshold"], filter_threshold=self.cfg["filter_threshold"] if prune else None,
                suggester=self.suggester, allow_punct_edges=bool(self.cfg.get("allow_punct_edges", False)),
                ents_threshold=self.cfg.get("ents_threshold") if self.cfg["write_ents"] else None,
                workspace=self._workspace,
            )

    def _blas(self) -> ContextManager:
        """numpy's BLAS held to one thread on the CPU when the model reads a transformer;
        otherwise (a GPU, a CNN-only pipeline) left as it is."""
        return blas_threads(self._blas_limit if isinstance(self.model.ops, NumpyOps) else None)

    def score_candidates(self, docs: List[Doc], prune: bool) -> CandidateScores:
        """Score every candidate span of ``docs``; see ``inference.score_all_spans``.

        docs (List[Doc]): The docs, processed by the upstream transformer.
        prune (bool): Apply the filter threshold before the MLP.
        RETURNS (CandidateScores): All candidates and the kept ones' probabilities.
        """
        with self._blas():
            return score_all_spans(
                self.model, docs, n_classes=len(self.labels) + 1,
                max_span_length=int(self.cfg["max_span_length"]), chunk_size=int(self.cfg["chunk_size"]),
                filter_threshold=self.cfg["filter_threshold"] if prune else None,
                suggester=self.suggester, allow_punct_edges=bool(self.cfg.get("allow_punct_edges", False)),
            )

    def set_annotations(self, docs: Iterable[Doc], predictions: SpanPredictions) -> None:
        """Write ``doc.spans[spans_key]`` (with scores) and, optionally, ``doc.ents``.

        docs (Iterable[Doc]): The docs given to ``predict``.
        predictions (SpanPredictions): The output of ``predict``.
        """
        # One conversion to Python lists per batch; per doc only Span objects are made, once
        # (``doc.set_ents``: the ``doc.ents`` setter would rebuild each Span; both default to "outside").
        rows = numpy.asarray(predictions.spans.dataXd).reshape(-1, 2).tolist()
        labels, scores = numpy.asarray(predictions.labels).tolist(), numpy.asarray(predictions.scores, dtype="f")
        label_ids = [self.vocab.strings.add(label) for label in self.labels]
        # With an ents floor, predict also returns spans only doc.ents may take (in_spans False).
        in_spans, ents_floor = predictions.in_spans, self.cfg.get("ents_threshold")
        for_ents = None if in_spans is None else (scores.astype("float64") >= float(ents_floor)).tolist()
        offset = 0
        for doc, count in zip(docs, numpy.asarray(predictions.spans.lengths).tolist()):
            end = offset + count
            spans = make_spans(doc, rows[offset:end], labels[offset:end], label_ids)
            if in_spans is None:
                doc.spans[self.key] = SpanGroup(doc, name=self.key, spans=spans, attrs={"scores": scores[offset:end]})
                if self.cfg["write_ents"]:
                    doc.set_ents([spans[i] for i in greedy_decode(rows[offset:end], scores[offset:end], len(doc))])
            else:
                member = in_spans[offset:end]
                group = [span for span, m in zip(spans, member) if m]
                doc.spans[self.key] = SpanGroup(doc, name=self.key, spans=group, attrs={"scores": scores[offset:end][member]})
                ents = [i for i in range(count) if for_ents[offset + i]]
                chosen = greedy_decode([rows[offset + i] for i in ents], [float(scores[offset + i]) for i in ents], len(doc))
                doc.set_ents([spans[ents[i]] for i in chosen])
            offset = end

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from gold spans and sampled negatives of a batch.

        examples (Iterable[Example]): The batch.
        drop (float): Dropout rate.
        sgd (Optional[Optimizer]): The optimizer.
        losses (Optional[Dict[str, float]]): Running losses, updated under ``self.name``.
        RETURNS (Dict[str, float]): The losses.
        """
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "SciNERSpanCategorizer.update")
        spans, _ = sample_training_spans(
            examples, self.key, self._label_map, int(self.cfg["max_span_length"]),
            int(self.cfg["negatives_per_doc"]), self._rng, candidates=self._candidates(examples),
            avoid=self._avoid(examples),
        )
        if spans.dataXd.shape[0] == 0:
            return losses
        docs = [eg.predicted for eg in examples]
        set_dropout_rate(self.model, drop)
        with self._blas():
            scores, backprop = self.model.begin_update((docs, spans))
            loss, d_scores = self.get_loss(examples, (spans, scores))
            backprop(d_scores)
            if sgd is not None:
                self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """Update the span head at ``learn_rate_scale`` times the base rate and an
        inline tok2vec (if any) at the base rate.

        sgd (Optimizer): The optimizer.
        """
        scale = float(self.cfg.get("learn_rate_scale", 1.0))
        finish_update_scaled(self.model, sgd, scale, base_rate_part=self.model.get_ref("tok2vec"))

    def _candidates(self, examples: List[Example]) -> List[numpy.ndarray]:
        """Candidate rows of each example's predicted doc (negatives come from these)."""
        docs = [eg.predicted for eg in examples]
        return doc_candidates(
            docs, int(self.cfg["max_span_length"]), self.suggester, bool(self.cfg.get("allow_punct_edges", False))
        )

    def _avoid(self, examples: List[Example]) -> Optional[List[numpy.ndarray]]:
        """Spans no negative may overlap, per example (``negatives_avoid``), or None."""
        keys = self.cfg.get("negatives_avoid")
        return None if keys is None else [reference_spans(eg, keys) for eg in examples]

    def get_loss(self, examples: Iterable[Example], spans_scores: Tuple[Ragged, Floats2d]) -> Tuple[float, Floats2d]:
        """Cross-entropy of the classifier plus binary cross-entropy of the filter.

        Summed over spans, not averaged, like spaCy's own components (the tagger's
        ``normalize=False``): the shared transformer then gets gradients of the usual
        scale. Measured on SciERC (MiniLM, 100 steps of 16 sentences, lr 1e-4): dev F
        0.247 at threshold 0.5 (0.274 calibrated) with sums vs 0.0 (0.211) with means.

        examples (Iterable[Example]): The batch.
        spans_scores (Tuple[Ragged, Floats2d]): The spans and the model's output.
        RETURNS (Tuple[float, Floats2d]): The loss and its gradient.
        """
        spans, scores = spans_scores
        targets = span_targets(list(examples), spans, self.key, self._label_map)
        loss, d_scores = classifier_and_filter_loss(self.model.ops.to_numpy(scores), targets, len(self.labels) + 1)
        return loss, self.model.ops.asarray2f(d_scores)

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[List[str]] = None,
    ) -> None:
        """Collect labels (or take ``labels``), size the softmax and initialize the model.

        get_examples (Callable[[], Iterable[Example]]): Representative training examples.
        nlp (Optional[Language]): The pipeline.
        labels (Optional[List[str]]): Labels, e.g. from ``spacy init labels``.
        """
        validate_get_examples(get_examples, "SciNERSpanCategorizer.initialize")
        for label in labels or []:
            self.add_label(label)
        subbatch: List[Example] = []
        for eg in get_examples():
            if labels is None:
                for span in eg.reference.spans.get(self.key, []):
                    self.add_label(span.label_)
            if len(subbatch) < 10:
                subbatch.append(eg)
        self._require_labels()
        self.model.get_ref("output_layer").set_dim("nO", len(self.labels) + 1, force=True)
        self._rng = numpy.random.default_rng(int(self.cfg["seed"]))
        docs = [eg.x for eg in subbatch if len(eg.x)]
        if docs:
            self.model.initialize(X=(docs, enumerate_batch([len(d) for d in docs], 1)))
        else:
            self.model.initialize()
        self._init_biases(get_examples)

    def _init_biases(self, get_examples: Callable[[], Iterable[Example]]) -> None:
        """Start both heads at the class prior of what ``update`` samples: gold spans
        by label, and ``negatives_per_doc`` negatives per doc (fewer if it has fewer)."""
        counts = sampled_class_counts(
            get_examples(), self.key, self._label_map, int(self.cfg["negatives_per_doc"]), self._n_negatives,
        )
        class_bias, filter_bias = class_prior_biases(counts)
        self.model.get_ref("output_layer").set_param("b", self.model.ops.asarray1f(class_bias))
        self.model.get_ref("filter").set_param("b", self.model.ops.asarray1f(filter_bias))

    def _n_negatives(self, eg: Example) -> int:
        """How many candidates of ``eg`` a negative may be drawn from."""
        avoid = self._avoid([eg])
        gold, _ = gold_spans(eg, self.key, self._label_map, unknown=-1)
        return len(negative_pool(self._candidates([eg])[0], gold, len(eg.predicted), None if avoid is None else avoid[0]))

    def calibrate(
        self,
        examples: Iterable[Example],
        *,
        target_recall: float = 0.99,
        tune_threshold: bool = True,
        tune_ents: bool = True,
        nlp: Optional[Language] = None,
        batch_size: int = 64,
    ) -> Dict[str, float]:
        """Choose the filter threshold (and the decision threshold) on dev examples.

        examples (Iterable[Example]): Dev examples. Their predicted docs must have been
            processed by the upstream transformer, or pass ``nlp`` to do it here.
        target_recall (float): Fraction of reachable gold spans the filter must keep.
        tune_threshold (bool): Also choose the decision rule on dev: argmax, unless a
            probability floor reaches a higher dev F1 (then ``threshold`` is that floor).
        tune_ents (bool): With ``tune_threshold`` and ``write_ents``, also choose
            ``ents_threshold``: doc.ents' own floor where it beats decoding doc.spans on
            dev doc.ents F (gold: the dev docs' ``doc.ents``); else doc.ents decodes doc.spans.
        nlp (Optional[Language]): Pipeline whose components before this one are run.
        batch_size (int): Docs per batch.
        RETURNS (Dict[str, float]): The report, also stored in ``cfg["calibration"]``.
        """
        data = collect_calibration_data(self, examples, nlp=nlp, batch_size=batch_size)
        tune_ents = tune_ents and bool(self.cfg["write_ents"]) and data.n_gold_ents > 0
        report = choose_thresholds(data, target_recall=target_recall, tune_threshold=tune_threshold, tune_ents=tune_ents)
        self.cfg["filter_threshold"] = report["filter_threshold"]
        if tune_threshold:
            self.cfg["threshold"] = report["threshold"]
            self.cfg["ents_threshold"] = report.get("ents_threshold")
        self.cfg["calibration"] = report
        return report


# The factory lives in factory.py (which needs the class above); the entry point names it
# here, where it has always been, so that pipelines and older checkouts keep resolving it.
from .factory import make_sciner_spancat  # noqa: E402,F401
