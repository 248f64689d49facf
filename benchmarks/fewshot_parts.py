"""Parts of benchmarks/fewshot.py: the system recipes, the fixed training samples, the
evaluation subsets, the per-sample weak-label inputs (leakage rule) and the reports."""
import hashlib
import importlib.util
import json
import random
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import spacy
from spacy.tokens import DocBin

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spancat_bench  # noqa: E402  (ROOT, DATA, evaluate)

ROOT = spancat_bench.ROOT
SPANS_KEY = spancat_bench.SPANS_KEY
# Data sets whose weak labels come from the training data itself (no gazetteer of the domain):
# their weak encoders must be pretrained per sample (the sample's own entities + mined candidates).
PER_SAMPLE_WEAK = {"scierc"}


@dataclass
class Recipe:
    """One system of the benchmark. `kind` "sciner": sciner_spancat head (calibrated on dev,
    span F); "ner": spaCy's ner (its own decoding, doc.ents). `encoder_option`: the CLI option
    giving its encoder folder (a template with {dataset} and {size}); None: `encoder`."""

    name: str
    config: str
    kind: str
    transformer: bool
    encoder: Optional[str] = None
    encoder_option: Optional[str] = None
    weak: bool = False  # encoder pretrained on weak labels built from training data (leakage rule)
    help: str = ""


def encoder_fingerprint(encoder) -> Optional[str]:
    """A short sha256 of a local encoder's weights (a Hugging Face folder's *.safetensors /
    *.bin files, or a tok2vec weights file), so that a result names the exact encoder it
    came from even after the folder is regenerated. None for a hub or registered name."""
    path = Path(str(encoder)).expanduser()
    files = [path] if path.is_file() else sorted(f for f in path.glob("*") if f.suffix in (".safetensors", ".bin")) if path.is_dir() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:12]


RECIPES = {}


def register(recipe: Recipe) -> Recipe:
    """Add a system (later issues register their encoders here, or pass `--encoder-for`)."""
    RECIPES[recipe.name] = recipe
    return recipe


register(Recipe("spacy_ner_cnn", "configs/spacy_ner_cnn.cfg", "ner", False, help="spaCy's stock CPU ner, no transformer"))
register(Recipe("minilm", "configs/sciner_spancat.cfg", "sciner", True, encoder="sciner-minilm", help="sciner_spancat on MiniLM as is"))
register(Recipe("hybrid", "configs/sciner_spancat_hybrid.cfg", "sciner", True, encoder="sciner-minilm",
                help="the project's default recipe: sciner_spancat on MiniLM + a character-aware CNN (issue 9)"))
register(Recipe("pft", "configs/sciner_spancat.cfg", "sciner", True, encoder_option="pft",
                help="the pft_all workflow's encoder (mlm_cand+ecb), e.g. pft/{dataset}/encoder"))
register(Recipe("weak_fine", "configs/sciner_spancat.cfg", "sciner", True, encoder_option="weak_fine", weak=True,
                help="weak_all's export-encoder, fine types, e.g. training/{dataset}-weak/encoder"))
register(Recipe("weak_coarse", "configs/sciner_spancat.cfg", "sciner", True, encoder_option="weak_coarse", weak=True,
                help="weak_all's export-encoder, coarse types (--vars.weak_granularity coarse)"))
register(Recipe("weak_fine_abbr", "configs/sciner_spancat.cfg", "sciner", True, encoder_option="weak_fine_abbr", weak=True,
                help="as weak_fine, the weak labels made with label-weak --abbreviations (weak_cnn.py --abbreviations)"))
register(Recipe("cnn", "configs/sciner_spancat_cnn.cfg", "sciner", False, help="sciner_spancat on spaCy's CNN tok2vec, no transformer"))
# CNN side of weak pretraining: the "encoder" is a tok2vec weights file for --paths.init_tok2vec.
register(Recipe("cnn_weak", "configs/sciner_spancat_cnn.cfg", "sciner", False, encoder_option="cnn_weak", weak=True,
                help="tok2vec weights of sciner_spancat_cnn pretrained on weak labels (weak-config + export-tok2vec), "
                     "e.g. weights/{dataset}-cnn-weak.bin"))
register(Recipe("cnn_weak_coarse", "configs/sciner_spancat_cnn.cfg", "sciner", False, encoder_option="cnn_weak_coarse", weak=True,
                help="as cnn_weak, pretrained on the coarse weak types (the fine-vs-coarse ablation)"))


def resolve_encoder(recipe: Recipe, templates: dict, dataset: str, size, work: Path = Path("WORK")) -> tuple:
    """(encoder or None, note): None with a 'missing encoder' or leakage note means skip.
    templates[name]: a path template, or {dataset or "*": template}; {dataset} {size} {work}."""
    template = templates.get(recipe.name)
    if isinstance(template, dict):
        template = template.get(dataset, template.get("*"))
    if recipe.encoder_option is None:
        return template or recipe.encoder, ""
    if not template:
        return None, f"missing encoder: pass --{recipe.encoder_option.replace('_', '-')} PATH ({recipe.help})"
    if recipe.weak and dataset in PER_SAMPLE_WEAK and size != "all" and "{size}" not in template:
        return None, (f"leakage rule: a {dataset} weak encoder must be pretrained per sample (its dictionary is the "
                      f"sample's own entities + mined candidates); pass a path with {{size}} (inputs: weak_inputs/size{{size}})")
    # "~/..." as written in fewshot.json's settings or passed quoted on the command line.
    path = str(Path(template.format(dataset=dataset, size=size, work=work)).expanduser())
    if not recipe.transformer:  # tok2vec weights (spacy pretrain's format)
        return (path, "") if Path(path).is_file() else (None, f"missing tok2vec weights: {path}")
    if not (Path(path) / "config.json").exists():
        return None, f"missing encoder: {path} (no config.json)"
    return path, ""


# ---------------------------------------------------------------------------- samples


def digest(indices) -> str:
    return hashlib.sha1(",".join(map(str, indices)).encode()).hexdigest()[:12]


def sample_indices(n_train: int, size, seed: int) -> list:
    """Sorted training-sentence indices of a sample: the first `size` of one seeded
    permutation (so the samples are nested: 10 within 50 within 100 ...); "all": all."""
    if size == "all" or size >= n_train:
        return list(range(n_train))
    order = list(range(n_train))
    random.Random(f"fewshot-sample-{seed}").shuffle(order)
    return sorted(order[:size])


_DOCS = {}


def read_docs(path: Path) -> list:
    """The Docs of a DocBin, read once per process (reading spans is slow: srsly hooks)."""
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _DOCS:
        _DOCS[key] = list(DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))
    return _DOCS[key]


def write_subset(src: Path, indices: list, out: Path) -> None:
    docs = read_docs(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    DocBin(docs=[docs[i] for i in indices], store_user_data=True).to_disk(tmp)
    tmp.replace(out)


def n_docs(path: Path) -> int:
    return len(DocBin().from_disk(path))


def get_sample(dataset: str, corpus: Path, work: Path, size, seed: int) -> dict:
    """The sample of `size` training sentences: indices in work/DS/samples/size{N}.json (reused
    by every system and seed; a rerun reads the file instead of drawing again) and its DocBin."""
    base = work / dataset / "samples"
    meta_path, train_path = base / f"size{size}.json", base / f"size{size}" / "train.spacy"
    n_train = n_docs(corpus / "train.spacy")
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta["n_train"] != n_train:
            raise SystemExit(f"error: {meta_path} was drawn from {meta['n_train']} training sentences, the corpus has {n_train}")
    else:
        indices = sample_indices(n_train, size, seed)
        meta = {"dataset": dataset, "size": size, "sample_seed": seed, "n_train": n_train, "n": len(indices),
                "sha": digest(indices), "indices": indices}
        base.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(json.dumps(meta))
    if not train_path.exists():
        write_subset(corpus / "train.spacy", meta["indices"], train_path)
    return {**meta, "path": train_path}


def eval_corpus(dataset: str, corpus: Path, work: Path, dev_sentences: int, test_sentences: int, seed: int) -> tuple:
    """work/DS/eval/{dev,test}.spacy: dev limited to `dev_sentences` (a seeded sample, 0: all),
    test to `test_sentences` (the first N; 0: all, the only setting for reported numbers)."""
    out = work / dataset / "eval"
    meta_path = out / "eval.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
    want = {"dev_sentences": dev_sentences, "test_sentences": test_sentences, "seed": seed}
    if meta is None or {k: meta[k] for k in want} != want:
        n_dev, n_test = n_docs(corpus / "dev.spacy"), n_docs(corpus / "test.spacy")
        dev = sample_indices(n_dev, dev_sentences or "all", seed + 1000)
        test = list(range(min(n_test, test_sentences))) if test_sentences else list(range(n_test))
        write_subset(corpus / "dev.spacy", dev, out / "dev.spacy")
        write_subset(corpus / "test.spacy", test, out / "test.spacy")
        meta = {**want, "dev_used": len(dev), "dev_total": n_dev, "test_used": len(test), "test_total": n_test,
                "dev_indices": dev}
        meta_path.write_text(json.dumps(meta))
    return out, meta


# ------------------------------------------------------------------- weak-label inputs


def _weak_label_module():
    spec = importlib.util.spec_from_file_location("weak_label", ROOT / "scripts" / "weak_label.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_dictionary(train_path: Path) -> dict:
    """text -> label of the sample's gold spans (the most frequent label of each text)."""
    counts = {}
    for doc in DocBin().from_disk(train_path).get_docs(spacy.blank("en").vocab):
        for span in doc.spans.get(SPANS_KEY, doc.ents):
            counts.setdefault(span.text, {}).setdefault(span.label_, 0)
            counts[span.text][span.label_] += 1
    return {text: max(sorted(labels), key=labels.get) for text, labels in sorted(counts.items())}


DEFAULT_MIN_DISTINCT = 10  # NER-BERT's rule 1 (spacy_sciner.weak.corpus.CorpusRules)


def weak_type_rule(weak_path: Path) -> tuple:
    """(distinct entities per type, min_distinct) of a per-sample weak corpus. NER-BERT's
    rule 1 drops types with fewer than 10 distinct entities, which suits a weak corpus built
    from large gazetteers; a sample's own dictionary can be so small that no type reaches
    10 matched entities (SciERC, 10 sentences: Generic 3, the others 1), and the rule would
    then drop every sentence. Such a sample keeps all its types (min_distinct 1, written to
    the manifest and to every run's results); any other keeps the rule as it is."""
    from spacy_sciner.weak.corpus import CorpusRules, read_weak_docbin

    stats = CorpusRules().statistics(read_weak_docbin(weak_path, spacy.blank("en").vocab))
    keep_rule = any(n >= DEFAULT_MIN_DISTINCT for n in stats.distinct.values())
    return stats.distinct, DEFAULT_MIN_DISTINCT if keep_rule else 1


def build_weak_inputs(dataset: str, sample: dict, work: Path, aux_files: list, lines: int, n_process: int = 1) -> Path:
    """The weak corpus of one sample (the leakage rule): a typed dictionary of the sample's
    own entities, candidates mined from aux text with the sample as the only labeled data,
    and aux text labeled with both. Nothing else from the training set, no dev/test text.
    Writes work/DS/weak_inputs/size{N}/ {dictionary.tsv, type_map.tsv, weak_text.txt,
    candidates.tsv, weak.spacy, weak_inputs.json (with the pretraining commands)}."""
    out = work / dataset / "weak_inputs" / f"size{sample['size']}"
    manifest = out / "weak_inputs.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("sample_sha") == sample["sha"]:
        return out
    out.mkdir(parents=True, exist_ok=True)
    terms = sample_dictionary(sample["path"])
    (out / "dictionary.tsv").write_text("".join(f"{t}\t{label}\n" for t, label in terms.items()), encoding="utf8")
    (out / "type_map.tsv").write_text("file\tlabel\n# the few-shot sample's own entities (term<TAB>label)\ndictionary.tsv\t*\n")
    text = _weak_label_module().take_lines(aux_files, lines)
    (out / "weak_text.txt").write_text("\n".join(text) + "\n", encoding="utf8")
    py = [sys.executable, "-m", "spacy_sciner"]
    steps = [
        py + ["mine", str(out / "weak_text.txt"), "--train", str(sample["path"]), "--output", str(out / "candidates.tsv"),
              "--n-process", str(n_process)],
        py + ["label-weak", str(out / "weak_text.txt"), "--output", str(out / "weak.spacy"), "--type-map",
              str(out / "type_map.tsv"), "--candidates", str(out / "candidates.tsv"), "--n-process", str(n_process),
              "--no-progress", "--report", str(out / "weak_label.json")],
    ]
    for cmd in steps:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"{' '.join(cmd[2:4])} failed: {(res.stderr or res.stdout)[-800:]}")
    distinct, min_distinct = weak_type_rule(out / "weak.spacy")
    rule = "" if min_distinct == DEFAULT_MIN_DISTINCT else f" --corpora.train.min_distinct {min_distinct} --corpora.dev.min_distinct {min_distinct}"
    # The transformer recipe of the biomedical sets (weak_cnn.py --encoder): the weak twin of
    # configs/sciner_spancat.cfg, 1,500 updates, plain negatives, seed 0.
    pretrain = {g: (f"python -m spacy_sciner weak-config configs/sciner_spancat.cfg {out}/trf_weak_{g}_plain.cfg "
                    f"--granularity {g} --max-steps 1500 --negatives plain && python -m spacy train "
                    f"{out}/trf_weak_{g}_plain.cfg --output {out}/pretrain-{g} --paths.weak {out}/weak.spacy "
                    f"--system.seed 0 --training.eval_frequency 300 --components.transformer.model.name sciner-minilm{rule} "
                    f"&& python -m spacy_sciner export-encoder {out}/pretrain-{g}/model-best {out}/encoder-{g} --force")
                for g in ("fine", "coarse")}
    pretrain["cnn"] = (f"python -m spacy_sciner weak-config configs/sciner_spancat_cnn.cfg {out}/cnn_weak.cfg && "
                       f"python -m spacy train {out}/cnn_weak.cfg --output {out}/pretrain-cnn --paths.weak {out}/weak.spacy{rule} "
                       f"&& python -m spacy_sciner export-tok2vec {out}/pretrain-cnn/model-best {out}/cnn-weak.bin")
    manifest.write_text(json.dumps({
        "dataset": dataset, "size": sample["size"], "sample_sha": sample["sha"], "dictionary_terms": len(terms),
        "aux_lines": len(text), "aux_files": [str(Path(f).parent.name) for f in aux_files],
        "distinct_per_type": distinct, "min_distinct": min_distinct,
        "rule": "dictionary = the sample's own gold entities; candidates mined from aux text with --train = the sample; "
                "only aux text is labeled (no dev/test text, no entity from outside the sample)",
        "pretrain_commands": pretrain,
        "encoder_template": f"--weak-fine {dataset}='{{work}}/{dataset}/weak_inputs/size{{size}}/encoder-fine' (coarse likewise; "
                            f"--cnn-weak {dataset}='{{work}}/{dataset}/weak_inputs/size{{size}}/cnn-weak.bin')",
    }, indent=1))
    return out


# ---------------------------------------------------------------------------- reports


def summarize(runs: dict) -> dict:
    """dataset -> size -> system -> test span F mean/std over the seeds done."""
    table = {}
    for r in runs.values():
        cell = table.setdefault(r["dataset"], {}).setdefault(str(r["size"]), {}).setdefault(
            r["system"], {"f": [], "ents_f": [], "by_seed": {}})
        cell["f"].append(r["scores"]["spans_f"])
        cell["ents_f"].append(r["scores"]["ents_f"])
        cell["by_seed"][str(r["seed"])] = r["scores"]["spans_f"]
    for sizes in table.values():
        for systems in sizes.values():
            for cell in systems.values():
                f = cell["f"]
                cell.update({"n": len(f), "mean": statistics.mean(f), "std": statistics.stdev(f) if len(f) > 1 else 0.0,
                             "ents_f_mean": statistics.mean(cell["ents_f"])})
    return table


def size_key(size: str):
    return (1, 0) if size == "all" else (0, int(size))


# The same system without the pretraining under test: the Δ column of the table.
BASELINE = {"cnn_weak": "cnn", "cnn_weak_coarse": "cnn", "pft": "minilm", "weak_fine": "minilm", "weak_coarse": "minilm",
            "weak_fine_abbr": "minilm"}


def delta(systems: dict, system: str) -> str:
    """Mean over fine-tuning seeds of F minus its baseline's F with the SAME seed (same data
    set and size): only seeds both systems ran count, so a seed done for one system only
    cannot move the difference. Where that leaves out a seed of either row, the seeds used are
    named. — without a baseline or a shared seed. (Cells without per-seed scores, from older
    results: difference of the means.)"""
    cell, base = systems[system], systems.get(BASELINE.get(system, ""))
    if not base:
        return "—"
    if "by_seed" not in cell or "by_seed" not in base:
        return f"{100 * (cell['mean'] - base['mean']):+.1f}"
    shared = sorted(set(cell["by_seed"]) & set(base["by_seed"]), key=int)
    if not shared:
        return "—"
    diff = statistics.mean(cell["by_seed"][k] - base["by_seed"][k] for k in shared)
    every = len(shared) == len(cell["by_seed"]) == len(base["by_seed"])
    return f"{100 * diff:+.1f}" + ("" if every else f" (seed{'s' if len(shared) > 1 else ''} {', '.join(shared)})")


def write_markdown(results: dict, path: Path) -> None:
    s = results["settings"]
    lines = [f"# Few-shot benchmark ({s['machine']}{'; SMOKE: tiny random BERT, a few steps' if s['smoke'] else ''})", "",
             f"Test span F (exact labelled spans against all gold spans, as in `spancat_bench.py`), mean ± std over the "
             f"fine-tuning seeds done (of {len(s['seeds'])}). Training samples: the first N of one permutation drawn with "
             f"seed {s['sample_seed']} (nested; indices in the work folder), the same for every system and seed. "
             f"Dev: {s['dev_note']}. Steps per training size (every system): {s['steps']}; model-best on dev; "
             "sciner systems calibrated on dev (`sciner calibrate`), the CNN ner decodes as trained.", "",
             f"Δ: F minus the same system without the pretraining under test, with the same fine-tuning seed, averaged over the seeds "
             f"both ran (named where that leaves a seed out) ({', '.join(f'{k} vs {v}' for k, v in BASELINE.items())}).", "",
             "| dataset | size | system | test span F | Δ | seeds | flat ents F |", "|---|---|---|---:|---:|---:|---:|"]
    for ds in sorted(results["summary"]):
        for size in sorted(results["summary"][ds], key=size_key):
            for system, c in sorted(results["summary"][ds][size].items()):
                systems = results["summary"][ds][size]
                spread = f" ± {100 * c['std']:.1f}" if c["n"] > 1 else " (one seed)"  # no std of one value
                lines.append(f"| {ds} | {size} | {system} | {100 * c['mean']:.1f}{spread} | "
                             f"{delta(systems, system)} | {c['n']} | "
                             f"{100 * c['ents_f_mean']:.1f} |")
    loosened = sorted({f"{r['dataset']}/{r['size']}/{r['system']} (min_distinct {r['weak_min_distinct']})"
                       for r in results["runs"].values() if r.get("weak_min_distinct", DEFAULT_MIN_DISTINCT) != DEFAULT_MIN_DISTINCT})
    if loosened:
        lines += ["", "Weak encoders pretrained with NER-BERT's rare-type rule loosened (no type of the sample's weak corpus "
                  f"had {DEFAULT_MIN_DISTINCT} distinct entities, so the rule would have dropped every sentence; "
                  "fewshot_parts.weak_type_rule): " + ", ".join(loosened) + "."]
    if results.get("skipped"):
        lines += ["", "Skipped:", ""] + [f"- {k}: {v}" for k, v in sorted(results["skipped"].items())]
    lines += ["", "![F1 vs training size](fewshot.png)"]
    path.write_text("\n".join(lines) + "\n")


def write_plot(results: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # the [bench] extra; CI installs only [test]
        print("note: matplotlib not installed (pip install -e '.[bench]'): no PNG written", flush=True)
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted(results["summary"]) or ["(no runs)"]
    # one colour per system in every panel
    every = sorted({sy for sizes in results["summary"].values() for cells in sizes.values() for sy in cells})
    colour = {sy: plt.get_cmap("tab10")(i % 10) for i, sy in enumerate(every)}
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        sizes = sorted(results["summary"].get(ds, {}), key=size_key)
        systems = sorted({sy for sz in sizes for sy in results["summary"][ds][sz]})
        for system in systems:
            pts = [(i, results["summary"][ds][sz][system]) for i, sz in enumerate(sizes) if system in results["summary"][ds][sz]]
            ax.errorbar([i for i, _ in pts], [100 * c["mean"] for _, c in pts], yerr=[100 * c["std"] for _, c in pts],
                        marker="o", capsize=3, label=system, color=colour[system])
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels(sizes)
        ax.set_xlabel("training sentences")
        ax.set_ylabel("test span F")
        ax.set_title(ds)
        ax.grid(alpha=0.3)
        if systems:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
