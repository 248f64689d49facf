"""Training updates/s and inference words/s against `max_padded_wordpieces`
(spacy-sciner.TransformerModel.v2: the encoder on length-sorted sub-batches, in training too).

One pipeline per value is built from --config with the transformer's architecture set to v2
and that value (0: one call per batch, as v1), all initialized with the same seed on the same
training sentences, so their weights start equal. Each round times --updates `nlp.update`
calls on the same 500-word batches (the configs' batcher) for every value in turn, then
`nlp.pipe` over dev sentences; the first round is a warm-up. Medians over --rounds.

    python benchmarks/encoder_buckets.py --dataset scierc   # -> benchmarks/results/encoder_buckets.{json,md}
"""
import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import convergence  # noqa: E402  (get_corpus, Parser)

ROOT = convergence.ROOT


def build(config_path: Path, value: int, encoder: str, examples: list, seed: int):
    """The config's pipeline with TransformerModel.v2 at `value`, initialized."""
    from spacy.util import fix_random_seed, load_config, load_model_from_config

    config = load_config(config_path)
    model = config["components"]["transformer"]["model"]
    model["@architectures"] = "spacy-sciner.TransformerModel.v2"
    model["max_padded_wordpieces"] = value
    model["name"] = encoder
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    fix_random_seed(seed)
    optimizer = nlp.initialize(lambda: examples)
    return nlp, optimizer


def batches(examples: list, n: int, size: int, seed: int) -> list:
    from spacy.training.batchers import minibatch_by_words

    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    return [list(b) for b in minibatch_by_words(shuffled, size=size, tolerance=0.2, discard_oversize=False)][:n]


def padded_per_real(tokenizer, groups: list) -> float:
    """Padded over real wordpieces when each group of texts is padded to its longest."""
    real = padded = 0
    for texts in groups:
        lengths = [len(ids) for ids in tokenizer(texts)["input_ids"]]
        real += sum(lengths)
        padded += max(lengths) * len(lengths)
    return padded / real


def padding(args) -> dict:
    """The padding one encoder call per batch computes: --batch-words training batches of the
    whole training set (seed-shuffled), and nlp.pipe batches of 64 test sentences (in order)."""
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example
    from spacy.util import minibatch
    from transformers import AutoTokenizer

    from spacy_sciner.encoders import resolve_encoder

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder(args.encoder), use_fast=True)
    corpus = convergence.get_corpus(args.dataset, args.state)
    vocab = spacy.blank("en").vocab
    train = [Example(d, d) for d in DocBin().from_disk(corpus / "train.spacy").get_docs(vocab)]
    test = [d.text for d in DocBin().from_disk(corpus / "test.spacy").get_docs(vocab)]
    train_groups = [[eg.reference.text for eg in b] for b in batches(train, len(train), args.batch_words, args.seed)]
    return {"train_batches": padded_per_real(tokenizer, train_groups),
            "test_batches_of_64": padded_per_real(tokenizer, [list(b) for b in minibatch(test, 64)])}


def run(args) -> dict:
    import spacy
    import torch
    from spacy.tokens import Doc, DocBin
    from spacy.training import Example

    torch.set_num_threads(args.threads)
    corpus = convergence.get_corpus(args.dataset, args.state)
    vocab = spacy.blank("en").vocab
    train = [Example(Doc(d.vocab, words=[t.text for t in d]), d)
             for d in DocBin().from_disk(corpus / "train.spacy").get_docs(vocab)][: args.train_sentences]
    dev = [[t.text for t in d] for d in DocBin().from_disk(corpus / "dev.spacy").get_docs(vocab)][: args.dev_sentences]
    pipes = {v: build(args.config, v, args.encoder, train, args.seed) for v in args.values}
    fixed = batches(train, args.updates, args.batch_words, args.seed)
    words = sum(map(len, dev))
    update_s = {v: [] for v in args.values}
    pipe_wps = {v: [] for v in args.values}
    for r in range(args.rounds + 1):  # round 0: warm-up
        for v in args.values if r % 2 else args.values[::-1]:
            nlp, optimizer = pipes[v]
            start = time.perf_counter()
            for batch in fixed:
                nlp.update(batch, sgd=optimizer, losses={})
            took = (time.perf_counter() - start) / len(fixed)
            start = time.perf_counter()
            list(nlp.pipe((Doc(nlp.vocab, words=w) for w in dev), batch_size=64))
            wps = words / (time.perf_counter() - start)
            if r:
                update_s[v].append(took)
                pipe_wps[v].append(wps)
    rows = [{"max_padded_wordpieces": v, "seconds_per_update": statistics.median(update_s[v]),
             "words_per_s": statistics.median(pipe_wps[v]), "all_seconds_per_update": update_s[v]} for v in args.values]
    return {"dataset": args.dataset, "config": str(args.config.relative_to(ROOT) if args.config.is_relative_to(ROOT) else args.config),
            "updates_per_round": len(fixed), "dev_sentences": len(dev), "dev_words": words, "rows": rows}


def markdown(report: dict) -> str:
    meta = report["meta"]
    base = report["rows"][0]
    lines = [f"`{report['config']}` on {report['dataset']} with `spacy-sciner.TransformerModel.v2`: seconds per "
             f"`nlp.update` ({report['updates_per_round']} fixed 500-word batches per round) and `nlp.pipe` words/s "
             f"({report['dev_sentences']} dev sentences, batch 64, the component's max_batch_items as configured); "
             f"median of {meta['rounds']} interleaved rounds after a warm-up, {meta['threads']} thread(s), load average "
             f"{meta['load_start']:.1f} -> {meta['load_end']:.1f}, {meta['updated'][:10]}. 0 = one encoder call per batch (v1).",
             "", "| max_padded_wordpieces | s/update | training speed-up | words/s | inference speed-up |",
             "|---:|---:|---:|---:|---:|"]
    for row in report["rows"]:
        lines.append(f"| {row['max_padded_wordpieces']} | {row['seconds_per_update']:.3f} | "
                     f"{base['seconds_per_update'] / row['seconds_per_update']:.2f}x | {row['words_per_s']:,.0f} | "
                     f"{row['words_per_s'] / base['words_per_s']:.2f}x |")
    if "padding" in report:
        pad = report["padding"]
        lines += ["", f"Padding with one call per batch (MiniLM's tokenizer): {pad['train_batches']:.2f}x the real wordpieces "
                  f"in the {report['dataset']} training set's 500-word batches, {pad['test_batches_of_64']:.2f}x in "
                  "`nlp.pipe` batches of 64 test sentences."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    p = convergence.Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="scierc")
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "sciner_spancat_hybrid.cfg")
    p.add_argument("--encoder", default="sciner-minilm")
    p.add_argument("--values", nargs="+", type=int, default=[0, 1024, 512, 256])
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--train-sentences", type=int, default=600)
    p.add_argument("--dev-sentences", type=int, default=200)
    p.add_argument("--batch-words", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--state", type=Path, default=convergence.STATE)
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "encoder_buckets")
    p.add_argument("--padding-only", action="store_true", help="Only measure the padding ratios (tokenizer only)")
    args = p.parse_args(argv)
    if not args.config.is_file():
        p.error(f"no config at {args.config}")
    if args.values[0] != 0 or any(v < 0 for v in args.values):
        p.error("--values: 0 first (the baseline), then positive values")
    if args.padding_only:  # add the padding ratios to an existing report
        path = args.results.with_suffix(".json")
        report = json.loads(path.read_text()) if path.exists() else {}
        report["padding"] = padding(args)
        path.write_text(json.dumps(report, indent=2) + "\n")
        if "rows" in report:
            args.results.with_suffix(".md").write_text(markdown(report))
        print(json.dumps(report["padding"]))
        return report
    load_start = os.getloadavg()[0]
    report = run(args)
    report["padding"] = padding(args)
    report["meta"] = {"threads": args.threads, "rounds": args.rounds, "load_start": load_start,
                      "load_end": os.getloadavg()[0], "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.results.with_suffix(".md").write_text(markdown(report))
    print(args.results.with_suffix(".md").read_text())
    return report


if __name__ == "__main__":
    main()
