"""Pieces of ``gpu_check.py``: data, device sync, stage timing, update timing, report."""
import json
import statistics
import time
from pathlib import Path
from typing import Callable, List, Optional, Tuple


def sync(gpu_id: int) -> None:
    """Wait for the GPU (torch and cupy streams), so wall clocks measure finished work."""
    if gpu_id < 0:
        return
    import cupy
    import torch

    torch.cuda.synchronize(gpu_id)
    cupy.cuda.get_current_stream().synchronize()


def write_corpus(read_scierc: Callable, data: Path, out: Optional[Path], n_texts: int, smoke: bool = False):
    """SciERC sentences as DocBins under ``out`` (train/dev/test), texts for the speed
    test (train, then dev and test, up to ``n_texts``) and PFT sentences (train tokens
    with their gold entities as candidates). Smoke: 40/20/20 sentences."""
    import spacy
    from spacy.tokens import DocBin

    vocab = spacy.blank("en").vocab
    docs = {split: list(read_scierc(data / f"{split}.json", vocab, spans_key="sc")) for split in ("train", "dev", "test")}
    if smoke:
        docs = {split: d[: 40 if split == "train" else 20] for split, d in docs.items()}
    texts = [doc.text for split in ("train", "dev", "test") for doc in docs[split]][:n_texts]
    if out is None:
        return None, texts, None
    out.mkdir(parents=True, exist_ok=True)
    for split, split_docs in docs.items():
        DocBin(docs=split_docs, store_user_data=True).to_disk(out / f"{split}.spacy")
    sentences = [
        {"tokens": [t.text for t in doc], "candidates": [[s.start, s.end, "gold"] for s in doc.spans["sc"]]}
        for doc in docs["train"]
    ]
    return out, texts, sentences


def pft_corpus(sentences: List[dict], path: Path) -> None:
    """The PFT candidate corpus as JSON lines (``sciner pft``'s JSONL input)."""
    with open(path, "w", encoding="utf8") as out:
        for sentence in sentences:
            out.write(json.dumps({"text": " ".join(sentence["tokens"]), **sentence}) + "\n")


def stage_breakdown(model: str, texts: List[str], batch_size: int, gpu_id: int, rounds: int = 2,
                    profile: bool = False) -> dict:
    """Seconds per stage over all texts, device-synchronised after each stage: the
    transformer, the span component's token vectors (its first step), the rest of its
    predict, and its set_annotations; under "minor_faults" the minor page faults (fresh
    memory pages the OS maps in; 0 where it does not count them) of the transformer, the
    token vectors alone, the whole predict (its token vectors included) and set_annotations,
    median of the rounds. With `profile`: a torch profile of the span component alone (predict +
    set_annotations over all texts) under "profile"."""
    import spacy
    from spacy.util import minibatch

    try:
        from spacy_sciner.spancat.tokvecs import predict_token_vectors
    except ImportError:  # an older checkout (--old-code): token vectors timed with predict
        predict_token_vectors = None

    nlp = spacy.load(model)
    transformer, spancat = nlp.get_pipe("transformer"), nlp.get_pipe("sciner_spancat")
    tok2vec = spancat.model.get_ref("tok2vec")
    totals = {"transformer": [], "token_vectors": [], "predict_rest": [], "set_annotations": []}
    fault_totals = {key: [] for key in ("transformer", "token_vectors", "predict", "set_annotations")}
    for _ in range(rounds):
        seconds, faults = dict.fromkeys(totals, 0.0), dict.fromkeys(fault_totals, 0)
        for batch in minibatch(texts, batch_size):
            docs = [nlp.make_doc(text) for text in batch]
            sync(gpu_id)
            t0, f0 = time.perf_counter(), minor_faults()
            transformer.set_annotations(docs, transformer.predict(docs))
            sync(gpu_id)
            t1, f1 = time.perf_counter(), minor_faults()
            if predict_token_vectors is not None:
                predict_token_vectors(tok2vec, docs)  # timed alone; predict computes it again
            sync(gpu_id)
            t2, f2 = time.perf_counter(), minor_faults()
            predictions = spancat.predict(docs)
            sync(gpu_id)
            t3, f3 = time.perf_counter(), minor_faults()
            spancat.set_annotations(docs, predictions)
            t4, f4 = time.perf_counter(), minor_faults()
            seconds["transformer"] += t1 - t0
            seconds["token_vectors"] += t2 - t1
            seconds["predict_rest"] += max(0.0, (t3 - t2) - (t2 - t1))
            seconds["set_annotations"] += t4 - t3
            # Faults are not subtracted: which call maps a page in depends on what the other freed.
            for key, count in (("transformer", f1 - f0), ("token_vectors", f2 - f1), ("predict", f3 - f2),
                               ("set_annotations", f4 - f3)):
                faults[key] += count
        for key in totals:
            totals[key].append(seconds[key])
        for key in fault_totals:
            fault_totals[key].append(faults[key])
    result = {key: statistics.median(values) for key, values in totals.items()}
    result["minor_faults"] = {key: int(statistics.median(values)) for key, values in fault_totals.items()}
    if profile:
        result["profile"] = _profile_spancat(nlp, texts, batch_size, gpu_id)
    return result


def minor_faults() -> int:
    """Minor page faults of this process so far; 0 where the OS does not count them."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _profile_spancat(nlp, texts: List[str], batch_size: int, gpu_id: int) -> dict:
    """Where the span component's inference time goes, over one pass through all texts:
    the Python functions with the most host time (cProfile; on a GPU the host is what
    waits) and, on a GPU, a torch profile: the counts of runtime calls that cost host
    time per call (kernel launches, copies, synchronisations) and the top device ops."""
    import cProfile
    import pstats

    from spacy.util import minibatch

    transformer, spancat = nlp.get_pipe("transformer"), nlp.get_pipe("sciner_spancat")
    batches = []
    for batch in minibatch(texts, batch_size):
        docs = [nlp.make_doc(text) for text in batch]
        transformer.set_annotations(docs, transformer.predict(docs))
        batches.append(docs)

    def run():
        for docs in batches:
            spancat.set_annotations(docs, spancat.predict(docs))

    profiler = cProfile.Profile()
    profiler.runcall(run)
    stats = pstats.Stats(profiler).stats  # {(file, line, name): (cc, ncalls, tottime, cumtime, callers)}
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:20]
    result = {"batches": len(batches), "calls": {},
              "top_python_by_tottime": [(f"{Path(f).name}:{line}({name})", n, round(tt * 1e3, 2), round(ct * 1e3, 2))
                                        for (f, line, name), (_, n, tt, ct, _) in top]}
    if gpu_id >= 0:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run()
        events = prof.key_averages()
        result["calls"] = {e.key: e.count for e in events
                           if any(word in e.key for word in ("Launch", "Memcpy", "Synchronize", "Malloc", "Memset"))}
        top_device = sorted(events, key=lambda e: getattr(e, "self_device_time_total", 0), reverse=True)[:15]
        result["top_by_device_time"] = [(e.key, e.count, round(getattr(e, "self_device_time_total", 0) / 1e3, 2))
                                        for e in top_device]
    return result


def train_speed(config_path: Path, encoder: str, train_path: Path, gpu_id: int, mixed: bool,
                updates: int = 40, batch_size: int = 16, profile: bool = False) -> dict:
    """Seconds per ``nlp.update`` of the sciner_spancat config with ``mixed_precision`` on
    or off: over a first pass through ``updates`` batches (every padded length new to the
    kernels and the allocator) and over a second pass through the same batches (steady
    state); optionally the torch profiler's top operators."""
    import torch
    from spacy.tokens import DocBin
    from spacy.training import Example
    from spacy.util import load_config, load_model_from_config, minibatch

    overrides = {"components.transformer.model.name": encoder,
                 "components.transformer.model.mixed_precision": mixed}
    config = load_config(config_path, overrides=overrides, interpolate=False)
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    docs = list(DocBin().from_disk(train_path).get_docs(nlp.vocab))
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in docs]
    optimizer = nlp.initialize(lambda: examples[:100])
    batches = [b for b in minibatch(examples * 4, batch_size)][:updates]
    if gpu_id >= 0:
        torch.cuda.reset_peak_memory_stats(gpu_id)
    passes = []
    for _ in range(2):
        times = []
        for batch in batches:
            sync(gpu_id)
            start = time.perf_counter()
            nlp.update(batch, sgd=optimizer, drop=0.1)
            sync(gpu_id)
            times.append(time.perf_counter() - start)
        passes.append(statistics.median(times))
    result = {"s_per_update": passes[1], "first_pass_s_per_update": passes[0], "updates_timed": len(batches),
              "batch_sentences": batch_size}
    if gpu_id >= 0:
        result["peak_gpu_memory_mib"] = torch.cuda.max_memory_allocated(gpu_id) / 2**20
    if profile and gpu_id >= 0:
        result["profile"] = _profile(nlp, optimizer, batches[:6])
    return result


def _profile(nlp, optimizer, batches) -> List[Tuple]:
    """Top operators by self CPU time and by self CUDA time over a few updates."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for batch in batches:
            nlp.update(batch, sgd=optimizer, drop=0.1)
    events = prof.key_averages()
    rows = []
    for key in ("self_cpu_time_total", "self_device_time_total"):
        top = sorted(events, key=lambda e: getattr(e, key, 0), reverse=True)[:12]
        rows.append({"by": key, "ops": [(e.key, e.count, round(e.self_cpu_time_total / 1e3, 2),
                                         round(getattr(e, "self_device_time_total", 0) / 1e3, 2)) for e in top]})
    return rows


def _stage_lines(stages: dict, where: str) -> List[str]:
    """The report's lines for one stage breakdown: seconds, page faults, implied ratio."""
    lines = ["", f"Stages, {where} (s over all texts, median of the rounds): "
             + ", ".join(f"{k} {v:.3f}" for k, v in stages.items() if k not in ("profile", "minor_faults"))]
    if stages.get("minor_faults"):
        lines.append("Minor page faults per pass (median of the rounds): "
                     + ", ".join(f"{k} {v:,}" for k, v in stages["minor_faults"].items()))
    if stages.get("transformer"):
        # The ratio the stage times imply, free of the bare transformer's own
        # round-to-round spread (the words/s ratios above divide two timings).
        span = sum(stages.get(k, 0.0) for k in ("token_vectors", "predict_rest", "set_annotations"))
        lines.append(f"Transformer / (transformer + span component), from the stages: "
                     f"{stages['transformer'] / (stages['transformer'] + span):.3f}")
    return lines


def markdown_report(report: dict) -> str:
    """The JSON report as a short Markdown page."""
    args = report.get("args", {})
    config = args.get("config", "sciner_spancat")
    if args.get("model") not in (None, "None") and "train" in str(args.get("skip", "")):
        config = f"the given pipeline {args['model']}"  # not trained here: --config does not apply
    lines = ["# gpu_check", "", f"Machine: `{json.dumps(report['machine'])}`", "", f"Config: `{config}`", ""]
    if report.get("label"):
        lines[1:1] = ["", report["label"]]
    if "train" in report:
        t = report["train"]
        lines.append(f"- train: {t['updates']} updates in {t['seconds']:.0f} s (incl. start-up), "
                     f"{t['updates_per_s']:.1f} updates/s between the two evaluations")
    if "resume" in report:
        r = report["resume"]
        lines.append(f"- resume: `sciner train` stopped before update {r['crashed_before']} of {r['updates']}, resumed "
                     f"after update {r['resumed_after']}: largest weight difference from an uninterrupted run "
                     f"{r['max_abs_diff']:.3g}{' (identical)' if r['identical'] else ''}")
    if "calibrate_evaluate" in report:
        c = report["calibrate_evaluate"]
        lines.append(f"- calibrate {c['calibrate_seconds']:.0f} s, evaluate {c['evaluate_seconds']:.0f} s; "
                     f"test spans F {c['spans_sc_f']}, ents F {c['ents_f']}")
    if "speed" in report:
        lines += ["", "| code | batch | max_batch_items | transformer words/s | pipeline words/s | ratio |",
                  "|---|---|---|---|---|---|"]
        for code in ("current", "old_code"):
            speed = report["speed"].get(code, {})
            items = speed.get("max_batch_items", "4096")  # reports before it was recorded: 4096
            for key, row in sorted((k, v) for k, v in speed.items() if k.startswith("batch_")):
                lines.append(f"| {code} | {key[6:]} | {items} | {row['transformer_wps']:,.0f} | {row['pipeline_wps']:,.0f} | "
                             f"{row['ratio']:.2f} |")
        for code in ("current", "old_code"):
            speed = report["speed"].get(code, {})
            for key in sorted((k for k in speed if k.startswith("stages_batch_")), key=lambda k: int(k[13:])):
                lines += _stage_lines(speed[key], f"{code}, batch {key[13:]}")
            stages = speed.get("stages", {})
            lines += _stage_lines(stages, f"{code}, largest batch") if stages else []
            if stages.get("profile"):
                calls = stages["profile"]["calls"]
                lines.append(f"Span component, one profiled pass ({stages['profile']['batches']} batches), runtime calls: "
                             + (", ".join(f"{k} {v:,}" for k, v in sorted(calls.items())) or "none recorded")
                             + "; most host time (cProfile, own ms): "
                             + ", ".join(f"`{name}` {own:,.0f}" for name, _, own, _ in stages["profile"]["top_python_by_tottime"][:6]))
    if "pft" in report:
        lines += ["", "| PFT objective | tokens/s (run) | tokens/s (steady) | from step |", "|---|---|---|---|"]
        for name, row in report["pft"].items():
            if isinstance(row, dict):
                lines.append(f"| {name} | {row['tokens_per_s']:,.0f} | {row['tokens_per_s_steady'] or 0:,.0f} | "
                             f"{row['steady_from_step']} |")
        if "cand_ecb_overhead" in report["pft"]:
            lines.append(f"\nmlm_cand+ecb overhead vs mlm_random (steady): {report['pft']['cand_ecb_overhead']:+.1%}")
    if "mixed_precision" in report:
        lines += ["", "| encoder, precision | s/update (same batches again) | first pass | peak MiB |",
                  "|---|---|---|---|"]
        for name, row in report["mixed_precision"].items():
            if isinstance(row, dict):
                first = row.get("first_pass_s_per_update")
                lines.append(f"| {name} | {row['s_per_update']:.4f} | {f'{first:.4f}' if first else '-'} | "
                             f"{row.get('peak_gpu_memory_mib', 0):,.0f} |")
            else:
                lines.append(f"| {name} (ratio) | {row:.2f} | | |")
    if report.get("skipped"):
        lines += ["", "Skipped: " + ", ".join(f"{k} ({v})" for k, v in report["skipped"].items())]
    if report.get("errors"):
        lines += ["", "Errors:"] + [f"- {k}: {v[:500]}" for k, v in report["errors"].items()]
    return "\n".join(lines) + "\n"
