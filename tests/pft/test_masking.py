import numpy as np
import pytest
import torch

from spacy_sciner.pft.data import Example
from spacy_sciner.pft.masking import (
    TOKEN_OBJECTIVES,
    bert_corrupt,
    budget,
    candidate_positions,
    mask_batch,
    parse_objective,
    random_positions,
    span_positions,
)

from pft_helpers import IDS, VOCAB, WORD_IDS  # [CLS] we use support vec ##tor machines ( svm ) [SEP]

SVM_MACHINE = (3, 7)  # "support vector machines": pieces 3..6
SVM = (8, 9)  # "svm"
WE = (1, 2)  # "we": its left neighbour is [CLS]


def example(*candidates):
    return Example(list(IDS), list(WORD_IDS), list(candidates))


def test_parse_objective():
    assert parse_objective("mlm_cand+ecb") == {"mlm_cand", "ecb"}
    assert parse_objective("mlm_span+sbo") == {"mlm_span", "sbo"}
    for bad in ("mlm_cand+mlm_random", "sbo", "foo", ""):
        with pytest.raises(ValueError):
            parse_objective(bad)


def test_budget_counts_only_content_pieces():
    assert budget(WORD_IDS, 0.15) == 1  # 9 content pieces -> round(1.35)
    assert budget(WORD_IDS, 0.5) == 4
    assert budget(WORD_IDS, 1.0) == 9
    assert budget([-1, -1], 0.15) == 0


def test_mlm_cand_masks_all_pieces_of_the_candidate():
    cand, ecb = candidate_positions(example(SVM_MACHINE), np.random.default_rng(0), 1.0, True, False)
    assert cand == [3, 4, 5, 6]  # both pieces of "vector" included
    assert ecb == []


def test_ecb_masks_the_boundary_words_and_keeps_the_candidate():
    cand, ecb = candidate_positions(example(SVM_MACHINE), np.random.default_rng(0), 1.0, False, True)
    assert cand == []
    assert ecb == [2, 7]  # "use" and "("
    # A multi-piece boundary word is masked whole: the right boundary of candidate
    # "support" is "vec ##tor" (pieces 4 and 5).
    _, ecb = candidate_positions(example((3, 4)), np.random.default_rng(0), 1.0, False, True)
    assert ecb == [2, 4, 5]


def test_ecb_skips_a_missing_side_at_the_sequence_edge():
    _, ecb = candidate_positions(example(WE), np.random.default_rng(0), 1.0, False, True)
    assert ecb == [2]  # [CLS] is not a word; only "use" on the right


def test_first_candidate_is_admitted_even_over_the_budget():
    """Budget 1 piece: the 4-piece candidate used to be excluded on every draw. Now it is
    masked whole whenever it comes first, and the budget still caps what follows."""
    seen = set()
    for seed in range(40):
        cand, _ = candidate_positions(example(SVM_MACHINE, SVM), np.random.default_rng(seed), 0.15, True, False)
        assert cand in ([3, 4, 5, 6], [8])  # never both: the budget is full after the first
        seen.add(tuple(cand))
    assert seen == {(3, 4, 5, 6), (8,)}
    # ECB needs 2 pieces for "svm" (both parentheses): admitted as the first candidate.
    _, ecb = candidate_positions(example(SVM), np.random.default_rng(0), 0.15, False, True)
    assert ecb == [7, 9]


def test_budget_caps_the_candidates_after_the_first():
    for seed in range(40):
        cand, _ = candidate_positions(example(SVM, (1, 2), (2, 3)), np.random.default_rng(seed), 0.15, True, False)
        assert len(cand) == 1


def test_combined_roles_are_consistent_over_many_draws():
    cands = [SVM_MACHINE, SVM, WE, (3, 4), (6, 7)]
    seen_roles = set()
    for seed in range(300):
        ex = example(*cands)
        cand, ecb = candidate_positions(ex, np.random.default_rng(seed), 0.5, True, True)
        masked = set(cand) | set(ecb)
        assert len(masked) == len(cand) + len(ecb) <= budget(WORD_IDS, 0.5)  # no candidate exceeds 4
        assert all(WORD_IDS[i] >= 0 for i in masked)
        # Every MLM_CAND piece belongs to a candidate; every ECB piece borders one that
        # stays fully visible.
        assert all(any(s <= i < e for s, e in cands) for i in cand)
        for i in ecb:
            assert any(
                not masked & set(range(s, e)) and WORD_IDS[i] in (WORD_IDS[s] - 1, WORD_IDS[e - 1] + 1)
                for s, e in cands
            )
        seen_roles.add((bool(cand), bool(ecb)))
    assert (True, True) in seen_roles  # both roles in one sequence happen


def test_random_positions_never_special_and_sized_by_budget():
    for seed in range(50):
        pos = random_positions(WORD_IDS, np.random.default_rng(seed), 0.3)
        assert len(pos) == budget(WORD_IDS, 0.3) == len(set(pos))
        assert all(WORD_IDS[i] >= 0 for i in pos)


def test_span_positions_are_whole_words_within_budget():
    word_ids = [-1] + [w for w in range(40) for _ in range(1 + w % 2)] + [-1]
    limit = budget(word_ids, 0.15)
    for seed in range(100):
        spans = span_positions(word_ids, np.random.default_rng(seed), 0.15)
        assert spans and sum(e - s for s, e in spans) <= limit
        for s, e in spans:
            assert word_ids[s] >= 0 and word_ids[e - 1] >= 0
            assert word_ids[s - 1] != word_ids[s] and word_ids[e] != word_ids[e - 1]  # whole words
            assert word_ids[e - 1] - word_ids[s] + 1 <= 10
        ends = [e for _, e in spans]
        starts = [s for s, _ in spans]
        assert all(e < s for e, s in zip(ends, starts[1:]))  # disjoint, not touching



def test_span_positions_in_a_window_and_with_gaps_in_word_indices():
    """A window of a long sentence starts at word 23, and word 30 has no pieces: spans
    are still whole words of this window (this raised a KeyError in a real PFT run)."""
    words = [w for w in range(23, 60) if w != 30]
    word_ids = [-1] + [w for w in words for _ in range(1 + w % 2)] + [-1]
    limit = budget(word_ids, 0.15)
    seen = set()
    for seed in range(200):
        spans = span_positions(word_ids, np.random.default_rng(seed), 0.15)
        assert spans and sum(e - s for s, e in spans) <= limit
        for s, e in spans:
            assert word_ids[s] >= 0 and word_ids[e - 1] >= 0
            assert word_ids[s - 1] != word_ids[s] and word_ids[e] != word_ids[e - 1]
            seen.add(word_ids[s])
    assert min(seen) == 23 and max(seen) > 50  # the whole window is sampled

def test_bert_corrupt_80_10_10():
    rng = np.random.default_rng(0)
    ids = np.full(20000, 2000)
    special = [0, 100, 101, 102, 103]
    out = bert_corrupt(ids, np.arange(20000), rng, 103, 30522, special)
    masked = (out == 103).mean()
    kept = (out == 2000).mean()
    randomised = 1 - masked - kept
    assert abs(masked - 0.8) < 0.015 and abs(kept - 0.1) < 0.01 and abs(randomised - 0.1) < 0.01
    assert not np.isin(out[(out != 103) & (out != 2000)], special).any()
    # Positions not chosen are untouched.
    out = bert_corrupt(ids[:10], [2, 5], rng, 103, 30522, special)
    assert (np.delete(out, [2, 5]) == 2000).all()




def test_mask_batch_targets_and_padding():
    short = Example([101, 2057, 2224, 102], [-1, 0, 1, -1], [(1, 2)])
    batch = mask_batch([example(SVM_MACHINE, SVM), short], parse_objective("mlm_cand+ecb"),
                       np.random.default_rng(3), VOCAB, mask_ratio=0.5)
    assert batch.input_ids.shape == (2, 11)
    assert batch.attention_mask[1].tolist() == [1, 1, 1, 1] + [0] * 7
    assert batch.input_ids[1, 4:].eq(0).all()
    assert batch.n_tokens == 15
    flat_originals = torch.tensor([IDS, [101, 2057, 2224, 102] + [0] * 7]).reshape(-1)
    assert torch.equal(flat_originals[batch.positions], batch.labels)
    assert set(batch.objective.tolist()) <= {TOKEN_OBJECTIVES.index("mlm_cand"), TOKEN_OBJECTIVES.index("ecb")}
    assert len(batch.positions) > 0 and batch.sbo_left is None


def test_mask_batch_sbo_boundaries():
    batch = mask_batch([example()], parse_objective("mlm_span+sbo"), np.random.default_rng(1),
                       VOCAB, mask_ratio=0.5)
    span_pos = batch.positions[batch.objective == TOKEN_OBJECTIVES.index("mlm_span")]
    assert torch.equal(span_pos, batch.sbo_left + 1 + batch.sbo_offset)
    assert (batch.sbo_right > span_pos).all() and (batch.sbo_left < span_pos).all()
    assert torch.equal(batch.sbo_labels, batch.labels[batch.objective == TOKEN_OBJECTIVES.index("mlm_span")])
