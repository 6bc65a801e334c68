"""P9: generation throughput of the llama.cpp engine with 1, 4 and 8 sequences decoded together (by hand).

    .venv/bin/python bench/engine_batching.py [--model embedded] [--prompts 8] [--max-tokens 64] [--threads 2]

The same chat prompts, greedy, side by side in one run: llama-cpp-python's own `create_completion` one
prompt at a time in this process (the engine before continuous batching), then the engine process with
`parallel=1` (one request at a time), `parallel=4` and `parallel=8` (every prompt submitted at once).
Throughput is completion tokens / wall time of the whole set. Batched greedy texts are compared with the
engine's single-stream ones: llama.cpp's CPU kernels round differently for different batch shapes, so a
near tie between two tokens can go the other way (counted, and where the first difference falls).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from finharness.backends import embedded
from finharness.core.types import GenerateParams, GenerateRequest, messages

PROMPTS = (
    "Explain what a bond's yield to maturity is and how it differs from its coupon rate.",
    "Describe three ways a company can finance a new factory, with one risk of each.",
    "What does a rising debt-to-equity ratio tell an investor? Give an example.",
    "Explain the difference between cash flow and net income for a small business.",
    "请解释什么是市盈率，以及投资者如何使用它。",
    "Why do central banks raise interest rates when inflation is high? Explain step by step.",
    "Describe how an index fund works and why its fees are usually low.",
    "What is working capital, and why does a retailer care about it before the holidays?",
)


def _requests(count: int, max_tokens: int) -> list[GenerateRequest]:
    chosen = [PROMPTS[i % len(PROMPTS)] for i in range(count)]
    return [GenerateRequest(messages(("user", text)), GenerateParams(max_tokens=max_tokens)) for text in chosen]


def in_process(model: str, requests: list[GenerateRequest], threads: int) -> dict:
    """llama-cpp-python's create_completion, one prompt at a time (no child process, no batching)."""
    import llama_cpp

    backend = embedded.from_spec(f"{model}?threads={threads}")
    llm = llama_cpp.Llama(model_path=str(backend.model_path), n_ctx=4096, n_threads=threads, verbose=False)
    texts, tokens = [], 0
    started = time.perf_counter()
    for request in requests:
        _, prompt = backend.render_tokens(request)
        result = llm.create_completion(prompt, max_tokens=request.params.max_tokens, temperature=0.0, top_p=1.0,
                                       top_k=0, min_p=0.0, repeat_penalty=1.0)
        texts.append(result["choices"][0]["text"])
        tokens += result["usage"]["completion_tokens"]
    wall = time.perf_counter() - started
    llm.close()
    backend.close()
    return {"texts": texts, "tokens": tokens, "wall_s": wall}


def engine(model: str, requests: list[GenerateRequest], threads: int, parallel: int) -> dict:
    backend = embedded.from_spec(f"{model}?threads={threads}&parallel={parallel}")
    asyncio.run(backend.generate(GenerateRequest(messages(("user", "Hi")), GenerateParams(max_tokens=1))))  # load

    async def everything() -> list:
        limit = asyncio.Semaphore(parallel)

        async def one(request: GenerateRequest):
            async with limit:
                return await backend.generate(request)

        return await asyncio.gather(*(one(r) for r in requests))

    started = time.perf_counter()
    replies = asyncio.run(everything())
    wall = time.perf_counter() - started
    backend.close()
    return {"texts": [r.text for r in replies], "tokens": sum(r.completion_tokens for r in replies), "wall_s": wall}


def first_difference(a: str, b: str) -> int | None:
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def measure(model: str, prompts: int, max_tokens: int, threads: int) -> tuple[dict, dict]:
    """(summary per run, texts per run) of the four runs side by side."""
    requests = _requests(prompts, max_tokens)
    runs = {"llama-cpp-python in-process, 1 at a time": in_process(model, requests, threads)}
    for parallel in (1, 4, 8):
        runs[f"engine parallel={parallel}"] = engine(model, requests, threads, parallel)
    single = runs["engine parallel=1"]
    summary = {}
    for name, run in runs.items():
        rate = run["tokens"] / run["wall_s"]
        summary[name] = {"tokens": run["tokens"], "wall_s": round(run["wall_s"], 2), "tok_s": round(rate, 1),
                         "vs_single": round(rate / (single["tokens"] / single["wall_s"]), 2),
                         "same_as_single": sum(a == b for a, b in zip(run["texts"], single["texts"])),
                         "first_difference_at_char": [first_difference(a, b) for a, b in
                                                      zip(run["texts"], single["texts"])]}
    return summary, {name: run["texts"] for name, run in runs.items()}


def p9(model: str = "embedded", prompts: int = 8, max_tokens: int = 64, threads: int | None = None):
    """The bench/run_all.py row: the better of parallel=4 and 8 against single-stream, same texts as condition."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from benchlib import Goal, Row

    threads = threads or os.cpu_count() or 1
    summary, texts = measure(model, prompts, max_tokens, threads)
    best = max(("engine parallel=4", "engine parallel=8"), key=lambda name: summary[name]["vs_single"])
    same = summary[best]["same_as_single"] / prompts
    single = summary["engine parallel=1"]
    return Row("P9", f"generation, {prompts} prompts x {max_tokens} tokens, 1 vs 4 vs 8 sequences",
               f"{best}: {summary[best]['tok_s']} tok/s", f"single stream {single['tok_s']} tok/s",
               summary[best]["vs_single"], Goal(">=", 1.6), condition=f"same greedy text {same:.0%}",
               condition_met=same >= 0.9, details={"runs": summary, "texts": texts, "threads": threads})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    summary, texts = measure(args.model, args.prompts, args.max_tokens, args.threads)
    print(f"{args.prompts} prompts x {args.max_tokens} new tokens, {args.model}, {args.threads} threads")
    print(f"{'':44} {'tokens':>6} {'wall s':>7} {'tok/s':>6} {'x single':>8} {'same text':>9}")
    for name, row in summary.items():
        print(f"{name:44} {row['tokens']:6d} {row['wall_s']:7.1f} {row['tok_s']:6.1f} {row['vs_single']:8.2f} "
              f"{row['same_as_single']:>5}/{args.prompts}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"args": vars(args), "runs": summary, "texts": texts}, handle, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
