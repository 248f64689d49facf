import pytest

from spacy_sciner.encoders import minilm_path, resolve_encoder


def test_default_alias_resolves_offline():
    path = resolve_encoder("sciner-minilm")
    assert path == str(minilm_path())
    assert (minilm_path() / "model.safetensors").exists()


def test_hub_name_passes_through():
    assert resolve_encoder("allenai/scibert_scivocab_uncased") == "allenai/scibert_scivocab_uncased"


def test_local_checkpoint_path(tiny_bert_dir):
    assert resolve_encoder(str(tiny_bert_dir)) == str(tiny_bert_dir.resolve())


def test_path_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        resolve_encoder(str(tmp_path))
