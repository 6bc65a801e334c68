"""A whole run against a real local server that injects faults: it completes, and every retry and failure is counted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from finharness.backends import from_spec
from finharness.benchmarks.demo.task import DemoTask
from finharness.core.retry import RetryPolicy
from finharness.core.runner import run_task
from finharness.core.store import RunStore
from tests.servers.fault_server import fault_server

FAST = RetryPolicy(max_attempts=8, base_delay=0.01, max_delay=0.05)


def run_demo(base_url: str, tmp_path: Path, name: str):
    backend = from_spec(f"openai:fault-model@{base_url}?timeout=0.5&concurrency=4")
    store = RunStore(tmp_path / f"{name}.sqlite")
    try:
        return asyncio.run(run_task(DemoTask(), {"model": backend}, store, data_dir=None,
                                    out_dir=tmp_path / name, retry=FAST))
    finally:
        store.close()


def test_random_faults_the_run_completes_and_retries_are_counted(tmp_path: Path):
    with fault_server(rate=0.45, seed=7, retry_after=0, timeout_sleep=1.0,
                      responder=lambda body: "Answer: B") as server:
        result = run_demo(server.base_url, tmp_path, "mixed")
        injected = server.counters.retryable_faults()
    res = result.results
    assert injected >= 5, "the fault mix must actually inject faults"
    assert res["status"] == "complete" and res["counts"]["failures"] == 0
    assert res["counts"]["retries"] == injected, "every retried fault is counted exactly once"
    assert res["metrics"]["accuracy"]["n"] == 12
    assert res["metrics"]["accuracy"]["value"] == 8 / 12  # 'Answer: B' is right on 8 of the 12 items


def test_a_request_that_keeps_failing_is_recorded_never_scored(tmp_path: Path):
    # the first request gets a 400 (not retryable); everything else is fine
    with fault_server(script=["400"], responder=lambda body: "Answer: B") as server:
        result = run_demo(server.base_url, tmp_path, "bad")
    res = result.results
    assert res["status"] == "incomplete"
    assert res["counts"]["failures"] == 1 and res["counts"]["failed_samples"] == 1
    assert res["metrics"]["accuracy"]["n"] == 11
    lines = [json.loads(l) for l in (tmp_path / "bad" / "samples.jsonl").read_text().splitlines()]
    failed = [l for l in lines if l["failed"]]
    assert len(failed) == 1 and failed[0]["score"] is None and "400" in failed[0]["failed"]
