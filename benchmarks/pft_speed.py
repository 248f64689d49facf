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
* ``mlm_cand+ecb``: our path with candidate masking and ECB targets;
* ``mlm_random [loader]``, ``mlm_cand+ecb [loader]``: the same steps with the batches masked
  ahead by ``--step-workers`` DataLoader workers (``spacy_sciner/pft/loader.py``), as the
  trainer does now; the two variants above mask in the step, as it did before.

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

Steady state: ``tokens_per_s`` covers every timed round; ``tokens_per_s_steady`` leaves out
the first 10% of the rounds (at least one), in which allocators, kernel choices and (for
the loader variants) worker start-up settle. The data pipeline is also timed alone: masked
batches per second that the loader delivers with 0, 1 and 2 workers over all SciERC
training sentences (from the first batch on; the worker start-up is reported apart).

With ``--gpu-id N`` the models run on that CUDA device with the trainer's mixed precision;
each timed step then ends with a device sync (else the host clock would time kernel
launches only), and the CPU-time columns measure the host's share of the work.

Usage: python benchmarks/pft_speed.py [--rounds 5] [--steps 3] [--threads 2] [--gpu-id -1]
    [--step-workers 1] [--masking-only]
"""
import argparse
import json
import os

# Waiting OpenMP threads sleep instead of spinning: on cores shared with other jobs a
# spinning thread burns CPU time while its partner is descheduled, which would make the
# CPU-time measurement count other jobs' load. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the report module, also when imported
from pft_speed_report import LOADER_OBJECTIVES, VARIANTS, markdown, masking_lines  # noqa: E402
from spacy_sciner.pft.device import amp_dtype, autocast, resolve_device  # noqa: E402

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


def masking_rates(tokenizer, batch_size: int, mask_ratio: float = 0.15, path: Path = SCIERC) -> dict:
    """Masked pieces per 1,000 tokens per objective on all SciERC train sentences (gold
    entities as candidates), mean of 3 masking seeds; and which entities masking reaches."""
    from spacy_sciner.pft.data import CorpusStats, encode_sentences
    from spacy_sciner.pft.masking import MaskVocab
    from spacy_sciner.pft.stats import ever_masked, fits_sequence_budget, measure_masking

    vocab = MaskVocab.from_tokenizer(tokenizer)
    examples = encode_sentences(scierc_sentences(path, 10**9), tokenizer, 128, CorpusStats())
    rates = {}
    for objective in MASKING_OBJECTIVES:
        runs = [measure_masking(examples, objective, vocab, mask_ratio, batch_size, seed) for seed in range(3)]
        rates[objective] = {k: float(np.mean([r.get(k, 0.0) for r in runs])) for k in runs[0]}
    return {
        "data": path.stem, "sentences": len(examples), "candidates": sum(len(ex.candidates) for ex in examples),
        "masked_per_1k_tokens": rates,
        "entities_fitting_sequence_budget": fits_sequence_budget(examples, mask_ratio),
        "entities_ever_masked_50_draws": ever_masked(examples, vocab, mask_ratio, draws=50),
    }



def loader_throughput(examples, vocab, batch_size: int, n_batches: int, workers: int, pin: bool) -> dict:
    """Masked batches/s the trainer's loader delivers with ``workers`` processes, per objective."""
    from spacy_sciner.pft.loader import MicroBatches, PackedExamples, micro_batches
    from spacy_sciner.pft.masking import parse_objective

    packed = PackedExamples(examples)
    out = {}
    for objective in LOADER_OBJECTIVES:
        dataset = MicroBatches(packed if workers else examples, parse_objective(objective), vocab, batch_size,
                               seed=0, mask_ratio=0.15, start=0, stop=n_batches)
        t0 = time.perf_counter()
        batches = micro_batches(dataset, workers, pin_memory=pin)
        next(batches)
        t1, c1 = time.perf_counter(), time.process_time()
        for _ in batches:
            pass
        t2, c2 = time.perf_counter(), time.process_time()
        out[objective] = {"batches_per_s": (n_batches - 1) / (t2 - t1), "startup_s": t1 - t0,
                          "main_process_cpu_ms_per_batch": 1e3 * (c2 - c1) / (n_batches - 1)}
    return out


class FixedBatches:
    """Map-style dataset for the loader variants: item ``i`` masks ``batches[i % len]``.

    The loader variants then time the same sentences as the in-step variants.
    """

    def __init__(self, batches, objective: str, vocab):
        self.batches, self.objective, self.vocab = batches, objective, vocab

    def __len__(self):
        return 10**9

    def __getitem__(self, i):
        from spacy_sciner.pft.masking import mask_batch, parse_objective

        batch = self.batches[i % len(self.batches)]
        return mask_batch(batch, parse_objective(self.objective), np.random.default_rng([i, 1]), self.vocab, 0.15)


def uptime() -> str:
    """The machine's load (``uptime``; the load averages where that command is missing)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="Timed steps per variant per round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--encoder", default="sciner-minilm")
    parser.add_argument("--out", type=Path, default=RESULTS / "pft_speed", help="JSON/Markdown path without suffix")
    parser.add_argument("--masking-only", action="store_true", help="Only the masking rates (no model, seconds)")
    parser.add_argument("--gpu-id", type=int, default=-1, help="CUDA device for the model steps; -1 = CPU")
    parser.add_argument("--step-workers", type=int, default=None,
                        help="Loader workers of the [loader] variants (default: the trainer's default, at least 1)")
    parser.add_argument("--loader-batches", type=int, default=300, help="Batches per data-pipeline measurement")
    parser.add_argument("--data", type=Path, default=SCIERC, help="SciERC-format json (one doc per line)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1 or args.batch_size < 1 or args.loader_batches < 2:
        parser.error("--rounds, --steps and --batch-size must be at least 1, --loader-batches at least 2")
    if not args.data.is_file():
        parser.error(f"--data {args.data}: no such file")
    return args


class Steps:
    """One training step of each variant, on its own copy of the model and optimizer.

    batches: The timed batches; the [loader] variants get them masked ahead by
        ``step_workers`` DataLoader workers, in the same order.
    """

    def __init__(self, args, tokenizer, vocab, batches, device, dtype, step_workers: int):
        from transformers import DataCollatorForLanguageModeling

        from spacy_sciner.pft.heads import load_masked_lm
        from spacy_sciner.pft.loader import micro_batches
        from spacy_sciner.pft.train import make_adamw

        self.device, self.dtype, self.vocab = device, dtype, vocab
        self.collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, return_tensors="pt")
        self.models, self.optims = {}, {}
        for name in VARIANTS:
            torch.manual_seed(0)  # every variant starts from the same fresh MLM head
            self.models[name], _ = load_masked_lm(args.encoder)
            self.models[name].to(device).train()
            # transformers' Trainer default (per-tensor AdamW) for the stock step only.
            self.optims[name] = (torch.optim.AdamW(self.models[name].parameters(), lr=1e-5) if name == "stock"
                                 else make_adamw(self.models[name].parameters(), 1e-5))
        self.loaders = {name: micro_batches(FixedBatches(batches, name.split()[0], vocab), step_workers,
                                            pin_memory=device.type == "cuda")
                        for name in VARIANTS if name.endswith("[loader]")}

    def _update(self, name, loss) -> None:
        loss.backward()
        self.optims[name].step()
        self.optims[name].zero_grad(set_to_none=True)

    def _stock(self, name, batch):
        width = max(len(ex.input_ids) for ex in batch)
        masked = self.collator([{"input_ids": ex.input_ids} for ex in batch])  # pads, masks 15% (80/10/10)
        assert masked["input_ids"].shape[1] == width
        with autocast(self.device, self.dtype):
            out = self.models[name](**{k: masked[k].to(self.device) for k in ("input_ids", "attention_mask", "labels")})
        self._update(name, out.loss)
        return int(masked["attention_mask"].sum()), int((masked["labels"] != -100).sum())

    def _ours(self, name, batch, rng):
        from spacy_sciner.pft.heads import compute_losses
        from spacy_sciner.pft.masking import mask_batch, parse_objective

        if name in self.loaders:
            masked = next(self.loaders[name])  # masked ahead by the loader's workers
        else:
            masked = mask_batch(batch, parse_objective(name), rng, self.vocab, 0.15)
        with autocast(self.device, self.dtype):
            loss, _ = compute_losses(self.models[name], None, masked, self.device)
        self._update(name, loss)
        return masked.n_tokens, len(masked.positions)

    def run(self, name, batch, rng):
        """One step; RETURNS (tokens, predicted pieces)."""
        out = self._stock(name, batch) if name.startswith("stock") else self._ours(name, batch, rng)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the step's kernels are done when the clock is read
        return out


def time_rounds(steps: Steps, batches, rounds: int) -> dict:
    """Interleaved rounds (rotating order) of every variant over the same batches.

    RETURNS (dict): Per variant the per-step wall and CPU times, tokens and predicted pieces,
        and per round each variant's tokens/s in wall and CPU time.
    """
    for name in VARIANTS:  # warm-up: allocator, threads, first-call overheads
        steps.run(name, batches[-1], np.random.default_rng(0))
    timed = {key: {name: [] for name in VARIANTS} for key in ("times", "cpu_times", "tokens", "targets")}
    timed.update(per_round=[], per_round_cpu=[])
    for r in range(rounds):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
        round_time, round_cpu = {}, {}
        for name in order:
            rng = np.random.default_rng([r, 1])
            start_total, start_cpu, n_tok = time.perf_counter(), time.process_time(), 0
            for batch in batches[:-1]:
                t0, c0 = time.perf_counter(), time.process_time()
                n, m = steps.run(name, batch, rng)
                timed["times"][name].append(time.perf_counter() - t0)
                timed["cpu_times"][name].append(time.process_time() - c0)
                timed["tokens"][name].append(n)
                timed["targets"][name].append(m)
                n_tok += n
            round_time[name] = n_tok / (time.perf_counter() - start_total)
            round_cpu[name] = n_tok / (time.process_time() - start_cpu)
        timed["per_round"].append(round_time)
        timed["per_round_cpu"].append(round_cpu)
        print(f"round {r}: " + ", ".join(f"{k} {v:.0f} tok/s wall, {round_cpu[k]:.0f} tok/cpu-s"
                                         for k, v in round_time.items()), file=sys.stderr)
    return timed


def masking_seconds(batches, vocab, reps: int = 20) -> dict:
    """CPU seconds per batch of masking alone (no model), random vs candidate selection."""
    from spacy_sciner.pft.masking import mask_batch, parse_objective

    out = {}
    for name in LOADER_OBJECTIVES:
        t0 = time.process_time()
        for i in range(reps):
            for batch in batches:
                mask_batch(batch, parse_objective(name), np.random.default_rng(i), vocab, 0.15)
        out[name] = (time.process_time() - t0) / (reps * len(batches))
    return out


def summarise(args, timed: dict, mask_time: dict, step_workers: int, device, n_sentences: int) -> dict:
    """The speeds, paired ratios and overheads of one run (``result`` of the JSON)."""
    times, cpu_times, tokens, targets = (timed[k] for k in ("times", "cpu_times", "tokens", "targets"))
    steady_from_round = max(1, math.ceil(0.1 * args.rounds)) if args.rounds > 1 else 0
    skip = steady_from_round * args.steps
    median_step = {name: statistics.median(times[name]) for name in VARIANTS}
    median_cpu = {name: statistics.median(cpu_times[name]) for name in VARIANTS}

    def paired(a, b, first_round=0, minus=0.0):
        """Median over rounds of a's speed / b's speed, in wall and in CPU time."""
        return {key: statistics.median(r[a] / r[b] for r in timed[rounds][first_round:]) - minus
                for key, rounds in (("wall", "per_round"), ("cpu", "per_round_cpu"))}

    return {
        "encoder": args.encoder, "batch_size": args.batch_size, "threads": args.threads,
        "rounds": args.rounds, "steps_per_round": args.steps, "device": str(device),
        "step_workers": step_workers, "steady_from_round": steady_from_round,
        "data": f"SciERC {args.data.stem}, first {n_sentences} sentences; gold entities as candidates",
        # The same sentences for every variant: these totals must agree (the report's tests check it).
        "timed_tokens": {n: sum(tokens[n]) for n in VARIANTS},
        "tokens_per_s": {n: sum(tokens[n]) / sum(times[n]) for n in VARIANTS},
        "tokens_per_s_steady": {n: sum(tokens[n][skip:]) / sum(times[n][skip:]) for n in VARIANTS},
        "tokens_per_cpu_s": {n: sum(tokens[n]) / sum(cpu_times[n]) for n in VARIANTS},
        "sentences_per_s": {n: args.batch_size / median_step[n] for n in VARIANTS},
        "median_step_s": median_step, "median_step_cpu_s": median_cpu,
        "mean_targets_per_batch": {n: float(np.mean(targets[n])) for n in VARIANTS},
        "per_round_tokens_per_s": timed["per_round"], "per_round_tokens_per_cpu_s": timed["per_round_cpu"],
        "speedup_mlm_random_vs_stock": paired("mlm_random", "stock"),
        "speedup_mlm_random_vs_stock_fused": paired("mlm_random", "stock_fused"),
        "speedup_mlm_cand_ecb_vs_stock": paired("mlm_cand+ecb", "stock"),
        "step_overhead_cand_ecb_vs_mlm_random": paired("mlm_random", "mlm_cand+ecb", minus=1),
        "step_overhead_cand_ecb_vs_mlm_random_loader": paired("mlm_random [loader]", "mlm_cand+ecb [loader]", minus=1),
        "step_overhead_cand_ecb_vs_mlm_random_steady": {
            "in_step": paired("mlm_random", "mlm_cand+ecb", steady_from_round, minus=1),
            "loader": paired("mlm_random [loader]", "mlm_cand+ecb [loader]", steady_from_round, minus=1),
        },
        "masking_s_per_batch": mask_time,
        "masking_overhead_share_of_step": (mask_time["mlm_cand+ecb"] - mask_time["mlm_random"]) / median_cpu["mlm_random"],
        "masked_per_1k_tokens_timed_batches": {n: 1000 * sum(targets[n]) / sum(tokens[n]) for n in VARIANTS},
        "targets": {"speedup_min": 1.5, "overhead_max": 0.10},
        "torch": torch.__version__, "cpu_count": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }



def main(argv=None) -> dict:
    """Run the benchmark; write ``--out`` .json and .md. RETURNS (dict): the JSON's content."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    from spacy_sciner.pft.heads import load_tokenizer

    tokenizer = load_tokenizer(args.encoder)
    if args.masking_only:
        print("\n".join(masking_lines(masking_rates(tokenizer, args.batch_size, path=args.data))))
        return {}
    from spacy_sciner.pft.data import CorpusStats, encode_sentences
    from spacy_sciner.pft.loader import default_workers
    from spacy_sciner.pft.masking import MaskVocab

    device, dtype = resolve_device(args.gpu_id), amp_dtype(args.gpu_id)
    step_workers = args.step_workers if args.step_workers is not None else max(1, default_workers(device))
    vocab = MaskVocab.from_tokenizer(tokenizer)
    n_batches = args.steps + 1  # the last one is the warm-up batch
    sentences = scierc_sentences(args.data, args.batch_size * n_batches)
    if len(sentences) < args.batch_size * n_batches:
        raise SystemExit(f"{args.data} has {len(sentences)} sentences; --steps {args.steps} needs "
                         f"{args.batch_size * n_batches} (steps + 1 warm-up batches)")
    examples = encode_sentences(sentences, tokenizer, 128, CorpusStats())
    batches = [examples[i * args.batch_size : (i + 1) * args.batch_size] for i in range(n_batches)]

    load_before = uptime()
    timed = time_rounds(Steps(args, tokenizer, vocab, batches[:-1], device, dtype, step_workers), batches, args.rounds)
    load_after = uptime()
    result = summarise(args, timed, masking_seconds(batches[:-1], vocab), step_workers, device, len(sentences))
    all_examples = encode_sentences(scierc_sentences(args.data, 10**9), tokenizer, 128, CorpusStats())
    result["loader_throughput"] = {w: loader_throughput(all_examples, vocab, args.batch_size, args.loader_batches, w,
                                                        device.type == "cuda") for w in (0, 1, 2)}
    result["masking_rates_scierc"] = masking_rates(tokenizer, args.batch_size, path=args.data)
    result.update(uptime_before=load_before, uptime_after=load_after)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    md = markdown(result, args.data, len(all_examples), args.loader_batches)
    args.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return result


if __name__ == "__main__":
    main()
