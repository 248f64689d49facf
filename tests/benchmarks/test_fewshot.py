"""benchmarks/fewshot.py: the --smoke run end to end on SciERC (tiny random BERT, 2 steps),
the fixed samples, the skip rules and the leakage rule of the per-sample weak corpus."""
import json
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import fewshot  # noqa: E402
import fewshot_parts as parts  # noqa: E402


def test_samples_fixed_nested_and_seeded():
    a = parts.sample_indices(1000, 10, 0)
    assert a == parts.sample_indices(1000, 10, 0) == sorted(set(a)) and len(a) == 10
    assert set(a) <= set(parts.sample_indices(1000, 50, 0))  # nested: 10 within 50
    assert a != parts.sample_indices(1000, 10, 1)
    assert parts.sample_indices(5, 10, 0) == parts.sample_indices(5, "all", 0) == list(range(5))


def test_encoder_skip_and_leakage_rules(tmp_path, monkeypatch):
    (tmp_path / "enc10").mkdir()
    (tmp_path / "enc10" / "config.json").write_text("{}")
    weak, pft = parts.RECIPES["weak_fine"], parts.RECIPES["pft"]
    assert parts.resolve_encoder(pft, {}, "ncbi_disease", 10)[0] is None
    assert "missing encoder" in parts.resolve_encoder(pft, {}, "ncbi_disease", 10)[1]
    assert "missing encoder" in parts.resolve_encoder(pft, {"pft": str(tmp_path / "nope")}, "scierc", 10)[1]
    fixed = {"weak_fine": str(tmp_path / "enc10")}
    # One weak encoder for every SciERC sample would have seen entities outside the sample.
    enc, note = parts.resolve_encoder(weak, fixed, "scierc", 10)
    assert enc is None and "leakage rule" in note
    assert parts.resolve_encoder(weak, fixed, "ncbi_disease", 10)[0] == str(tmp_path / "enc10")
    per_sample = {"weak_fine": str(tmp_path / "enc{size}")}
    assert parts.resolve_encoder(weak, per_sample, "scierc", 10)[0] == str(tmp_path / "enc10")
    by_dataset = {"weak_fine": {"*": str(tmp_path / "enc10"), "scierc": "{work}/enc{size}"}}
    assert parts.resolve_encoder(weak, by_dataset, "scierc", 10, tmp_path)[0] == str(tmp_path / "enc10")
    assert parts.resolve_encoder(weak, by_dataset, "bc5cdr", 50)[0] == str(tmp_path / "enc10")
    # A template under the home folder written as ~/... (how fewshot.json records paths)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parts.resolve_encoder(pft, {"pft": "~/enc10"}, "bc5cdr", 50) == (str(tmp_path / "enc10"), "")
    args = fewshot.parse_args(["--weak-fine", "a/{dataset}", "scierc=b/{size}"])
    assert args.templates["weak_fine"] == {"*": "a/{dataset}", "scierc": "b/{size}"}
    # cnn_weak's "encoder" is a tok2vec weights file, not a Hugging Face folder
    cnn_weak = parts.RECIPES["cnn_weak"]
    (tmp_path / "w10.bin").write_bytes(b"x")
    assert parts.resolve_encoder(cnn_weak, {"cnn_weak": str(tmp_path / "w{size}.bin")}, "scierc", 10)[0] == str(tmp_path / "w10.bin")
    assert "missing tok2vec weights" in parts.resolve_encoder(cnn_weak, {"cnn_weak": str(tmp_path / "w{size}.bin")}, "scierc", 50)[1]
    # the coarse-types ablation of the CNN side: its own option, same weights-file rules
    args = fewshot.parse_args(["--cnn-weak-coarse", "c/{dataset}.bin"])
    assert args.templates["cnn_weak_coarse"] == {"*": "c/{dataset}.bin"} and not args.templates.get("cnn_weak")
    coarse = parts.RECIPES["cnn_weak_coarse"]
    assert parts.resolve_encoder(coarse, {"cnn_weak_coarse": str(tmp_path / "w{size}.bin")}, "scierc", 10)[0] == str(tmp_path / "w10.bin")


def test_delta_against_the_system_without_pretraining():
    systems = {"cnn": {"mean": 0.40}, "cnn_weak": {"mean": 0.455}, "spacy_ner_cnn": {"mean": 0.3}}
    assert parts.delta(systems, "cnn_weak") == "+5.5"
    assert parts.delta(systems, "spacy_ner_cnn") == "—" and parts.delta({"cnn_weak": {"mean": 0.4}}, "cnn_weak") == "—"


def test_delta_pairs_seeds():
    """A seed one system has and its baseline lacks does not move Δ; the seeds used are named."""
    runs = {i: {"dataset": "d", "size": 100, "system": sy, "seed": seed, "scores": {"spans_f": f, "ents_f": f}}
            for i, (sy, seed, f) in enumerate([("minilm", 0, 0.50), ("minilm", 1, 0.60), ("minilm", 2, 0.40),
                                               ("weak_fine", 0, 0.55), ("weak_fine", 1, 0.62),
                                               ("pft", 0, 0.52), ("pft", 1, 0.61), ("pft", 2, 0.43)])}
    systems = parts.summarize(runs)["d"]["100"]
    # unpaired: 0.585 - 0.50 = +8.5; paired over seeds 0 and 1: (0.05 + 0.02) / 2 = +3.5
    assert parts.delta(systems, "weak_fine") == "+3.5 (seeds 0, 1)"
    assert parts.delta(systems, "pft") == "+2.0"
    systems["weak_fine"]["by_seed"] = {"5": 0.7}
    assert parts.delta(systems, "weak_fine") == "—"


def test_encoder_fingerprint_follows_the_weights(tmp_path):
    enc = tmp_path / "encoder"
    enc.mkdir()
    (enc / "config.json").write_text("{}")
    assert parts.encoder_fingerprint(enc) is None  # no weights: nothing to fingerprint
    (enc / "model.safetensors").write_bytes(b"weights-1")
    first = parts.encoder_fingerprint(enc)
    assert len(first) == 12 and parts.encoder_fingerprint(str(enc)) == first
    (enc / "config.json").write_text('{"changed": 1}')  # only the weights count
    assert parts.encoder_fingerprint(enc) == first
    (enc / "model.safetensors").write_bytes(b"weights-2")  # regenerated weights: a new fingerprint
    assert parts.encoder_fingerprint(enc) != first
    weights = tmp_path / "tok2vec.bin"  # a tok2vec weights file (cnn_weak)
    weights.write_bytes(b"weights-2")
    assert parts.encoder_fingerprint(weights) not in (None, first)
    assert parts.encoder_fingerprint("sciner-minilm") is None  # a registered / hub name


def test_dev_note_keeps_data_sets_of_earlier_calls():
    """A call on one data set (its eval.json here) must not drop the dev/test sizes of data
    sets whose runs came from an earlier checkout (only the old note knows them)."""
    old = ("bc5cdr 500 of 4581 dev sentences (seeded sample), test 4797 of 4797; "
           "scierc 100 of 275 dev sentences (seeded sample), test 551 of 551")
    meta = {"scierc": {"dev_used": 275, "dev_total": 275, "test_used": 551, "test_total": 551}}
    note = fewshot.merge_dev_note(old, meta)
    assert note == ("bc5cdr 500 of 4581 dev sentences (seeded sample), test 4797 of 4797; "
                    "scierc 275 of 275 dev sentences (seeded sample), test 551 of 551")
    assert fewshot.merge_dev_note("", {}) == "—" and fewshot.merge_dev_note("—", meta).startswith("scierc 275")


def test_encoders_of_earlier_calls_stay_per_data_set():
    """A call for the biomedical sets must not drop the per-sample SciERC path of an earlier call."""
    old = {"weak_fine": {"scierc": "{work}/scierc/weak_inputs/size{size}/encoder-fine"}, "minilm": "/m"}
    new = {"weak_fine": {"*": "~/w/{dataset}"}, "pft": {}, "minilm": "/tiny"}
    assert fewshot.merge_encoders(old, new) == {
        "weak_fine": {"scierc": "{work}/scierc/weak_inputs/size{size}/encoder-fine", "*": "~/w/{dataset}"},
        "minilm": {"*": "/tiny"}}
    assert fewshot.merge_encoders({}, {}) == {}


def test_bad_arguments():
    with pytest.raises(SystemExit):
        fewshot.parse_args(["--systems", "nope"])
    with pytest.raises(SystemExit):
        fewshot.parse_args(["--sizes", "ten"])
    with pytest.raises(SystemExit):
        fewshot.parse_args(["--smoke"])  # needs --encoder


def norm(text: str) -> str:
    """Matching is token-aligned and case-smart: compare without spaces and case."""
    return "".join(text.split()).lower()


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, shared_data, tiny_bert_dir):
    """One smoke run (sizes 10 and 20, seed 0, 2 steps) with per-sample weak_fine encoders
    (here the tiny BERT under size{N}); pft and weak_coarse are not given (skipped)."""
    work = tmp_path_factory.mktemp("fewshot")
    for size in (10, 20):
        (work / "enc").mkdir(exist_ok=True)
        (work / "enc" / f"size{size}").symlink_to(tiny_bert_dir)
    argv = ["--smoke", "--encoder", str(tiny_bert_dir), "--weak-fine", str(work / "enc" / "size{size}"),
            "--work", str(work / "work"), "--results", str(work / "results")]
    assert fewshot.main(argv) == 0
    return work, argv


def test_smoke_outputs(smoke, capsys):
    work, argv = smoke
    results = json.loads((work / "results" / "fewshot.json").read_text())
    assert set(results) >= {"settings", "runs", "summary", "skipped"}
    systems = {"spacy_ner_cnn", "minilm", "hybrid", "weak_fine", "cnn"}
    assert set(results["runs"]) == {f"scierc/{n}/{s}/seed0" for n in ("10", "20") for s in systems}
    # --encoder is the encoder of both plain transformer recipes; the hybrid adds its char CNN.
    for size in ("10", "20"):
        hybrid, minilm = (results["runs"][f"scierc/{size}/{s}/seed0"] for s in ("hybrid", "minilm"))
        assert hybrid["encoder"] == minilm["encoder"] and Path(hybrid["encoder"]).name == Path(argv[2]).name
        # ... and the weights' fingerprint is recorded with it (None for spaCy's ner: no encoder).
        assert hybrid["encoder_sha"] == minilm["encoder_sha"] == parts.encoder_fingerprint(argv[2]) is not None
        assert results["runs"][f"scierc/{size}/spacy_ner_cnn/seed0"]["encoder_sha"] is None
    assert all(r["resumed"] is False for r in results["runs"].values())  # nothing was cut off
    run_dir = work / "work" / "scierc" / "size10" / "hybrid" / "seed0"
    assert (run_dir / "checkpoint" / "state.pkl").is_file() and (run_dir / "model-best").is_dir()  # sciner train's
    config = (work / "work" / "scierc" / "size10" / "hybrid" / "seed0" / "model-best" / "config.cfg").read_text()
    assert "spacy-sciner.HybridTok2Vec.v1" in config
    for size in ("10", "20"):
        cells = results["summary"]["scierc"][size]
        assert set(cells) == systems and all(c["n"] == 1 and 0.0 <= c["mean"] <= 1.0 for c in cells.values())
        assert "missing encoder" in results["skipped"][f"scierc/{size}/pft"]
        assert "missing encoder" in results["skipped"][f"scierc/{size}/cnn_weak"]
        # The same sample for every system: the indices file, its digest in every run.
        meta = json.loads((work / "work" / "scierc" / "samples" / f"size{size}.json").read_text())
        assert meta["n"] == int(size) and meta["sha"] == parts.digest(meta["indices"])
        assert {r["sample_sha"] for r in results["runs"].values() if r["size"] == size} == {meta["sha"]}
    assert "20 of 275 dev sentences" in results["settings"]["dev_note"]
    md = (work / "results" / "fewshot.md").read_text()
    for size in ("10", "20"):
        for system in systems:
            assert f"| scierc | {size} | {system} | " in md
    try:
        import matplotlib  # noqa: F401  (the [bench] extra, not [test])
    except ImportError:
        assert not (work / "results" / "fewshot.png").exists()
    else:
        assert (work / "results" / "fewshot.png").stat().st_size > 0
    # Resumable: a second call trains nothing.
    capsys.readouterr()
    assert fewshot.main(argv) == 0
    out = capsys.readouterr().out
    assert "training (" not in out and out.count("done before") == 10
    # A later call with other sizes and seeds keeps the earlier calls' steps and seeds.
    assert fewshot.main(argv + ["--report-only", "--sizes", "30", "--steps", "7", "--seeds", "3"]) == 0
    settings = json.loads((work / "results" / "fewshot.json").read_text())["settings"]
    assert settings["steps"] == {"10": 2, "20": 2, "30": 7}
    assert settings["seeds"] == [0, 3]
    assert "weak_fine" in settings["encoders"] and set(results["runs"]) <= set(
        json.loads((work / "results" / "fewshot.json").read_text())["runs"])


def test_weak_inputs_leakage_rule(smoke, shared_data):
    """The per-sample weak corpus: typed terms only from the sample's own gold entities,
    labeled text only aux text (never dev/test), candidates mined with the sample only."""
    work, _ = smoke
    vocab = spacy.blank("en").vocab
    corpus = work / "work" / "corpora" / "scierc" / "corpus"
    all_train = list(DocBin().from_disk(corpus / "train.spacy").get_docs(vocab))
    eval_text = {d.text.strip() for split in ("dev", "test") for d in DocBin().from_disk(corpus / f"{split}.spacy").get_docs(vocab)}
    for size in (10, 20):
        meta = json.loads((work / "work" / "scierc" / "samples" / f"size{size}.json").read_text())
        inside = {s.text for i in meta["indices"] for s in all_train[i].spans["sc"]}
        outside = {s.text for i, d in enumerate(all_train) if i not in set(meta["indices"]) for s in d.spans["sc"]} - inside
        out = work / "work" / "scierc" / "weak_inputs" / f"size{size}"
        terms = [line.split("\t")[0] for line in (out / "dictionary.tsv").read_text(encoding="utf8").splitlines()]
        assert terms and set(terms) <= inside and not set(terms) & outside
        aux = set((out / "weak_text.txt").read_text(encoding="utf8").splitlines())
        weak_docs = list(DocBin().from_disk(out / "weak.spacy").get_docs(vocab))
        assert weak_docs and all(d.text.strip() in aux for d in weak_docs)
        assert not {d.text.strip() for d in weak_docs} & eval_text
        lowered = {norm(t) for t in inside}
        typed = [s for d in weak_docs for s in d.spans["weak"] if s.label_ != "ENTITY"]
        assert typed and all(norm(s.text) in lowered for s in typed)
        cands = [line.split("\t") for line in (out / "candidates.tsv").read_text(encoding="utf8").splitlines()[1:]]
        assert all(norm(c[0]) in lowered for c in cands if "dict" in c[1].split(","))
        manifest = json.loads((out / "weak_inputs.json").read_text())
        assert manifest["sample_sha"] == meta["sha"]
        # Tiny samples: no type reaches 10 distinct entities, so every command keeps all types.
        assert max(manifest["distinct_per_type"].values()) < 10 and manifest["min_distinct"] == 1
        assert all("--corpora.train.min_distinct 1 --corpora.dev.min_distinct 1" in cmd
                   for cmd in manifest["pretrain_commands"].values())


def test_weak_type_rule_loosened_only_where_no_type_reaches_ten(tmp_path):
    from spacy.tokens import Doc, Span

    nlp = spacy.blank("en")

    def weak_docbin(n_distinct):
        db = DocBin()
        for i in range(12):
            doc = Doc(nlp.vocab, words=["see", f"a{i % n_distinct}", "and", "b"])
            doc.spans["weak"] = [Span(doc, 1, 2, "A"), Span(doc, 3, 4, "B"), Span(doc, 2, 3, "ENTITY")]
            db.add(doc)
        return db.to_disk(tmp_path / f"w{n_distinct}.spacy") or tmp_path / f"w{n_distinct}.spacy"

    assert parts.weak_type_rule(weak_docbin(9)) == ({"A": 9, "B": 1}, 1)
    assert parts.weak_type_rule(weak_docbin(10)) == ({"A": 10, "B": 1}, parts.DEFAULT_MIN_DISTINCT)


def test_fails_at_start_when_the_package_is_not_importable():
    """A broken install stops the benchmark before its first training run, with a clear
    message, instead of failing in the first evaluation after the training."""
    import subprocess

    block = "import sys; sys.modules['spacy_sciner'] = None; sys.argv = ['fewshot.py', '--help']; "
    run = f"{block}sys.path.insert(0, 'benchmarks'); import runpy; runpy.run_path('benchmarks/fewshot.py', run_name='__main__')"
    out = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1
    assert "spacy-sciner is not importable" in out.stderr and "pip install" in out.stderr
    assert "Traceback" not in out.stderr


def test_markdown_gives_no_spread_for_one_seed(tmp_path):
    """A cell of one seed has no standard deviation: the table says "one seed", not "± 0.0"."""
    runs = {i: {"dataset": "d", "size": "all", "system": sy, "seed": seed, "scores": {"spans_f": f, "ents_f": f}}
            for i, (sy, seed, f) in enumerate([("minilm", 0, 0.50), ("minilm", 1, 0.60), ("hybrid", 0, 0.55)])}
    settings = {"machine": "2 CPU cores", "smoke": False, "seeds": [0, 1, 2], "sample_seed": 0, "dev_note": "d: all",
                "steps": {"all": 10}}
    parts.write_markdown({"settings": settings, "summary": parts.summarize(runs), "runs": runs}, tmp_path / "f.md")
    rows = {line.split(" | ")[2]: line for line in (tmp_path / "f.md").read_text().splitlines() if line.startswith("| d |")}
    assert "| 55.0 (one seed) |" in rows["hybrid"] and "±" not in rows["hybrid"]
    assert "| 55.0 ± 7.1 |" in rows["minilm"]
