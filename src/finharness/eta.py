"""An ETA that remembers what it promised (cli_common.LiveProgress and the suite's progress show it).

Each estimate is a promise (made at t, due at t + eta); a promise whose time passed while the work went on measures
how wrong the estimates were (elapsed since it was made ÷ what it promised). Once one was missed by more than a
quarter, the ETA is shown as a range, from the estimate to the estimate times the worst miss; past ten times, or
with nothing to go on, as `?`. It never again promises seconds it has failed to keep. The tracker takes a clock
(`time.monotonic` by default) so that tests drive it with a fake one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

MISS_TOLERANCE = 1.25
"""A promise kept within 25 % counts as kept."""

GIVE_UP = 10.0
"""Missed by more than ten times: the ETA is `?`."""

PROMISE_EVERY_S = 10.0
"""One promise is remembered per this many seconds (the estimates in between are the same promise, nearly)."""


def duration(seconds: float) -> str:
    """'45s', '3m10s', '1h05m'."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


@dataclass
class EtaTracker:
    """An ETA that turns into a range, then `?`, once its promises are not kept (module docstring)."""

    clock: Callable[[], float] = time.monotonic
    promises: list[tuple[float, float]] = field(default_factory=list)
    """(made at, due at) of the promises still to be judged."""
    worst: float = 1.0
    """The largest (time taken ÷ time promised) of a promise that was due, so far."""

    def _judge(self, now: float) -> None:
        for made, due in self.promises:
            if now > due:
                self.worst = max(self.worst, (now - made) / max(due - made, 1e-9))

    def text(self, remaining_s: float | None) -> str:
        """The ETA to show for `remaining_s` seconds of work estimated now (None: no estimate)."""
        now = self.clock()
        self._judge(now)
        if remaining_s is None or remaining_s != remaining_s:  # NaN: no estimate
            return "?"
        if not self.promises or now - self.promises[-1][0] >= PROMISE_EVERY_S:
            self.promises.append((now, now + max(remaining_s, 1.0)))
            self.promises = self.promises[-50:]
        if self.worst <= MISS_TOLERANCE:
            return duration(remaining_s)
        if self.worst > GIVE_UP:
            return "?"
        return f"{duration(remaining_s)}–{duration(remaining_s * self.worst)}"

    def done(self) -> None:
        """The work finished: nothing promised is due any more."""
        self.promises.clear()
