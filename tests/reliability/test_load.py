"""Load: a thousand requests through the whole engine against the local server, with bounded concurrency.

A synthetic task (one chat call per sample, answered by the server with a hash of the question)
runs N samples through an OpenAI-shaped backend at concurrency 16, with 5% retryable faults
mixed in. Asserted: no request lost (N calls stored, N sample records, every answer belongs to
its own question), no store lock errors, the server never sees more than 16 requests at once,
and the process's peak resident memory grows by less than a stated, generous bound (Linux
VmHWM, reset before the run). No timing is asserted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from finharness.backends import from_spec
from finharness.core.hashing import canonical_json
from finharness.core.retry import RetryPolicy
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.task import Models, Task
from finharness.core.types import GenerateParams, Message, Sample, Score
from tests.servers.fault_server import answer_text, fault_server

CONCURRENCY = 16
"""The configured bound (`?concurrency=16` on the spec)."""

FAULT_RATE = 0.05
LOAD_FAULTS = ("429_retry_after", "500", "503")
"""Retryable faults mixed into the load (no stalls: the test stays fast)."""

RETRY = RetryPolicy(max_attempts=10, base_delay=0.005, max_delay=0.02)


class EchoTask(Task):
    """N questions; the right answer to each is the server's hash of it."""

    name = "load-echo"

    def __init__(self, n: int):
        super().__init__(n=n)
        self.n = n

    @staticmethod
    def question(i: int) -> str:
        return f"load question {i}: what was the operating margin?"

    def load(self, data_dir: Path | None) -> list[Sample]:
        return [Sample(id=f"load/{i}", input=self.question(i),
                       target=answer_text({"messages": [{"role": "user", "content": self.question(i)}]}))
                for i in range(self.n)]

    async def solve(self, sample: Sample, models: Models) -> str:
        reply = await models.model.chat([Message("user", sample.input)], GenerateParams(max_tokens=8))
        return reply.text

    def score(self, sample: Sample, prediction: Any) -> Score:
        return Score(value=float(prediction == sample.target), extracted=prediction, rule="exact", parsed=True)


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss() -> int:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; return it in bytes.
    (tracemalloc would be exact for the Python heap but slows this test threefold.)"""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError as exc:
        pytest.skip(f"cannot reset the peak RSS on this system ({exc})")
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    return _status_kib("VmHWM") * 1024


def run_load(tmp_path: Path, n: int, caplog: pytest.LogCaptureFixture) -> tuple[dict, Any, int, RunStore]:
    """The run's results, the server's counters, the growth of the peak RSS (bytes) and the (closed) store."""
    with fault_server(rate=FAULT_RATE, seed=11, kinds=LOAD_FAULTS, retry_after=0, latency=0.002) as server:
        backend = from_spec(f"openai:fault-model@{server.base_url}?concurrency={CONCURRENCY}&timeout=30")
        backend.identity()  # the one GET /models, before the measurement
        store = RunStore(tmp_path / "store.sqlite")
        try:
            before = reset_peak_rss()
            with caplog.at_level(logging.WARNING):
                result = asyncio.run(run_task(EchoTask(n), {"model": backend}, store, RunOptions(retry=RETRY), out_dir=tmp_path / "run"))
            growth = peak_rss() - before
        finally:
            store.close()
        return result.results, server.counters, growth, store


def repeated_calls(counters: Any) -> int:
    """Requests the server had already answered 'ok' (a completed call made again)."""
    answered = Counter(canonical_json(b) for b, kind in zip(counters.bodies, counters.served) if kind == "ok")
    return sum(k - 1 for k in answered.values())


def check_nothing_lost(tmp_path: Path, n: int, results: dict, counters: Any, store: RunStore,
                       caplog: pytest.LogCaptureFixture) -> None:
    assert results["status"] == "complete", results["notes"]
    counts = results["counts"]
    assert counts["calls"] == counts["samples"] == n and counts["failures"] == 0, counts
    seen = f"server saw {dict(counters.by_kind)}, max {counters.max_in_flight} at once; counts {counts}"
    # Every attempt that reached the server is a success (one per sample) or an injected fault.
    assert counters.requests == n + counters.retryable_faults(), seen
    # Every fault is retried once. A few more retries are legitimate: under load a kept-alive
    # connection can be closed before the server reads the request ("closed without a response"),
    # which the server never sees as a request; those are bounded, never lost, never repeated.
    assert counters.retryable_faults() > 0 and counts["retries"] >= counters.retryable_faults(), seen
    assert counts["retries"] - counters.retryable_faults() <= max(3, n // 100), seen
    # every answer belongs to its own question (no crossed responses under load)
    assert results["metrics"]["accuracy"]["value"] == 1.0 and results["metrics"]["accuracy"]["n"] == n
    lines = (tmp_path / "run" / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == n and len({json.loads(line)["id"] for line in lines}) == n
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == n
        assert conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == n
        assert conn.execute("SELECT COUNT(*) FROM failures").fetchone()[0] == 0
    assert not [r for r in caplog.records if "locked" in r.getMessage()], "no 'database is locked'"
    assert 2 <= counters.max_in_flight <= CONCURRENCY, seen
    assert repeated_calls(counters) == 0


# every sample's record is kept for samples.jsonl, so memory grows with n, by a bounded amount each
@pytest.mark.parametrize("n,rss_bound_mib", [(1000, 128), pytest.param(10_000, 512, marks=pytest.mark.slow)])
def test_requests_none_lost_bounded_concurrency_and_memory(n, rss_bound_mib, tmp_path, caplog, reliability_tally):
    results, counters, growth, store = run_load(tmp_path, n, caplog)
    check_nothing_lost(tmp_path, n, results, counters, store, caplog)
    print(f"peak RSS growth {growth / 2**20:.1f} MiB for {n} requests")
    assert growth < rss_bound_mib * 2**20, f"peak RSS grew {growth / 2**20:.1f} MiB for {n} requests"
    reliability_tally(f"load: {n} requests, 5% retryable faults", injected=counters.retryable_faults(),
                      completed=int(results["status"] == "complete"), runs=1,
                      lost=n - results["counts"]["samples"], repeated=repeated_calls(counters))
