"""Choose what to mask for each pre-fine-tuning objective, and build the masked batch.

Objectives (combine with ``+``):

* ``mlm_cand``: all word pieces of chosen candidate spans are masked and predicted.
* ``ecb``: for a chosen candidate the left and right boundary *words* (x_{s-1}, x_{e+1}, all
  their pieces; a side is skipped when it is the sequence edge) are masked and predicted
  while the candidate itself stays visible.
* ``mlm_random``: BERT's random word pieces.
* ``mlm_span`` (+ ``sbo``): SpanBERT's whole-word spans of geometric length (p=0.2, at most
  10 words); ``sbo`` adds the span-boundary objective over the same masked pieces.

Every objective predicts at most ``mask_ratio`` (default 15%) of the non-special pieces of a
sequence, so all variants get about the same prediction budget, with one exception: the
candidate objectives always admit the first candidate of a sequence (in random order), even
when it alone exceeds the budget. Tri-Train predicts the tokens *of entity candidates*, whole;
a strict per-sequence cap would never mask a candidate longer than 15% of its sentence
(20.7% of SciERC's entities with MiniLM's word pieces), and those long multi-word terms are
the ones the objective is for. Admitting the first candidate instead of pooling the budget
over the batch keeps each sequence's masking independent of the other sequences in its
batch (batch size, data order and ``--grad-accum`` do not change what a sentence teaches)
and exceeds the cap by at most one candidate per sequence; the real rate is logged as
masked pieces per 1,000 tokens (``stats.py``). With
``mlm_cand+ecb`` each candidate is given one role at random (a single forward pass cannot
show a candidate to ECB and hide it from MLM_CAND at once): a candidate masked for
MLM_CAND never overlaps a candidate kept visible for ECB. All chosen positions get BERT's
80/10/10 corruption ([MASK] / random token / unchanged). Special tokens are never masked.
"""
from dataclasses import dataclass, field, fields
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .data import Example

OBJECTIVES = ("mlm_cand", "ecb", "mlm_random", "mlm_span", "sbo")
# Objectives that may be combined with each other (one group per run).
OBJECTIVE_GROUPS = (
    frozenset({"mlm_cand", "ecb"}),
    frozenset({"mlm_random"}),
    frozenset({"mlm_span", "sbo"}),
)
# Objectives whose predictions go through the MLM head at gathered positions.
TOKEN_OBJECTIVES = ("mlm_cand", "ecb", "mlm_random", "mlm_span")
SPANBERT_P = 0.2
SPANBERT_MAX_WORDS = 10


def parse_objective(objective: str) -> FrozenSet[str]:
    """Parse ``"mlm_cand+ecb"`` into a set of objective names and validate it.

    objective (str): Objective names joined by ``+``.
    RETURNS (FrozenSet[str]): The objective names.
    """
    names = frozenset(n.strip() for n in objective.split("+") if n.strip())
    unknown = names - set(OBJECTIVES)
    if not names or unknown:
        raise ValueError(
            f"Unknown PFT objective '{objective}': choose from {', '.join(OBJECTIVES)} "
            "joined by '+', e.g. mlm_cand+ecb"
        )
    if not any(names <= group for group in OBJECTIVE_GROUPS):
        raise ValueError(
            f"PFT objectives '{objective}' cannot be combined; allowed combinations are "
            "subsets of mlm_cand+ecb, mlm_random, mlm_span+sbo"
        )
    if "sbo" in names and "mlm_span" not in names:
        raise ValueError("The 'sbo' objective predicts the masked spans of 'mlm_span': use mlm_span+sbo")
    return names


def budget(word_ids: Sequence[int], mask_ratio: float) -> int:
    """Number of pieces that may be masked: ``mask_ratio`` of the non-special pieces (≥ 1)."""
    n_content = len(word_ids) - list(word_ids).count(-1)  # list.count runs in C
    return max(1, int(round(n_content * mask_ratio))) if n_content else 0


def _word_at(word_ids: Sequence[int], i: int) -> range:
    """The pieces of the word that piece ``i`` belongs to (empty for a special or an edge).

    Scanning from ``i`` costs the length of one word, where mapping every word of the
    sequence first cost more than the rest of the candidate selection.
    """
    if i < 0 or i >= len(word_ids) or word_ids[i] < 0:
        return range(0)
    w, start, end = word_ids[i], i, i + 1
    while start > 0 and word_ids[start - 1] == w:
        start -= 1
    while end < len(word_ids) and word_ids[end] == w:
        end += 1
    return range(start, end)


def _word_pieces(word_ids: Sequence[int]) -> Dict[int, Tuple[int, int]]:
    """Map each word index to its ``(first_piece, end_piece_exclusive)``."""
    spans: Dict[int, Tuple[int, int]] = {}
    for i, w in enumerate(word_ids):
        if w >= 0:
            start, _ = spans.get(w, (i, i))
            spans[w] = (start, i + 1)
    return spans


def random_positions(word_ids: Sequence[int], rng: np.random.Generator, mask_ratio: float) -> List[int]:
    """BERT-style: a random ``mask_ratio`` share of the non-special pieces.

    word_ids (Sequence[int]): Word index per piece, -1 for special tokens.
    rng (np.random.Generator): Random source.
    mask_ratio (float): Share of pieces to mask.
    RETURNS (List[int]): Sorted piece positions.
    """
    content = [i for i, w in enumerate(word_ids) if w >= 0]
    n = budget(word_ids, mask_ratio)
    return sorted(rng.choice(content, size=n, replace=False).tolist()) if n else []


def span_positions(
    word_ids: Sequence[int],
    rng: np.random.Generator,
    mask_ratio: float,
    p: float = SPANBERT_P,
    max_words: int = SPANBERT_MAX_WORDS,
) -> List[Tuple[int, int]]:
    """SpanBERT-style whole-word spans with geometric lengths, within the budget.

    RETURNS (List[Tuple[int, int]]): Sorted ``(first_piece, end_piece_exclusive)`` spans. The
        pieces just outside each span are its SBO boundaries (always present: the special
        tokens close the sequence on both sides).
    """
    # Words in order, by position: a window of a long sentence starts at a word index > 0,
    # and a word with no pieces leaves a gap, so word indices are not 0..n-1.
    pieces = _word_pieces(word_ids)
    words = [pieces[w] for w in sorted(pieces)]
    n_words, limit = len(words), budget(word_ids, mask_ratio)
    masked = np.zeros(len(word_ids), dtype=bool)
    spans: List[Tuple[int, int]] = []
    # SpanBERT samples until the budget is used; a bounded number of draws keeps tiny or
    # saturated sequences from looping for ever.
    for _ in range(10 * max(limit, 1)):
        if masked.sum() >= limit or not n_words:
            break
        length = min(int(rng.geometric(p)), max_words, n_words)
        first = int(rng.integers(0, n_words - length + 1))
        start, end = words[first][0], words[first + length - 1][1]
        if masked[start - 1 : end + 1].any() or masked.sum() + (end - start) > limit:
            continue  # overlapping or touching spans would share boundaries
        masked[start:end] = True
        spans.append((start, end))
    return sorted(spans)


def candidate_positions(
    example: Example,
    rng: np.random.Generator,
    mask_ratio: float,
    use_cand: bool = True,
    use_ecb: bool = True,
) -> Tuple[List[int], List[int]]:
    """Choose candidates and return the pieces to predict for MLM_CAND and for ECB.

    example (Example): Pieces, word ids and candidate spans (piece offsets).
    rng (np.random.Generator): Random source (candidate order and roles).
    mask_ratio (float): Budget, as a share of the non-special pieces; the first
        candidate admitted may exceed it.
    use_cand (bool): Use the MLM_CAND role.
    use_ecb (bool): Use the ECB role.
    RETURNS (Tuple[List[int], List[int]]): Sorted ``(cand_positions, ecb_positions)``.
    """
    word_ids = example.word_ids
    limit = budget(word_ids, mask_ratio)
    masked, visible = set(), set()
    cand, ecb = [], []
    order = rng.permutation(len(example.candidates))
    # Drawn for every candidate, so the random stream does not depend on the roles; in one
    # call, as each call of the generator costs more than a candidate's set operations.
    rolls = rng.random(len(order)).tolist()
    for i, roll in zip(order.tolist(), rolls):
        start, end = example.candidates[i]
        span = range(start, end)
        if use_cand and (not use_ecb or roll < 0.5):
            if not visible.isdisjoint(span) or not masked.isdisjoint(span):
                continue
            targets, out = span, cand
        else:
            targets, out = [*_word_at(word_ids, start - 1), *_word_at(word_ids, end)], ecb
            # The candidate must stay visible and its boundaries must not be hidden spans.
            hidden = not masked.isdisjoint(span) or not masked.isdisjoint(targets)
            if not targets or hidden or not visible.isdisjoint(targets):
                continue
        # The first candidate is admitted whatever its length (see the module docstring).
        if masked and len(masked) + len(targets) > limit:
            continue
        masked.update(targets)
        out.extend(targets)
        if out is ecb:
            visible.update(span)
    return sorted(cand), sorted(ecb)


def bert_corrupt(
    input_ids: np.ndarray,
    positions: Sequence[int],
    rng: np.random.Generator,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
) -> np.ndarray:
    """BERT's 80/10/10 corruption: [MASK], a random non-special token, or unchanged.

    RETURNS (np.ndarray): A corrupted copy of ``input_ids``.
    """
    out = np.array(input_ids, copy=True)
    if not len(positions):
        return out
    positions = np.asarray(positions)
    roll = rng.random(len(positions))
    out[positions[roll < 0.8]] = mask_id
    rand_pos = positions[(roll >= 0.8) & (roll < 0.9)]
    # Random replacements avoid special tokens, which the model never sees inside text.
    random_ids = rng.integers(0, vocab_size, size=len(rand_pos))
    special = np.isin(random_ids, np.asarray(special_ids))
    while special.any():
        random_ids[special] = rng.integers(0, vocab_size, size=int(special.sum()))
        special = np.isin(random_ids, np.asarray(special_ids))
    out[rand_pos] = random_ids
    return out


@dataclass(frozen=True)
class MaskVocab:
    """The token ids masking needs, read from the tokenizer once (``len(tokenizer)`` of a
    fast tokenizer costs ~20 ms per call, more than masking a whole batch).

    pad_id, mask_id (int): Padding and [MASK] ids.
    size (int): Number of ids (random replacements are drawn below it).
    special_ids (Tuple[int, ...]): Never used as random replacements.
    """

    pad_id: int
    mask_id: int
    size: int
    special_ids: Tuple[int, ...]

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "MaskVocab":
        return cls(tokenizer.pad_token_id, tokenizer.mask_token_id, len(tokenizer), tuple(tokenizer.all_special_ids))


@dataclass
class MaskedBatch:
    """A padded, corrupted batch and its prediction targets.

    input_ids, attention_mask (torch.Tensor): ``(B, T)``.
    positions (torch.Tensor): Flat indices into ``B * T`` of the pieces to predict.
    labels (torch.Tensor): Original ids at ``positions``.
    objective (torch.Tensor): Index into ``TOKEN_OBJECTIVES`` per position.
    selection (Dict[str, torch.Tensor]): Per token objective present in the batch (in the
        order of ``TOKEN_OBJECTIVES``), the indices into ``positions`` of its pieces. Known
        on the host, so the loss needs no device->host sync to find out which objectives
        are present (a boolean mask's size is only known after one).
    sbo_left, sbo_right, sbo_offset, sbo_labels (Optional[torch.Tensor]): For ``sbo``, per
        masked span piece: flat index of the left and right boundary piece, the offset in
        the span and the original id.
    n_tokens (int): Non-padding pieces (for tokens/s).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    positions: torch.Tensor
    labels: torch.Tensor
    objective: torch.Tensor
    selection: Dict[str, torch.Tensor] = field(default_factory=dict)
    sbo_left: Optional[torch.Tensor] = None
    sbo_right: Optional[torch.Tensor] = None
    sbo_offset: Optional[torch.Tensor] = None
    sbo_labels: Optional[torch.Tensor] = None
    n_tokens: int = 0

    def _map(self, fn) -> "MaskedBatch":
        """A copy with ``fn`` applied to every tensor."""
        tensors = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("selection", "n_tokens")}
        out = {name: fn(t) if t is not None else None for name, t in tensors.items()}
        return MaskedBatch(**out, selection={k: fn(v) for k, v in self.selection.items()}, n_tokens=self.n_tokens)

    def pin_memory(self) -> "MaskedBatch":
        """Page-locked copies (the DataLoader's pin-memory thread calls this)."""
        return self._map(lambda t: t.pin_memory())

    def to(self, device: torch.device) -> "MaskedBatch":
        """The batch on ``device``; from pinned memory the copies do not block the host."""
        if device.type == "cpu":
            return self
        return self._map(lambda t: t.to(device, non_blocking=True))


def _pad(examples: Sequence[Example], pad_id: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pad the examples' piece ids: (ids, attention mask, lengths), int64 arrays."""
    lengths = np.fromiter((len(ex.input_ids) for ex in examples), dtype=np.int64, count=len(examples))
    width = int(lengths.max())
    # Padding in one assignment: the pieces of all sequences fill the True cells row by row.
    attention = (np.arange(width) < lengths[:, None]).astype(np.int64)
    ids = np.full((len(examples), width), pad_id, dtype=np.int64)
    ids[attention.astype(bool)] = np.fromiter((i for ex in examples for i in ex.input_ids), np.int64, int(lengths.sum()))
    return ids, attention, lengths


def _sequence_positions(ex: Example, base: int, objectives: FrozenSet[str], rng: np.random.Generator,
                        mask_ratio: float, sbo: List[Tuple[int, int, int, int]]) -> Dict[str, List[int]]:
    """Draw one sequence's target positions per token objective; append its SBO rows to ``sbo``.

    base (int): The sequence's first cell in the flattened batch (row * width).
    """
    per_objective: Dict[str, List[int]] = {}
    if "mlm_random" in objectives:
        per_objective["mlm_random"] = random_positions(ex.word_ids, rng, mask_ratio)
    if "mlm_span" in objectives:
        spans = span_positions(ex.word_ids, rng, mask_ratio)
        per_objective["mlm_span"] = [i for s, e in spans for i in range(s, e)]
        if "sbo" in objectives:
            sbo.extend((base + s - 1, base + e, i - s, ex.input_ids[i]) for s, e in spans for i in range(s, e))
    if objectives & {"mlm_cand", "ecb"}:
        cand, ecb = candidate_positions(ex, rng, mask_ratio, "mlm_cand" in objectives, "ecb" in objectives)
        per_objective["mlm_cand"], per_objective["ecb"] = cand, ecb
    return per_objective


def mask_batch(
    examples: Sequence[Example],
    objectives: FrozenSet[str],
    rng: np.random.Generator,
    vocab: MaskVocab,
    mask_ratio: float = 0.15,
) -> MaskedBatch:
    """Pad a batch of examples and apply the objectives' masking.

    examples (Sequence[Example]): The batch.
    objectives (FrozenSet[str]): From ``parse_objective``.
    rng (np.random.Generator): Random source (seeded per batch by the trainer).
    vocab (MaskVocab): Pad, mask and special ids and the vocabulary size.
    mask_ratio (float): Prediction budget per sequence.
    RETURNS (MaskedBatch): Tensors on the CPU.
    """
    ids, attention, lengths = _pad(examples, vocab.pad_id)
    width = ids.shape[1]
    # Plain lists: for the ~10 positions of a sequence, list operations beat numpy calls.
    flat: List[int] = []
    kinds: List[int] = []
    sbo: List[Tuple[int, int, int, int]] = []
    code = {name: i for i, name in enumerate(TOKEN_OBJECTIVES)}
    # The generator is drawn from sequence by sequence in this order; the draws (and so what
    # is masked) must not depend on how the rest is vectorised.
    for b, ex in enumerate(examples):
        per_objective = _sequence_positions(ex, b * width, objectives, rng, mask_ratio, sbo)
        for name in TOKEN_OBJECTIVES:
            positions = per_objective.get(name)
            if positions:
                flat.extend([b * width + i for i in positions])
                kinds.extend([code[name]] * len(positions))
    flat_arr = np.array(flat, dtype=np.int64)
    kinds_arr = np.array(kinds, dtype=np.int64)
    original = ids.reshape(-1)
    labels = torch.from_numpy(original[flat_arr])
    # One corruption call per batch: per sequence, its fixed cost was half the masking time.
    ids = bert_corrupt(original, flat_arr, rng, vocab.mask_id, vocab.size, vocab.special_ids)
    ids = ids.reshape(len(examples), width)
    selection = {name: torch.from_numpy(np.flatnonzero(kinds_arr == c)) for name, c in code.items()
                 if (kinds_arr == c).any()}
    sbo_cols = [torch.tensor(col, dtype=torch.long) for col in zip(*sbo)] if sbo else [torch.zeros(0, dtype=torch.long)] * 4
    has_sbo = "sbo" in objectives
    return MaskedBatch(
        input_ids=torch.from_numpy(ids),
        attention_mask=torch.from_numpy(attention),
        positions=torch.from_numpy(flat_arr),
        labels=labels,
        objective=torch.from_numpy(kinds_arr),
        selection=selection,
        sbo_left=sbo_cols[0] if has_sbo else None,
        sbo_right=sbo_cols[1] if has_sbo else None,
        sbo_offset=sbo_cols[2] if has_sbo else None,
        sbo_labels=sbo_cols[3] if has_sbo else None,
        n_tokens=int(lengths.sum()),
    )
