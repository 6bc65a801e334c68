"""Adaptive concurrency (core/limiter.py): AIMD on rate limits, slots per attempt, and a run against
a real local server that answers 429s: the limit shrinks, grows back, and the run completes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from finharness.backends import from_spec
from finharness.backends.fake import FakeBackend
from finharness.benchmarks.demo.task import DemoTask
from finharness.core.backend import BackendError, CallFailed
from finharness.core.limiter import AdaptiveLimiter, is_rate_limited
from finharness.core.model import CachedModel, RunCounters, model_state
from finharness.core.retry import RetryPolicy
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import GenerateParams, GenerateRequest, Message
from tests.servers.fault_server import fault_server
from tests.unit.asking_task import AskingTask

NO_WAIT = RetryPolicy(max_attempts=4, base_delay=0.0, jitter="none")
FAST = RetryPolicy(max_attempts=8, base_delay=0.01, max_delay=0.05)


def rate_limited() -> BackendError:
    return BackendError("HTTP 429: slow down", retryable=True, status=429, kind="rate_limit")


# --- the limit itself ---------------------------------------------------------------------------

def test_a_refusal_halves_the_limit_but_never_below_one():
    limiter = AdaptiveLimiter(8)
    assert limiter.record_rate_limit(limiter.epoch) and limiter.limit == 4
    assert limiter.record_rate_limit(limiter.epoch) and limiter.limit == 2
    assert limiter.record_rate_limit(limiter.epoch) and limiter.limit == 1
    assert not limiter.record_rate_limit(limiter.epoch) and limiter.limit == 1
    assert limiter.shrinks == 3 and limiter.min_limit == 1


def test_a_burst_of_refusals_sent_under_one_limit_halves_it_once():
    limiter = AdaptiveLimiter(8)
    sent_at = limiter.epoch  # eight attempts sent together, all refused
    halved = [limiter.record_rate_limit(sent_at) for _ in range(8)]
    assert halved == [True] + [False] * 7
    assert limiter.limit == 4 and limiter.shrinks == 1
    # an attempt sent after the halving and refused again halves once more
    assert limiter.record_rate_limit(limiter.epoch) and limiter.limit == 2


def test_the_limit_grows_back_by_one_per_window_of_successes_up_to_the_maximum():
    limiter = AdaptiveLimiter(4)
    limiter.record_rate_limit(limiter.epoch)
    limiter.record_rate_limit(limiter.epoch)
    assert limiter.limit == 1
    seen = []
    for _ in range(12):
        limiter.record_success()
        seen.append(limiter.limit)
    # one success at limit 1, two at limit 2, three at limit 3; then it stays at the maximum
    assert seen == [2, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4]


def test_a_fixed_run_of_successes_can_be_asked_for():
    limiter = AdaptiveLimiter(10, successes_to_grow=3)
    limiter.record_rate_limit(limiter.epoch)
    assert limiter.limit == 5
    for _ in range(2):
        limiter.record_success()
    assert limiter.limit == 5
    limiter.record_success()
    assert limiter.limit == 6


def test_a_refusal_restarts_the_run_of_successes():
    limiter = AdaptiveLimiter(4, successes_to_grow=2)
    limiter.record_rate_limit(limiter.epoch)
    limiter.record_success()
    limiter.record_rate_limit(limiter.epoch - 1)  # an old attempt: no halving, but the run is broken
    limiter.record_success()
    assert limiter.limit == 2
    limiter.record_success()
    assert limiter.limit == 3


@pytest.mark.parametrize("bad", [0, -1])
def test_a_maximum_below_one_is_refused(bad):
    with pytest.raises(ValueError, match="maximum must be >= 1"):
        AdaptiveLimiter(bad)


def test_what_counts_as_a_rate_limit():
    assert is_rate_limited(rate_limited())
    assert is_rate_limited(BackendError("overloaded", retryable=True, status=529, kind="server_error"))
    assert is_rate_limited(BackendError("quota", kind="rate_limit"))
    assert not is_rate_limited(BackendError("HTTP 500", retryable=True, status=500))
    assert not is_rate_limited(BackendError("HTTP 400", status=400))
    failed = CallFailed("gave up", attempts=3, kind="rate_limit")
    failed.__cause__ = rate_limited()
    assert is_rate_limited(failed)
    assert not is_rate_limited(ValueError("a bug"))


# --- slots --------------------------------------------------------------------------------------

def test_after_a_halving_new_callers_wait_until_the_running_ones_drop_below_the_new_limit():
    async def scenario():
        limiter = AdaptiveLimiter(4)
        for _ in range(4):
            await limiter.acquire()
        limiter.record_rate_limit(limiter.epoch)  # limit 2, four still running
        waiter = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0)
        states = []
        for _ in range(3):
            limiter.release()
            await asyncio.sleep(0)
            states.append((waiter.done(), limiter.in_use))
        await waiter
        return states

    # 4 -> 3 -> 2 running: still at the limit; at 1 running the waiter gets the second slot
    assert asyncio.run(scenario()) == [(False, 3), (False, 2), (True, 2)]


def test_waiters_get_slots_first_come_first_served():
    async def scenario():
        limiter = AdaptiveLimiter(1)
        order: list[int] = []

        async def worker(i: int):
            async with limiter.slot():
                order.append(i)
                await asyncio.sleep(0)

        await asyncio.gather(*(worker(i) for i in range(6)))
        return order, limiter.in_use

    assert asyncio.run(scenario()) == (list(range(6)), 0)


def test_a_cancelled_waiter_leaks_no_slot():
    async def scenario():
        limiter = AdaptiveLimiter(1)
        await limiter.acquire()
        waiter = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        limiter.release()
        await asyncio.wait_for(limiter.acquire(), timeout=5)
        return limiter.in_use

    assert asyncio.run(scenario()) == 1


def test_a_release_without_an_acquire_is_a_bug():
    with pytest.raises(RuntimeError, match="without a matching acquire"):
        AdaptiveLimiter(2).release()


# --- one retried call ---------------------------------------------------------------------------

def test_a_call_gives_its_slot_back_while_it_waits_to_retry():
    async def scenario():
        limiter = AdaptiveLimiter(2)
        in_use_during_backoff = []
        answers = iter([rate_limited(), rate_limited(), "ok"])

        async def fn():
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

        async def sleep(delay):
            in_use_during_backoff.append(limiter.in_use)

        result = await limiter.call(fn, NO_WAIT, sleep=sleep)
        return result, in_use_during_backoff, limiter

    (text, retries), during_backoff, limiter = asyncio.run(scenario())
    assert (text, retries) == ("ok", 2)
    assert during_backoff == [0, 0]
    assert limiter.in_use == 0
    # the first refusal halved 2 -> 1; the second was sent at limit 1 (nothing left to halve);
    # the success is a full window at limit 1, so the limit grows back to 2
    assert limiter.shrinks == 1 and limiter.min_limit == 1 and limiter.limit == 2


def test_a_call_that_keeps_being_refused_shrinks_the_limit_and_fails():
    async def scenario():
        limiter = AdaptiveLimiter(8)

        async def fn():
            raise rate_limited()

        with pytest.raises(CallFailed) as failed:
            await limiter.call(fn, NO_WAIT)
        return limiter, failed.value

    limiter, failed = asyncio.run(scenario())
    # four attempts, each sent after the previous halving: 8 -> 4 -> 2 -> 1 -> (1)
    assert limiter.limit == 1 and limiter.shrinks == 3 and limiter.in_use == 0
    assert failed.kind == "rate_limit" and failed.attempts == 4


def test_other_failures_leave_the_limit_alone():
    async def scenario():
        limiter = AdaptiveLimiter(4)
        answers = iter([BackendError("HTTP 503", retryable=True, status=503), "ok"])

        async def fn():
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

        await limiter.call(fn, NO_WAIT)
        return limiter

    limiter = asyncio.run(scenario())
    assert limiter.limit == 4 and limiter.shrinks == 0


# --- against a real server that answers 429 -----------------------------------------------------

def chat(i: int) -> GenerateRequest:
    return GenerateRequest((Message("user", f"question {i}"),), GenerateParams(max_tokens=8))


def test_a_server_that_answers_429_shrinks_the_limit_which_then_recovers(tmp_path: Path):
    # the first four requests (the whole first wave at concurrency 4) are refused
    with fault_server(script=["429"] * 4, latency=0.05) as server:
        backend = from_spec(f"openai:fault-model@{server.base_url}?concurrency=4&timeout=5")
        store = RunStore(tmp_path / "s.sqlite")
        counters = RunCounters()
        model = CachedModel(backend, store, counters, concurrency=4, retry=FAST)

        async def wave(start: int, n: int):
            return await asyncio.gather(*(model.generate(chat(i)) for i in range(start, start + n)))

        async def scenario():
            first = await wave(0, 4)
            lowest = model.limiter.min_limit
            second = await wave(4, 24)
            await backend.aclose()
            return first, lowest, second

        try:
            first, lowest, second = asyncio.run(scenario())
        finally:
            store.close()
        refused = server.counters.by_kind["429"]
    assert refused == 4 and len(first) == 4 and len(second) == 24
    assert lowest <= 2, "a wave of 429s must at least halve the limit"
    assert counters.concurrency_shrinks == model.limiter.shrinks >= 1
    assert counters.concurrency_min_limit == lowest
    assert counters.retries == 4 and counters.failures == 0
    assert model.limiter.limit == 4, "after a long run of successes the limit is back at its maximum"


def test_a_run_against_a_rate_limiting_server_completes_and_counts_the_shrinks(tmp_path: Path):
    with fault_server(script=["429"] * 6, latency=0.02, responder=lambda body: "Answer: B") as server:
        backend = from_spec(f"openai:fault-model@{server.base_url}?concurrency=4&timeout=5")
        store = RunStore(tmp_path / "s.sqlite")
        try:
            result = asyncio.run(run_task(DemoTask(), {"model": backend}, store, RunOptions(retry=FAST), out_dir=tmp_path / "run"))
        finally:
            store.close()
    counts = result.results["counts"]
    assert result.results["status"] == "complete" and counts["failures"] == 0
    assert counts["retries"] == 6
    assert counts["concurrency_shrinks"] >= 1
    assert 1 <= counts["concurrency_min_limit"] <= 2
    assert result.results["metrics"]["accuracy"]["n"] == 12


def test_a_run_joining_a_model_whose_limit_already_shrank_records_that_limit(tmp_path: Path):
    backend = FakeBackend("fake?name=pooled")
    store = RunStore(tmp_path / "s.sqlite")
    try:
        early, late = RunCounters(), RunCounters()
        first = CachedModel(backend, store, early, concurrency=8)
        assert first.limiter.record_rate_limit(first.limiter.epoch)  # 8 -> 4, counted in the early run
        assert early.concurrency_min_limit == 4 and early.concurrency_shrinks == 1
        CachedModel(backend, store, late, _shared=first._shared)  # a pooled run's later task joins
        assert late.concurrency_min_limit == 4 and late.concurrency_shrinks == 0
        untouched = RunCounters()
        CachedModel(FakeBackend("fake?name=other"), store, untouched, concurrency=8)
        assert untouched.concurrency_min_limit is None
    finally:
        store.close()


# -- a cancelled run (moved here from the engine review's findings) -------------------------------------------

class BlockingBackend(FakeBackend):
    """Every call waits until the test releases it."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.release = asyncio.Event()
        self.started = 0

    async def generate(self, request):
        self.started += 1
        await self.release.wait()
        return await super().generate(request)


def test_a_cancelled_run_gives_back_every_limiter_slot(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = BlockingBackend()
    shared: dict = {}

    async def scenario() -> None:
        run = asyncio.create_task(run_task(AskingTask(n=8), {"model": backend}, store, RunOptions(concurrency=2), out_dir=None, shared_handles=shared))
        while backend.started < 2:  # both slots taken, the other samples waiting for one
            await asyncio.sleep(0)
        limiter = model_state(shared, backend, 2)["limiter"]
        assert limiter.in_use == 2 and limiter._waiters
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert limiter.in_use == 0 and not limiter._waiters
        assert model_state(shared, backend, 2)["counters"] == [], "a finished run is no longer counted"

    asyncio.run(scenario())
    store.close()
