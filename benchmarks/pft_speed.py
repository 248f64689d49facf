"""PFT training speed on MiniLM: our steps vs a stock transformers BertForMaskedLM step.

Measured in one run, on the same model (offline all-MiniLM-L6-v2 + a fresh MLM head), the
same batches (16 SciERC training sentences each, their gold entities standing in for mined
candidates) and the same thread count:

* ``stock``: ``BertForMaskedLM(input_ids, attention_mask, labels)`` with transformers'
  ``DataCollatorForLanguageModeling`` random 15% masking (vocabulary projection at every
  position), backward, and the optimizer of transformers' Trainer default (``adamw_torch``:
  ``torch.optim.AdamW``, per-tensor loop);
* ``stock_fused``: the same model step with the fused AdamW our trainer uses, which
  isolates the effect of projecting only the masked positions;
* ``mlm_random``: our path, random 15% masking, projection at masked positions only;
* ``mlm_cand+ecb``: our path with candidate masking and ECB targets.

The variants run interleaved in rounds (rotating order), so load from other jobs on the
shared cores hits all of them alike; ratios are medians of per-round paired ratios. Each step
is timed twice: wall clock (tokens/s as a user sees it) and the CPU time of this process
(``time.process_time``, all threads): when other jobs share the cores, wall time mostly
measures waiting for them, the CPU time still measures the work each variant does. The
masking time of each of our variants is also measured on its own, which isolates the cost of
candidate selection from the noise of the much longer forward/backward pass.

It also reports how many pieces each objective actually masks per 1,000 tokens (the budget
is a cap: candidate objectives mask what the candidates allow), over all SciERC training
sentences, and the share of entities that fit a strict per-sequence budget vs the share that
masking reaches. ``--masking-only`` prints just these (seconds, no model).

Usage: python benchmarks/pft_speed.py [--rounds 5] [--steps 3] [--threads 2] [--masking-only]
"""
import argparse
import json
import os

# Waiting OpenMP threads sleep instead of spinning: on cores shared with other jobs a
# spinning thread burns CPU time while its partner is descheduled, which would make the
# CPU-time measurement count other jobs' load. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SCIERC = ROOT.parent / "shared" / "data" / "scierc" / "train.json"


def scierc_sentences(path: Path, n: int):
    """Sentences of SciERC train with their gold entities as candidate spans (end exclusive)."""
    from spacy_sciner.pft.data import Sentence

    out = []
    with open(path, encoding="utf8") as file_:
        for line in file_:
            doc = json.loads(line)
            offset = 0
            for tokens, ents in zip(doc["sentences"], doc["ner"]):
                cands = [(s - offset, e - offset + 1, "gold") for s, e, _ in ents]
                out.append(Sentence(tokens, cands, f"{path.name}:{doc['doc_key']}"))
                offset += len(tokens)
                if len(out) == n:
                    return out
    return out


MASKING_OBJECTIVES = ("mlm_cand", "ecb", "mlm_cand+ecb", "mlm_random", "mlm_span+sbo")


def masking_rates(tokenizer, batch_size: int, mask_ratio: float = 0.15) -> dict:
    """Masked pieces per 1,000 tokens per objective on all SciERC train sentences (gold
    entities as candidates), mean of 3 masking seeds; and which entities masking reaches."""
    from spacy_sciner.pft.data import CorpusStats, encode_sentences
    from spacy_sciner.pft.masking import MaskVocab
    from spacy_sciner.pft.stats import ever_masked, fits_sequence_budget, measure_masking

    vocab = MaskVocab.from_tokenizer(tokenizer)
    examples = encode_sentences(scierc_sentences(SCIERC, 10**9), tokenizer, 128, CorpusStats())
    rates = {}
    for objective in MASKING_OBJECTIVES:
        runs = [measure_masking(examples, objective, vocab, mask_ratio, batch_size, seed) for seed in range(3)]
        rates[objective] = {k: float(np.mean([r.get(k, 0.0) for r in runs])) for k in runs[0]}
    return {
        "sentences": len(examples), "candidates": sum(len(ex.candidates) for ex in examples),
        "masked_per_1k_tokens": rates,
        "entities_fitting_sequence_budget": fits_sequence_budget(examples, mask_ratio),
        "entities_ever_masked_50_draws": ever_masked(examples, vocab, mask_ratio, draws=50),
    }


def masking_lines(rates: dict) -> list:
    """Markdown lines for ``masking_rates``."""
    from spacy_sciner.pft.stats import format_per_1k

    per_objective = "; ".join(f"`{o}`: {format_per_1k(r)}" for o, r in rates["masked_per_1k_tokens"].items())
    return [
        f"- masked pieces per 1,000 tokens, all {rates['sentences']} SciERC train sentences "
        f"({rates['candidates']} entities as candidates), budget 15%: {per_objective}",
        f"- SciERC entities no longer than their sentence's 15% budget: "
        f"{rates['entities_fitting_sequence_budget']:.1%}; masked whole as MLM_CAND in at least one of "
        f"50 draws: **{rates['entities_ever_masked_50_draws']:.1%}**",
    ]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="Timed steps per variant per round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--encoder", default="sciner-minilm")
    parser.add_argument("--out", type=Path, default=RESULTS / "pft_speed", help="JSON/Markdown path without suffix")
    parser.add_argument("--masking-only", action="store_true", help="Only the masking rates (no model, seconds)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.masking_only:
        from spacy_sciner.pft.heads import load_tokenizer

        print("\n".join(masking_lines(masking_rates(load_tokenizer(args.encoder), args.batch_size))))
        return
    from transformers import DataCollatorForLanguageModeling

    from spacy_sciner.pft.data import CorpusStats, encode_sentences
    from spacy_sciner.pft.heads import compute_losses, load_masked_lm, load_tokenizer
    from spacy_sciner.pft.masking import MaskVocab, mask_batch, parse_objective
    from spacy_sciner.pft.train import make_adamw

    tokenizer = load_tokenizer(args.encoder)
    vocab = MaskVocab.from_tokenizer(tokenizer)
    n_batches = args.steps + 1
    sentences = scierc_sentences(SCIERC, args.batch_size * n_batches)
    examples = encode_sentences(sentences, tokenizer, 128, CorpusStats())
    batches = [examples[i * args.batch_size : (i + 1) * args.batch_size] for i in range(n_batches)]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, return_tensors="pt")

    variants = ("stock", "stock_fused", "mlm_random", "mlm_cand+ecb")
    models, optims = {}, {}
    for name in variants:
        torch.manual_seed(0)
        models[name], _ = load_masked_lm(args.encoder)
        models[name].train()
        optims[name] = (torch.optim.AdamW(models[name].parameters(), lr=1e-5) if name == "stock"
                        else make_adamw(models[name].parameters(), 1e-5))

    def stock_step(name, batch):
        width = max(len(ex.input_ids) for ex in batch)
        features = [{"input_ids": ex.input_ids} for ex in batch]
        masked = collator(features)  # pads, masks 15% (80/10/10), labels -100 elsewhere
        assert masked["input_ids"].shape[1] == width
        out = models[name](input_ids=masked["input_ids"], attention_mask=masked["attention_mask"],
                              labels=masked["labels"])
        out.loss.backward()
        optims[name].step()
        optims[name].zero_grad(set_to_none=True)
        return int(masked["attention_mask"].sum()), int((masked["labels"] != -100).sum())

    def our_step(name, batch, rng):
        masked = mask_batch(batch, parse_objective(name), rng, vocab, 0.15)
        loss, _ = compute_losses(models[name], None, masked, torch.device("cpu"))
        loss.backward()
        optims[name].step()
        optims[name].zero_grad(set_to_none=True)
        return masked.n_tokens, len(masked.positions)

    def run(name, batch, rng):
        return stock_step(name, batch) if name.startswith("stock") else our_step(name, batch, rng)

    load_before = uptime()
    for name in variants:  # warm-up: allocator, threads, first-call overheads
        run(name, batches[-1], np.random.default_rng(0))
    times = {name: [] for name in variants}
    cpu_times = {name: [] for name in variants}
    tokens = {name: [] for name in variants}
    targets = {name: [] for name in variants}
    per_round, per_round_cpu = [], []
    for r in range(args.rounds):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        round_time, round_cpu = {}, {}
        for name in order:
            rng = np.random.default_rng([r, 1])
            start_total, start_cpu, n_tok = time.perf_counter(), time.process_time(), 0
            for batch in batches[: args.steps]:
                t0, c0 = time.perf_counter(), time.process_time()
                n, m = run(name, batch, rng)
                times[name].append(time.perf_counter() - t0)
                cpu_times[name].append(time.process_time() - c0)
                tokens[name].append(n)
                targets[name].append(m)
                n_tok += n
            round_time[name] = n_tok / (time.perf_counter() - start_total)
            round_cpu[name] = n_tok / (time.process_time() - start_cpu)
        per_round.append(round_time)
        per_round_cpu.append(round_cpu)
        print(f"round {r}: " + ", ".join(f"{k} {v:.0f} tok/s wall, {round_cpu[k]:.0f} tok/cpu-s"
                                         for k, v in round_time.items()), file=sys.stderr)
    load_after = uptime()

    # Masking cost alone (no model): candidate selection vs random selection, same batches.
    mask_time = {}
    for name in ("mlm_random", "mlm_cand+ecb"):
        reps, t0 = 20, time.process_time()
        for i in range(reps):
            for batch in batches[: args.steps]:
                mask_batch(batch, parse_objective(name), np.random.default_rng(i), vocab, 0.15)
        mask_time[name] = (time.process_time() - t0) / (reps * args.steps)

    rates = masking_rates(tokenizer, args.batch_size)
    median_step = {name: statistics.median(times[name]) for name in variants}
    median_cpu = {name: statistics.median(cpu_times[name]) for name in variants}
    tok_s = {name: sum(tokens[name]) / sum(times[name]) for name in variants}
    tok_cpu_s = {name: sum(tokens[name]) / sum(cpu_times[name]) for name in variants}

    def paired(rounds, a, b):
        return statistics.median(r[a] / r[b] for r in rounds)

    speedup = {"wall": paired(per_round, "mlm_random", "stock"), "cpu": paired(per_round_cpu, "mlm_random", "stock")}
    speedup_same_optim = {"wall": paired(per_round, "mlm_random", "stock_fused"),
                          "cpu": paired(per_round_cpu, "mlm_random", "stock_fused")}
    speedup_cand = {"wall": paired(per_round, "mlm_cand+ecb", "stock"),
                    "cpu": paired(per_round_cpu, "mlm_cand+ecb", "stock")}
    step_overhead = {"wall": paired(per_round, "mlm_random", "mlm_cand+ecb") - 1,
                     "cpu": paired(per_round_cpu, "mlm_random", "mlm_cand+ecb") - 1}
    masking_overhead = (mask_time["mlm_cand+ecb"] - mask_time["mlm_random"]) / median_cpu["mlm_random"]
    result = {
        "encoder": args.encoder, "batch_size": args.batch_size, "threads": args.threads,
        "rounds": args.rounds, "steps_per_round": args.steps,
        "data": f"SciERC train, first {len(sentences)} sentences; gold entities as candidates",
        "tokens_per_s": tok_s, "tokens_per_cpu_s": tok_cpu_s,
        "sentences_per_s": {n: args.batch_size / median_step[n] for n in variants},
        "median_step_s": median_step, "median_step_cpu_s": median_cpu, "mean_targets_per_batch": {n: float(np.mean(targets[n])) for n in variants},
        "per_round_tokens_per_s": per_round, "per_round_tokens_per_cpu_s": per_round_cpu,
        "speedup_mlm_random_vs_stock": speedup, "speedup_mlm_random_vs_stock_fused": speedup_same_optim, "speedup_mlm_cand_ecb_vs_stock": speedup_cand,
        "step_overhead_cand_ecb_vs_mlm_random": step_overhead,
        "masking_s_per_batch": mask_time, "masking_overhead_share_of_step": masking_overhead,
        "masked_per_1k_tokens_timed_batches": {n: 1000 * sum(targets[n]) / sum(tokens[n]) for n in variants},
        "masking_rates_scierc": rates,
        "targets": {"speedup_min": 1.5, "overhead_max": 0.10},
        "uptime_before": load_before, "uptime_after": load_after,
        "torch": torch.__version__, "cpu_count": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    rows = [
        "| variant | tokens/s (wall) | tokens per CPU-s | sentences/s (wall) | median step wall / CPU (s) "
        "| predicted pieces / batch | per 1,000 tokens |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ] + [
        f"| {n} | {tok_s[n]:.0f} | {tok_cpu_s[n]:.0f} | {result['sentences_per_s'][n]:.1f} | "
        f"{median_step[n]:.2f} / {median_cpu[n]:.2f} | {result['mean_targets_per_batch'][n]:.1f} | "
        f"{result['masked_per_1k_tokens_timed_batches'][n]:.1f} |" for n in variants
    ]
    md = [
        "# PFT speed (benchmarks/pft_speed.py)", "",
        f"MiniLM ({args.encoder}), batch {args.batch_size} sentences, {args.threads} threads, "
        f"{args.rounds} interleaved rounds x {args.steps} steps per variant; {result['data']}.", "",
        *rows, "",
        f"- speed-up of our mlm_random step vs stock BertForMaskedLM (median of per-round ratios): "
        f"**{speedup['cpu']:.2f}x** in CPU time, {speedup['wall']:.2f}x wall (target >= 1.5x); "
        f"mlm_cand+ecb vs stock: {speedup_cand['cpu']:.2f}x CPU, {speedup_cand['wall']:.2f}x wall",
        f"- same optimizer (fused AdamW in both), i.e. the masked-positions-only projection alone: "
        f"**{speedup_same_optim['cpu']:.2f}x** CPU, {speedup_same_optim['wall']:.2f}x wall",
        f"- step-time overhead of mlm_cand+ecb vs our mlm_random (per-round median): "
        f"**{step_overhead['cpu'] * 100:+.1f}%** CPU, {step_overhead['wall'] * 100:+.1f}% wall (target <= 10%; "
        f"mlm_cand+ecb predicts fewer pieces when candidates do not fill the budget)",
        f"- masking alone: mlm_random {mask_time['mlm_random'] * 1e3:.2f} ms/batch, mlm_cand+ecb "
        f"{mask_time['mlm_cand+ecb'] * 1e3:.2f} ms/batch (CPU): the difference is {masking_overhead * 100:.2f}% "
        "of an mlm_random step",
        *masking_lines(rates),
        f"- load: before `{load_before}`; after `{load_after}` (uptime: a 1-min load near 2 means the 2 cores were busy with this run only)",
    ]
    args.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
