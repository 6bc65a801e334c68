"""Generation throughput of the `openai:` backend against a real local llama.cpp server (run by hand).

    python bench/openai_throughput.py                       # starts llama_cpp.server on the embedded model
    python bench/openai_throughput.py --engine xllamacpp   # llama.cpp's server with 2 parallel slots
    python bench/openai_throughput.py --base-url http://127.0.0.1:8080/v1   # an already running server

Sends the same short prompts at each concurrency level through the backend and
the retry layer (exactly the path a run takes) and prints completion tokens/s.
Needs `pip install 'llama-cpp-python[server]'` (or `pip install xllamacpp` for --engine
xllamacpp) to start a server itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from finharness.backends.openai_compat import from_spec
from finharness.core.retry import RetryPolicy, call_with_retries
from finharness.core.types import GenerateParams, GenerateRequest, messages

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def start_server(engine: str, python: str, model: Path, port: int, threads: int, n_ctx: int,
                 parallel: int, extra: list[str]) -> subprocess.Popen:
    if engine == "xllamacpp":  # llama.cpp's own server: `parallel` slots decoded in one batch
        command = [python, "-c", XLLAMACPP_SERVER, str(model), str(port), str(parallel), str(n_ctx),
                   str(threads)]
    else:  # llama-cpp-python's server: one request at a time behind a global lock
        command = [python, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
                   "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
                   "--model_alias", "bench", *extra]
    log = tempfile.NamedTemporaryFile("w", prefix="llama-server-", suffix=".log", delete=False)
    print(f"starting the {engine} server on port {port} with {model} (log: {log.name})", file=sys.stderr)
    # Logs go to a file: llama.cpp is chatty, and an unread pipe would fill up and stall the server.
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)


def wait_until_up(base_url: str, server: subprocess.Popen | None, deadline_s: float = 180.0) -> None:
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        if server is not None and server.poll() is not None:
            raise SystemExit(f"server exited with {server.returncode}; see {server.stdout.name}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"server at {base_url} did not answer within {deadline_s:.0f} s")


async def measure(base_url: str, concurrency: int, prompts: list[str], max_tokens: int) -> dict:
    backend = from_spec(f"openai:bench@{base_url}?concurrency={concurrency}&timeout=600")
    gate = asyncio.Semaphore(concurrency)
    policy = RetryPolicy(max_attempts=3)

    async def one(prompt: str):
        request = GenerateRequest(messages(("user", prompt)),
                                  GenerateParams(max_tokens=max_tokens, temperature=0.0, seed=0))
        async with gate:
            started = time.perf_counter()
            response, retries = await call_with_retries(lambda: backend.generate(request), policy)
            return response, retries, time.perf_counter() - started

    try:
        await one("Say OK.")  # warm-up: model load into cache, first prompt processing
        started = time.perf_counter()
        results = await asyncio.gather(*(one(p) for p in prompts))
        wall = time.perf_counter() - started
    finally:
        await backend.aclose()
    tokens = sum(r.completion_tokens for r, _, _ in results)
    return {"concurrency": concurrency, "requests": len(results), "completion_tokens": tokens,
            "wall_s": round(wall, 2), "tokens_per_s": round(tokens / wall, 2),
            "mean_latency_s": round(sum(t for _, _, t in results) / len(results), 2),
            "retries": sum(n for _, n, _ in results),
            "truncated": sum(r.truncated for r, _, _ in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="use a running OpenAI-compatible server instead of starting one")
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded model)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
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
        model = args.model
        if model is None:
            from finharness.backends.model_files import ensure_model
            model = ensure_model("embedded")
        port = free_port()
        base_url = f"http://127.0.0.1:{port}/v1"
        server = start_server(args.engine, args.engine_python, model, port, args.threads, args.n_ctx,
                              args.parallel, args.server_arg)
    try:
        wait_until_up(base_url, server)
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.prompts)]
        # Levels alternate round by round, so a neighbour's load on a shared CPU hits them alike.
        for round_number in range(1, args.rounds + 1):
            for concurrency in args.concurrency:
                row = asyncio.run(measure(base_url, concurrency, prompts, args.max_tokens))
                print(json.dumps({"round": round_number, **row}), flush=True)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
