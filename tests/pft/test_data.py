import json

import pytest
import spacy
from spacy.tokens import DocBin, Span

from spacy_sciner.pft.data import CorpusStats, PFTDataError, encode_sentences, load_corpus, read_sentences
from spacy_sciner.pft.heads import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_dir):
    return load_tokenizer(str(tiny_bert_dir))


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def test_jsonl_candidates_map_to_word_pieces(tmp_path, tokenizer):
    path = write_lines(tmp_path / "c.jsonl", [json.dumps(
        {"text": "we use support vector machines", "tokens": ["we", "use", "support", "vector", "machines"],
         "candidates": [[2, 5, "dict"]]})])
    examples, stats = load_corpus(path, tokenizer, 128)
    (ex,) = examples
    pieces = tokenizer.convert_ids_to_tokens(ex.input_ids)
    start, end = ex.candidates[0]
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    assert tokenizer.convert_tokens_to_string(pieces[start:end]) == "support vector machines"
    assert ex.word_ids[start - 1] == 1 and ex.word_ids[end] == -1
    assert stats.candidates == stats.candidates_kept == 1


def test_docbin_and_jsonl_give_the_same_examples(tmp_path, tokenizer, corpus_jsonl):
    nlp = spacy.blank("en")
    doc_bin = DocBin(store_user_data=False)
    for sent in read_sentences(corpus_jsonl):
        doc = spacy.tokens.Doc(nlp.vocab, words=sent.tokens)
        doc.spans["candidates"] = [Span(doc, s, e, label=src) for s, e, src in sent.candidates]
        doc_bin.add(doc)
    doc_bin.to_disk(tmp_path / "c.spacy")
    from_docbin, stats_db = load_corpus(tmp_path / "c.spacy", tokenizer, 128)
    from_jsonl, stats_js = load_corpus(corpus_jsonl, tokenizer, 128)
    assert from_docbin == from_jsonl
    assert stats_db == stats_js and stats_db.candidates_kept == 96
    assert next(iter(read_sentences(tmp_path / "c.spacy"))).candidates[0][2] == "dict"


def test_empty_corpus_is_a_clear_error(tmp_path, tokenizer):
    path = write_lines(tmp_path / "empty.jsonl", ["", "   "])
    with pytest.raises(PFTDataError, match="no usable text"):
        load_corpus(path, tokenizer, 128)
    with pytest.raises(PFTDataError, match="not found"):
        load_corpus(tmp_path / "missing.jsonl", tokenizer, 128)


@pytest.mark.parametrize(
    "line,message",
    [
        ('{"text": "a b", "tokens": ["a", "b"]', "bad.jsonl:2: invalid JSON"),
        ('{"text": "a b", "tokens": ["a", "b"], "candidates": [[1, 3, "dict"]]}', "bad.jsonl:2: candidate"),
        ('{"text": "a b", "tokens": ["a", "b"], "candidates": [[1, 1, "dict"]]}', "bad.jsonl:2: candidate"),
        ('{"text": "a b", "tokens": "a b"}', "bad.jsonl:2: 'tokens' must be"),
        ('["a", "b"]', "bad.jsonl:2: expected an object"),
    ],
)
def test_bad_jsonl_lines_name_file_and_line(tmp_path, tokenizer, line, message):
    path = write_lines(tmp_path / "bad.jsonl", ['{"text": "fine"}', line])
    with pytest.raises(PFTDataError, match=message):
        load_corpus(path, tokenizer, 128)


def test_corrupt_docbin_is_a_clear_error(tmp_path, tokenizer):
    (tmp_path / "broken.spacy").write_bytes(b"\x00not a docbin")
    with pytest.raises(PFTDataError, match="broken.spacy: not a readable spaCy DocBin"):
        load_corpus(tmp_path / "broken.spacy", tokenizer, 128)


def test_candidate_on_no_word_piece_is_counted_and_skipped(tmp_path, tokenizer):
    # A lone zero-width space tokenizes to nothing.
    path = write_lines(tmp_path / "c.jsonl", [json.dumps(
        {"text": "x", "tokens": ["alpha", "\u200b", "beta"], "candidates": [[1, 2, "dict"], [0, 1, "dict"]]})])
    (ex,), stats = load_corpus(path, tokenizer, 128)
    assert stats.candidates_no_piece == 1 and stats.candidates_kept == 1
    assert ex.candidates == [(1, 2)]


def test_long_sentences_are_windowed_at_word_boundaries(tokenizer):
    from spacy_sciner.pft.data import Sentence

    words = ["photosynthesis"] * 200 + ["cell", "membrane"]  # 'photosynthesis' is several pieces
    n_pieces = len(tokenizer(words, is_split_into_words=True, add_special_tokens=False)["input_ids"])
    cands = [(0, 2, "dict"), (200, 202, "dict"), (0, 200, "phrase")]  # the last cannot fit
    stats = CorpusStats()
    examples = encode_sentences([Sentence(words, cands, "t")], tokenizer, 64, stats)
    assert len(examples) > 1 and stats.split_sentences == 1
    assert all(len(ex.input_ids) <= 64 for ex in examples)
    # Nothing is lost: every piece of the sentence is in exactly one window.
    assert sum(len(ex.input_ids) - 2 for ex in examples) == n_pieces
    assert stats.candidates_kept == 2 and stats.candidates_cut_by_window == 1
    for ex in examples:  # no word split across windows
        assert ex.word_ids[1] == 0 and all(b - a in (0, 1) for a, b in zip(ex.word_ids[1:-2], ex.word_ids[2:-1]))


def test_candidate_objectives_need_candidates(tmp_path, tiny_bert_dir, pft_config):
    from spacy_sciner.pft.train import train_pft

    path = write_lines(tmp_path / "c.jsonl", [json.dumps({"text": "no candidates in this line"})] * 8)
    with pytest.raises(PFTDataError, match="no usable candidate spans .* 'mlm_cand\\+ecb'"):
        train_pft(pft_config(path, tmp_path / "o", tiny_bert_dir))
    # The random baseline does not need candidates.
    log = train_pft(pft_config(path, tmp_path / "o2", tiny_bert_dir, objective="mlm_random", max_steps=2))
    assert log["steps"] == 2 and log["batches_without_targets"] == 0


def test_batches_without_targets_are_counted(tmp_path, tiny_bert_dir, pft_config):
    from spacy_sciner.pft.train import train_pft

    tokens = "we use support vector machines here today .".split()
    path = write_lines(tmp_path / "c.jsonl", [json.dumps({"text": " ".join(tokens), "tokens": tokens,
                                                          "candidates": [[0, 8, "dict"]]})] * 8)
    # ECB predicts the words around a candidate: one that spans the sentence has none.
    log = train_pft(pft_config(path, tmp_path / "o", tiny_bert_dir, objective="ecb", max_steps=3))
    assert log["batches_without_targets"] == 3 and log["steps"] == 3
    assert log["masked_pieces"] == {} and log["masked_per_1k_tokens"] == {}


def test_masked_pieces_are_logged_per_objective(tmp_path, tiny_bert_dir, pft_config):
    from spacy_sciner.pft.train import train_pft

    tokens = "we use support vector machines here today .".split()
    path = write_lines(tmp_path / "c.jsonl", [json.dumps({"text": " ".join(tokens), "tokens": tokens,
                                                          "candidates": [[2, 5, "dict"]]})] * 8)
    # The 3-word candidate is longer than a 1-piece budget: it is masked all the same.
    log = train_pft(pft_config(path, tmp_path / "o", tiny_bert_dir, objective="mlm_cand", mask_ratio=0.01,
                               max_steps=3, batch_size=2))
    assert log["batches_without_targets"] == 0
    pieces_per_sentence = log["masked_pieces"]["mlm_cand"] / 6
    assert pieces_per_sentence >= 3
    assert log["masked_per_1k_tokens"] == {"mlm_cand": 1000 * log["masked_pieces"]["mlm_cand"] / log["tokens"]}


def test_window_larger_than_the_model_is_refused(tmp_path, tiny_bert_dir, corpus_jsonl, pft_config):
    from spacy_sciner.pft.train import train_pft

    with pytest.raises(ValueError, match="--max-length 600 exceeds the 512 positions"):
        train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_bert_dir, max_length=600))
