"""Everything spaCy resolves is found through setup.cfg entry points, without --code."""
import subprocess
import sys
from importlib.metadata import distribution

GROUPS = (
    "spacy_factories", "spacy_architectures", "spacy_readers", "spacy_scorers", "spacy_misc", "spacy_callbacks",
    "spacy_cli",
)


def _entry_points():
    return [ep for ep in distribution("spacy-sciner").entry_points if ep.group in GROUPS]


def test_every_entry_point_loads():
    eps = _entry_points()
    assert {ep.group for ep in eps} == set(GROUPS)
    for ep in eps:
        obj = ep.load()
        assert obj is not None, ep


def test_names_are_namespaced_and_versioned():
    for ep in _entry_points():
        if ep.group in ("spacy_architectures", "spacy_readers", "spacy_scorers", "spacy_misc", "spacy_loggers", "spacy_callbacks"):
            assert ep.name.startswith("spacy-sciner."), ep.name
            assert ep.name.rsplit(".", 1)[-1].startswith("v"), ep.name


def test_resolved_by_spacy_in_a_process_that_never_imports_the_package():
    code = """
import spacy, sys
from spacy.util import registry
assert "spacy_sciner" not in sys.modules
nlp = spacy.blank("en")
nlp.add_pipe("sciner_spancat")
nlp.add_pipe("sciner_candidate_miner")
nlp.add_pipe("sciner_abbreviations")
for reg, name in [
    (registry.architectures, "spacy-sciner.SpanCategorizer.v1"),
    (registry.architectures, "spacy-sciner.TransformerModel.v1"),
    (registry.architectures, "spacy-sciner.TransformerModel.v2"),
    (registry.readers, "spacy-sciner.SciERCReader.v1"),
    (registry.readers, "spacy-sciner.CoNLLReader.v1"),
    (registry.readers, "spacy-sciner.BratReader.v1"),
    (registry.readers, "spacy-sciner.JSONLReader.v1"),
    (registry.readers, "spacy-sciner.WeakBalancedCorpus.v1"),
    (registry.scorers, "spacy-sciner.span_scorer.v1"),
    (registry.misc, "spacy-sciner.encoder_path.v1"),
    (registry.misc, "spacy-sciner.candidate_suggester.v1"),
    (registry.architectures, "spacy-sciner.HybridTok2Vec.v1"),
    (registry.loggers, "spacy-sciner.JSONLLogger.v1"),
    (registry.callbacks, "spacy-sciner.numpy_blas.v1"),
]:
    assert callable(reg.get(name)), name
print("OK", nlp.pipe_names)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK ['sciner_spancat', 'sciner_candidate_miner', 'sciner_abbreviations']" in result.stdout


def test_spacy_cli_has_the_sciner_commands():
    result = subprocess.run([sys.executable, "-m", "spacy", "sciner", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    for command in ("info", "convert", "calibrate", "mine", "build-corpus", "pft", "render", "debug-data"):
        assert command in result.stdout, command
