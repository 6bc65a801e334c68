"""The single retry layer: what is retried, how long it waits, how it gives up (fake clock)."""

from __future__ import annotations

import asyncio
import random

import pytest

from finharness.core.backend import BackendError, CallFailed
from finharness.core.retry import RetryPolicy, call_with_retries, error_kind


class Flaky:
    """An async callable that raises the given errors in turn, then returns 'answer'."""

    def __init__(self, *errors: Exception):
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"


class FakeSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def retryable(status: int | None = 503, retry_after: float | None = None) -> BackendError:
    return BackendError(f"HTTP {status}", retryable=True, status=status, retry_after=retry_after)


def run(fn, policy=RetryPolicy(), **kwargs):
    return asyncio.run(call_with_retries(fn, policy, **kwargs))


def test_retries_retryable_errors_until_success_and_counts_them():
    fn, sleep, seen = Flaky(retryable(429), retryable(500), retryable(None)), FakeSleep(), []
    result, retries = run(fn, sleep=sleep, on_retry=lambda n, err, delay: seen.append((n, err.status, delay)))
    assert (result, retries, fn.calls) == ("answer", 3, 4)
    assert [n for n, _, _ in seen] == [1, 2, 3]
    assert [status for _, status, _ in seen] == [429, 500, None]
    assert [delay for _, _, delay in seen] == sleep.delays


def test_success_at_first_try_has_no_retries_and_no_wait():
    sleep = FakeSleep()
    assert run(Flaky(), sleep=sleep) == ("answer", 0)
    assert sleep.delays == []


def test_non_retryable_error_fails_at_once_with_the_cause_attached():
    error = BackendError("HTTP 400: bad field", retryable=False, status=400)
    fn, sleep = Flaky(error), FakeSleep()
    with pytest.raises(CallFailed) as info:
        run(fn, sleep=sleep)
    assert (info.value.attempts, info.value.kind, fn.calls) == (1, "client_error", 1)
    assert info.value.__cause__ is error and "bad field" in str(info.value)
    assert sleep.delays == []


def test_gives_up_after_max_attempts_with_the_last_error():
    errors = [retryable(502), retryable(503), BackendError("rate", retryable=True, status=429)]
    fn, sleep = Flaky(*errors, retryable()), FakeSleep()
    with pytest.raises(CallFailed) as info:
        run(fn, RetryPolicy(max_attempts=3), sleep=sleep)
    assert (info.value.attempts, info.value.kind, fn.calls) == (3, "rate_limit", 3)
    assert info.value.__cause__ is errors[2]
    assert len(sleep.delays) == 2


def test_error_kind_prefers_the_errors_own_kind():
    error = BackendError("timed out", retryable=True)
    error.kind = "timeout"  # what finharness.backends.http_common.RemoteError carries
    assert error_kind(error) == "timeout"
    assert error_kind(BackendError("x", status=503)) == "server_error"
    assert error_kind(BackendError("x")) == "error"


def test_other_exceptions_are_bugs_and_propagate_unwrapped():
    fn = Flaky(KeyError("choices"))
    with pytest.raises(KeyError):
        run(fn, sleep=FakeSleep())
    assert fn.calls == 1


def test_retry_after_is_honoured_exactly_and_capped():
    sleep = FakeSleep()
    run(Flaky(retryable(429, retry_after=7.0), retryable(429, retry_after=900.0)),
        RetryPolicy(max_retry_after=60.0), sleep=sleep)
    assert sleep.delays == [7.0, 60.0]


def test_exponential_backoff_without_jitter_doubles_up_to_max_delay():
    sleep = FakeSleep()
    policy = RetryPolicy(max_attempts=7, base_delay=0.5, max_delay=4.0, jitter="none")
    run(Flaky(*(retryable() for _ in range(6))), policy, sleep=sleep)
    assert sleep.delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_full_jitter_stays_under_the_ceiling_and_varies():
    ceilings = [0.5, 1.0, 2.0, 4.0, 8.0]
    delays = []
    for seed in range(20):
        sleep = FakeSleep()
        run(Flaky(*(retryable() for _ in range(5))), RetryPolicy(max_attempts=6), sleep=sleep,
            rng=random.Random(seed))
        assert all(0.0 <= d <= c for d, c in zip(sleep.delays, ceilings))
        delays.append(tuple(sleep.delays))
    assert len(set(delays)) == len(delays)  # seeds give different waits: the crowd spreads out


@pytest.mark.parametrize("bad", [dict(max_attempts=0), dict(base_delay=-1), dict(jitter="half")])
def test_policy_rejects_nonsense(bad):
    with pytest.raises(ValueError):
        RetryPolicy(**bad)
