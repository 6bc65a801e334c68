"""Executions per second: the warm sandbox pool vs a fresh interpreter per program (run by hand).

    .venv/bin/python bench/sandbox_bench.py [--programs 200] [--pool-size 2] [--isolation auto]

Both sides run the same ~200 small BizBench-style programs (arithmetic, a few
with numpy), `--pool-size` at a time. "fresh" starts `python -c PROGRAM` per
program with no isolation at all, so it is a lower bound on the cost of
starting a new interpreter; "pool" is the full sandbox (bwrap or fallback,
audit guard, limits, one fork per job), first as routed (plain programs to
plain workers), then with every program on a numpy+pandas worker. Prints
programs/s, latency percentiles, and the machine's load average (the figures
scale with free CPU).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from benchlib import Goal, Row

from finharness.sandbox import Limits, Sandbox
from finharness.sandbox.pool import needs_scientific

TEMPLATES = [
    "revenue_{i} = {a}\ncost_{i} = {b}\nmargin = (revenue_{i} - cost_{i}) / revenue_{i}\nmargin * 100",
    "start = {a}\nend = {b}\ngrowth = (end - start) / start\nround(growth * 100, 2)",
    "rate = {r}\nyears = {n}\nprincipal = {a}\nprincipal * (1 + rate) ** years",
    "cash_flows = [{a}, {b}, {a} + {b}]\nrate = {r}\n"
    "sum(cf / (1 + rate) ** (t + 1) for t, cf in enumerate(cash_flows))",
    "import numpy as np\nvalues = np.array([{a}, {b}, {n}], dtype=float)\nfloat(values.mean() / values.std())",
    "shares = {n}\nnet_income = {a}\neps = net_income / shares\neps",
]


def programs(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(TEMPLATES).format(i=i, a=rng.randint(100, 10_000), b=rng.randint(50, 9_000),
                                         r=round(rng.uniform(0.01, 0.12), 3), n=rng.randint(1, 30))
            for i in range(count)]


def _fresh_wrapper(code: str) -> str:
    # The same last-expression rule as the sandbox, in a plain new interpreter.
    return ("import ast\ntree = ast.parse(" + repr(code) + ")\nlast = tree.body.pop()\nns = {}\n"
            "exec(compile(tree, '<program>', 'exec'), ns, ns)\n"
            "print(eval(compile(ast.Expression(last.value), '<program>', 'eval'), ns, ns))")


def run_fresh(code: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-I", "-c", _fresh_wrapper(code)], capture_output=True, text=True,
                          timeout=30)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return time.perf_counter() - start


def measure(label: str, run, codes: list[str], concurrency: int) -> dict:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = list(pool.map(run, codes))
    elapsed = time.perf_counter() - start
    ordered = sorted(latencies)
    return {"label": label, "n": len(codes), "seconds": elapsed, "per_s": len(codes) / elapsed,
            "p50_ms": 1000 * statistics.median(ordered), "p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))]}


P6_GOAL = Goal(">=", 100, "programs/s")


def measure_all(count: int, pool_size: int, isolation: str) -> dict:
    """The pool as routed, the pool with every program on a numpy+pandas worker, a fresh interpreter each."""
    codes = programs(count)
    started = time.perf_counter()
    with Sandbox(pool_size=pool_size, limits=Limits(cpu_s=2, wall_s=10), isolation=isolation) as box:
        startup_s = time.perf_counter() - started

        def run_pooled(code: str) -> float:
            start = time.perf_counter()
            result = box.run(code)
            if not result.ok:
                raise RuntimeError(f"{result.error_class}: {result.message}")
            return time.perf_counter() - start

        measure("warm-up", run_pooled, codes[:10], pool_size)
        pooled = measure(f"pool ({box.isolation}), as routed: plain or numpy+pandas worker", run_pooled, codes,
                         pool_size)
        # The same programs forced onto numpy+pandas workers (slower forks): the worst case.
        scientific = measure("pool, every program on a numpy+pandas worker", run_pooled,
                             ["import numpy as np\n" + code for code in codes], pool_size)
        isolation_used = box.isolation
    fresh = measure(f"fresh `python -c` per program (no isolation), {pool_size} at a time", run_fresh, codes,
                    pool_size)
    return {"startup_s": startup_s, "isolation": isolation_used, "pool_size": pool_size,
            "scientific_programs": sum(needs_scientific(code, "") for code in codes), "programs": len(codes),
            "rows": [pooled, scientific, fresh]}


def p6(count: int = 100, pool_size: int = 2, isolation: str = "auto") -> Row:
    m = measure_all(count, pool_size, isolation)
    pooled, scientific, fresh = m["rows"]
    return Row("P6", f"sandboxed executions, {count} programs, {pool_size} at a time",
               f"warm pool ({m['isolation']}) {pooled['per_s']:.1f}/s (all on numpy workers {scientific['per_s']:.1f}/s)",
               f"fresh `python -c` {fresh['per_s']:.1f}/s", pooled["per_s"], P6_GOAL, details=m)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "kernel", "rlimits", "unsafe", "bare"])
    args = parser.parse_args()
    m = measure_all(args.programs, args.pool_size, args.isolation)
    pooled, scientific, fresh = m["rows"]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (1 min)")
    print(f"pool startup: {m['startup_s']:.2f} s for {args.pool_size} plain + {args.pool_size} numpy/pandas workers; "
          f"{m['scientific_programs']} of {m['programs']} programs need numpy/pandas")
    print(f"{'mode':<70} {'programs':>8} {'seconds':>8} {'per s':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for row in (pooled, scientific, fresh):
        print(f"{row['label']:<70} {row['n']:>8} {row['seconds']:>8.2f} {row['per_s']:>8.1f} "
              f"{row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f}")
    print(f"speed-up of the pool: {pooled['per_s'] / fresh['per_s']:.1f}x")


if __name__ == "__main__":
    main()
