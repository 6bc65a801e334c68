"""Adaptive concurrency: how many calls a model gets at once, shrinking on rate limits (AIMD).

A fixed concurrency is either too timid for a fast server or too greedy for a rate-limited API.
`AdaptiveLimiter` starts at the configured maximum and behaves like TCP congestion control:

- multiplicative decrease: a call refused for rate (HTTP 429, Anthropic's 529 'overloaded')
  halves the limit, never below 1. A burst of refusals from calls that were all sent at the
  old limit counts once: only an attempt that *started after* the last halving can halve again
  (the limiter's `epoch` tells them apart);
- additive increase: after a run of successes (as many as the current limit, i.e. one full
  window, unless `successes_to_grow` says otherwise) the limit grows by one, up to the maximum.

`call` holds one slot per attempt, not per call: a call waiting out its retry backoff gives its
slot back, so a shrunken limit really bounds the requests the server sees.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Awaitable, Callable, TypeVar

from .backend import BackendError, CallFailed
from .retry import OnRetry, RetryPolicy, call_with_retries, error_kind

T = TypeVar("T")

RATE_LIMIT_STATUSES = frozenset({429, 529})
"""429 Too Many Requests; 529 is Anthropic's 'overloaded' (a refusal for load, not a server bug)."""


def is_rate_limited(error: BaseException) -> bool:
    """Whether a failed attempt was refused for rate or load (the signal to send fewer at once)."""
    if isinstance(error, CallFailed):
        cause = error.__cause__
        return isinstance(cause, BackendError) and is_rate_limited(cause)
    if not isinstance(error, BackendError):
        return False
    return error.status in RATE_LIMIT_STATUSES or error_kind(error) in ("rate_limit", "overloaded")


class AdaptiveLimiter:
    """An asyncio concurrency limit that halves on rate limits and grows back by one (AIMD).

    Waiters are served first come, first served, so the order in which callers arrive (e.g. long
    samples first) is the order in which they get slots."""

    def __init__(self, maximum: int, *, successes_to_grow: int | None = None,
                 on_shrink: Callable[["AdaptiveLimiter"], None] | None = None):
        if maximum < 1:
            raise ValueError(f"AdaptiveLimiter: maximum must be >= 1, got {maximum}")
        if successes_to_grow is not None and successes_to_grow < 1:
            raise ValueError(f"AdaptiveLimiter: successes_to_grow must be >= 1, got {successes_to_grow}")
        self.maximum = maximum
        self.successes_to_grow = successes_to_grow
        self.on_shrink = on_shrink
        self.limit = maximum
        """Calls allowed at once now."""
        self.min_limit = maximum
        """The lowest limit reached so far."""
        self.shrinks = 0
        """Times the limit was halved."""
        self.epoch = 0
        """Bumped at each halving: an attempt started in an older epoch cannot halve again."""
        self.in_use = 0
        self._successes = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    # -- slots -------------------------------------------------------------------------------
    async def acquire(self) -> None:
        if self.in_use < self.limit and not self._waiters:
            self.in_use += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # `_wake` counts the slot in before it resolves the waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just as the caller was cancelled
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        if self.in_use <= 0:
            raise RuntimeError("AdaptiveLimiter.release() without a matching acquire()")
        self.in_use -= 1
        self._wake()

    @contextlib.asynccontextmanager
    async def slot(self):
        await self.acquire()
        try:
            yield
        finally:
            self.release()

    def _wake(self) -> None:
        while self._waiters and self.in_use < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_use += 1
                waiter.set_result(None)

    # -- feedback ----------------------------------------------------------------------------
    def record_success(self) -> None:
        """One call succeeded; a full run of them grows the limit by one."""
        self._successes += 1
        needed = self.successes_to_grow or self.limit
        if self._successes >= needed and self.limit < self.maximum:
            self.limit += 1
            self._successes = 0
            self._wake()

    def record_rate_limit(self, attempt_epoch: int) -> bool:
        """An attempt started in `attempt_epoch` was refused for rate; True when the limit halved."""
        self._successes = 0
        if attempt_epoch != self.epoch or self.limit == 1:
            return False  # sent under a limit already halved for this burst, or nothing left to halve
        self.limit = max(1, self.limit // 2)
        self.min_limit = min(self.min_limit, self.limit)
        self.shrinks += 1
        self.epoch += 1
        if self.on_shrink is not None:
            self.on_shrink(self)
        return True

    # -- one call, retried -------------------------------------------------------------------
    async def call(self, fn: Callable[[], Awaitable[T]], policy: RetryPolicy, *,
                   on_retry: OnRetry | None = None,
                   sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> tuple[T, int]:
        """`call_with_retries(fn, policy)` with a slot held during each attempt (not the backoffs),
        feeding every rate-limited attempt and every success back into the limit."""
        attempt_epoch = self.epoch
        held = False

        async def attempt() -> T:
            nonlocal attempt_epoch
            attempt_epoch = self.epoch
            return await fn()

        def retried(failed_attempt: int, error: BackendError, delay: float) -> None:
            if is_rate_limited(error):
                self.record_rate_limit(attempt_epoch)
            if on_retry is not None:
                on_retry(failed_attempt, error, delay)

        async def backoff(delay: float) -> None:
            nonlocal held
            self.release()
            held = False
            await sleep(delay)
            await self.acquire()
            held = True

        await self.acquire()
        held = True
        try:
            result, retries = await call_with_retries(attempt, policy, on_retry=retried, sleep=backoff)
        except CallFailed as failed:
            if is_rate_limited(failed):  # the last attempt was refused for rate too
                self.record_rate_limit(attempt_epoch)
            raise
        finally:
            if held:
                self.release()
        self.record_success()
        return result, retries
