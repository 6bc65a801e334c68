"""Every fault of the local fault server, against both HTTP shapes (OpenAI, Anthropic), in whole runs.

Each case runs the demo task (12 questions) against a real server on 127.0.0.1 that injects one
fault kind on the first requests, then reruns the same command on the same store:

- a retryable fault (429 in three forms, 500/502/503/529, reset, read timeout, truncated JSON,
  empty choices) is retried: the run completes and `counts.retries` counts every retry the run made;
- a 400 is not retried: its samples fail (never scored), the run ends `incomplete` with a note
  saying to rerun, and the rerun completes by asking only for the failed samples;
- a model that never stops gives a valid answer cut at max_tokens, flagged on its sample;
- faults that keep coming (every retryable kind at once, each bound to one question on every
  attempt) exhaust the retries: each sample fails with its fault's kind named, the rest complete;
- a healthy reply that comes after the client's timeout is a timeout retry, never a lost sample.

The counts are checked against what the server logged request by request (tests/servers/
reconcile.py), not against the faults injected: on a loaded machine a healthy reply can come after
the client's short timeout, which is one more (rightly counted) retry, not a miscount. So a run's
retries are the requests the server saw less one per question; each injected fault failed its
attempt and was retried; any other retry was a reply that came too late, retried as a timeout. The
server holds a 'timeout' fault (and a 'slow_ok' reply) until the client hangs up, so the client's
timeout always fires first. The cases about what a reply does to its sample (a 400, a length stop)
use a patient client instead: there the reply must reach the client (a 400 that came too late
would be retried into an answer), and only a stalled machine makes a local reply a minute late.

How long a Retry-After makes the client wait is checked in tests/unit/test_backend_remote.py;
here the server asks for 0 s so the cases stay fast.

The server answers each question with its gold letter, so a failure scored as an answer (an empty
or truncated body read as text) would show up as a wrong answer. "Calls repeated" counts calls
made again for a question the client had already accepted an answer for (goal 0).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from finharness.backends import from_spec
from finharness.benchmarks.demo.task import DemoTask
from finharness.core.results import RunResult
from finharness.core.retry import RetryPolicy
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from tests.servers.fault_server import FAULT_KINDS, RETRYABLE_FAULTS, SLOW_OK, Served, fault_server
from tests.servers.reconcile import ACCEPTED, CLIENT_KIND, TIMEOUT, ClientAttempts, Reconciled, body_key, reconcile

CLIENT_TIMEOUT = 0.3
"""Read timeout of the client in the cases with timeouts in them (the server holds a 'timeout' fault
until the client hangs up: this always fires first)."""

PATIENT = 60.0
"""Read timeout of the client in the cases about what a reply does to its sample: no local reply is
ever that late."""

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

SETTLE_S = 30.0
"""Bound on waiting for the server to log and finish what the client sent (only a broken case waits it out)."""


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
    """One server for the module (both shapes): each case rescripts it, which resets its counters.
    A 'timeout' fault is held until the client hangs up (the default timeout_sleep, 30 s, is only
    reached by a client that never does)."""
    with fault_server(retry_after=0, responder=gold_answer) as running:
        yield running


@pytest.fixture(scope="module")
def backends(server):
    """One backend per shape for the module, with the short timeout (each asks GET /models once)."""
    return {shape: from_spec(f"{shape}:fault-model@{server.base_url}?timeout={CLIENT_TIMEOUT}&concurrency=4")
            for shape in SHAPES}


@pytest.fixture(scope="module")
def patient_backends(server):
    """One backend per shape for the module that waits for every reply."""
    return {shape: from_spec(f"{shape}:fault-model@{server.base_url}?timeout={PATIENT}&concurrency=4")
            for shape in SHAPES}


@dataclass
class Case:
    """One fault case: both runs, what the client tried and what the server saw, reconciled."""

    first: RunResult
    rerun: RunResult
    log: list[Served]
    """What the server served, request by request in arrival order, over both runs."""
    rerun_from: int
    """Index in `served` where the rerun's requests start."""
    tried: ClientAttempts
    """The first run's attempts, as the client saw them."""
    retried: ClientAttempts
    """The rerun's attempts."""
    rec: Reconciled
    """The first run: the server's log of it explains every attempt (checked by `reconcile`)."""
    rerun_rec: Reconciled
    """The rerun, likewise."""
    store: Path

    @property
    def served(self) -> list[str]:
        """Fault kinds served, in arrival order, over both runs."""
        return [s.kind for s in self.log]

    def repeated_calls(self) -> int:
        """Attempts made for a question after the client had accepted an answer for it, over both runs
        (a completed call made again). A healthy reply the client gave up on is not an answer it has."""
        repeated = 0
        for key in set(self.tried.by_key) | set(self.retried.by_key):
            outcomes = self.tried.by_key.get(key, []) + self.retried.by_key.get(key, [])
            if ACCEPTED in outcomes:
                repeated += len(outcomes) - 1 - outcomes.index(ACCEPTED)
        return repeated


def attempts_made(*attempts: ClientAttempts) -> int:
    return sum(len(outcomes) for a in attempts for outcomes in a.by_key.values())


def settle(server, attempts: int) -> None:
    """Wait until the server has logged a request for each of the client's `attempts` (one the client
    gave up on may not even have been read yet) and every logged request has ended (a held one ends
    once it sees that its client hung up). Returns at once when all that has happened already."""
    deadline = time.monotonic() + SETTLE_S
    while server.counters.requests < attempts:
        if time.monotonic() > deadline:
            raise AssertionError(f"fault server: {server.counters.requests} request(s) logged after "
                                 f"{SETTLE_S} s, but the client made {attempts} attempt(s)")
        time.sleep(0.01)
    server.wait_settled(SETTLE_S)


def run_case(tmp_path: Path, server, backend, script: list[str] = (), *, plan=None, retry: RetryPolicy = FAST,
             limit: int | None = None) -> Case:
    """Run the demo with `script` (or `plan`) served first, then, faults over, rerun the same command on the
    same store (one event loop for both: one HTTP client). Every attempt of each run is recorded and
    reconciled with the server's log of that run (raises where the log does not explain them)."""
    server.rescript(script, plan=plan)
    store = RunStore(tmp_path / "store.sqlite")
    tried, retried = ClientAttempts(), ClientAttempts()
    generate, own = backend.generate, "generate" in vars(backend)

    def run(name: str, attempts: ClientAttempts):
        backend.generate = attempts.wrap(generate)  # the runner calls backend.generate for each attempt
        return run_task(DemoTask(), {"model": backend}, store, RunOptions(retry=retry, limit=limit), out_dir=tmp_path / name)

    async def both() -> tuple[RunResult, int, RunResult]:
        first = await run("first", tried)
        # every request of the first run is logged and ended before the rerun sends any
        await asyncio.to_thread(settle, server, attempts_made(tried))
        server.plan, rerun_from = None, server.counters.requests
        return first, rerun_from, await run("rerun", retried)

    try:
        first, rerun_from, rerun = asyncio.run(both())
        settle(server, attempts_made(tried, retried))
    finally:
        if own:
            backend.generate = generate
        else:
            del backend.generate  # the backend's own method again (the backends are shared by the module)
        store.close()
    log = list(server.counters.log)
    return Case(first, rerun, log, rerun_from, tried, retried,
                reconcile(log[:rerun_from], tried), reconcile(log[rerun_from:], retried), tmp_path / "store.sqlite")


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


def check_retries_on_their_samples(run: RunResult, rec: Reconciled) -> None:
    """Each answered sample carries the retries of its own question: the server's requests for it, less one."""
    for line in sample_lines(run):
        if line["failed"]:
            continue
        calls = [t for t in line["trace"] if t.get("kind") == "generate"]
        asked = calls[-1]["prompt"][-1]["content"]
        assert sum(t["retries"] for t in calls) == len(rec.served[asked]) - 1, line["id"]


def stored_failures(store: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT error, attempts FROM failures ORDER BY id").fetchall()


def lost(run: RunResult) -> int:
    """Samples of the run that are neither recorded nor visibly failed."""
    return run.results["counts"]["samples_total"] - len(sample_lines(run))


def test_every_fault_kind_is_covered():
    assert set(FAULT_CLASS) == set(FAULT_KINDS) - {"ok"}
    assert set(HARNESS_KIND) == RETRYABLE_FAULTS
    assert HARNESS_KIND == {kind: CLIENT_KIND[kind] for kind in RETRYABLE_FAULTS}  # what reconcile expects


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", sorted(RETRYABLE_FAULTS))
def test_a_retryable_fault_is_retried_and_the_run_completes(tmp_path, server, backends, reliability_tally, kind, shape):
    # run_case has reconciled each run with the server's log: every failed attempt is explained by what was
    # served (its fault's own kind, or a timeout for a reply that came too late, healthy ones included)
    case = run_case(tmp_path, server, backends[shape], [kind] * INJECTED)
    first, rerun, rec = case.first.results, case.rerun.results, case.rec
    assert case.served[:INJECTED] == [kind] * INJECTED
    assert rec.injected == INJECTED and rec.accepted == 12, "every injected fault is retried, no question is lost"
    assert first["status"] == "complete", first["notes"]
    counts = first["counts"]
    # every retry is counted, whatever the timing: the requests the server saw less the answered ones, that is
    # the injected faults and any healthy reply that came too late (retried as a timeout)
    assert counts["retries"] == rec.requests - rec.accepted == rec.injected + rec.late_healthy, \
        "every retry is in results.json"
    check_retries_on_their_samples(case.first, rec)
    assert counts["failures"] == counts["failed_samples"] == 0 and counts["failure_examples"] == []
    assert counts["calls"] == 12 and counts["samples"] == 12
    # the server gave every question its gold letter: a fault read as an answer would score 0
    assert first["metrics"]["accuracy"] == {**first["metrics"]["accuracy"], "value": 1.0, "n": 12}
    check_no_failure_is_scored(case.first)
    assert stored_failures(case.store) == []
    assert case.repeated_calls() == 0, "no completed call is made again"
    # the rerun asks the server nothing: every call completed and is stored
    assert rerun["status"] == "complete" and len(case.served) == case.rerun_from and not case.retried.by_key
    assert rerun["counts"]["calls"] == 0 and rerun["metrics"] == first["metrics"]
    reliability_tally(FAULT_CLASS[kind], injected=INJECTED, runs=2, lost=lost(case.first) + lost(case.rerun),
                      completed=sum(r["status"] == "complete" for r in (first, rerun)),
                      repeated=case.repeated_calls())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_bad_request_fails_its_samples_cleanly_and_the_rerun_completes_them(tmp_path, server, patient_backends,
                                                                              reliability_tally, shape):
    # a patient client: the 400 must reach it (one that came too late would be retried into an answer)
    case = run_case(tmp_path, server, patient_backends[shape], ["400"] * INJECTED)
    first, rerun = case.first.results, case.rerun.results
    assert first["status"] == "incomplete"
    counts = first["counts"]
    assert counts["retries"] == case.rec.retries == 0, "a 400 is never retried"
    assert counts["failures"] == counts["failed_samples"] == INJECTED and counts["calls"] == 12 - INJECTED
    assert all("HTTP 400" in m and "not retryable" in m for m in counts["failure_examples"])
    # a 4xx is the request's own fault: the notes do not promise that a rerun helps (here the fault was injected
    # once, so the rerun below does complete)
    assert any("a rerun will not change them" in note and "client_error" in note for note in first["notes"])
    assert not any("rerun the same command" in note for note in first["notes"])
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
def test_a_model_that_never_stops_gives_a_length_stopped_answer_flagged_on_its_sample(tmp_path, server,
                                                                                      patient_backends,
                                                                                      reliability_tally, shape):
    # a patient client: the cut answer must reach it (one that came too late would be retried into 'ok')
    case = run_case(tmp_path, server, patient_backends[shape], ["never_stops"] * INJECTED)
    first = case.first.results
    counts = first["counts"]
    assert first["status"] == "complete"
    assert counts["retries"] == case.rec.retries == counts["failures"] == 0
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
    first, rerun, rec = case.first.results, case.rerun.results, case.rec
    counts = first["counts"]
    # each fault was served on every attempt of its question (however late any reply came); the answered
    # question was asked once more for each of its replies that came too late
    served = Counter(case.served[:case.rerun_from])
    assert {k: n for k, n in served.items() if k != "ok"} == {k: attempts for k in kinds}
    assert first["status"] == "incomplete"
    assert counts["failures"] == counts["failed_samples"] == len(kinds)
    assert counts["calls"] == rec.accepted == len(GOLD) - len(kinds)
    assert counts["retries"] == rec.retries == (attempts - 1) * len(kinds) + rec.late_healthy
    assert first["metrics"]["accuracy"]["n"] == len(GOLD) - len(kinds) and first["metrics"]["accuracy"]["value"] == 1.0
    check_no_failure_is_scored(case.first)
    check_retries_on_their_samples(case.first, rec)
    prompts = {line["id"]: line for line in sample_lines(case.first)}
    task = DemoTask()
    for sample in task.load(None):
        question = task.messages(sample)[-1].content
        kind = planned.get(question)
        failed = prompts[sample.id]["failed"]
        if kind is None:
            assert failed is None
            continue
        # named as what its last attempt got: the fault's own kind, or a timeout if that reply came too late
        # (reconcile has checked that nothing else was served for it)
        seen = case.tried.by_key[question]
        assert seen[-1] in (HARNESS_KIND[kind], TIMEOUT) and failed.startswith(seen[-1] + ":"), (kind, seen, failed)
        assert f"after {attempts} attempt(s) (giving up)" in failed
    assert [n for _, n in stored_failures(case.store)] == [attempts] * len(kinds)
    # the faults have passed: the rerun asks only for the failed samples (any retry is a reply that came
    # too late, and counted) and completes
    assert set(case.rerun_rec.served) == set(planned) and case.rerun_rec.accepted == len(kinds)
    assert rerun["counts"]["retries"] == case.rerun_rec.retries
    assert rerun["status"] == "complete" and rerun["metrics"]["accuracy"] == {
        **rerun["metrics"]["accuracy"], "value": 1.0, "n": len(GOLD)}
    assert case.repeated_calls() == 0
    reliability_tally("retries exhausted (each retryable kind)", injected=attempts * len(kinds), runs=2,
                      completed=sum(r["status"] == "complete" for r in (first, rerun)),
                      lost=lost(case.first) + lost(case.rerun), repeated=case.repeated_calls())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_healthy_reply_that_comes_too_late_is_a_timeout_retry_never_a_lost_sample(tmp_path, server, backends,
                                                                                    reliability_tally, shape):
    # what a loaded machine does by chance, done on purpose: the first reply to one question is healthy but
    # held until the client has given up on it (reconcile checks it was, and that the client saw a timeout)
    slow_question = list(GOLD)[5]
    slowed: list[str] = []

    def plan(body: dict) -> str | None:
        if body_key(body) == slow_question and not slowed:
            slowed.append(slow_question)
            return SLOW_OK
        return None

    case = run_case(tmp_path, server, backends[shape], plan=plan)
    first, rerun, rec = case.first.results, case.rerun.results, case.rec
    counts = first["counts"]
    assert first["status"] == "complete" and counts["failures"] == 0 and rec.accepted == 12, "no question is lost"
    # no fault injected: every retry was a healthy reply that came too late, retried as a timeout and counted
    assert rec.injected == 0 and rec.late_healthy >= 1
    assert counts["retries"] == rec.requests - rec.accepted == rec.late_healthy
    check_retries_on_their_samples(case.first, rec)
    # ... the slow sample among them, answered with its gold letter
    slow = next(line for line in sample_lines(case.first)
                if line["trace"][-1]["prompt"][-1]["content"] == slow_question)
    assert not slow["failed"] and slow["prediction"] == f"Answer: {GOLD[slow_question]}"
    assert slow["trace"][-1]["retries"] >= 1
    assert first["metrics"]["accuracy"] == {**first["metrics"]["accuracy"], "value": 1.0, "n": 12}
    assert rerun["status"] == "complete" and rerun["counts"]["calls"] == 0 and not case.retried.by_key
    assert case.repeated_calls() == 0
    reliability_tally("healthy reply after the client's timeout", injected=1, runs=2,
                      completed=sum(r["status"] == "complete" for r in (first, rerun)),
                      lost=lost(case.first) + lost(case.rerun), repeated=case.repeated_calls())
