"""Run inside a fresh virtual environment: load an installed pipeline package by name, run
nlp.pipe on some texts and report, as JSON on stdout, where every piece of code came from.

    VENV/bin/python -I use_installed_pipeline.py PACKAGE_NAME TEXT_FILE

It never imports spacy_sciner itself: spaCy must find the components through the installed
spacy-sciner wheel's entry points.
"""
import json
import sys
from importlib import metadata


def main(package: str, text_file: str) -> None:
    import spacy

    imported_before_load = "spacy_sciner" in sys.modules
    nlp = spacy.load(package)
    with open(text_file, encoding="utf8") as f:
        texts = [line.strip() for line in f if line.strip()]
    docs = list(nlp.pipe(texts, batch_size=8))
    sciner = sys.modules.get("spacy_sciner")
    pipeline_module = sys.modules.get(package)
    dist = metadata.distribution("spacy-sciner")
    report = {
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "sys_path": sys.path,
        "spacy_sciner_imported_before_load": imported_before_load,
        "spacy_sciner_file": getattr(sciner, "__file__", None),
        "pipeline_file": getattr(pipeline_module, "__file__", None),
        "spacy_sciner_dist_location": str(dist.locate_file("")),
        "spacy_sciner_version": dist.version,
        "spacy_sciner_direct_url": dist.read_text("direct_url.json"),
        "spacy_sciner_dists": [
            str(d.locate_file("")) for d in metadata.distributions() if d.metadata["Name"] == "spacy-sciner"
        ],
        "pipe_names": nlp.pipe_names,
        "factories": {name: nlp.get_pipe_meta(name).factory for name in nlp.pipe_names},
        "docs": [
            {
                "text": doc.text,
                "has_sc": "sc" in doc.spans,
                "spans": [[s.start_char, s.end_char, s.label_] for s in doc.spans.get("sc", [])],
                "scores": [float(x) for x in doc.spans["sc"].attrs.get("scores", [])] if "sc" in doc.spans else None,
                "ents": [[e.start_char, e.end_char, e.label_] for e in doc.ents],
            }
            for doc in docs
        ],
    }
    print(json.dumps(report))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
