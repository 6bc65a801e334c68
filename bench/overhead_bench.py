"""P1 harness overhead: N requests through the `fake` backend (no model time), cold and fully cached.

Prints requests/s, CPU seconds per 1,000 requests and peak memory. Run by hand:
    .venv/bin/python bench/overhead_bench.py [--n 10000]
Before/after a change, in one run (each side in its own process, alternated, medians):
    git worktree add /tmp/base HEAD
    .venv/bin/python bench/overhead_bench.py --compare /tmp/base/src [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, Goal, Row

from finharness.backends.fake import FakeBackend
from finharness.core.runner import RunOptions, run_task
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
    result = asyncio.run(run_task(SyntheticTask(n), {"model": FakeBackend()}, store, RunOptions(concurrency=64), out_dir=out))
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


def measure_in_process(src: Path, n: int) -> dict:
    """One P1 measurement in a fresh interpreter importing finharness from `src`."""
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, __file__, "--n", str(n), "--json"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def compare(base_src: Path, n: int, repeats: int) -> None:
    """Base and current code alternated `repeats` times (the machine's load drifts); medians side by side."""
    sides = {"base": base_src.resolve(), "after": REPO / "src"}
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for i in range(repeats):
        for side, src in sides.items():
            runs[side].append(measure_in_process(src, n))
            m = runs[side][-1]
            print(f"  run {i + 1} {side:5}: cold {m['cold']['requests_per_s']:7.0f} req/s, "
                  f"cached {m['cached']['requests_per_s']:7.0f} req/s", file=sys.stderr)
    figures = [("cold requests/s", lambda m: m["cold"]["requests_per_s"], "{:,.0f}"),
               ("cold CPU s per 1,000", lambda m: m["cold"]["cpu_s_per_1000"], "{:.3f}"),
               ("cached requests/s", lambda m: m["cached"]["requests_per_s"], "{:,.0f}"),
               ("cached CPU s per 1,000", lambda m: m["cached"]["cpu_s_per_1000"], "{:.3f}"),
               ("peak RSS MiB", lambda m: m["peak_rss_mib"], "{:.0f}")]
    print(f"P1, {n:,} requests through fake: median of {repeats} alternated runs per side")
    print(f"| {'figure':24} | {'base':>9} | {'after':>9} | after/base |")
    print(f"|{'-' * 26}|{'-' * 11}|{'-' * 11}|{'-' * 12}|")
    for label, get, fmt in figures:
        base, after = (statistics.median(get(m) for m in runs[side]) for side in sides)
        print(f"| {label:24} | {fmt.format(base):>9} | {fmt.format(after):>9} | {after / base:10.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--json", action="store_true", help="print the measurements as one JSON line")
    parser.add_argument("--compare", type=Path, metavar="BASE_SRC",
                        help="the src/ folder of the code to compare with (e.g. a git worktree of HEAD)")
    parser.add_argument("--repeats", type=int, default=3, help="alternated runs per side with --compare")
    args = parser.parse_args()
    if args.compare is not None:
        compare(args.compare, args.n, args.repeats)
        return
    row = p1(args.n)
    if args.json:
        print(json.dumps(row.details))
        return
    for label in ("cold", "cached"):
        m = row.details[label]
        print(f"{label:7} n={m['n']}  wall {m['wall_s']:7.2f} s  {m['requests_per_s']:8.0f} requests/s  "
              f"{m['cpu_s_per_1000']:6.3f} CPU s per 1,000  calls {m['calls']}  cache hits {m['cache_hits']}")
    print(f"peak memory (max RSS): {row.details['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
