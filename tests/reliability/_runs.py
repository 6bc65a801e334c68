"""Drive `finharness` as a subprocess, kill it with SIGKILL at chosen points, and read what it left.

Calls are counted with the fake backend's `log=FILE` option (one JSON line per call actually made,
keyed by the run store's content key) and checked against the store itself, so "repeated" means
exactly: a call made again although its answer was already committed to the store.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlencode

from ..benchmarks.test_cfinbench_task import EXAM, write_exam

FINHARNESS = [sys.executable, "-m", "finharness"]

PROCESS_TIMEOUT_S = 300
"""A run that takes longer than this is hung (the test fails instead of waiting forever)."""


def fake_spec(name: str, *, latency: float = 0.0, log: Path | None = None, **options: str) -> str:
    """`fake?name=NAME&latency=S&log=FILE&...`: latency and log do not change the model's identity."""
    query: dict[str, Any] = {"name": name, **options}
    if latency:
        query["latency"] = latency
    if log is not None:
        query["log"] = str(log)
    return "fake?" + urlencode(query)


def cli(args: Sequence[str], *, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*FINHARNESS, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=PROCESS_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise AssertionError(f"finharness {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


# --- what a run left behind ----------------------------------------------------------------------

def logged(*logs: Path) -> list[dict[str, Any]]:
    """Every call the fake backends wrote to these logs, in order per file (nothing when absent)."""
    lines: list[dict[str, Any]] = []
    for log in logs:
        if log.exists():
            lines += [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines


def marks(logs: Sequence[Path]) -> list[int]:
    """How many lines each log holds now (see `since`)."""
    return [len(logged(log)) for log in logs]


def since(logs: Sequence[Path], before: Sequence[int]) -> list[dict[str, Any]]:
    """The calls logged after `marks(logs)` returned `before` (each file is append-only)."""
    return [line for log, n in zip(logs, before) for line in logged(log)[n:]]


def _query(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of a store another process may be writing (WAL: readers never block it); [] before it exists."""
    if not db.exists():
        return []
    try:
        conn = sqlite3.connect(db, timeout=30)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as err:  # "no such table" until the run's migration commits
        if "no such table" in str(err):
            return []
        raise


def committed_keys(db: Path) -> set[str]:
    return {row[0] for row in _query(db, "SELECT key FROM calls")}


def stored_samples(db: Path, run_key: str) -> Counter:
    """How many times each sample id of one run is in the store."""
    return Counter(row[0] for row in _query(db, "SELECT sample_id FROM samples WHERE run_key = ?", (run_key,)))


def sample_rows(db: Path) -> int:
    return _query(db, "SELECT COUNT(*) FROM samples")[0][0] if db.exists() else 0


def has_run_row(db: Path) -> bool:
    """The run registered itself: samples are loaded and solving has begun."""
    rows = _query(db, "SELECT COUNT(*) FROM runs")
    return bool(rows and rows[0][0])


def sample_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def comparable(results: dict[str, Any], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """What must not depend on how a run got done: headline, metrics, groups, counts, each sample's outcome
    (timing, cache hits, call counts and traces are left out)."""
    counts = results["counts"]
    return {
        "status": results["status"], "headline": results["headline"], "metrics": results["metrics"],
        "groups": results["groups"], "run_key": results["run_key"],
        "counts": {k: counts[k] for k in ("samples", "scored", "failed_samples", "unparseable", "truncated_samples")},
        "samples": {s["id"]: {k: s[k] for k in ("prediction", "target", "extraction", "score", "failed")}
                    for s in samples},
    }


def run_outcome(out: Path) -> dict[str, Any]:
    """comparable() of the run written to `out`."""
    return comparable(json.loads((out / "results.json").read_text(encoding="utf-8")),
                      sample_lines(out / "samples.jsonl"))


def repeated_exam(root: Path, copies: int) -> Path:
    """The tiny CFinBench exam (tests/golden) with each val item asked `copies` times, reworded: more samples."""
    files = {name: items for name, items in EXAM.items() if not name.startswith("val/")}
    for name, items in EXAM.items():
        if name.startswith("val/"):
            files[name] = [dict(item, text=f"（第{n + 1}套）{item['text']}") for n in range(copies)
                           for item in items]
    return write_exam(root, files)


# --- processes -----------------------------------------------------------------------------------

def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (read from /proc; collected before a kill, since orphans move)."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def survivors(pids: set[int], *, wait_s: float = 10.0) -> set[int]:
    """Those of `pids` still alive after up to `wait_s` (processes that should die with the harness)."""
    deadline = time.monotonic() + wait_s
    left = {p for p in pids if alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left


@dataclass(frozen=True)
class KillPoint:
    """When to kill a run: once the logs hold `calls` calls (and the run has registered), `delay` s later."""

    calls: int
    """Calls logged (cumulative over the chain's logs); 0 = as soon as solving has begun."""

    delay: float
    """Seconds to wait after that, so the kill lands anywhere inside the next step."""


def kill_points(seed: int | str, *, kills: int, total_calls: int, margin: int, max_delay: float,
                lowest: int = 1) -> list[KillPoint]:
    """`kills` increasing kill points drawn by a seeded RNG in [lowest, total_calls - margin]."""
    rng = random.Random(seed)
    highest = total_calls - margin
    assert highest >= lowest + kills - 1, f"too few calls ({total_calls}) for {kills} kills with margin {margin}"
    calls = sorted(rng.sample(range(lowest, highest + 1), kills))
    return [KillPoint(c, round(rng.uniform(0.0, max_delay), 3)) for c in calls]


@dataclass(frozen=True)
class Killed:
    """What one killed process left."""

    injected: bool
    """The process was still running when SIGKILL was sent (else it had finished first)."""
    calls_committed: int
    """Calls in the store right after the kill."""
    samples_committed: int
    """Sample rows in the store right after the kill."""
    calls_logged: int
    """Calls this process made (logged)."""
    orphans: frozenset[int]
    """Processes it started that outlived it (sandbox workers must die with the harness)."""
    results_written: bool
    """A results.json existed after the kill (a killed run must never leave one)."""


def run_until_killed(args: Sequence[str], *, cwd: Path, logs: Sequence[Path], trigger: Sequence[Path], store: Path,
                     point: KillPoint, results: Path | None = None, wait_for_run_row: bool = True,
                     stderr: Path | None = None) -> Killed:
    """Start a run, SIGKILL it at `point` (counted on the `trigger` logs), and say what it left."""
    before = len(logged(*logs))
    err = open(stderr or os.devnull, "ab")
    try:
        proc = subprocess.Popen([*FINHARNESS, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
    finally:
        err.close()
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            if len(logged(*trigger)) >= point.calls and (not wait_for_run_row or has_run_row(store)):
                break
            time.sleep(0.01)
        time.sleep(point.delay)
        injected = proc.poll() is None
        children = descendants(proc.pid)
        if injected:
            os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return Killed(injected, len(committed_keys(store)), sample_rows(store), len(logged(*logs)) - before,
                  frozenset(survivors(children)), results is not None and results.exists())


@dataclass
class Chain:
    """A run killed at several points, then rerun to completion: every process's calls, checked against the store."""

    killed: list[Killed] = field(default_factory=list)
    repeated: int = 0
    """Calls a process made although their answer was committed before it started."""
    lost_in_flight: int = 0
    """Calls answered by the backend but killed before their commit (legitimately made again)."""
    keys: Counter = field(default_factory=Counter)
    """Every logged call key over the whole chain."""
    final: subprocess.CompletedProcess | None = None

    @property
    def injected(self) -> int:
        return sum(k.injected for k in self.killed)


def crash_chain(args: Sequence[str], *, cwd: Path, logs: Sequence[Path], store: Path, points: Sequence[KillPoint],
                trigger: Sequence[Path] | None = None, results: Path | None = None,
                wait_for_run_row: bool = True) -> Chain:
    """Kill a run at each point in turn (each time restarting the same command), then rerun it to the end."""
    chain = Chain()
    for i, point in enumerate(points):
        committed_before = committed_keys(store)
        seen = marks(logs)
        killed = run_until_killed(args, cwd=cwd, logs=logs, trigger=trigger or logs, store=store, point=point,
                                  results=results, wait_for_run_row=wait_for_run_row,
                                  stderr=cwd / f"killed-{i}.stderr")
        made = since(logs, seen)
        committed_after = committed_keys(store)
        chain.killed.append(killed)
        chain.repeated += sum(line["key"] in committed_before for line in made)
        chain.lost_in_flight += sum(line["key"] not in committed_after for line in made)
        chain.keys.update(line["key"] for line in made)
    committed_before = committed_keys(store)
    seen = marks(logs)
    chain.final = cli(args, cwd=cwd)
    made = since(logs, seen)
    chain.repeated += sum(line["key"] in committed_before for line in made)
    chain.keys.update(line["key"] for line in made)
    return chain
