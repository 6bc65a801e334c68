"""Log-likelihoods over HTTP (`openai-completions:`) against the embedded engine, on FinKnow and CPA (run by hand).

    .venv/bin/python bench/ll_over_http.py [--finknow 100] [--cpa 100] [--rounds 2] [--logprobs echo|prompt]

The same items run as tasks (`--method ll`) two ways, in pairs whose order alternates, each on a fresh run store:

- embedded: the local engine (`embedded`, its scorer in a child process);
- HTTP: `openai-completions:` against tests/servers/completions_stub.py started as its own process on the same
  GGUF (it answers /tokenize and /v1/completions from llama.cpp logits evaluated as the local scorer does).

Both are started and warmed (one request each) before the clock starts, as a server already up would be. It
prints, per task: items, the share whose chosen option agrees, the largest |ΔLL| over every option, greedy flags
that differ, and the wall times of each side with the ratio HTTP / embedded per pair (and its median). Figures
depend on the machine's load: say how loaded it was (`uptime`) when you quote them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import DATA_DIR, REPO

from finharness.backends import from_spec
from finharness.benchmarks.bizbench.finknow import FinKnowTask
from finharness.benchmarks.cfinbench.task import STANDIN_CPA, CFinBenchTask
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import LoglikelihoodRequest


def start_stub(model: Path, threads: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "tests.servers.completions_stub", str(model), str(threads)],
                               cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    port = process.stdout.readline().strip()  # printed once the model is loaded and the socket listens
    if not port.isdigit():
        process.kill()
        raise SystemExit(f"the completions stub did not start (said {port!r})")
    return process, f"http://127.0.0.1:{port}/v1"


async def timed_run(task, backend, subset: int) -> tuple[float, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "store.sqlite")
        try:
            started = time.perf_counter()
            result = await run_task(task, {"model": backend}, store, RunOptions(data_dir=DATA_DIR, subset=subset))
            wall = time.perf_counter() - started
        finally:
            store.close()
    if result.results["status"] != "complete":
        raise SystemExit(f"{task.name} on {backend.spec}: {result.results['counts'].get('failure_examples')}")
    return wall, {r.id: ([lp for t in r.trace if t.get("kind") == "loglikelihood" for lp in t["logprobs"]],
                         [g for t in r.trace if t.get("kind") == "loglikelihood" for g in t["is_greedy"]],
                         r.prediction) for r in result.records}


def compare(name: str, local: tuple[float, dict], remote: tuple[float, dict]) -> dict[str, Any]:
    (local_s, a), (remote_s, b) = local, remote
    assert a.keys() == b.keys()
    agree = sum(a[i][2] == b[i][2] for i in a)
    delta = max(abs(x - y) for i in a for x, y in zip(a[i][0], b[i][0]))
    greedy_differ = sum(x != y for i in a for x, y in zip(a[i][1], b[i][1]))
    return {"task": name, "items": len(a), "choices_agree": agree, "max_abs_delta_ll": delta,
            "greedy_flags_differ": greedy_differ, "embedded_s": [round(local_s, 2)], "http_s": [round(remote_s, 2)],
            "ratio_http_over_embedded": [round(remote_s / local_s, 3)]}


async def paired(make, embedded, remote, items: int, rounds: int) -> dict[str, Any]:
    """`rounds` pairs of runs, the order alternating (embedded first, then HTTP first...), so a drift in the
    machine's speed weighs on both sides; agreement is read from the first pair."""
    row: dict[str, Any] = {}
    for r in range(rounds):
        if r % 2 == 0:
            local = await timed_run(make(), embedded, items)
            over_http = await timed_run(make(), remote, items)
        else:
            over_http = await timed_run(make(), remote, items)
            local = await timed_run(make(), embedded, items)
        pair = compare(make().name, local, over_http)
        if not row:
            row = pair
        else:
            for key in ("embedded_s", "http_s", "ratio_http_over_embedded"):
                row[key] += pair[key]
    ratios = sorted(row["ratio_http_over_embedded"])
    row["median_ratio"] = ratios[len(ratios) // 2]
    return row


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    embedded = from_spec(f"embedded?threads={args.threads}")
    stub, url = start_stub(embedded.model_path, args.threads)
    remote = from_spec(f"openai-completions:stub@{url}?logprobs={args.logprobs}")
    warm = LoglikelihoodRequest("Warm-up:", (" A",))
    try:
        await embedded.loglikelihood(warm)
        await remote.loglikelihood(warm)
        rows = []
        for make, items in ((lambda: FinKnowTask(method="ll"), args.finknow),
                            (lambda: CFinBenchTask(exam=STANDIN_CPA, method="ll", shots=0), args.cpa)):
            if items:
                rows.append(await paired(make, embedded, remote, items, args.rounds))
                print(json.dumps(rows[-1]), flush=True)
        return rows
    finally:
        await remote.aclose()
        embedded.close()
        stub.terminate()
        stub.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finknow", type=int, default=100, help="FinKnow items (a seeded subset; 0: none)")
    parser.add_argument("--cpa", type=int, default=100, help="CPA items (IDEAFinBench, a seeded subset; 0: none)")
    parser.add_argument("--logprobs", choices=("echo", "prompt"), default="echo")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads of each engine")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs per task, the order alternating")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments))
    if arguments.json:
        arguments.json.write_text(json.dumps(result, indent=2) + "\n")
