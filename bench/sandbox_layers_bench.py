"""The kernel layers' cost: sandboxed executions per second of this tree against another source tree (run by hand).

    git archive BASE_COMMIT src | tar -x -C /tmp/base      # the tree to compare with
    .venv/bin/python bench/sandbox_layers_bench.py --base-src /tmp/base/src [--programs 300 --rounds 3]
        [--same-kinds [--kinds bwrap,kernel,bare]]

Each round runs, one after the other in fresh processes, the same programs (sandbox_bench.programs, the
P6 mix) through the warm pool of the base tree and of this one, `--pool-size` at a time, for each pair of
isolations (base bubblewrap vs bubblewrap with seccomp + Landlock + memory cgroup; base rlimits fallback
vs the `kernel` kind; with --same-kinds: bwrap, kernel and bare each against itself). Pool start-up is not
timed. Prints executions/s and the workers' CPU time per job
(their own and their reaped jobs', from /proc: steadier than the wall clock on a loaded machine) per round,
the median ratios new/base, and the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
MEASURE = """
import json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, {bench!r})
from sandbox_bench import programs
from finharness.sandbox import Limits, Sandbox

def worker_cpu(roots):
    # CPU seconds of the worker trees: each process's own and that of the children it reaped (the jobs)
    stats = {{}}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = open(f"/proc/{{entry}}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    tree, frontier = set(roots), set(roots)
    while frontier:
        frontier = {{pid for pid, (parent, _) in stats.items() if parent in frontier}} - tree
        tree |= frontier
    return sum(stats[pid][1] for pid in tree if pid in stats) / os.sysconf("SC_CLK_TCK")

codes = programs({count})
with Sandbox(pool_size={pool}, limits=Limits(cpu_s=2, wall_s=10), isolation={isolation!r}) as box:
    with ThreadPoolExecutor({pool}) as pool:
        list(pool.map(box.run, codes[:20]))  # warm-up
        roots = box.worker_pids()
        cpu = worker_cpu(roots)
        start = time.perf_counter()
        results = list(pool.map(box.run, codes))
        elapsed = time.perf_counter() - start
        cpu = worker_cpu(roots) - cpu
    assert all(r.ok for r in results), [r for r in results if not r.ok][:1]
    assert box.worker_pids() == roots or sorted(box.worker_pids()) == sorted(roots), "a worker was replaced"
    print(json.dumps({{"per_s": len(codes) / elapsed, "cpu_ms": 1000 * cpu / len(codes), "isolation": box.isolation}}))
"""
PAIRS = (("bwrap", "bwrap"), ("rlimits", "kernel"))
"""(base isolation, new isolation): the same kind of worker before and after the kernel layers."""
SAME_KINDS = (("bwrap", "bwrap"), ("kernel", "kernel"), ("bare", "bare"))
"""--same-kinds: each kind against itself (a base tree that has all three, e.g. before issue 34's changes)."""


def measure(src: Path, isolation: str, count: int, pool: int) -> dict:
    code = MEASURE.format(bench=str(HERE), count=count, pool=pool, isolation=isolation)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(src)})
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-src", type=Path, required=True, help="src/ of the tree to compare with")
    parser.add_argument("--programs", type=int, default=300)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--same-kinds", action="store_true", help="compare bwrap, kernel and bare each with itself")
    parser.add_argument("--kinds", default="bwrap,kernel,bare", help="with --same-kinds: which (comma-separated)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (1 min) at the start")
    wanted = set(args.kinds.split(","))
    pairs = [pair for pair in SAME_KINDS if pair[0] in wanted] if args.same_kinds else PAIRS
    for base_isolation, new_isolation in pairs:
        ratios, cpu_ratios, base_rates, new_rates = [], [], [], []
        for round_number in range(args.rounds):
            base = measure(args.base_src, base_isolation, args.programs, args.pool_size)
            new = measure(SRC, new_isolation, args.programs, args.pool_size)
            base_rates.append(base["per_s"])
            new_rates.append(new["per_s"])
            ratios.append(new["per_s"] / base["per_s"])
            cpu_ratios.append(new["cpu_ms"] / base["cpu_ms"])
            print(f"round {round_number + 1}: base {base['isolation']:<22} {base['per_s']:6.1f}/s "
                  f"{base['cpu_ms']:5.2f} ms CPU/job | new {new['isolation']:<38} {new['per_s']:6.1f}/s "
                  f"{new['cpu_ms']:5.2f} ms CPU/job | ratio {ratios[-1]:.3f}")
        print(f"median ({base_isolation} -> {new_isolation}): base {statistics.median(base_rates):.1f}/s, new "
              f"{statistics.median(new_rates):.1f}/s; new/base executions/s {statistics.median(ratios):.3f}, "
              f"worker CPU per job {statistics.median(cpu_ratios):.3f}")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
