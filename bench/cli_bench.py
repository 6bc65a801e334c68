"""P5 (a fully cached rerun ÷ the cold run) and P8 (start-up, time to the first request), as a user types them.

    .venv/bin/python bench/cli_bench.py p5 [--task demo] [--model embedded] [--sample N]
    .venv/bin/python bench/cli_bench.py p8 [--repeat 5]

P5 runs `finharness run TASK --model MODEL --out DIR --store DIR/store.sqlite` twice; the second run finds
every call in the store. Both the whole command's wall time (what a user waits for, interpreter start-up
included) and the engine's own (results.json timing.wall_s) are reported; the goal is read on the whole
command.

P8 times `finharness --help` (median of --repeat runs) and, for `finharness run demo --model fake
--limit 1`, the time from just before the process starts to the first backend call (the median again;
bench/first_request_probe.py stamps it). The goal is read on the slower of the two.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import BENCH, DATA_DIR, FINHARNESS, Goal, Row

P5_GOAL = Goal("<=", 0.02)
P8_GOAL = Goal("<=", 0.5, "s")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process); CPU time shows what a busy machine's wall time hides."""
    cpu = children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, children_cpu_s() - cpu


def p5(task: str = "demo", model: str = "embedded", sample: int | None = None) -> Row:
    with tempfile.TemporaryDirectory(prefix="finharness-p5-") as tmp:
        out = Path(tmp) / "run"
        command = [str(FINHARNESS), "run", task, "--model", model, "--out", str(out), "--store",
                   str(Path(tmp) / "store.sqlite"), "--data-dir", str(DATA_DIR), "--quiet"]
        if sample is not None:
            command += ["--sample", str(sample)]
        runs: list[dict[str, Any]] = []
        for label in ("cold", "cached"):
            wall, cpu = timed(command)
            results = json.loads((out / "results.json").read_text())
            runs.append({"run": label, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "engine_wall_s": results["timing"]["wall_s"],
                         "calls": results["counts"]["calls"], "cache_hits": results["counts"]["cache_hits"]})
    cold, cached = runs
    if cached["calls"]:
        raise RuntimeError(f"the rerun made {cached['calls']} model calls: it was not fully cached")
    return Row("P5", f"cached rerun ÷ cold run, `run {task} --model {model}`",
               f"rerun {cached['wall_s']:.2f} s (engine {cached['engine_wall_s']:.3f} s)",
               f"cold {cold['wall_s']:.2f} s (engine {cold['engine_wall_s']:.2f} s, {cold['calls']} calls)",
               cached["wall_s"] / cold["wall_s"], P5_GOAL,
               details={"command": " ".join(command), "runs": runs,
                        "engine_ratio": cached["engine_wall_s"] / cold["engine_wall_s"]})


def time_to_first_request(out: Path) -> tuple[float, float]:
    """(seconds from just before the process starts to the first backend call, whole command's CPU s)."""
    stamp = out.with_suffix(".stamp")
    stamp.unlink(missing_ok=True)
    command = [sys.executable, str(BENCH / "first_request_probe.py"), str(stamp), "run", "demo", "--model", "fake",
               "--limit", "1", "--out", str(out), "--quiet"]
    started = time.time()
    _, cpu = timed(command)
    return float(stamp.read_text()) - started, cpu


def p8(repeat: int = 5) -> Row:
    helps = [timed([str(FINHARNESS), "--help"]) for _ in range(repeat)]
    with tempfile.TemporaryDirectory(prefix="finharness-p8-") as tmp:
        firsts = [time_to_first_request(Path(tmp) / f"run{i}") for i in range(repeat)]
    help_s = statistics.median(wall for wall, _ in helps)
    first_s = statistics.median(f for f, _ in firsts)
    return Row("P8", f"start-up, median of {repeat}",
               f"`finharness --help` {help_s:.2f} s", f"first request of `run demo --model fake` {first_s:.2f} s",
               max(help_s, first_s), P8_GOAL,
               details={"help_wall_s": [round(w, 3) for w, _ in helps], "help_cpu_s": [round(c, 3) for _, c in helps],
                        "first_request_s": [round(f, 3) for f, _ in firsts],
                        "demo_run_cpu_s": [round(c, 3) for _, c in firsts], "headline": "the slower of the two"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["p5", "p8"])
    parser.add_argument("--task", default="demo")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--sample", type=int)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    row = p5(args.task, args.model, args.sample) if args.which == "p5" else p8(args.repeat)
    print(json.dumps(row.to_json(), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
