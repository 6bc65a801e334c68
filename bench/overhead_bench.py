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


def measure(label: str, n: int, store: RunStore, out: Path) -> None:
    cpu0, t0 = time.process_time(), time.perf_counter()
    result = asyncio.run(run_task(SyntheticTask(n), {"model": FakeBackend()}, store, data_dir=None, out_dir=out,
                                  concurrency=64))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    c = result.results["counts"]
    print(f"{label:7} n={n}  wall {wall:7.2f} s  {n / wall:8.0f} requests/s  {1000 * cpu / n:6.3f} CPU s per 1,000  "
          f"calls {c['calls']}  cache hits {c['cache_hits']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "store.sqlite")
        measure("cold", args.n, store, Path(tmp) / "out")
        measure("cached", args.n, store, Path(tmp) / "out")
        store.close()
    print(f"peak memory (max RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
