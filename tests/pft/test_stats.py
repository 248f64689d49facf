import json
from pathlib import Path

import numpy as np

from spacy_sciner.pft.data import CorpusStats, Example, Sentence, encode_sentences
from spacy_sciner.pft.masking import MaskVocab, mask_batch, parse_objective
from spacy_sciner.pft.stats import (
    Throughput,
    count_targets,
    ever_masked,
    fits_sequence_budget,
    format_per_1k,
    measure_masking,
    per_1k_tokens,
)

from pft_helpers import IDS, VOCAB, WORD_IDS  # 9 content pieces: budget 1 at 15%


def example():
    return Example(list(IDS), list(WORD_IDS), [(3, 7), (8, 9)])  # "support vector machines", "svm"


def test_count_targets_and_rates():
    batch = mask_batch([example(), example()], parse_objective("mlm_random"), np.random.default_rng(0), VOCAB, 0.3)
    assert count_targets(batch) == {"mlm_random": 6}  # 3 pieces per sequence
    rates = per_1k_tokens({"mlm_random": 6}, batch.n_tokens)
    assert rates == {"mlm_random": 1000 * 6 / 22}
    assert format_per_1k({"ecb": 1.0, "mlm_cand": 2.25}) == "mlm_cand 2.2, ecb 1.0"
    assert format_per_1k({}) == "none"


def test_every_candidate_can_be_masked():
    """The 4-piece candidate is longer than the 1-piece budget: it used to be unreachable."""
    examples = [example()]
    assert fits_sequence_budget(examples, 0.15) == 0.5
    assert ever_masked(examples, VOCAB, 0.15, draws=30) == 1.0


def test_measure_masking_counts_every_objective():
    examples = [example() for _ in range(20)]
    rates = measure_masking(examples, "mlm_cand+ecb", VOCAB, 0.15, batch_size=8)
    assert set(rates) == {"mlm_cand", "ecb"}
    # One candidate per sequence (the budget is full after it): 1 or 4 pieces for
    # MLM_CAND, 2 or 2 for ECB, over 11 tokens per sequence.
    assert 1000 * 1 / 11 <= sum(rates.values()) <= 1000 * 4 / 11


def scierc_examples(shared_data, n_sentences):
    """The first SciERC train sentences, gold entities as candidates, MiniLM word pieces."""
    from spacy_sciner.pft.heads import load_tokenizer

    sentences = []
    with open(Path(shared_data) / "scierc" / "train.json", encoding="utf8") as file_:
        for line in file_:
            doc, offset = json.loads(line), 0
            for tokens, ents in zip(doc["sentences"], doc["ner"]):
                sentences.append(Sentence(tokens, [(s - offset, e - offset + 1, "gold") for s, e, _ in ents], ""))
                offset += len(tokens)
            if len(sentences) >= n_sentences:
                break
    tokenizer = load_tokenizer("sciner-minilm")
    return encode_sentences(sentences, tokenizer, 128, CorpusStats()), MaskVocab.from_tokenizer(tokenizer)


def test_all_scierc_entities_can_be_masked(shared_data):
    """On real SciERC text a strict 15% budget excluded about a fifth of the entities."""
    examples, vocab = scierc_examples(shared_data, 300)
    assert fits_sequence_budget(examples) < 0.85
    assert ever_masked(examples, vocab, draws=200) == 1.0
    rates = measure_masking(examples, "mlm_cand", vocab)
    assert 100 < rates["mlm_cand"] < 200  # per 1,000 tokens: near the 15% of mlm_random


def test_throughput_counts_warm_up_apart_and_resumes_from_the_log():
    meter = Throughput()
    meter.add(2.0, 100, steady=False)  # warm-up: counted in the run, not in the steady state
    meter.add(1.0, 300, steady=True)
    log = meter.to_log()
    assert log["wall_s"] == 3.0 and log["tokens"] == 400 and log["tokens_per_s"] == 400 / 3.0
    assert log["steady_steps"] == 1 and log["tokens_per_s_steady"] == 300.0
    assert meter.close_window() > 0 and meter.window_tokens == 0  # a new window starts
    resumed = Throughput.from_log(log)  # a resumed run goes on counting
    resumed.add(1.0, 200, steady=True)
    assert resumed.to_log()["tokens"] == 600 and resumed.to_log()["tokens_per_s_steady"] == 250.0
    assert Throughput().to_log()["tokens_per_s_steady"] is None  # no steady step yet
