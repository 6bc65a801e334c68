"""Several `finharness run` processes writing to one run store at the same time.

Different tasks and models side by side, and the very same run started twice (or four times) at
once: every run completes with the results of a run alone, the store ends with each call and each
sample once, no process reports `database is locked`, no run computes a call whose answer was
committed before it started, and no run computes one call twice (concurrent runs may each compute
a call that none had committed when it looked). What was computed is counted from the fake
backend's call log (one line per call really made), never from the store's rows: a call computed
again replaces its row, so the store cannot show it.
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ._runs import FINHARNESS, PROCESS_TIMEOUT_S, cli, fake_spec, logged, repeated_exam, run_outcome, stored_samples

PREFIX = 35
"""Samples run to the end, alone, before the racing runs start (of 105): their calls are committed first."""


def start_all(commands: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    """Start every command at once, then wait for all of them."""
    procs = [subprocess.Popen([*FINHARNESS, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for args in commands]
    done = []
    for args, proc in zip(commands, procs):
        out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
        done.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return done


def store_rows(db: Path) -> tuple[Counter, set[str]]:
    """(samples per (run, id), call keys) of a finished store."""
    with sqlite3.connect(db) as conn:
        samples = Counter(conn.execute("SELECT run_key, sample_id FROM samples").fetchall())
        calls = {row[0] for row in conn.execute("SELECT key FROM calls")}
    return samples, calls


def computed(log_lines: list[dict[str, Any]]) -> Counter:
    """How many times each call (key) was really computed, over every process that logged it."""
    return Counter(line["key"] for line in log_lines)


def run_args(task: str, out: Path, store: Path, spec: str, *rest: str) -> list[str]:
    return ["run", task, "--model", spec, "--out", str(out), "--store", str(store), "-q", *rest]


def check_clean(procs: list[subprocess.CompletedProcess]) -> None:
    for proc in procs:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "database is locked" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_two_runs_of_different_tasks_share_one_store(tmp_path, reliability_tally):
    exam = repeated_exam(tmp_path / "exam", 10)
    store = tmp_path / "shared.sqlite"
    demo = run_args("demo", tmp_path / "demo", store, fake_spec("a", log=tmp_path / "a.log"), "--concurrency", "8")
    cfin = run_args("cfinbench", tmp_path / "cfin", store, fake_spec("b", log=tmp_path / "b.log"),
                    "--data-dir", str(exam), "--concurrency", "8")
    procs = start_all([demo, cfin], tmp_path)
    check_clean(procs)
    # each alone, in a store of its own
    alone = start_all([run_args("demo", tmp_path / "demo-alone", tmp_path / "demo.sqlite", fake_spec("a")),
                       run_args("cfinbench", tmp_path / "cfin-alone", tmp_path / "cfin.sqlite", fake_spec("b"),
                                "--data-dir", str(exam))], tmp_path)
    check_clean(alone)
    a, b = logged(tmp_path / "a.log"), logged(tmp_path / "b.log")
    samples, calls = store_rows(store)
    lost = 0
    for name in ("demo", "cfin"):
        together, solo = run_outcome(tmp_path / name), run_outcome(tmp_path / f"{name}-alone")
        assert together == solo
        in_store = stored_samples(store, together["run_key"])
        lost += len(set(solo["samples"]) - set(in_store))
        assert in_store == Counter(list(solo["samples"]))
    assert all(n == 1 for n in samples.values())
    # different models share no call: a call computed twice (by either run) is a repeat
    made = computed(a + b)
    repeated = sum(made.values()) - len(made)
    reliability_tally("two runs on one store: different tasks", injected=1, completed=2, lost=lost,
                      repeated=repeated, runs=2)
    assert calls == set(made) and repeated == 0, "each call computed once and stored once"


@pytest.mark.parametrize("writers", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_the_same_run_started_twice_at_once(tmp_path, writers, reliability_tally):
    """`writers` copies of one run, started at once on a store that already holds the calls of its
    first PREFIX samples (a run with --limit, finished before they start).

    What can honestly be asserted about runs racing on the same items, counted from the call log:
    - a call committed before a run started is never computed by it (a run looks each call up just
      before making it): the writers compute none of the prefix's calls;
    - no run computes one call twice (its own answers are found by its later lookups);
    - any other call may be computed by every writer: each can look it up before any has committed
      it. Usually one run is a step ahead and the other finds its answers, but runs in lockstep both
      miss every call; which happens is up to the scheduler, so the only bound is 1 to `writers`
      computations per call, at most one per run.
    None of this depends on timing. A store that fails to serve a committed call fails it every time:
    the prefix's samples belong to another run (--limit is part of the run), so the writers solve
    them again and must find their calls in the store.
    """
    exam = repeated_exam(tmp_path / "exam", 15)
    store = tmp_path / "shared.sqlite"
    spec = fake_spec("m", latency=0.002, log=tmp_path / "calls.log")
    check_clean([cli(run_args("cfinbench", tmp_path / "prefix", store, fake_spec("m", log=tmp_path / "prefix.log"),
                              "--data-dir", str(exam), "--limit", str(PREFIX)), cwd=tmp_path)])
    prefix = set(computed(logged(tmp_path / "prefix.log")))
    _, committed_before = store_rows(store)
    assert prefix == committed_before and len(prefix) >= PREFIX, "the prefix run committed its calls"
    commands = [run_args("cfinbench", tmp_path / f"out{i}", store, spec, "--data-dir", str(exam),
                         "--concurrency", "4") for i in range(writers)]
    procs = start_all(commands, tmp_path)
    check_clean(procs)
    lines = logged(tmp_path / "calls.log")
    samples, calls = store_rows(store)
    outcomes = [run_outcome(tmp_path / f"out{i}") for i in range(writers)]
    assert all(o == outcomes[0] for o in outcomes), "every run must end with the same results"
    reference = tmp_path / "alone"
    check_clean(start_all([run_args("cfinbench", reference, tmp_path / "alone.sqlite",
                                    fake_spec("m", log=tmp_path / "alone.log"), "--data-dir", str(exam))], tmp_path))
    assert outcomes[0] == run_outcome(reference)
    needed = set(computed(logged(tmp_path / "alone.log")))
    # the writers need the prefix's calls, and (--limit makes another run) resume none of its samples:
    # they must look those calls up, else never computing them again would prove nothing
    assert prefix < needed and run_outcome(tmp_path / "prefix")["run_key"] != outcomes[0]["run_key"]
    ids = set(outcomes[0]["samples"])
    in_store = stored_samples(store, outcomes[0]["run_key"])
    assert in_store == Counter(ids), "each sample once in the store"
    assert all(n == 1 for n in samples.values())
    assert calls == needed, "the store holds exactly the calls of one run"

    made = computed(lines)
    per_run = Counter((line["pid"], line["key"]) for line in lines)
    repeated = sum(made[key] for key in prefix)
    reliability_tally(f"{writers} copies of one run on one store", injected=writers - 1, completed=len(procs),
                      lost=len(ids - set(in_store)), repeated=repeated, runs=writers)
    assert repeated == 0, (f"the writers computed {repeated} calls committed before they started "
                           f"({len(prefix)} such calls, {sum(made.values())} computed in all)")
    assert set(made) == needed - prefix, "every other call was computed by some run"
    twice = {key: n for key, n in per_run.items() if n > 1}
    assert not twice, f"{len(twice)} calls computed twice by one run"
    assert all(n <= writers for n in made.values())  # follows from the above: at most once per run
