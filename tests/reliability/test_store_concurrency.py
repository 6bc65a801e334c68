"""Several `finharness run` processes writing to one run store at the same time.

Different tasks and models side by side, and the very same run started twice (or four times) at
once: every run completes with the results of a run alone, the store ends with each call and each
sample once, no process reports `database is locked`, and no call is made whose answer was already
committed when it started (concurrent runs may both compute a call that neither has finished).
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ._runs import FINHARNESS, PROCESS_TIMEOUT_S, fake_spec, logged, repeated_exam, run_outcome, stored_samples


def start_all(commands: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    """Start every command at once, then wait for all of them."""
    procs = [subprocess.Popen([*FINHARNESS, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for args in commands]
    done = []
    for args, proc in zip(commands, procs):
        out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
        done.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return done


def store_rows(db: Path) -> tuple[Counter, dict[str, float]]:
    """(samples per (run, id), commit time of each call) of a finished store."""
    with sqlite3.connect(db) as conn:
        samples = Counter(conn.execute("SELECT run_key, sample_id FROM samples").fetchall())
        calls = dict(conn.execute("SELECT key, created FROM calls").fetchall())
    return samples, calls


def recomputed(log_lines: list[dict[str, Any]], committed_at: dict[str, float]) -> int:
    """Calls started after their answer was already committed (by the other run): never allowed."""
    return sum(1 for line in log_lines if line["started"] > committed_at[line["key"]])


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
    assert set(calls) == {line["key"] for line in a + b} and len(calls) == len(a) + len(b)  # nothing twice
    reliability_tally("two runs on one store: different tasks", injected=1, completed=2, lost=lost,
                      repeated=recomputed(a + b, calls), runs=2)


@pytest.mark.parametrize("writers", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_the_same_run_started_twice_at_once(tmp_path, writers, reliability_tally):
    exam = repeated_exam(tmp_path / "exam", 15)
    store = tmp_path / "shared.sqlite"
    log = tmp_path / "calls.log"
    commands = [run_args("cfinbench", tmp_path / f"out{i}", store, fake_spec("m", latency=0.002, log=log),
                         "--data-dir", str(exam), "--concurrency", "4") for i in range(writers)]
    procs = start_all(commands, tmp_path)
    check_clean(procs)
    lines = logged(log)
    samples, calls = store_rows(store)
    outcomes = [run_outcome(tmp_path / f"out{i}") for i in range(writers)]
    assert all(o == outcomes[0] for o in outcomes), "every run must end with the same results"
    reference = tmp_path / "alone"
    check_clean(start_all([run_args("cfinbench", reference, tmp_path / "alone.sqlite", fake_spec("m"),
                                    "--data-dir", str(exam))], tmp_path))
    assert outcomes[0] == run_outcome(reference)
    ids = set(outcomes[0]["samples"])
    in_store = stored_samples(store, outcomes[0]["run_key"])
    assert in_store == Counter(ids), "each sample once in the store"
    assert all(n == 1 for n in samples.values())
    assert set(calls) == {line["key"] for line in lines}, "each call once in the store"
    repeated = recomputed(lines, calls)
    reliability_tally(f"{writers} copies of one run on one store", injected=writers - 1, completed=len(procs),
                      lost=len(ids - set(in_store)), repeated=repeated, runs=writers)
    assert repeated == 0, "no run may compute a call whose answer the other had already committed"
    # both may have computed a call neither had finished: at most once per writer
    assert len(lines) <= writers * len(calls)
