"""How fast FinTradeBench RAG starts from a cold cache (run by hand).

    .venv/bin/python bench/rag_startup.py index [DATA_DIR]          # every filing of every ticker
    .venv/bin/python bench/rag_startup.py first-context [DATA_DIR]  # the first question's retrieval alone
    .venv/bin/python bench/rag_startup.py first-answer [DATA_DIR] [--model embedded] [-o KEY=VALUE ...]

DATA_DIR defaults to $FINHARNESS_DATA_DIR, else ../shared/data beside the checkout. Both run in a fresh
cache folder ($FINHARNESS_CACHE) in which the model files of ~/.cache/finharness are linked, so
nothing of retrieval is cached (no parsed filing, index or embedding) and nothing else is rebuilt.
Wall seconds are printed beside the process's CPU seconds (on a shared machine wall time includes
waiting for the CPU; CPU seconds / cores is what an idle machine would take at best); say the load
(`uptime`) with the figures.

``index``: the retrieval index of each ticker over all of its filings, built as a RAG run builds it
(build_index with the default dense encoder: parse, chunk, BM25, MiniLM embeddings), then where the time
went, measured again piece by piece on the same filings: HTML/XBRL parsing, chunking, BM25, WordPiece
tokenization and the ONNX encoder (on every n-th distinct text, ~640 of them, scaled to all).
``--profile-only`` skips the build (minutes of CPU) and gives the pieces alone.

``first-context``: the retrieval of the first question such a run asks (F1, Apple as of 2025-09-30), cold,
in this process: what a RAG run pays before its first model call.

``first-answer``: ``finharness run fintradebench --mode rag -o per_category=1`` (one question per
category) as a subprocess; the run store is polled, so the figures are the seconds from the start of
the command to the first model call sent (its stored time less its latency: the first question's
retrieval is done), to the first model call answered and stored (the first answer), to the first
sample done, and to the end, with the command's exit status. How long the first answer takes after
its context is ready is the model's generation (``-o max_tokens=N`` bounds it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DATA_DIR
from retrieval_bench import Clock

RETRIEVAL_CACHES = ("retrieval", "filings")
"""The cache folders this bench leaves out of the fresh cache."""


def fresh_cache() -> Path:
    """A temporary cache folder holding links to everything in the user's cache but retrieval's."""
    from finharness.data.registry import cache_dir

    source = cache_dir()
    fresh = Path(tempfile.mkdtemp(prefix="finharness-rag-startup-"))
    for entry in source.iterdir() if source.is_dir() else ():
        if entry.name not in RETRIEVAL_CACHES:
            (fresh / entry.name).symlink_to(entry)
    return fresh


def index_all(data_dir: Path, build: bool = True) -> None:
    os.environ["FINHARNESS_CACHE"] = str(fresh_cache())
    from finharness.markets.filings import Filing, discover_filings, extract_text, split_sections
    from finharness.retrieval.bm25 import BM25Index
    from finharness.retrieval.chunking import ChunkingParams, chunk_filing
    from finharness.retrieval.dense import default_encoder
    from finharness.retrieval.index import build_index, dense_text

    refs = discover_filings(data_dir)
    tickers = sorted({ref.ticker for ref in refs})
    encoder = default_encoder()
    print(f"{len(refs)} filings of {len(tickers)} tickers; encoder {encoder.name} (batch, threads: "
          f"FINHARNESS_DENSE_THREADS={os.environ.get('FINHARNESS_DENSE_THREADS', '2')}); "
          f"cores {os.cpu_count()}; load {os.getloadavg()[0]:.2f}")
    children = 0
    if not build:
        print("(index build skipped: --profile-only)")
    with Clock() as total:
        for ticker in tickers if build else ():
            mine = [ref for ref in refs if ref.ticker == ticker]
            with Clock() as clock:
                index = build_index(mine, encoder=encoder)
            children += len(index.children)
            print(f"  {ticker}: {len(mine)} filings, {len(index.children)} children: {clock}", flush=True)
    if build:
        print(f"index build, all {len(refs)} filings, {children} children: {total}  (load {os.getloadavg()[0]:.2f})")

    print("where the time goes (the same filings again, piece by piece):")
    with Clock() as clock:
        parsed = []
        for ref in refs:
            raw = ref.path.read_bytes()
            parsed.append((ref, *extract_text(raw, ref.path)))
    print(f"  HTML/XBRL parsing {clock}")
    with Clock() as clock:
        filings = [Filing(ref=ref, period_end=period, sections=split_sections(lines), sha256="")
                   for ref, period, lines in parsed]
        parents = [parent for filing in filings for parent in chunk_filing(filing, ChunkingParams())]
    texts = [parent.indexed_text(child) for parent in parents for child in parent.children]
    dense = list(dict.fromkeys(dense_text(parent, child) for parent in parents for child in parent.children))
    print(f"  sections + chunking {clock}  ({len(texts)} children, {len(dense)} distinct dense texts)")
    with Clock() as clock:
        BM25Index.build(texts)
    print(f"  BM25 (one index over all) {clock}")
    tokenizer = encoder._tokenizer
    with Clock() as clock:
        pieces = sum(len(e.ids) for e in tokenizer.encode_batch(dense))
    print(f"  WordPiece tokenization {clock}  ({pieces} pieces, {pieces / len(dense):.0f} a text, cut at "
          f"{encoder.max_tokens})")
    sample = dense[:: max(1, len(dense) // 640)]
    with Clock() as clock:
        encoder.encode(sample)
    per = clock.cpu / len(sample)
    print(f"  ONNX encoder on {len(sample)} texts {clock}: {per * 1000:.1f} ms cpu a text, "
          f"~{per * len(dense):.0f} s cpu for all {len(dense)}")


def first_context(data_dir: Path) -> None:
    """The retrieval of a per_category=1 run's first question (F1), from a cold cache, in this process."""
    os.environ["FINHARNESS_CACHE"] = str(fresh_cache())
    import asyncio

    from finharness.benchmarks.fintradebench.task import FinTradeBenchTask

    task = FinTradeBenchTask(mode="rag", per_category=1)
    first = task.load(data_dir)[0]
    print(f"{first.id}: {first.input['question']!r}, tickers {first.input['tickers']}, as of {first.input['as_of']}; "
          f"cores {os.cpu_count()}; load {os.getloadavg()[0]:.2f}")
    with Clock() as clock:
        context, info = asyncio.run(task.rag_context(first))
    filings = {item["source"].split("#")[0] for item in info["items"] if item["track"] == "filings"}
    print(f"first question's context, cold: {clock}; {len(info['items'])} items from {len(filings)} filing(s); "
          f"load {os.getloadavg()[0]:.2f}")


def first_answer(data_dir: Path, model: str, judge: str, options: list[str]) -> None:
    cache = fresh_cache()
    out = Path(tempfile.mkdtemp(prefix="finharness-rag-first-")) / "run"
    command = [sys.executable, "-m", "finharness", "run", "fintradebench", "--model", model, "--judge", judge,
               "--mode", "rag", "-o", "per_category=1", *sum((["-o", o] for o in options), []),
               "--data-dir", str(data_dir), "--out", str(out)]
    print("FINHARNESS_CACHE=" + str(cache), " ".join(command[1:]))
    print(f"cores {os.cpu_count()}; load {os.getloadavg()[0]:.2f}")
    env = {**os.environ, "FINHARNESS_CACHE": str(cache)}
    started = time.time()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_sent = first_call = first_sample = None  # epoch seconds
    while True:
        done = process.poll() is not None
        store = out / "store.sqlite"
        if store.is_file() and (first_call is None or first_sample is None):
            try:
                with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
                    first_call = first_call or db.execute("SELECT min(created) FROM calls").fetchone()[0]
                    first_sample = first_sample or db.execute("SELECT min(created) FROM samples").fetchone()[0]
            except sqlite3.Error:
                pass
        if done:
            break
        time.sleep(0.5)
    ended = time.time()
    if (out / "store.sqlite").is_file():  # over every call: one sent earlier may have been stored later
        with sqlite3.connect(f"file:{out / 'store.sqlite'}?mode=ro", uri=True) as db:
            first_sent = db.execute("SELECT min(created - latency_s) FROM calls").fetchone()[0]
    stderr = process.stderr.read() if process.stderr else ""
    retrieval = [line for line in stderr.splitlines() if line.startswith("retrieval:")]
    print("\n".join(f"  {line}" for line in retrieval[-4:]))

    def since(moment):
        return "-" if moment is None else f"{moment - started:.1f} s"

    results = out / "results.json"
    status = json.loads(results.read_text()).get("status") if results.is_file() else "no results"
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"first model call sent (first context ready) {since(first_sent)}; first answer (first model call "
          f"stored) {since(first_call)}; first sample done {since(first_sample)}; "
          f"cpu of the run and its engine {usage.ru_utime + usage.ru_stime:.0f} s; "
          f"end {ended - started:.1f} s (exit {process.returncode}, {status}); load {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    index = sub.add_parser("index", help="index every filing of every ticker, cold")
    index.add_argument("data_dir", nargs="?", default=str(DATA_DIR))
    index.add_argument("--profile-only", action="store_true",
                       help="skip the build; time the pieces (the encoder on a sample) and add them up")
    context = sub.add_parser("first-context", help="the first question's retrieval alone, cold")
    context.add_argument("data_dir", nargs="?", default=str(DATA_DIR))
    first = sub.add_parser("first-answer", help="a 3-question RAG run from a cold retrieval cache")
    first.add_argument("data_dir", nargs="?", default=str(DATA_DIR))
    first.add_argument("--model", default="embedded")
    first.add_argument("--judge", default="embedded")
    first.add_argument("-o", dest="options", action="append", default=[], help="task option KEY=VALUE")
    args = parser.parse_args()
    if args.what == "index":
        index_all(Path(args.data_dir), build=not args.profile_only)
    elif args.what == "first-context":
        first_context(Path(args.data_dir))
    else:
        first_answer(Path(args.data_dir), args.model, args.judge, args.options)


if __name__ == "__main__":
    main()
