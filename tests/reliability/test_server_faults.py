"""Every fault of the local fault server, against both HTTP shapes (OpenAI, Anthropic), in whole runs.

Each case runs the demo task (12 questions) against a real server on 127.0.0.1 that injects one
fault kind on the first requests, then reruns the same command on the same store:

- a retryable fault (429 in three forms, 500/502/503/529, reset, read timeout, truncated JSON,
  empty choices) is retried: the run completes, `counts.retries` equals the faults served;
- a 400 is not retried: its samples fail (never scored), the run ends `incomplete` with a note
  saying to rerun, and the rerun completes by asking only for the failed samples;
- a model that never stops gives a valid answer cut at max_tokens, flagged on its sample;
- faults that keep coming (every retryable kind at once, each bound to one question on every
  attempt) exhaust the retries: each sample fails with its fault's kind named, the rest complete.

How long a Retry-After makes the client wait is checked in tests/unit/test_backend_remote.py;
here the server asks for 0 s so the cases stay fast.

The server answers each question with its gold letter, so a failure scored as an answer (an empty
or truncated body read as text) would show up as a wrong answer. "Calls repeated" counts request
bodies the server had already answered that were sent again (goal 0).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from finharness.backends import from_spec
from finharness.benchmarks.demo.task import DemoTask
from finharness.core.retry import RetryPolicy
from finharness.core.runner import RunResult, run_task
from finharness.core.store import RunStore, canonical_json
from tests.servers.fault_server import FAULT_KINDS, RETRYABLE_FAULTS, fault_server

CLIENT_TIMEOUT = 0.3
"""Read timeout of the client; a 'timeout' fault stalls twice as long."""

FAST = RetryPolicy(max_attempts=8, base_delay=0.01, max_delay=0.05)
"""Real backoff, scaled down so a case takes well under a second."""

INJECTED = 3
"""Faults served per case (on the first three requests, which overlap: concurrency 4)."""

SHAPES = ("openai", "anthropic")

FAULT_CLASS = {
    "429": "HTTP 429, no Retry-After",
    "429_retry_after": "HTTP 429, Retry-After seconds",
    "429_retry_after_date": "HTTP 429, Retry-After HTTP date",
    "500": "HTTP 500", "502": "HTTP 502", "503": "HTTP 503",
    "529": "HTTP 529 (overloaded)",
    "400": "HTTP 400 (not retryable)",
    "reset": "connection reset",
    "timeout": "read timeout",
    "truncated_json": "truncated JSON body",
    "empty_choices": "empty choices / content",
    "never_stops": "never stops (max_tokens)",
}
"""Table names of the fault kinds."""

HARNESS_KIND = {"429": "rate_limit", "429_retry_after": "rate_limit", "429_retry_after_date": "rate_limit",
                "500": "server_error", "502": "server_error", "503": "server_error", "529": "server_error",
                "reset": "connection", "timeout": "timeout", "truncated_json": "bad_response",
                "empty_choices": "bad_response"}
"""The `kind` a failed sample names for each retryable fault (core.retry.error_kind)."""

ANSWERED = ("ok", "never_stops")
"""Fault kinds whose answer the client accepts: a completed call."""


def demo_prompts() -> dict[str, str]:
    """The user message of each demo question -> its gold letter."""
    task = DemoTask()
    return {task.messages(s)[-1].content: s.target for s in task.load(None)}


GOLD = demo_prompts()


def gold_answer(body: dict) -> str:
    """The server answers every demo question with its gold letter ('Answer: B')."""
    return f"Answer: {GOLD[body['messages'][-1]['content']]}"


@pytest.fixture(scope="module")
def server():
    """One server for the module (both shapes): each case rescripts it, which resets its counters."""
    with fault_server(retry_after=0, timeout_sleep=2 * CLIENT_TIMEOUT, responder=gold_answer) as running:
        yield running


@pytest.fixture(scope="module")
def backends(server):
    """One backend per shape for the module (each asks GET /models once for its identity)."""
    return {shape: from_spec(f"{shape}:fault-model@{server.base_url}?timeout={CLIENT_TIMEOUT}&concurrency=4")
            for shape in SHAPES}


@dataclass
class Case:
    """One fault case: both runs and what the server saw."""

    first: RunResult
    rerun: RunResult
    served: list[str]
    """Fault kinds served, in arrival order, over both runs."""
    bodies: list[str]
    """Canonical request bodies, in the same order."""
    rerun_from: int
    """Index in `served` where the rerun's requests start."""
    store: Path

    def repeated_calls(self) -> int:
        """Requests whose body the server had already answered (a completed call made twice)."""
        answered = Counter(b for b, kind in zip(self.bodies, self.served) if kind in ANSWERED)
        return sum(n - 1 for n in answered.values())


def run_case(tmp_path: Path, server, backend, script: list[str] = (), *, plan=None, retry: RetryPolicy = FAST,
             limit: int | None = None) -> Case:
    """Run the demo with `script` (or `plan`) served first, then, faults over, rerun the same command on the
    same store (one event loop for both: one HTTP client)."""
    server.rescript(script, plan=plan)
    store = RunStore(tmp_path / "store.sqlite")

    def run(name: str):
        return run_task(DemoTask(), {"model": backend}, store, data_dir=None, out_dir=tmp_path / name,
                        retry=retry, limit=limit)

    async def both() -> tuple[RunResult, int, RunResult]:
        first = await run("first")
        server.plan, rerun_from = None, server.counters.requests  # no request is in flight here
        return first, rerun_from, await run("rerun")

    try:
        first, rerun_from, rerun = asyncio.run(both())
    finally:
        store.close()
    counters = server.counters
    return Case(first, rerun, list(counters.served), [canonical_json(b) for b in counters.bodies],
                rerun_from, tmp_path / "store.sqlite")


def sample_lines(run: RunResult) -> list[dict]:
    assert run.out_dir is not None
    return [json.loads(line) for line in (run.out_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def check_no_failure_is_scored(run: RunResult) -> None:
    """Failed samples carry no prediction, extraction or score; every other sample is scored."""
    for line in sample_lines(run):
        if line["failed"]:
            assert line["score"] is None and line["extraction"] is None and line["prediction"] is None, line["id"]
        else:
            assert line["score"] is not None and isinstance(line["prediction"], str) and line["prediction"], line["id"]


def stored_failures(store: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT error, attempts FROM failures ORDER BY id").fetchall()


def lost(run: RunResult) -> int:
    """Samples of the run that are neither recorded nor visibly failed."""
    return run.results["counts"]["samples_total"] - len(sample_lines(run))


def test_every_fault_kind_is_covered():
    assert set(FAULT_CLASS) == set(FAULT_KINDS) - {"ok"}
    assert set(HARNESS_KIND) == RETRYABLE_FAULTS


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", sorted(RETRYABLE_FAULTS))
def test_a_retryable_fault_is_retried_and_the_run_completes(tmp_path, server, backends, reliability_tally, kind, shape):
    case = run_case(tmp_path, server, backends[shape], [kind] * INJECTED)
    first, rerun = case.first.results, case.rerun.results
    assert case.served[:INJECTED] == [kind] * INJECTED
    assert first["status"] == "complete", first["notes"]
    counts = first["counts"]
    assert counts["retries"] == INJECTED, "every retry is in results.json"
    assert counts["failures"] == counts["failed_samples"] == 0 and counts["failure_examples"] == []
    assert counts["calls"] == 12 and counts["samples"] == 12
    # the server gave every question its gold letter: a fault read as an answer would score 0
    assert first["metrics"]["accuracy"] == {**first["metrics"]["accuracy"], "value": 1.0, "n": 12}
    check_no_failure_is_scored(case.first)
    assert stored_failures(case.store) == []
    # the rerun asks the server nothing: every call completed and is stored
    assert rerun["status"] == "complete" and len(case.served) == case.rerun_from
    assert rerun["counts"]["calls"] == 0 and rerun["metrics"] == first["metrics"]
    assert case.repeated_calls() == 0
    reliability_tally(FAULT_CLASS[kind], injected=INJECTED, runs=2, lost=lost(case.first) + lost(case.rerun),
                      completed=sum(r["status"] == "complete" for r in (first, rerun)),
                      repeated=case.repeated_calls())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_bad_request_fails_its_samples_cleanly_and_the_rerun_completes_them(tmp_path, server, backends, reliability_tally, shape):
    case = run_case(tmp_path, server, backends[shape], ["400"] * INJECTED)
    first, rerun = case.first.results, case.rerun.results
    assert first["status"] == "incomplete"
    counts = first["counts"]
    assert counts["retries"] == 0, "a 400 is never retried"
    assert counts["failures"] == counts["failed_samples"] == INJECTED and counts["calls"] == 12 - INJECTED
    assert all("HTTP 400" in m and "not retryable" in m for m in counts["failure_examples"])
    assert any("rerun the same command" in note for note in first["notes"])
    assert first["metrics"]["accuracy"]["n"] == 12 - INJECTED and first["metrics"]["accuracy"]["value"] == 1.0
    check_no_failure_is_scored(case.first)
    failed = [line for line in sample_lines(case.first) if line["failed"]]
    assert len(failed) == INJECTED and all(line["failed"].startswith("client_error:") for line in failed)
    assert [attempts for _, attempts in stored_failures(case.store)] == [1] * INJECTED
    # the rerun asks only for the failed samples, and completes
    assert case.served[case.rerun_from:] == ["ok"] * INJECTED
    assert rerun["status"] == "complete" and rerun["counts"]["calls"] == INJECTED
    assert rerun["metrics"]["accuracy"]["n"] == 12 and rerun["metrics"]["accuracy"]["value"] == 1.0
    assert case.repeated_calls() == 0
    reliability_tally(FAULT_CLASS["400"], injected=INJECTED, runs=2, lost=lost(case.first) + lost(case.rerun),
                      completed=sum(r["status"] == "complete" for r in (first, rerun)),
                      repeated=case.repeated_calls())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_model_that_never_stops_gives_a_length_stopped_answer_flagged_on_its_sample(tmp_path, server, backends,
                                                                                      reliability_tally, shape):
    case = run_case(tmp_path, server, backends[shape], ["never_stops"] * INJECTED)
    first = case.first.results
    counts = first["counts"]
    assert first["status"] == "complete"
    assert counts["retries"] == counts["failures"] == 0
    assert counts["length_stops"] == counts["truncated_samples"] == INJECTED
    # the cut answer is scored as what it is: no option letter, unparseable, wrong
    assert counts["unparseable"] == INJECTED
    assert first["metrics"]["accuracy"]["n"] == 12 and first["metrics"]["accuracy"]["value"] == (12 - INJECTED) / 12
    flagged = [line for line in sample_lines(case.first) if line["truncated"]]
    assert len(flagged) == INJECTED
    for line in flagged:
        assert line["trace"][-1]["finish_reason"] == "length" and not line["prompt_truncated"]
        assert line["extraction"]["rule"] == "unparseable" and line["score"]["value"] == 0.0
    assert case.rerun.results["counts"]["calls"] == 0 and case.repeated_calls() == 0
    reliability_tally(FAULT_CLASS["never_stops"], injected=INJECTED, runs=2,
                      completed=sum(r.results["status"] == "complete" for r in (case.first, case.rerun)),
                      lost=lost(case.first) + lost(case.rerun), repeated=case.repeated_calls())


@pytest.mark.parametrize("shape", SHAPES)
def test_faults_that_keep_coming_fail_their_samples_with_the_kind_named(tmp_path, server, backends, reliability_tally,
                                                                        shape):
    # every retryable kind bound to its own question, on every attempt; the last question is answered
    attempts, kinds = 3, sorted(RETRYABLE_FAULTS)
    planned = dict(zip(GOLD, kinds))
    case = run_case(tmp_path, server, backends[shape], plan=lambda body: planned.get(body["messages"][-1]["content"]),
                    retry=RetryPolicy(max_attempts=attempts, base_delay=0.01, max_delay=0.02))
    first, rerun = case.first.results, case.rerun.results
    counts = first["counts"]
    assert Counter(case.served[:case.rerun_from]) == {**{k: attempts for k in kinds}, "ok": len(GOLD) - len(kinds)}
    assert first["status"] == "incomplete"
    assert counts["failures"] == counts["failed_samples"] == len(kinds)
    assert counts["retries"] == (attempts - 1) * len(kinds) and counts["calls"] == len(GOLD) - len(kinds)
    assert first["metrics"]["accuracy"]["n"] == len(GOLD) - len(kinds) and first["metrics"]["accuracy"]["value"] == 1.0
    check_no_failure_is_scored(case.first)
    prompts = {line["id"]: line for line in sample_lines(case.first)}
    task = DemoTask()
    for sample in task.load(None):
        kind = planned.get(task.messages(sample)[-1].content)
        failed = prompts[sample.id]["failed"]
        if kind is None:
            assert failed is None
            continue
        assert failed.startswith(HARNESS_KIND[kind] + ":"), (kind, failed)
        assert f"after {attempts} attempt(s) (giving up)" in failed
    assert [n for _, n in stored_failures(case.store)] == [attempts] * len(kinds)
    # the faults have passed: the rerun asks only for the failed samples and completes
    assert case.served[case.rerun_from:] == ["ok"] * len(kinds)
    assert rerun["status"] == "complete" and rerun["metrics"]["accuracy"] == {
        **rerun["metrics"]["accuracy"], "value": 1.0, "n": len(GOLD)}
    assert case.repeated_calls() == 0
    reliability_tally("retries exhausted (each retryable kind)", injected=attempts * len(kinds), runs=2,
                      completed=sum(r["status"] == "complete" for r in (first, rerun)),
                      lost=lost(case.first) + lost(case.rerun), repeated=case.repeated_calls())
