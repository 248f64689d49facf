"""Candidate miner: quality per source (Tri-Train Table 5), speed and memory.

1. Quality: for SciERC and BioNLP13CG, mine the train+dev text (labels hidden; SciERC
   abstracts as documents, BioNLP13CG sentences) with the dictionary = the training
   entities only, then annotate dev (gold tokens) and compare the candidate spans of each
   source, and of the merged set, with the gold dev entity spans (exact boundaries).
2. Dictionary scan: MB/s (wall and per CPU second) of the miner's dictionary pass with a
   100k-term automaton (OpenBEL names) over all aux text, one process: batches of 1000 raw
   lines -> tokens (regex or whitespace tokenizer) -> ``TermDictionary.match_many`` (marked
   string, Aho-Corasick, token-boundary checks); the same on already tokenized lines; and
   pyahocorasick iterating alone over the same text, for reference.
3. Whole mining of ../shared/data/aux (all three sources, OpenBEL dictionary) with
   ``n_process`` 2 and 1, alternating twice (ratio measured in the same run).
4. Peak memory (VmHWM of a fresh process, n_process=1) mining every 4th aux line (1x)
   vs all aux lines (4x), and build-corpus (top 30k) time over all aux text.

    python benchmarks/mining_bench.py            # writes benchmarks/results/mining.{json,md}
    python benchmarks/mining_bench.py --quick    # quality only (minutes less)
"""
import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import spacy

from spacy_sciner.corpora.conll import read_conll
from spacy_sciner.corpora.scierc import read_scierc
from spacy_sciner.mining.candidates import SOURCES, annotate
from spacy_sciner.mining.dictionary import TermDictionary
from spacy_sciner.mining.miner import MinerConfig, mine
from spacy_sciner.mining.text import tokenize

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
AUX = sorted(glob.glob(str(DATA / "aux" / "*" / "text.txt")))
OPENBEL = sorted(glob.glob(str(DATA / "gazetteers" / "openbel" / "*.bel*")))


def load_gold(name, vocab):
    if name == "scierc":
        train = list(read_scierc(DATA / "scierc" / "train.json", vocab, doc_unit="document"))
        dev = list(read_scierc(DATA / "scierc" / "dev.json", vocab, doc_unit="document"))
    else:
        train = list(read_conll(DATA / "BioNLP13CG" / "train.tsv", vocab))
        dev = list(read_conll(DATA / "BioNLP13CG" / "dev.tsv", vocab))
    return train, dev


def quality(name, seed=0):
    """Precision/recall of candidates per source vs gold dev spans."""
    vocab = spacy.blank("en").vocab
    train, dev = load_gold(name, vocab)
    dictionary = TermDictionary(case="smart")
    load = dictionary.add_many((s.text for d in train for s in d.spans["sc"]), "dict")
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "train_dev.txt"
        with open(text, "w", encoding="utf8") as out:
            for doc in train + dev:  # labels hidden: only the tokens are written
                for sent in doc.sents:
                    out.write(" ".join(t.text for t in sent) + "\n")
                out.write("\n")  # a blank line ends a document (SciERC abstract)
        cfg = MinerConfig(tokenizer="whitespace", doc_boundary="blank", split_sentences=False,
                          seed=seed, min_count=3)
        start = time.perf_counter()
        table, report = mine([str(text)], dictionary, cfg, n_process=1, progress=False)
        seconds = time.perf_counter() - start
    # Dev annotation: mined table (dict rows = training entities found, pattern and phrase
    # rows) plus all training entities, plus acronyms found in each dev document.
    mined = table.to_dictionary("smart", SOURCES, min_quality=cfg.threshold)
    for term, sources, case_sensitive in dictionary.to_list():
        mined.add(term, sources, case_sensitive=case_sensitive)
    gold, found = set(), {s: set() for s in SOURCES}
    for i, doc in enumerate(dev):
        gold.update((i, s.start, s.end) for s in doc.spans["sc"])
        sents = [[t.text for t in sent] for sent in doc.sents]
        offsets = [sent.start for sent in doc.sents]
        for off, spans in zip(offsets, annotate(sents, mined, acronyms=True, overlap="all")):
            for start, end, sources in spans:
                for source in sources.split("|"):
                    found[source].add((i, off + start, off + end))
    found["merged"] = set().union(*(found[s] for s in SOURCES))
    # "Keep the top l% most frequent candidates" (Tri-Train §4.4.6): the merged set from
    # the frequency-sorted table cut at l%, plus the acronyms of each dev document.
    top = {}
    for percent in (50, 25, 10):
        cut = table.top_percent(percent).to_dictionary("smart", SOURCES, min_quality=cfg.threshold)
        spans = set()
        for i, doc in enumerate(dev):
            sents = [[t.text for t in sent] for sent in doc.sents]
            offsets = [sent.start for sent in doc.sents]
            for off, found_spans in zip(offsets, annotate(sents, cut, acronyms=True, overlap="all")):
                spans.update((i, off + a, off + b) for a, b, _ in found_spans)
        hits = len(spans & gold)
        top[f"top_{percent}%"] = {"candidates": len(spans), "correct": hits,
                                  "precision": round(hits / max(len(spans), 1), 4),
                                  "recall": round(hits / max(len(gold), 1), 4)}
    rows = {}
    for source, spans in found.items():
        hits = len(spans & gold)  # exact (doc, start, end) match with a gold dev span
        rows[source] = {"candidates": len(spans), "correct": hits,
                        "precision": round(hits / max(len(spans), 1), 4),
                        "recall": round(hits / max(len(gold), 1), 4)}
    return {"gold_dev_spans": len(gold), "train_terms": load.added, "mining_seconds": round(seconds, 2),
            "table_by_source": report["by_source"], "phrase_model": report.get("phrase_model", {}).get("model"),
            "sources": dict(rows, **top)}


def openbel_dictionary(limit=None):
    dictionary = TermDictionary(case="smart")
    for path in OPENBEL:
        dictionary.load_gazetteer(path)
    if limit is not None and len(dictionary) > limit:
        dictionary = TermDictionary.from_list(dictionary.to_list()[:limit])
    return dictionary


def _timed(fn):
    """(result, wall seconds, CPU seconds of this process) of fn()."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - start, time.process_time() - cpu


def dictionary_scan():
    dictionary = openbel_dictionary(limit=100_000)
    automaton, build, _ = _timed(lambda: dictionary.automaton)
    lines = [line for path in AUX for line in open(path, encoding="utf8").read().splitlines()]
    mb = sum(len(line.encode("utf8")) for line in lines) / 1e6
    res = {"terms": len(dictionary), "build_seconds": round(build, 2), "megabytes": round(mb, 2)}
    # On a shared machine wall time includes waiting for a core; CPU time does not.
    # raw lines, regex tokenizer: the miner's path on raw text (tokenizing included);
    # raw lines, whitespace tokenizer: the miner's path on pre-tokenized text;
    # token lists: the component's path (tokens already there, e.g. from a Doc).
    # Batches of 1000 lines, as the miner hands them to TermDictionary.match_many.
    batches = [lines[i:i + 1000] for i in range(0, len(lines), 1000)]
    token_batches = [[tokenize(line) for line in batch] for batch in batches]

    def scan(tokenizer):
        return sum(len(m) for batch in batches
                   for m in dictionary.match_many([tokenize(line, tokenizer) for line in batch], clean=True))

    runs = {
        "regex": lambda: scan("regex"),
        "whitespace": lambda: scan("whitespace"),
        "tokens": lambda: sum(len(m) for batch in token_batches for m in dictionary.match_many(batch, clean=True)),
        # pyahocorasick alone (lower-cased, space-padded lines, every hit), for reference.
        "automaton_only": lambda: sum(1 for line in lines for _ in automaton.iter(f" {line.lower()} ")),
    }
    for name, run in runs.items():
        found, wall, cpu = _timed(run)
        res[name] = {"matches_or_hits": found, "seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                     "mb_per_second": round(mb / wall, 2), "mb_per_cpu_second": round(mb / cpu, 2)}
    return res


def _cpu_with_children():
    self_, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_.ru_utime + self_.ru_stime + children.ru_utime + children.ru_stime


def whole_aux(n_process):
    dictionary = openbel_dictionary()
    start, cpu = time.perf_counter(), _cpu_with_children()
    table, report = mine(AUX, dictionary, MinerConfig(), n_process=n_process, progress=False)
    return {"n_process": n_process, "seconds": round(time.perf_counter() - start, 2),
            "cpu_seconds_all_processes": round(_cpu_with_children() - cpu, 2),
            "lines": report["lines"], "tokens": report["tokens"], "megabytes": round(report["chars"] / 1e6, 2),
            "candidates": len(table), "by_source": report["by_source"], "dictionary_terms": len(dictionary),
            "lines_per_second": report["lines_per_second"]}


# VmHWM (peak RSS) of the fresh process: ru_maxrss would carry the parent's peak over exec.
MEMORY_SCRIPT = """
import re, sys, time
from spacy_sciner.mining.miner import MinerConfig, mine
start = time.perf_counter()
table, report = mine([sys.argv[1]], None, MinerConfig(), n_process=1, progress=False)
hwm = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(hwm, report["lines"], report["tokens"], len(table), round(time.perf_counter() - start, 2))
"""


def memory(tmp):
    """Peak RSS of mining 1x (every 4th aux line) vs 4x (all aux lines) in fresh processes."""
    lines = [line for path in AUX for line in open(path, encoding="utf8")]
    results = {}
    for label, subset in (("1x", lines[::4]), ("4x", lines)):
        path = Path(tmp) / f"aux_{label}.txt"
        path.write_text("".join(subset), encoding="utf8")
        out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(path)], capture_output=True,
                             text=True, check=True).stdout.split()
        results[label] = {"peak_rss_mb": round(int(out[0]) / 1024, 1), "lines": int(out[1]),
                          "tokens": int(out[2]), "candidates": int(out[3]), "seconds": float(out[4])}
    results["ratio_4x_over_1x"] = round(results["4x"]["peak_rss_mb"] / results["1x"]["peak_rss_mb"], 2)
    return results


def build_corpus_time(tmp):
    table = Path(tmp) / "aux.tsv"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "spacy_sciner", "mine", *AUX, "-o", str(table), "--n-process", "2",
                    "--no-progress"], check=True, capture_output=True)
    mine_cli = time.perf_counter() - start
    start = time.perf_counter()
    out = Path(tmp) / "pft.spacy"
    subprocess.run([sys.executable, "-m", "spacy_sciner", "build-corpus", *AUX, "-c", str(table), "-o", str(out),
                    "--n", "30000", "--n-process", "2", "--no-progress"], check=True, capture_output=True)
    report = json.loads(Path(f"{out}.report.json").read_text())
    return {"mine_cli_seconds_no_dictionary": round(mine_cli, 2), "build_corpus_seconds": round(time.perf_counter() - start, 2),
            "sentences_seen": report["sentences_seen"], "selected": report["selected"],
            "candidates_in_selection": report["candidates_in_selection"]}


def to_markdown(res):
    lines = ["# Candidate miner benchmark", "", f"Load at start: `{res['uptime_start']}`; at end: `{res['uptime_end']}`",
             "", "## Candidate quality vs gold dev spans (Tri-Train Table 5 analysis)", "",
             "Mined on train+dev text (labels hidden), dictionary = training entities only, exact span match; "
             "top_l% rows: merged candidates from the l% most frequent rows of the mined table only.", "",
             "| data set | source | candidates | correct | precision | recall |", "|---|---|---:|---:|---:|---:|"]
    for name, q in res["quality"].items():
        for source, row in q["sources"].items():
            lines.append(f"| {name} | {source} | {row['candidates']} | {row['correct']} | {row['precision']:.3f} | {row['recall']:.3f} |")
    if "scan" in res:
        s = res["scan"]
        lines += ["", "## Speed and memory", "",
                  f"Dictionary scan: {s['terms']} OpenBEL terms, all aux text ({s['megabytes']} MB), one process.", "",
                  "| scan | MB/s wall | MB per CPU second |", "|---|---:|---:|"]
        names = {"regex": "raw lines, regex tokenizer (raw text)", "whitespace": "raw lines, whitespace tokenizer (pre-tokenized text)",
                 "tokens": "already tokenized lines (match_many only)", "automaton_only": "pyahocorasick iteration alone (reference)"}
        for key, label in names.items():
            lines.append(f"| {label} | {s[key]['mb_per_second']} | {s[key]['mb_per_cpu_second']} |")
        lines += ["", "| measurement | value |", "|---|---:|"]
        for run in res["whole_aux"]:
            lines.append(f"| whole aux mining ({run['lines']} lines, {run['tokens']} tokens), n_process={run['n_process']}, s wall | {run['seconds']} |")
            lines.append(f"| same, CPU seconds of all processes | {run['cpu_seconds_all_processes']} |")
        lines.append(f"| speed-up 2 vs 1 process (mean of the two runs each) | {res['speedup_2_over_1']} |")
        m = res["memory"]
        lines += [f"| peak RSS mining 1x ({m['1x']['lines']} lines), MB | {m['1x']['peak_rss_mb']} |",
                  f"| peak RSS mining 4x ({m['4x']['lines']} lines), MB | {m['4x']['peak_rss_mb']} |",
                  f"| memory ratio 4x / 1x | {m['ratio_4x_over_1x']} |",
                  f"| CLI mine, all aux, 2 processes (no dictionary), s | {res['build_corpus']['mine_cli_seconds_no_dictionary']} |",
                  f"| build-corpus top 30k (2 processes) of {res['build_corpus']['sentences_seen']} sentences, s | {res['build_corpus']['build_corpus_seconds']} |"]
    return "\n".join(lines) + "\n"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="quality only")
    args = parser.parse_args()
    res = {"uptime_start": uptime(), "cpu_count": os.cpu_count(), "seed": 0}
    res["quality"] = {name: quality(name) for name in ("scierc", "bionlp13cg")}
    print(json.dumps(res["quality"], indent=1), file=sys.stderr)
    if not args.quick:
        res["scan"] = dictionary_scan()
        print(res["scan"], file=sys.stderr)
        # Alternating 2, 1, 2, 1 processes: the machine is shared, its load drifts.
        res["whole_aux"] = [whole_aux(n) for n in (2, 1, 2, 1)]
        mean = {n: sum(r["seconds"] for r in res["whole_aux"] if r["n_process"] == n) / 2 for n in (1, 2)}
        res["speedup_2_over_1"] = round(mean[1] / mean[2], 2)
        print(res["whole_aux"], file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            res["memory"] = memory(tmp)
            res["build_corpus"] = build_corpus_time(tmp)
    res["uptime_end"] = uptime()
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    (RESULTS / f"mining{suffix}.json").write_text(json.dumps(res, indent=2) + "\n")
    (RESULTS / f"mining{suffix}.md").write_text(to_markdown(res))
    print(to_markdown(res))


if __name__ == "__main__":
    main()
