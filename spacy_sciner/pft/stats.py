"""How much each PFT objective actually masks, and which candidates can ever be masked.

The prediction budget (``mask_ratio``) is a cap, not a target: candidate objectives mask
only what the mined candidates allow, so their real masking rate differs from 15% and from
the random baselines'. These helpers count it, for the run log and the CLI summary of
``sciner pft`` and for ``benchmarks/pft_speed.py``.
"""
import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, Sequence

import numpy as np
import torch

from .data import Example
from .masking import TOKEN_OBJECTIVES, MaskedBatch, MaskVocab, budget, mask_batch, parse_objective


def count_targets(batch: MaskedBatch) -> Dict[str, int]:
    """Pieces predicted per token objective in one batch (objectives absent from it omitted).

    batch (MaskedBatch): From ``mask_batch``.
    RETURNS (Dict[str, int]): ``{objective: pieces}``.
    """
    counts = torch.bincount(batch.objective, minlength=len(TOKEN_OBJECTIVES)).tolist()
    return {name: n for name, n in zip(TOKEN_OBJECTIVES, counts) if n}


def add_counts(total: Dict[str, int], counts: Dict[str, int]) -> Dict[str, int]:
    """Add ``counts`` into ``total`` in place and return it."""
    for name, n in counts.items():
        total[name] = total.get(name, 0) + n
    return total


def per_1k_tokens(counts: Dict[str, int], n_tokens: int) -> Dict[str, float]:
    """Masked pieces per 1,000 input pieces (specials included, padding excluded)."""
    return {name: 1000.0 * n / max(n_tokens, 1) for name, n in sorted(counts.items())}


def format_per_1k(rates: Dict[str, float]) -> str:
    """``"mlm_cand 91.3, ecb 40.2"``, in the order of ``TOKEN_OBJECTIVES``."""
    names = [n for n in TOKEN_OBJECTIVES if n in rates]
    return ", ".join(f"{n} {rates[n]:.1f}" for n in names) or "none"


def measure_masking(
    examples: Sequence[Example],
    objective: str,
    vocab: MaskVocab,
    mask_ratio: float = 0.15,
    batch_size: int = 16,
    seed: int = 0,
) -> Dict[str, float]:
    """Mask every example once, in batches, and return the pieces per 1,000 tokens.

    examples (Sequence[Example]): Encoded corpus windows.
    objective (str): E.g. ``"mlm_cand+ecb"``.
    vocab (MaskVocab): Token ids for masking.
    mask_ratio (float): Prediction budget per sequence.
    batch_size (int): Sequences per batch.
    seed (int): Seed of the masking.
    RETURNS (Dict[str, float]): ``{objective: pieces per 1,000 tokens}``.
    """
    objectives = parse_objective(objective)
    counts: Dict[str, int] = {}
    n_tokens = 0
    for i in range(0, len(examples), batch_size):
        rng = np.random.default_rng([seed, i])
        batch = mask_batch(examples[i : i + batch_size], objectives, rng, vocab, mask_ratio)
        add_counts(counts, count_targets(batch))
        n_tokens += batch.n_tokens
    return per_1k_tokens(counts, n_tokens)


def fits_sequence_budget(examples: Iterable[Example], mask_ratio: float = 0.15) -> float:
    """Share of candidates no longer than their sequence's budget.

    Under a strict per-sequence budget these are the only candidates that can ever be
    MLM_CAND targets; the others are excluded on every draw.
    """
    fit = total = 0
    for ex in examples:
        limit = budget(ex.word_ids, mask_ratio)
        fit += sum(1 for s, e in ex.candidates if e - s <= limit)
        total += len(ex.candidates)
    return fit / max(total, 1)


def ever_masked(
    examples: Sequence[Example], vocab: MaskVocab, mask_ratio: float = 0.15, draws: int = 50, seed: int = 0
) -> float:
    """Share of candidates masked whole as MLM_CAND in at least one of ``draws`` maskings.

    An empirical check of which candidates the masking can reach (``mlm_cand`` alone, so no
    role is lost to ECB). A candidate nested in another one also counts when the outer one
    is masked, which covers all its pieces.
    """
    objectives = parse_objective("mlm_cand")
    seen = [np.zeros(len(ex.candidates), dtype=bool) for ex in examples]
    for d in range(draws):
        for b, ex in enumerate(examples):
            if not ex.candidates or seen[b].all():
                continue
            batch = mask_batch([ex], objectives, np.random.default_rng([seed, d, b]), vocab, mask_ratio)
            masked = np.zeros(len(ex.input_ids), dtype=bool)
            masked[batch.positions.numpy()] = True
            seen[b] |= [bool(masked[s:e].all()) for s, e in ex.candidates]
    total = sum(len(s) for s in seen)
    return sum(int(s.sum()) for s in seen) / max(total, 1)


@dataclass
class Throughput:
    """Wall time and tokens of a PFT run: all of it, its steady state (after the warm-up) and
    the current log window. Kept in the run log, so a resumed run goes on counting.
    """

    wall: float = 0.0
    tokens: int = 0
    steady_wall: float = 0.0
    steady_tokens: int = 0
    steady_steps: int = 0
    window_tokens: int = 0
    window_start: float = field(default_factory=time.perf_counter)

    @classmethod
    def from_log(cls, log: Dict) -> "Throughput":
        """The counts of a run log (zeros for a new run)."""
        keys = ("wall_s", "tokens", "steady_wall_s", "steady_tokens", "steady_steps")
        return cls(*(log.get(k, 0) for k in keys))

    def add(self, seconds: float, tokens: int, steady: bool) -> None:
        """Count one optimizer step; ``steady`` once the warm-up is over."""
        self.wall, self.tokens, self.window_tokens = self.wall + seconds, self.tokens + tokens, self.window_tokens + tokens
        if steady:
            self.steady_wall, self.steady_tokens = self.steady_wall + seconds, self.steady_tokens + tokens
            self.steady_steps += 1

    def close_window(self) -> float:
        """Tokens/s since the last call (loading and evaluation included); starts a new window."""
        rate = self.window_tokens / max(time.perf_counter() - self.window_start, 1e-9)
        self.window_tokens, self.window_start = 0, time.perf_counter()
        return rate

    def to_log(self) -> Dict:
        """The run log's speed entries."""
        return {"wall_s": self.wall, "tokens": self.tokens, "tokens_per_s": self.tokens / max(self.wall, 1e-9),
                "steady_wall_s": self.steady_wall, "steady_tokens": self.steady_tokens,
                "steady_steps": self.steady_steps,
                "tokens_per_s_steady": self.steady_tokens / self.steady_wall if self.steady_steps else None}
