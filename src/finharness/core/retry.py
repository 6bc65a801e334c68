"""The one retry layer of the harness.

Backends never retry by themselves: they raise `BackendError(retryable=...)`
and the runner wraps every backend call with `call_with_retries`, so each
retry is counted once, in one place, and shows up in the run record.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Awaitable, Callable, Literal, TypeVar

from .backend import BackendError, CallFailed

T = TypeVar("T")

OnRetry = Callable[[int, BackendError, float], None]
"""Called before each wait as on_retry(failed_attempt_number, error, delay_seconds)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed backend call is tried again."""

    max_attempts: int = 6
    """Tries in all, the first included; 1 disables retrying."""

    base_delay: float = 0.5
    """Backoff ceiling (seconds) after the first failure; it doubles after each further failure."""

    max_delay: float = 30.0
    """Upper bound on the backoff ceiling (seconds)."""

    jitter: Literal["full", "none"] = "full"
    """'full': wait a uniform random time in [0, ceiling] (AWS 'full jitter', spreads out
    a crowd of clients that failed together); 'none': wait exactly the ceiling."""

    max_retry_after: float = 300.0
    """Longest server-requested wait (Retry-After) that is honoured; longer requests are cut to it."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("RetryPolicy delays must be >= 0")
        if self.jitter not in ("full", "none"):
            raise ValueError(f"RetryPolicy.jitter must be 'full' or 'none', got {self.jitter!r}")

    def delay(self, failed_attempts: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after `failed_attempts` consecutive failures.

        A server that says when to come back (Retry-After) is taken at its word."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (failed_attempts - 1))
        return rng.uniform(0.0, ceiling) if self.jitter == "full" else ceiling


def error_kind(error: BackendError) -> str:
    """A short name for what went wrong: the error's own `kind` if it has one, else from its status."""
    if error.kind:
        return error.kind
    status = error.status
    if status == 429:
        return "rate_limit"
    if status is not None and status >= 500:
        return "server_error"
    if status is not None:
        return "client_error"
    return "error"


_default_rng = random.Random()


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy = RetryPolicy(),
    *,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """Await `fn()` until it succeeds; return (result, number of retries).

    Only `BackendError(retryable=True)` is retried (429, 5xx, timeouts, connection
    errors, malformed bodies). A non-retryable BackendError, or the last failed
    attempt, raises `CallFailed` whose `__cause__` is the last error. Any other
    exception (a bug) propagates unchanged. `sleep` and `rng` are injectable so
    tests run on a fake clock."""
    rng = rng or _default_rng
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return await fn(), attempt - 1
        except BackendError as error:
            if not error.retryable or attempt == policy.max_attempts:
                verdict = "not retryable" if not error.retryable else "giving up"
                raise CallFailed(
                    f"backend call failed after {attempt} attempt(s) ({verdict}): {error}",
                    attempts=attempt, kind=error_kind(error)) from error
            delay = policy.delay(attempt, error.retry_after, rng)
            if on_retry is not None:
                on_retry(attempt, error, delay)
            await sleep(delay)
    raise AssertionError("unreachable: the loop either returns or raises")
