"""Entity counts per type before and after the NER-BERT corpus rules and balanced sampling.

For one weak DocBin (``sciner label-weak``'s output, weak labels in ``doc.spans["weak"]``)
it runs the reader ``spacy-sciner.WeakBalancedCorpus.v1`` exactly as ``spacy train``
would (train split), and counts spans per type three times: in the whole file (labels
mapped to the chosen granularity), after the rules (the train part), and in one pass of
the sampler (as many sentences as the train part). It also compares the sampler's law
q(E) ~ |E|^alpha with the empirical frequency of the drawn types.

    python benchmarks/weak_sampling.py corpus/weak.spacy --out benchmarks/results/weak_sampling
    python benchmarks/weak_sampling.py --synthetic 5000 --out /tmp/ws     # no corpus needed

Writes OUT/weak_sampling.json and, with matplotlib (the [bench] extra), OUT/weak_sampling.png.
"""
import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, Optional

import spacy
from spacy.tokens import Doc, DocBin, Span

from spacy_sciner.weak.corpus import WeakCorpusError, label_map, relabel, span_counts
from spacy_sciner.weak.sampling import create_weak_balanced_corpus


def make_synthetic_docbin(path: Path, n_docs: int = 2000, n_types: int = 12, seed: int = 0) -> Path:
    """A weak DocBin with Zipf-sized types (type k has weight 1/(k+1)^1.5), 0-7 ENTITY
    spans per sentence, and one type (``T_rare``) with only 5 distinct entities, so
    that every rule has something to do. For demos and tests."""
    rng = random.Random(seed)
    nlp = spacy.blank("en")
    types = [f"T{k:02d}" for k in range(n_types)]
    weights = [1 / (k + 1) ** 1.5 for k in range(n_types)]
    db = DocBin(store_user_data=False)
    for i in range(n_docs):
        words, spans = [f"s{i}"], []
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            label = "T_rare" if rng.random() < 0.01 else rng.choices(types, weights)[0]
            n_distinct = 5 if label == "T_rare" else 200
            words += ["see"]
            spans.append((len(words), len(words) + 1, label))
            words.append(f"{label.lower()}_{rng.randrange(n_distinct)}")
        for _ in range(rng.choice([0, 0, 1, 2, 5, 7])):
            words += ["and"]
            spans.append((len(words), len(words) + 1, "ENTITY"))
            words.append(f"cand_{rng.randrange(1000)}")
        doc = Doc(nlp.vocab, words=words + ["."])
        doc.spans["weak"] = [Span(doc, s, e, label=label) for s, e, label in spans]
        db.add(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    db.to_disk(path)
    return path


def measure(path: Path, *, n_samples: int = 0, **reader_args) -> Dict[str, object]:
    """Counts before/after for one corpus and reader setting (see the module docstring)."""
    nlp = spacy.blank("en")
    reader = create_weak_balanced_corpus(path, split="train", n_samples=n_samples, **reader_args)
    kept = reader.prepare(nlp.vocab)
    raw = reader.raw
    labels = {label for s in raw for _, _, label in s.spans}
    raw_counts = span_counts(relabel(raw, label_map(labels, reader.o["granularity"], reader.o["coarse_map"])))
    kept_counts = span_counts(kept)
    n = n_samples or len(kept)
    sampled, drawn = Counter(), Counter()
    for label, position in reader.sampler.draw(n, [reader.o["seed"], 0]):
        drawn[label] += 1
        sampled.update(lbl for _, _, lbl in kept[position].spans)
    expected = reader.sampler.expected()
    sizes = dict(zip(reader.sampler.types, reader.sampler.sizes.tolist()))
    types = sorted(set(raw_counts) | set(kept_counts), key=lambda t: (-raw_counts[t], t))
    return {
        "input": Path(path).name,  # the name only: no machine-specific paths in results
        "reader": {k: v for k, v in reader.o.items()},
        "docs_in_file": len(raw),
        "filter_stats": reader.stats.to_dict(),
        "sentences_after_rules": len(kept),
        "samples": n,
        "types": {
            t: {
                "spans_in_file": raw_counts[t],
                "spans_after_rules": kept_counts[t],
                "spans_sampled": sampled[t],
                "sentences": int(sizes.get(t, 0)),
                "q_expected": round(expected.get(t, 0.0), 6),
                "q_drawn": round(drawn[t] / n, 6),
            }
            for t in types
        },
    }


def plot(result: Dict[str, object], out: Path) -> Optional[Path]:
    """Grouped bars per type (log scale); None without matplotlib."""
    try:
        import matplotlib
    except ImportError:  # the [bench] extra; the JSON is written anyway
        print("note: matplotlib not installed (pip install -e '.[bench]'): no PNG written", flush=True)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = list(result["types"])
    series = [("in file", "spans_in_file"), ("after rules", "spans_after_rules"), ("sampled (one pass)", "spans_sampled")]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(types) + 2), 4.5))
    for k, (name, key) in enumerate(series):
        xs = [i + (k - 1) * width for i in range(len(types))]
        ax.bar(xs, [max(result["types"][t][key], 0.5) for t in types], width, label=name)
    ax.set_yscale("log")
    ax.set_xticks(range(len(types)))
    ax.set_xticklabels(types, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("spans")
    alpha = result["reader"]["alpha"]
    ax.set_title(f"{Path(result['input']).name}: spans per type, p(E) ~ |E|^{alpha}, {result['reader']['granularity']}")
    ax.legend()
    fig.tight_layout()
    path = out / "weak_sampling.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, help="weak DocBin (.spacy)")
    parser.add_argument("--synthetic", type=int, default=0, help="build a synthetic corpus of N sentences in OUT instead")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--spans-key", default="weak")
    parser.add_argument("--alpha", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--granularity", default="fine")
    parser.add_argument("--no-filters", action="store_true")
    parser.add_argument("--heldout-fraction", type=float, default=0.1)
    parser.add_argument("--n-samples", type=int, default=0, help="0: as many as the train sentences")
    parser.add_argument("--note", default="", help="how the corpus was made, stored in the JSON")
    args = parser.parse_args(argv)
    if (args.corpus is None) == (not args.synthetic):
        parser.error("give either a corpus or --synthetic N")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.corpus or make_synthetic_docbin(args.out / "synthetic_weak.spacy", args.synthetic)
    try:
        result = measure(
            path, n_samples=args.n_samples, spans_key=args.spans_key, alpha=args.alpha, seed=args.seed,
            granularity=args.granularity, filters=not args.no_filters, heldout_fraction=args.heldout_fraction,
        )
    except WeakCorpusError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    result["note"] = args.note or ("synthetic" if args.synthetic else "")
    (args.out / "weak_sampling.json").write_text(json.dumps(result, indent=1) + "\n")
    png = plot(result, args.out)
    s = result["filter_stats"]
    print(
        f"{result['docs_in_file']} docs, train part {s['docs_in']} -> {s['docs_out']} after rules "
        f"(rare types {sorted(s['rare_types'])}, no entity {s['no_entity']}, only ENTITY {s['only_untyped']}, "
        f"frequent {s['frequent']}/{s['frequent_eligible']}); {result['samples']} sampled"
    )
    print(f"wrote {args.out / 'weak_sampling.json'}" + (f" and {png}" if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
