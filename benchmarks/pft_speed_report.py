"""Markdown report of benchmarks/pft_speed.py (kept apart so the timing code reads at once)."""
from pathlib import Path

LOADER_OBJECTIVES = ("mlm_random", "mlm_cand+ecb")
VARIANTS = ("stock", "stock_fused", "mlm_random", "mlm_cand+ecb", "mlm_random [loader]", "mlm_cand+ecb [loader]")


def masking_lines(rates: dict) -> list:
    """Markdown lines for ``masking_rates``."""
    from spacy_sciner.pft.stats import format_per_1k

    per_objective = "; ".join(f"`{o}`: {format_per_1k(r)}" for o, r in rates["masked_per_1k_tokens"].items())
    return [
        f"- masked pieces per 1,000 tokens, all {rates['sentences']} SciERC {rates.get('data', 'train')} sentences "
        f"({rates['candidates']} entities as candidates), budget 15%: {per_objective}",
        f"- SciERC entities no longer than their sentence's 15% budget: "
        f"{rates['entities_fitting_sequence_budget']:.1%}; masked whole as MLM_CAND in at least one of "
        f"50 draws: **{rates['entities_ever_masked_50_draws']:.1%}**",
    ]


def variant_rows(result: dict) -> list:
    """Markdown table: one row per variant."""
    header = [
        "| variant | tokens/s (wall) | steady tokens/s (wall) | tokens per CPU-s | sentences/s (wall) "
        "| median step wall / CPU (s) | predicted pieces / batch | per 1,000 tokens |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    return header + [
        f"| {n} | {result['tokens_per_s'][n]:.0f} | {result['tokens_per_s_steady'][n]:.0f} | "
        f"{result['tokens_per_cpu_s'][n]:.0f} | {result['sentences_per_s'][n]:.1f} | "
        f"{result['median_step_s'][n]:.2f} / {result['median_step_cpu_s'][n]:.2f} | "
        f"{result['mean_targets_per_batch'][n]:.1f} | {result['masked_per_1k_tokens_timed_batches'][n]:.1f} |"
        for n in VARIANTS
    ]


def pipeline_rows(pipeline: dict) -> list:
    """Markdown table: loader batches/s per worker count and objective."""
    header = [
        "| loader workers | " + " | ".join(f"{o} batches/s" for o in LOADER_OBJECTIVES) + " | start-up (s) "
        "| main-process CPU ms / batch |",
        "|---:|" + "---:|" * (len(LOADER_OBJECTIVES) + 2),
    ]
    return header + [
        f"| {w} | " + " | ".join(f"{pipeline[w][o]['batches_per_s']:.0f}" for o in LOADER_OBJECTIVES)
        + f" | {max(pipeline[w][o]['startup_s'] for o in LOADER_OBJECTIVES):.2f} | "
        + " / ".join(f"{pipeline[w][o]['main_process_cpu_ms_per_batch']:.2f}" for o in LOADER_OBJECTIVES) + " |"
        for w in pipeline
    ]


def markdown(result: dict, data: Path, n_windows: int, loader_batches: int) -> list:
    """The report's Markdown lines."""
    r = result
    speedup, fused, cand = (r[k] for k in ("speedup_mlm_random_vs_stock", "speedup_mlm_random_vs_stock_fused",
                                           "speedup_mlm_cand_ecb_vs_stock"))
    overhead, loader = r["step_overhead_cand_ecb_vs_mlm_random"], r["step_overhead_cand_ecb_vs_mlm_random_loader"]
    steady, mask_time = r["step_overhead_cand_ecb_vs_mlm_random_steady"], r["masking_s_per_batch"]
    return [
        "# PFT speed (benchmarks/pft_speed.py)", "",
        f"Encoder `{r['encoder']}` on {r['device']}, batch {r['batch_size']} sentences, {r['threads']} threads, "
        f"{r['rounds']} interleaved rounds x {r['steps_per_round']} steps per variant; {r['data']}; "
        f"[loader] variants: {r['step_workers']} DataLoader worker(s); steady state: rounds from round "
        f"{r['steady_from_round']} on (the first 10%, at least one, left out).", "",
        *variant_rows(r), "",
        f"- speed-up of our mlm_random step vs stock BertForMaskedLM (median of per-round ratios): "
        f"**{speedup['cpu']:.2f}x** in CPU time, {speedup['wall']:.2f}x wall (target >= 1.5x); "
        f"mlm_cand+ecb vs stock: {cand['cpu']:.2f}x CPU, {cand['wall']:.2f}x wall",
        f"- same optimizer (fused AdamW in both), i.e. the masked-positions-only projection alone: "
        f"**{fused['cpu']:.2f}x** CPU, {fused['wall']:.2f}x wall",
        f"- step-time overhead of mlm_cand+ecb vs our mlm_random (per-round median): "
        f"**{overhead['cpu'] * 100:+.1f}%** CPU, {overhead['wall'] * 100:+.1f}% wall (target <= 10%; "
        f"mlm_cand+ecb predicts fewer pieces when candidates do not fill the budget)",
        f"- the same overhead with the batches masked ahead by the loader ([loader] variants): "
        f"**{loader['cpu'] * 100:+.1f}%** CPU, {loader['wall'] * 100:+.1f}% wall; steady "
        f"state (rounds from {r['steady_from_round']}): in the step {steady['in_step']['cpu'] * 100:+.1f}% CPU, "
        f"{steady['in_step']['wall'] * 100:+.1f}% wall; loader "
        f"{steady['loader']['cpu'] * 100:+.1f}% CPU, {steady['loader']['wall'] * 100:+.1f}% wall",
        f"- masking alone: mlm_random {mask_time['mlm_random'] * 1e3:.2f} ms/batch, mlm_cand+ecb "
        f"{mask_time['mlm_cand+ecb'] * 1e3:.2f} ms/batch (CPU): the difference is "
        f"{r['masking_overhead_share_of_step'] * 100:.2f}% of an mlm_random step",
        *masking_lines(r["masking_rates_scierc"]), "",
        f"Data pipeline alone: the trainer's loader over all {n_windows} SciERC {data.stem} windows, "
        f"{loader_batches} batches of {r['batch_size']} per cell, batches/s after the first batch "
        "(0 workers: masking in the calling process; the main-process CPU per batch is what the "
        "trainer's process spends to receive one):", "",
        *pipeline_rows(r["loader_throughput"]), "",
        f"- load: before `{r['uptime_before']}`; after `{r['uptime_after']}` (uptime: a 1-min load near 2 "
        "means the 2 cores were busy with this run only)",
    ]

