"""A whole run against a real local server that injects faults: it completes, and every retry and failure is counted.

The counts are checked against what the server logged request by request (tests/servers/reconcile.py),
not against the faults it injected: on a slow machine a healthy reply can come after the client's
timeout, which is one more (rightly counted) retry, not a miscount."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from finharness.backends import from_spec
from finharness.benchmarks.demo.task import DemoTask
from finharness.core.retry import RetryPolicy
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from tests.servers.fault_server import SLOW_OK, fault_server
from tests.servers.reconcile import ClientAttempts, body_key, reconcile

FAST = RetryPolicy(max_attempts=8, base_delay=0.01, max_delay=0.05)

CLIENT_TIMEOUT = 0.5
"""Read timeout of the run with timeouts in its mix (the server holds a 'timeout' fault and a
'slow_ok' reply until the client hangs up, so the timeout always fires first)."""

PATIENT = 60.0
"""Read timeout of a run that has no timeout to exercise: no reply is ever that late."""

QUESTIONS = [DemoTask().messages(s)[-1].content for s in DemoTask().load(None)]
SLOW_QUESTION = QUESTIONS[5]
"""The question whose first request gets a healthy reply only after the client has given up on it."""


def run_demo(base_url: str, tmp_path: Path, name: str, *, timeout: float = PATIENT,
             attempts: ClientAttempts | None = None):
    backend = from_spec(f"openai:fault-model@{base_url}?timeout={timeout}&concurrency=4")
    if attempts is not None:  # record what each attempt got, as the client saw it (the runner calls this)
        backend.generate = attempts.wrap(backend.generate)
    store = RunStore(tmp_path / f"{name}.sqlite")
    try:
        return asyncio.run(run_task(DemoTask(), {"model": backend}, store, RunOptions(retry=FAST), out_dir=tmp_path / name))
    finally:
        store.close()


def sample_lines(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "samples.jsonl").read_text().splitlines()]


def test_random_faults_the_run_completes_and_retries_are_counted(tmp_path: Path):
    slowed: set[str] = set()

    def plan(body: dict) -> str | None:  # a slow but healthy reply, once, on top of the random faults
        if body_key(body) == SLOW_QUESTION and not slowed:
            slowed.add(SLOW_QUESTION)
            return SLOW_OK
        return None

    attempts = ClientAttempts()
    with fault_server(rate=0.45, seed=7, retry_after=0, plan=plan,
                      responder=lambda body: "Answer: B") as server:
        result = run_demo(server.base_url, tmp_path, "mixed", timeout=CLIENT_TIMEOUT, attempts=attempts)
        server.wait_settled()
        counters = server.counters
    # request by request, the server's log explains every attempt of the run (raises where it does not)
    rec = reconcile(counters.log, attempts)
    res = result.results
    assert rec.injected >= 5, "the fault mix must actually inject faults"
    assert res["status"] == "complete" and res["counts"]["failures"] == 0 and rec.accepted == 12
    # every retry is counted exactly once, whatever the timing: the requests the server saw, less one per question
    assert res["counts"]["retries"] == rec.retries == counters.requests - 12
    # every injected fault was retried; every other retry is a healthy reply that came too late (the slow
    # one served on purpose, and any a loaded machine made late), each retried as a timeout
    assert rec.retries == rec.injected + rec.late_healthy and rec.late_healthy >= 1
    assert attempts.by_key[SLOW_QUESTION][0] == "timeout"
    # ... and on the sample it belongs to
    lines = sample_lines(tmp_path / "mixed")
    assert len(lines) == 12
    for line in lines:
        calls = [t for t in line["trace"] if t.get("kind") == "generate"]
        asked = calls[-1]["prompt"][-1]["content"]
        assert sum(t["retries"] for t in calls) == len(rec.served[asked]) - 1, line["id"]
    slow = next(line for line in lines if line["trace"][-1]["prompt"][-1]["content"] == SLOW_QUESTION)
    assert slow["prediction"] == "Answer: B" and not slow["failed"]  # retried, not lost
    assert res["metrics"]["accuracy"]["n"] == 12
    assert res["metrics"]["accuracy"]["value"] == 8 / 12  # 'Answer: B' is right on 8 of the 12 items


def test_a_request_that_keeps_failing_is_recorded_never_scored(tmp_path: Path):
    # the first request gets a 400 (not retryable); everything else is fine
    with fault_server(script=["400"], responder=lambda body: "Answer: B") as server:
        result = run_demo(server.base_url, tmp_path, "bad")  # patient: a slow 400 is still a 400
    res = result.results
    assert res["status"] == "incomplete"
    assert res["counts"]["failures"] == 1 and res["counts"]["failed_samples"] == 1
    assert res["metrics"]["accuracy"]["n"] == 11
    lines = sample_lines(tmp_path / "bad")
    failed = [row for row in lines if row["failed"]]
    assert len(failed) == 1 and failed[0]["score"] is None and "400" in failed[0]["failed"]
