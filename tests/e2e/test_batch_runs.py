"""Batch runs through the command line against the batch stand-in (tests/servers/batch_server.py):

- a run killed with SIGKILL at three moments while its batch is in flight (the create request answered but its
  reply not yet read; the batch in progress; its results being downloaded) and rerun each time: every call sent
  once (none twice), every call stored (none lost), the results those of a live run;
- a suite (the bundled quick suite's rows whose data the shared copy holds) run live and in batch mode against the
  same stand-in: the same rows in the store, the same scores on the scorecard;
- `finharness batch status` and `batch cancel`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from finharness.core.store import RunStore
from finharness.suite.spec import bundled_suite_toml
from tests.e2e.stand_ins import server_answer
from tests.servers.batch_server import batch_server

FAST = {"FINHARNESS_BATCH_POLL_S": "0.05", "FINHARNESS_BATCH_GATHER_S": "0.3", "PYTHONUNBUFFERED": "1"}


def finharness(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finharness", *args], env={**os.environ, **FAST, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "finharness", *args], env={**os.environ, **FAST},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(event, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not event.wait(0.05):
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before the moment came"
        assert time.monotonic() < deadline, "the moment never came"


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def stored_calls(store_path: Path) -> dict[str, dict]:
    with RunStore(store_path) as store:
        return {c["key"]: c["response"] for c in store.iter_calls()}


def test_kill_9_at_three_moments_of_a_batch_sends_no_call_twice_and_loses_none(tmp_path: Path):
    with batch_server(server_answer) as server:
        spec = f"openai:m@{server.base_url}"
        args = ["run", "demo", "--model", spec, "--batch", "--out", str(tmp_path / "batch"), "-q"]
        # 1: the provider has created the batch; its reply (the batch id) never reaches the run
        server.pause_create = True
        proc = start(*args)
        wait_for(server.reached["created"], proc)
        kill(proc)
        server.pause_create = False
        server.release.set()
        with RunStore(tmp_path / "batch" / "store.sqlite") as store:
            assert [row["state"] for row in store.batches()] == ["creating"]
        # 2: the batch in progress (found again at the provider by its metadata, then followed)
        server.release.clear()
        server.hold.set()
        server.reached["polled"].clear()
        proc = start(*args)
        wait_for(server.reached["polled"], proc)
        kill(proc)
        with RunStore(tmp_path / "batch" / "store.sqlite") as store:
            assert [row["state"] for row in store.batches()] == ["submitted"]
        # 3: the batch completed, its output file being downloaded
        server.hold.clear()
        server.pause_results = True
        proc = start(*args)
        wait_for(server.reached["results"], proc)
        kill(proc)
        server.pause_results = False
        server.release.set()
        with RunStore(tmp_path / "batch" / "store.sqlite") as store:
            assert [row["state"] for row in store.batches()] == ["ended"]
        finished = finharness(*args)
        assert finished.returncode == 0, finished.stderr
        live = finharness("run", "demo", "--model", spec, "--out", str(tmp_path / "live"), "-q")
        assert live.returncode == 0, live.stderr
        submitted = dict(server.submitted)
    batch_calls = stored_calls(tmp_path / "batch" / "store.sqlite")
    assert len(server.jobs) == 1  # one batch in all: never made again
    assert len(submitted) == 12 and set(submitted.values()) == {1}, "a call sent twice"
    assert set(batch_calls) == set(submitted), "a call paid for and not stored"
    assert batch_calls == stored_calls(tmp_path / "live" / "store.sqlite")
    results = json.loads((tmp_path / "batch" / "results.json").read_text(encoding="utf-8"))
    live_results = json.loads((tmp_path / "live" / "results.json").read_text(encoding="utf-8"))
    assert results["status"] == "complete" and results["metrics"] == live_results["metrics"]
    with RunStore(tmp_path / "batch" / "store.sqlite") as store:
        assert [row["state"] for row in store.batches()] == ["collected"]


def available_quick(tmp_path: Path) -> Path:
    """The quick suite without the rows whose data the shared copy lacks (BizBench's Hub files)."""
    text = bundled_suite_toml("quick")
    head, *rows = text.split("[[task]]")
    kept = [r for r in rows if not re.search(r'id = "bizbench_(fincode|codefinqa|convfinqa-e)"', r)]
    path = tmp_path / "quick-here.toml"
    path.write_text(head + "".join("[[task]]" + r for r in kept), encoding="utf-8")
    return path


SCORED = ("models", "rows", "cells", "differences", "ratings", "status", "roles")
"""The scorecard's parts made from the scores (its usage table counts calls made, which in a live run too depends on
which of two rows asking the same request got there first)."""


@pytest.mark.slow
def test_a_suite_in_batch_mode_stores_and_scores_what_a_live_suite_does(tmp_path: Path):
    suite = available_quick(tmp_path)
    with batch_server(server_answer) as server:
        url = server.base_url
        roles = ["--model", f"openai:m@{url}", "--judge", f"openai:j@{url}", "--user-model", f"openai:u@{url}"]
        live = finharness("suite", str(suite), *roles, "--out", str(tmp_path / "live"), "-q")
        assert live.returncode == 0, live.stderr[-2000:]
        calls_live = server.live_calls
        batch = finharness("suite", str(suite), *roles, "--batch", "--out", str(tmp_path / "batch"), "-q")
        assert batch.returncode == 0, batch.stderr[-2000:]
        assert server.live_calls == calls_live  # nothing went live in batch mode
        submitted = dict(server.submitted)
        waves = len(server.jobs)
    assert set(submitted.values()) == {1} and waves >= 3  # first turns, dialogue rounds, judging
    assert stored_calls(tmp_path / "batch" / "store.sqlite") == stored_calls(tmp_path / "live" / "store.sqlite")
    cards = [json.loads((tmp_path / d / "scorecard.json").read_text(encoding="utf-8")) for d in ("live", "batch")]
    assert {k: cards[0][k] for k in SCORED} == {k: cards[1][k] for k in SCORED}
    modes = {m for entry in cards[1]["usage"] for m in (entry.get("billed") or {})}
    assert modes and all(m.endswith("/batch") for m in modes)
    everything = next(u for u in cards[1]["usage"] if u["model"] == "all")
    assert sum(f["calls"] for f in everything["billed"].values()) == sum(submitted.values())  # each billed once


def test_batch_status_and_cancel_list_and_stop_a_runs_batches(tmp_path: Path):
    with batch_server(server_answer) as server:
        server.hold.set()
        proc = start("run", "demo", "--model", f"openai:m@{server.base_url}", "--batch", "--out", str(tmp_path),
                     "-q")
        wait_for(server.reached["polled"], proc)
        kill(proc)
        status = finharness("batch", "status", str(tmp_path))
        assert status.returncode == 0, status.stderr
        assert "in_progress" in status.stdout and "12" in status.stdout and "submitted" in status.stdout
        cancelled = finharness("batch", "cancel", str(tmp_path))
        assert cancelled.returncode == 0, cancelled.stderr
        (job,) = server.jobs.values()
        assert job.cancel_asked
        again = finharness("batch", "status", str(tmp_path), "--json")
    rows = json.loads(again.stdout)
    assert rows[0]["status"] in ("cancelling", "cancelled")
