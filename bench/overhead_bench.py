"""P1 harness overhead: N requests through the `fake` backend (no model time), cold and fully cached.

Prints requests/s, CPU seconds per 1,000 requests and peak memory. Run by hand:
    .venv/bin/python bench/overhead_bench.py [--n 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

from benchlib import Goal, Row

from finharness.backends.fake import FakeBackend
from finharness.core.runner import run_task
from finharness.core.store import RunStore
from finharness.core.task import Task
from finharness.core.types import GenerateParams, Message, Sample, Score


class SyntheticTask(Task):
    name = "synthetic"

    def __init__(self, n: int = 10000):
        super().__init__(n=n)
        self.n = n

    def load(self, data_dir):
        return [Sample(id=f"s{i}", input=f"Question {i}: which letter?", target="A") for i in range(self.n)]

    async def solve(self, sample, models):
        reply = await models.model.chat([Message("user", sample.input)], GenerateParams(max_tokens=8))
        return reply.text

    def score(self, sample, prediction):
        return Score(value=float(prediction.endswith(sample.target)), extracted=prediction[-1:])


P1_GOAL = Goal(">=", 5000, "req/s")


def measure(n: int, store: RunStore, out: Path) -> dict:
    cpu0, t0 = time.process_time(), time.perf_counter()
    result = asyncio.run(run_task(SyntheticTask(n), {"model": FakeBackend()}, store, data_dir=None, out_dir=out,
                                  concurrency=64))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    c = result.results["counts"]
    return {"n": n, "wall_s": round(wall, 3), "requests_per_s": round(n / wall, 1),
            "cpu_s_per_1000": round(1000 * cpu / n, 4), "calls": c["calls"], "cache_hits": c["cache_hits"]}


def peak_memory_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def p1(n: int = 10000) -> Row:
    """Cold (every request computed by `fake`) and fully cached, in one store; peak RSS of the process."""
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "store.sqlite")
        try:
            cold = measure(n, store, Path(tmp) / "out")
            cached = measure(n, store, Path(tmp) / "out")
        finally:
            store.close()
    peak = peak_memory_mib()
    return Row("P1", f"harness overhead, {n:,} requests through fake",
               f"cold {cold['requests_per_s']:,.0f} req/s, {cold['cpu_s_per_1000']:.3f} CPU s/1k, {peak:.0f} MiB peak",
               f"cached rerun {cached['requests_per_s']:,.0f} req/s", cold["requests_per_s"], P1_GOAL,
               details={"cold": cold, "cached": cached, "peak_rss_mib": round(peak, 1)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10000)
    args = parser.parse_args()
    row = p1(args.n)
    for label in ("cold", "cached"):
        m = row.details[label]
        print(f"{label:7} n={m['n']}  wall {m['wall_s']:7.2f} s  {m['requests_per_s']:8.0f} requests/s  "
              f"{m['cpu_s_per_1000']:6.3f} CPU s per 1,000  calls {m['calls']}  cache hits {m['cache_hits']}")
    print(f"peak memory (max RSS): {row.details['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
