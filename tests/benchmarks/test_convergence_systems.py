"""benchmarks/convergence.py's systems: variant names and settings, and the configs their runs
train (no training here; the runs themselves: test_convergence.py)."""
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import convergence  # noqa: E402
import convergence_runs  # noqa: E402


def test_decay_variant_names():
    """"<transformer system>_decay<N>" is a fixed-budget variant of that system; nothing else is."""
    assert convergence.known_system("sciner_spancat_hybrid_decay2000")
    assert convergence.base_system("sciner_spancat_hybrid_decay2000") == "sciner_spancat_hybrid"
    assert convergence.known_system("spacy_spancat_decay500")
    assert convergence.base_system("sciner_spancat") == "sciner_spancat"
    assert not convergence.known_system("spacy_ner_cnn_decay2000")  # CNN configs keep their own schedule
    assert not convergence.known_system("nonsense_decay2000")
    assert not convergence.known_system("sciner_spancat_decay0")
    assert not convergence.known_system("sciner_spancat_decay")
    # a learning-rate variant: its own system name, the rate taken from the name
    assert convergence.base_system("sciner_spancat_hybrid_decay2000_lr2e-4") == "sciner_spancat_hybrid"
    assert convergence_runs.variant_lr("sciner_spancat_hybrid_decay2000_lr2e-4") == 2e-4
    assert convergence_runs.decay_steps("sciner_spancat_hybrid_decay2000_lr5.5e-5") == 2000
    assert convergence_runs.variant_lr("sciner_spancat_hybrid_decay2000") is None
    assert not convergence.known_system("sciner_spancat_decay2000_lr")
    assert not convergence.known_system("sciner_spancat_decay2000_lr0.1")
    assert not convergence.known_system("spacy_ner_cnn_decay2000_lr2e-4")


def test_lr_variant_settings(tmp_path):
    """A _lr<X> variant trains at X whatever --lr says; its plain sibling at --lr; both end at N."""
    args = convergence.parse_args(["--datasets", "scierc", "--lr", "1e-4"])
    lr_run = convergence_runs.Run(tmp_path, "scierc", "sciner_spancat_hybrid_decay2000_lr2e-4", 0)
    plain = convergence_runs.Run(tmp_path, "scierc", "sciner_spancat_hybrid_decay2000", 0)
    lr_settings = convergence_runs.run_settings(lr_run, args, transformer=True)
    assert lr_settings["lr"] == 2e-4 and lr_settings["max_steps"] == 2000 and lr_settings["patience_evals"] == 0
    assert convergence_runs.run_settings(plain, args, transformer=True)["lr"] == 1e-4
    assert lr_run.dir != plain.dir



def run_configs(tmp_path, dataset, *systems):
    """The config of each system's run on ``dataset``, as run_config writes it."""
    from spacy.util import load_config

    args = convergence.parse_args(["--datasets", dataset])
    args.deadline = 0
    configs = {}
    for system in systems:
        path = convergence_runs.run_config(convergence_runs.Run(tmp_path, dataset, system, 0), args, tmp_path)
        configs[system] = load_config(path, interpolate=False)
    return configs


def test_span_head_variant_config(tmp_path):
    """sciner_spancat_hybrid_ends trains the hybrid config with its span vector changed (max
    pooling + boundary tokens + a width embedding), and its config still resolves; the plain
    hybrid keeps SEPT's max pooling."""
    from thinc.api import noop

    from spacy_sciner.spancat.model import build_span_categorizer

    configs = run_configs(tmp_path, "scierc", "sciner_spancat_hybrid_ends_decay2000", "sciner_spancat_hybrid_decay2000")
    ends = configs["sciner_spancat_hybrid_ends_decay2000"]["components"]["sciner_spancat"]["model"]
    plain = configs["sciner_spancat_hybrid_decay2000"]["components"]["sciner_spancat"]["model"]
    assert (ends["reducer"], ends["width_embedding"]) == ("max_endpoints", 32)
    assert (plain["reducer"], plain["width_embedding"]) == ("max", 0)
    # The listener needs a pipeline to resolve; the head's settings alone build a model:
    settings = {k: v for k, v in ends.items() if k not in ("tok2vec", "@architectures")}
    model = build_span_categorizer(noop(), **settings)
    assert model.get_ref("span_encoder").attrs["reducer"] == "max_endpoints"


def test_sentencized_variant_config(tmp_path):
    """sciner_spancat_hybrid_sents puts spaCy's sentencizer first and lets it annotate the
    training docs (the docs made from the text have no sentence starts otherwise)."""

    configs = run_configs(tmp_path, "scierc_doc", "sciner_spancat_hybrid_sents_decay2000", "sciner_spancat_hybrid_decay2000")
    sents, plain = configs["sciner_spancat_hybrid_sents_decay2000"], configs["sciner_spancat_hybrid_decay2000"]
    assert sents["nlp"]["pipeline"] == ["sentencizer", "transformer", "sciner_spancat"]
    assert sents["components"]["sentencizer"] == {"factory": "sentencizer"}
    assert sents["training"]["annotating_components"] == ["sentencizer"]
    # Model-best is chosen on span F alone, not on the sentencizer's score.
    weights = sents["training"]["score_weights"]
    assert weights["spans_sc_f"] == 1.0 and weights["sents_f"] == weights["sents_p"] == weights["sents_r"] == 0.0
    assert plain["nlp"]["pipeline"] == ["transformer", "sciner_spancat"] and "sentencizer" not in plain["components"]


def test_v2_system_trains_the_default_config_with_the_bucketed_encoder(tmp_path):
    """sciner_spancat_hybrid_v2 is the default config as it now stands: TransformerModel.v2."""
    config = run_configs(tmp_path, "scierc", "sciner_spancat_hybrid_v2_decay2000")["sciner_spancat_hybrid_v2_decay2000"]
    model = config["components"]["transformer"]["model"]
    assert model["@architectures"] == "spacy-sciner.TransformerModel.v2" and model["max_padded_wordpieces"] == 512
    assert config["training"]["max_steps"] == 2000


def test_averaged_variant_config(tmp_path):
    """sciner_spancat_hybrid_v2_avg is the default config with the optimizer's averages kept
    (use_averages); the plain system keeps the config's own setting (off)."""
    configs = run_configs(tmp_path, "scierc", "sciner_spancat_hybrid_v2_avg_decay2000", "sciner_spancat_hybrid_v2_decay2000")
    assert configs["sciner_spancat_hybrid_v2_avg_decay2000"]["training"]["optimizer"]["use_averages"] is True
    assert configs["sciner_spancat_hybrid_v2_decay2000"]["training"]["optimizer"]["use_averages"] is False
    assert configs["sciner_spancat_hybrid_v2_avg_decay2000"]["training"]["max_steps"] == 2000
    spacy_avg = run_configs(tmp_path, "scierc", "spacy_spancat_avg_decay2000")["spacy_spancat_avg_decay2000"]
    assert spacy_avg["training"]["optimizer"]["use_averages"] is True
    assert spacy_avg["components"]["spancat"]["factory"] == "spancat"


def test_gold_token_variants_train_and_select_on_the_corpus_words(tmp_path):
    """The *_goldtok systems read train and dev with GoldTokensCorpus.v1 (gold_preproc that
    keeps doc.spans); their plain counterparts keep spaCy's tokenization."""

    names = ("sciner_spancat_hybrid_v2_goldtok_decay1470", "spacy_spancat_goldtok_decay1470",
             "sciner_spancat_hybrid_v2_decay1470", "spacy_spancat_decay1470")
    (tmp_path / "first").mkdir()
    configs = run_configs(tmp_path / "first", "scierc", *names)
    for name in names:
        corpora = configs[name]["corpora"]
        readers = {corpora[split]["@readers"] for split in ("train", "dev")}
        if "goldtok" in name:
            assert readers == {"spacy-sciner.GoldTokensCorpus.v1"}, name
            assert corpora["train"]["path"] == "${paths.train}" and corpora["dev"]["path"] == "${paths.dev}"
        else:
            assert readers == {"spacy.Corpus.v1"} and corpora["train"]["gold_preproc"] is False, name
    assert convergence_runs.base_system(names[0]) in convergence_runs.ENCODER_V2


def test_gold_token_runs_are_calibrated_on_gold_tokens(tmp_path, monkeypatch):
    """evaluate_run calibrates a *_goldtok sciner run with --gold-tokens (dev as it was read in
    training), a plain run without; spaCy spancat's threshold is tuned for both of its variants."""
    import convergence_eval

    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        return SimpleNamespace(returncode=1, stderr="stop here", stdout="")

    monkeypatch.setattr(convergence_eval.subprocess, "run", fake_run)
    args = convergence.parse_args(["--datasets", "scierc"])
    for system in ("sciner_spancat_hybrid_v2_goldtok_decay1470", "sciner_spancat_hybrid_v2_decay1470"):
        with pytest.raises(RuntimeError, match="stop here"):
            convergence_eval.evaluate_run(convergence_runs.Run(tmp_path, "scierc", system, 0), args, tmp_path)
    assert [("calibrate" in c, "--gold-tokens" in c) for c in calls] == [(True, True), (True, False)]
    # spaCy's spancat, gold-token variant included: its threshold is tuned on dev (gold tokens).
    tuned = []
    monkeypatch.setattr(convergence_eval.spancat_bench, "tune_spancat_threshold",
                        lambda model, dev, out, **kw: tuned.append((dev.name, kw)) or (_ for _ in ()).throw(RuntimeError("tuned")))
    for system in ("spacy_spancat_goldtok_decay1470", "spacy_spancat_decay1470"):
        with pytest.raises(RuntimeError, match="tuned"):
            convergence_eval.evaluate_run(convergence_runs.Run(tmp_path, "scierc", system, 0), args, tmp_path)
    assert tuned == [("dev.spacy", {}), ("dev.spacy", {})]


@pytest.mark.parametrize("system", ["sciner_spancat_hybrid_v2_weak", "sciner_spancat_hybrid_v2_pft", "spacy_spancat_pft"])
def test_own_encoder_system_needs_its_encoder(tmp_path, capsys, system):
    """The default recipe (or spaCy's spancat) on a weak- or PFT-pretrained encoder: refused
    without --encoder (before any training), trained on the given folder with the v2 encoder
    otherwise; not in the default list."""
    with pytest.raises(SystemExit):
        convergence.parse_args(["--datasets", "scierc", "--systems", f"{system}_decay2000"])
    assert "--encoder" in capsys.readouterr().err
    assert system not in convergence.parse_args(["--datasets", "scierc"]).systems
    args = convergence.parse_args(["--datasets", "scierc", "--systems", f"{system}_decay2000",
                                   "--encoder", str(tmp_path / "encoder-fine")])
    args.deadline = 0
    run = convergence_runs.Run(tmp_path, "scierc", f"{system}_decay2000", 0)
    from spacy.util import load_config

    config = load_config(convergence_runs.run_config(run, args, tmp_path), interpolate=False)
    model = config["components"]["transformer"]["model"]
    assert model["name"] == str(tmp_path / "encoder-fine")
    assert model["@architectures"] == "spacy-sciner.TransformerModel.v2"
    assert run.m["settings"]["encoder"] == str(tmp_path / "encoder-fine")


def test_report_header_names_every_runs_encoder():
    """The header holds for every row: a system run on its own encoder is named with it."""
    from convergence_report import encoders_note

    runs = {f"d/{s}/seed{i}": {"system": s, "settings": {"encoder": enc}}
            for i, (s, enc) in enumerate([("a", "sciner-minilm"), ("b", "sciner-minilm"), ("w", "enc/weak")])}
    assert encoders_note({"encoder": "enc/weak", "runs": runs}) == "sciner-minilm; w: enc/weak"
    assert encoders_note({"encoder": "sciner-minilm", "runs": {}}) == "sciner-minilm"
