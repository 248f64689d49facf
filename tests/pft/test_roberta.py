"""PFT on the RoBERTa family: a tiny random RoBERTa with a byte-level BPE trained offline."""
import pytest

from spacy_sciner.pft.data import load_corpus
from spacy_sciner.pft.heads import load_tokenizer
from spacy_sciner.pft.train import train_pft


@pytest.fixture(scope="module")
def tiny_roberta_dir(tmp_path_factory, pft_sentences):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    path = tmp_path_factory.mktemp("tiny-roberta")
    bpe = ByteLevelBPETokenizer()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator([s for s, _ in pft_sentences] * 5, vocab_size=400, min_frequency=1, special_tokens=specials)
    tokenizer = RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                     sep_token="</s>", cls_token="<s>", pad_token="<pad>", unk_token="<unk>",
                                     mask_token="<mask>")
    tokenizer.save_pretrained(path)
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id)
    RobertaModel(config).save_pretrained(path)
    return path


def test_roberta_candidates_align_with_prefix_space(tiny_roberta_dir, corpus_jsonl):
    tokenizer = load_tokenizer(str(tiny_roberta_dir))
    examples, stats = load_corpus(corpus_jsonl, tokenizer, 128)
    assert stats.candidates_kept == stats.candidates == 96
    start, end = examples[0].candidates[0]
    assert tokenizer.decode(examples[0].input_ids[start:end]).strip() == "support vector machine"
    assert examples[0].input_ids[0] == tokenizer.cls_token_id and examples[0].input_ids[-1] == tokenizer.sep_token_id


def test_roberta_gets_an_lm_head_and_learns(tmp_path, tiny_roberta_dir, corpus_jsonl, pft_config):
    # 12 held-out sentences: enough that the fixed held-out masking has both roles.
    log = train_pft(pft_config(corpus_jsonl, tmp_path / "o", tiny_roberta_dir, max_steps=20, eval_every=10,
                               eval_fraction=0.25))
    assert {"mlm_cand", "ecb"} <= set(log["eval"][0])
    assert log["head"]["mlm_head_added"] and "lm_head.dense.weight" in log["head"]["missing_keys"]
    assert log["head"]["decoder_tied_to_embeddings"]
    assert log["eval"][-1]["loss"] < log["eval"][0]["loss"] - 0.5


def test_roberta_position_offset_limits_the_window(tiny_roberta_dir):
    from spacy_sciner.pft.heads import max_positions

    assert max_positions(str(tiny_roberta_dir)) == 128  # 130 embeddings, positions start after <pad>=1
