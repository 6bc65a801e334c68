"""P4: generation throughput of the `openai:` backend against a local llama.cpp server, vs the server's own rate.

    .venv/bin/python bench/openai_throughput.py                      # llama_cpp.server on the embedded model
    .venv/bin/python bench/openai_throughput.py --model gemma        # ... on Gemma-3-270M
    .venv/bin/python bench/openai_throughput.py --engine xllamacpp   # llama.cpp's server with 2 parallel slots
    .venv/bin/python bench/openai_throughput.py --base-url http://127.0.0.1:8080/v1   # a running server

At each concurrency level the same prompts go two ways, one right after the other:

- finharness: a run (`run_task`, a fresh run store, the `openai:` backend, the engine's limiter and retry
  layer), exactly the path `finharness run ... --concurrency N` takes;
- the server's own rate: the same JSON bodies (`OpenAICompatBackend.payload`) posted by a bare httpx
  client at the same concurrency, nothing else in between.

Temperature 0 and a fixed seed, so both sides decode the same tokens. Prints completion tokens/s.
Needs `pip install 'llama-cpp-python[server]'` (or `pip install xllamacpp` for --engine xllamacpp) to
start a server itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from benchlib import Goal, Row, free_port, gemma_path, start_llama_cpp_server, stop, wait_until_up

from finharness.backends.openai_compat import from_spec
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.task import Task
from finharness.core.types import GenerateParams, GenerateRequest, Message, Sample, Score, messages

PROMPTS = [
    "In one sentence, what is free cash flow?",
    "Define EBITDA in one sentence.",
    "What does a 10-K filing contain? Answer briefly.",
    "Explain the price-to-earnings ratio in one sentence.",
    "What is the difference between revenue and profit? One sentence.",
    "What is a bond coupon? Answer briefly.",
    "What does a negative working capital mean? One sentence.",
    "What is a stock buyback? Answer in one sentence.",
]
P4_GOAL = Goal(">=", 0.95)

XLLAMACPP_SERVER = """
import sys, time, xllamacpp
model, port, parallel, n_ctx, threads = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:6])
params = xllamacpp.CommonParams()
params.model.path = model
params.hostnames = ["127.0.0.1"]
params.port = port
params.n_parallel = parallel
params.n_ctx = n_ctx * parallel  # llama.cpp splits the context between its slots
params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
server = xllamacpp.Server(params)
while True:
    time.sleep(3600)
"""


def start_xllamacpp(python: str, model: Path, port: int, threads: int, n_ctx: int, parallel: int) -> subprocess.Popen:
    """llama.cpp's own server: `parallel` slots decoded in one batch."""
    log = tempfile.NamedTemporaryFile("w", prefix="xllamacpp-server-", suffix=".log", delete=False)
    print(f"starting the xllamacpp server on port {port} with {model} (log: {log.name})", file=sys.stderr)
    server = subprocess.Popen([python, "-c", XLLAMACPP_SERVER, str(model), str(port), str(parallel), str(n_ctx),
                               str(threads)], stdout=log, stderr=subprocess.STDOUT, text=True)
    server.log_path = log.name  # type: ignore[attr-defined]
    return server


def resolve_model(name: str | None) -> Path:
    """'embedded' (default), 'gemma', or a GGUF path."""
    if name in (None, "embedded"):
        from finharness.backends.model_files import ensure_model

        return ensure_model("embedded")
    if name == "gemma":
        return gemma_path()
    return Path(name)


class PromptsTask(Task):
    """One chat request per prompt; the reply is the prediction (nothing to score)."""

    name = "bench/openai-throughput"

    def __init__(self, prompts: tuple[str, ...] = (), max_tokens: int = 32):
        super().__init__(prompts=list(prompts), max_tokens=max_tokens)
        self.prompts, self.max_tokens = prompts, max_tokens

    def load(self, data_dir):
        return [Sample(id=f"p{i}", input=prompt, target=None) for i, prompt in enumerate(self.prompts)]

    async def solve(self, sample, models):
        reply = await models.model.chat([Message("user", sample.input)], params(self.max_tokens))
        return {"text": reply.text, "completion_tokens": reply.completion_tokens}

    def score(self, sample, prediction):
        return Score(value=None, extracted=None)


def params(max_tokens: int) -> GenerateParams:
    return GenerateParams(max_tokens=max_tokens, temperature=0.0, seed=0)


async def through_finharness(base_url: str, concurrency: int, prompts: list[str], max_tokens: int) -> dict[str, Any]:
    backend = from_spec(f"openai:bench@{base_url}?concurrency={concurrency}&timeout=600")
    with tempfile.TemporaryDirectory(prefix="finharness-p4-") as tmp:
        store = RunStore(Path(tmp) / "store.sqlite")  # fresh: every request goes to the server
        try:
            started = time.perf_counter()
            result = await run_task(PromptsTask(tuple(prompts), max_tokens), {"model": backend}, store, RunOptions(concurrency=concurrency), out_dir=None)
            wall = time.perf_counter() - started
        finally:
            store.close()
            await backend.aclose()
    counts = result.results["counts"]
    return {"wall_s": round(wall, 3), "completion_tokens": counts["completion_tokens"],
            "tokens_per_s": round(counts["completion_tokens"] / wall, 2), "retries": counts["retries"],
            "failures": counts["failures"]}


async def straight_to_server(base_url: str, concurrency: int, prompts: list[str], max_tokens: int) -> dict[str, Any]:
    """The same request bodies from a bare httpx client: the rate the server itself delivers."""
    shaper = from_spec(f"openai:bench@{base_url}")
    bodies = [shaper.payload(GenerateRequest(messages(("user", p)), params(max_tokens))) for p in prompts]
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        async def one(body: dict) -> int:
            async with gate:
                response = await client.post("/chat/completions", json=body)
                response.raise_for_status()
                return response.json()["usage"]["completion_tokens"]

        started = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(body) for body in bodies)))
        wall = time.perf_counter() - started
    return {"wall_s": round(wall, 3), "completion_tokens": tokens, "tokens_per_s": round(tokens / wall, 2)}


def measure_levels(base_url: str, levels: list[int], prompts: list[str], max_tokens: int,
                   rounds: int = 1) -> list[dict[str, Any]]:
    """Both sides at every level, each side first at every other level, so a neighbour's load hits them alike."""
    asyncio.run(straight_to_server(base_url, 1, ["Say OK."], 4))  # warm-up: weights paged in, first prompt
    rows = []
    for round_number in range(1, rounds + 1):
        for index, concurrency in enumerate(levels):
            sides = {"finharness": through_finharness, "server": straight_to_server}
            order = list(sides) if (round_number + index) % 2 else list(sides)[::-1]  # neither side always first
            measured = {side: asyncio.run(sides[side](base_url, concurrency, prompts, max_tokens)) for side in order}
            ours, server = measured["finharness"], measured["server"]
            rows.append({"round": round_number, "concurrency": concurrency, "first": order[0],
                         "finharness": ours, "server": server,
                         "ratio": round(ours["tokens_per_s"] / server["tokens_per_s"], 3)})
    return rows


def p4(model: str | None = "embedded", levels: tuple[int, ...] = (1, 2, 4), prompts: int = 4, max_tokens: int = 32,
       threads: int | None = None, n_ctx: int = 2048, base_url: str | None = None, rounds: int = 1) -> Row:
    threads = threads or os.cpu_count() or 1
    texts = [PROMPTS[i % len(PROMPTS)] for i in range(prompts)]
    server = None
    path = None
    if base_url is None:
        path = resolve_model(model)
        port = free_port()
        base_url = f"http://127.0.0.1:{port}/v1"
        server = start_llama_cpp_server(path, port, n_ctx=n_ctx, threads=threads)
    try:
        wait_until_up(base_url, server)
        rows = measure_levels(base_url, list(levels), texts, max_tokens, rounds)
    finally:
        stop(server)

    def rate(side: str) -> float:
        return sum(r[side]["completion_tokens"] for r in rows) / sum(r[side]["wall_s"] for r in rows)

    if not all(r[side]["completion_tokens"] for r in rows for side in ("finharness", "server")):
        raise RuntimeError(f"{path or base_url} generated no tokens for these chat prompts (a base model "
                           "without a chat template stops at once); use an instruct model (--p4-model embedded)")
    ours, theirs = rate("finharness"), rate("server")
    # The headline is the median of the per-level ratios: on a shared machine one level can stall for
    # minutes (llama.cpp's threads waiting on a busy core) and would swamp a ratio of sums.
    ratio = statistics.median(r["ratio"] for r in rows)
    per_level = ", ".join(f"c{r['concurrency']} {r['finharness']['tokens_per_s']:.1f}" for r in rows)
    server_level = ", ".join(f"c{r['concurrency']} {r['server']['tokens_per_s']:.1f}" for r in rows)
    return Row("P4", f"generation via openai: backend, {prompts} prompts x {max_tokens} tokens, llama_cpp.server",
               f"{ours:.1f} tok/s ({per_level})", f"server direct {theirs:.1f} tok/s ({server_level})",
               ratio, P4_GOAL,
               details={"model": str(path or base_url), "levels": rows, "threads": threads,
                        "ratio_of_sums": ours / theirs,
                        "headline": "median over levels of tokens/s through finharness ÷ tokens/s of a bare client"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="use a running OpenAI-compatible server instead of starting one")
    parser.add_argument("--model", default="embedded", help="'embedded', 'gemma' or a GGUF path")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1, help="repeat every level this many times")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--engine", choices=["llama-cpp-python", "xllamacpp"], default="llama-cpp-python")
    parser.add_argument("--engine-python", default=sys.executable,
                        help="interpreter that has the engine installed (default: this one)")
    parser.add_argument("--parallel", type=int, default=2, help="xllamacpp: parallel decoding slots")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="extra llama_cpp.server argument (repeatable), e.g. --server-arg=--n_batch=256")
    args = parser.parse_args()

    server = None
    base_url = args.base_url
    if base_url is None:
        model = resolve_model(args.model)
        port = free_port()
        base_url = f"http://127.0.0.1:{port}/v1"
        if args.engine == "xllamacpp":
            server = start_xllamacpp(args.engine_python, model, port, args.threads, args.n_ctx, args.parallel)
        else:
            server = start_llama_cpp_server(model, port, n_ctx=args.n_ctx, threads=args.threads,
                                            python=args.engine_python, extra=args.server_arg)
    try:
        wait_until_up(base_url, server)
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.prompts)]
        for row in measure_levels(base_url, args.concurrency, prompts, args.max_tokens, args.rounds):
            print(json.dumps(row), flush=True)
    finally:
        stop(server)


if __name__ == "__main__":
    main()
