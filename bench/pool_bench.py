"""Two tasks run one after the other vs pooled in one run (issue 8, scheduling).

    .venv/bin/python bench/pool_bench.py [--data-dir ../shared/data] [--limits 3,40,200] [--repeats 3]

`fake?latency=0.05` at concurrency 4, a fresh store for every run; in-process (run_task twice vs
run_tasks) and through the CLI (two `finharness run` vs one `finharness run A B`); medians. Ratios
below 1 mean pooling saved time: one start-up instead of two and shorter tails.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from finharness.backends import from_spec
from finharness.benchmarks.registry import make_task, task_class
from finharness.core.runner import PooledTask, RunOptions, run_task, run_tasks
from finharness.core.store import RunStore

SPEC, CONCURRENCY = "fake?latency=0.05", 4
TASKS = ("bizbench/finknow", "bizbench/tatqa-e")
FINHARNESS = [sys.executable, "-m", "finharness"]


def in_process(data: Path, limit: int, pooled: bool) -> float:
    root = Path(tempfile.mkdtemp())
    store = RunStore(root / "store.sqlite")
    backend = from_spec(SPEC)
    tasks = [make_task(task_class(name), {}) for name in TASKS]
    started = time.perf_counter()
    if pooled:
        results = asyncio.run(run_tasks([PooledTask(t, {"model": backend}, root / str(i)) for i, t in enumerate(tasks)], store, RunOptions(data_dir=data, limit=limit, concurrency=CONCURRENCY)))
    else:
        results = [asyncio.run(run_task(t, {"model": backend}, store, RunOptions(data_dir=data, limit=limit, concurrency=CONCURRENCY), out_dir=root / str(i))) for i, t in enumerate(tasks)]
    wall = time.perf_counter() - started
    store.close()
    assert all(r.results["status"] == "complete" for r in results)
    return wall


def through_cli(data: Path, limit: int, pooled: bool) -> float:
    root = Path(tempfile.mkdtemp())
    args = ["--model", SPEC, "--concurrency", str(CONCURRENCY), "--limit", str(limit), "--data-dir", str(data), "-q"]
    started = time.perf_counter()
    if pooled:
        subprocess.run([*FINHARNESS, "run", *TASKS, *args, "--out", str(root / "pool")], check=True, capture_output=True)
    else:
        for i, name in enumerate(TASKS):
            subprocess.run([*FINHARNESS, "run", name, *args, "--out", str(root / str(i))], check=True,
                           capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--limits", default="3,40,200")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    for how, measure in (("in-process", in_process), ("CLI", through_cli)):
        for limit in (int(x) for x in options.limits.split(",")):
            sequential = statistics.median(measure(options.data_dir, limit, False) for _ in range(options.repeats))
            pooled = statistics.median(measure(options.data_dir, limit, True) for _ in range(options.repeats))
            print(f"{how:10} {limit:4} per task: one after the other {sequential:6.2f} s, pooled {pooled:6.2f} s, "
                  f"pooled/sequential {pooled / sequential:.2f}", flush=True)


if __name__ == "__main__":
    main()
