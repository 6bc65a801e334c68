"""Many processes opening one fresh run store at the same instant.

Every `finharness run` opens its store first: switches it into WAL and brings its schema up to date.
Started together on a new store path, the processes race on exactly that (before the fix, SQLite
answered the loser's WAL switch 'database is locked' at once, without waiting out the busy timeout).
Here worker processes wait for a common go, then all open the round's fresh store together and
start a run in it (a committed write, read back); every open must succeed and every store end in
WAL with the current schema. Workers live across rounds, so a round costs the race and not an
interpreter start. The default case is 20 processes at once for 50 rounds (a single round collides
only now and then; before the fix 50 rounds failed 6 to 92 opens in each of 6 tries), `-m slow`
100 rounds each of 2, 4 and 8 processes.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Semaphore
from pathlib import Path
from typing import Callable

import pytest

from finharness.core.store import MIGRATIONS, RunStore

WAIT_S = 120.0
"""Longest a worker waits for the go, and the parent for a worker: a hang fails the test instead of blocking."""


def open_rounds(root: str, rounds: int, ready: Semaphore, go: tuple[Semaphore, Semaphore], reports: Queue) -> None:
    """A worker: in each round, say it is ready, wait for the go, then open the round's store and start a
    run in it; reports the failures (one line each)."""
    failures: list[str] = []
    for r in range(rounds):
        ready.release()
        # the go of even and odd rounds alternate: a worker done early with round r cannot take a go
        # meant for a slower one in round r (a round's go is given only once all are ready for it)
        if not go[r % 2].acquire(timeout=WAIT_S):
            failures.append(f"round {r}: no go")
            break
        try:
            store = RunStore(Path(root) / f"round{r}.sqlite")
            try:
                store.put_run("run", {"round": r})  # outside an event loop: committed at once
                if store.get_run("run") != {"round": r}:
                    failures.append(f"round {r}: the run's row did not read back")
            finally:
                store.close()
        except Exception as err:  # noqa: BLE001 -- every failure is counted, none stops the rounds
            failures.append(f"round {r}: {type(err).__name__}: {err}")
    reports.put(failures)


def open_at_once(root: Path, processes: int, rounds: int) -> tuple[list[str], float]:
    """(failures, wall seconds) of `rounds` rounds of `processes` processes opening a fresh store together."""
    # workers forked from a clean single-threaded server that has imported this module: no fork of a
    # pytest process that may hold threads, and no interpreter start and imports per worker
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    ready, go, reports = ctx.Semaphore(0), (ctx.Semaphore(0), ctx.Semaphore(0)), ctx.Queue()
    workers = [ctx.Process(target=open_rounds, args=(str(root), rounds, ready, go, reports))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    try:
        started = time.perf_counter()
        for r in range(rounds):
            # a semaphore post per worker wakes each at once (a multiprocessing Barrier or Event wakes
            # its waiters one after another, each acknowledging: that staggers the opens it should race)
            for _ in workers:
                assert ready.acquire(timeout=WAIT_S), "a worker never became ready"
            for _ in workers:
                go[r % 2].release()
        failures = [line for _ in workers for line in reports.get(timeout=WAIT_S)]
        wall = time.perf_counter() - started
    finally:
        for worker in workers:
            worker.join(WAIT_S)
            if worker.is_alive():
                worker.kill()
    assert all(worker.exitcode == 0 for worker in workers), [worker.exitcode for worker in workers]
    return failures, wall


def check_stores(root: Path, rounds: int) -> None:
    """Each round's store ended in WAL, at the current schema, with its run once."""
    for r in range(rounds):
        with sqlite3.connect(root / f"round{r}.sqlite") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
            assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def stress(tmp_path: Path, processes: int, rounds: int, reliability_tally: Callable[..., None]) -> None:
    """Race `processes` openers on a fresh store, `rounds` times: no open may fail."""
    failures, wall = open_at_once(tmp_path, processes, rounds)
    starts = processes * rounds
    print(f"{processes} processes x {rounds} rounds: {starts} opens, {len(failures)} failed, {wall:.2f} s")
    reliability_tally(f"{processes} processes open one fresh store at once", injected=(processes - 1) * rounds,
                      completed=starts - len(failures), lost=0, repeated=0, runs=starts)
    assert failures == [], f"{len(failures)} of {starts} opens failed: {failures[:5]}"
    check_stores(tmp_path, rounds)


def test_twenty_processes_open_a_fresh_store_at_once(tmp_path, reliability_tally):
    stress(tmp_path, processes=20, rounds=50, reliability_tally=reliability_tally)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 4, 8])
def test_a_hundred_rounds_of_processes_opening_a_fresh_store(tmp_path, processes, reliability_tally):
    stress(tmp_path, processes=processes, rounds=100, reliability_tally=reliability_tally)
