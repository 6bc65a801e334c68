"""How far a suite is, and how long it will take, said honestly (what cli_common.LiveProgress shows).

- `EtaTracker` (eta.py): an ETA that turns into a range, then `?`, once its promises are not kept.
- `SuiteProgress`: rows done of total, the rows under way with their items and how long since their last reply (a
  heartbeat while one call takes minutes: the backends report no tokens before a reply ends, so the elapsed time is
  what there is), and the suite's ETA: the work left in the plan's token counts (prompt + expected completion tokens
  of each row still to run, from the dry run's plan) over the token rate measured so far; without a plan, items
  left over the item rate.

SuiteProgress takes a clock (`time.monotonic` by default) so that tests drive it with a fake one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..eta import EtaTracker, duration

HEARTBEAT_AFTER_S = 30.0
"""A running row with no reply for this long says so (`last reply 2m10s ago`)."""


@dataclass
class RowState:
    label: str
    planned: float | None = None
    """Work the plan gives the row (prompt + expected completion tokens of its calls to make); None: no plan."""
    done: int = 0
    total: int | None = None
    tokens: int = 0
    """Tokens of the calls it made so far (prompt, completion, log-likelihood)."""
    started: float | None = None
    """When its first reply (or stored answer) came."""
    last_change: float | None = None
    finished: float | None = None


def _tokens(counters: Any) -> int:
    return int(getattr(counters, "prompt_tokens", 0) + getattr(counters, "completion_tokens", 0)
               + getattr(counters, "tokens_evaluated", 0))


class SuiteProgress:
    """Rows done of total, the rows under way, the suite's ETA (module docstring)."""

    def __init__(self, rows: Mapping[str, float | None], clock: Callable[[], float] = time.monotonic,
                 extra: tuple[int, float | None] = (0, None)):
        """rows: each row's label (`ROW on MODEL`) -> its planned work in tokens (None: unplanned); extra: (units known
        to come under labels of their own: the judging pairs of the steps after the rows, SuiteHooks.steps_after_rows;
        the planned work of each, None: unplanned). A label `rows` does not name is one of those units while any
        remain."""
        self.clock = clock
        self.rows = {label: RowState(label, planned) for label, planned in rows.items()}
        self.extra_rows, self.extra_work = extra
        self.eta = EtaTracker(clock)
        self.started = clock()

    def update(self, label: str, counters: Any) -> None:
        now = self.clock()
        row = self.rows.get(label)
        if row is None:  # a row the plan did not name (the judging): counted from its first report
            judging = self.extra_rows > 0
            row = self.rows[label] = RowState(label, self.extra_work if judging else None)
            self.extra_rows -= judging
        seen = (counters.samples_done, _tokens(counters), getattr(counters, "calls", 0),
                getattr(counters, "cache_hits", 0))
        before = (row.done, row.tokens, getattr(row, "_calls", 0), getattr(row, "_hits", 0))
        row.done, row.total, row.tokens = counters.samples_done, counters.samples_total, _tokens(counters)
        row._calls, row._hits = seen[2], seen[3]  # type: ignore[attr-defined]
        if seen != before or row.last_change is None:
            if row.started is None and (seen[0] or seen[2] or seen[3]):
                row.started = now
            row.last_change = now
        if row.total is not None and row.done >= row.total and row.finished is None and row.total:
            row.finished = now
        if row.total == 0 and row.finished is None:
            row.finished = now

    @property
    def finished_rows(self) -> int:
        return sum(1 for r in self.rows.values() if r.finished is not None)

    @property
    def total_rows(self) -> int:
        return len(self.rows) + self.extra_rows

    def running(self) -> list[RowState]:
        """The rows under way: reported, not finished (one waiting for its first reply included)."""
        return [r for r in self.rows.values() if r.last_change is not None and r.finished is None]

    def remaining_s(self) -> float | None:
        """Seconds of work left: planned tokens left over the measured token rate, else items over the item rate."""
        now = self.clock()
        rows = list(self.rows.values())
        made = sum(r.tokens for r in rows)
        active = now - min((r.started for r in rows if r.started is not None), default=now)
        if active <= 0:
            return None
        unfinished = [r for r in rows if r.finished is None]
        if not unfinished and not self.extra_rows:
            return 0.0
        if all(r.planned is not None for r in rows) and made > 0 and not (self.extra_rows and self.extra_work is None):
            left = sum(max(0.0, (r.planned or 0.0) - r.tokens) for r in unfinished) + (
                self.extra_rows * (self.extra_work or 0.0))
            return left / (made / active) if left else None  # planned work done, yet rows run on: no estimate
        done = sum(r.done for r in rows)
        left_items = sum((r.total or 0) - r.done for r in unfinished)
        if done == 0 or any(r.total is None for r in unfinished):
            return None
        return left_items / (done / active)

    def eta_text(self) -> str:
        if self.finished_rows == self.total_rows:
            self.eta.done()
            return "0s"
        return self.eta.text(self.remaining_s())

    def heartbeat(self, row: RowState) -> str:
        """'last reply 2m10s ago' for a running row that has been quiet long enough; '' otherwise."""
        if row.last_change is None or row.finished is not None:
            return ""
        quiet = self.clock() - row.last_change
        if quiet < HEARTBEAT_AFTER_S:
            return ""
        return f"last reply {duration(quiet)} ago" if row.started is not None else f"no reply yet in {duration(quiet)}"

    def line(self) -> str:
        """`rows 4/13 done · running: my_exam on embedded 3/6 (last reply 2m10s ago) · suite ETA 12m00s–30m00s`."""
        parts = [f"rows {self.finished_rows}/{self.total_rows} done"]
        running = []
        for row in self.running():
            beat = self.heartbeat(row)
            running.append(f"{row.label} {row.done}/{row.total if row.total is not None else '?'}"
                           + (f" ({beat})" if beat else ""))
        if running:
            parts.append("running: " + ", ".join(running))
        parts.append(f"suite ETA {self.eta_text()}")
        return " · ".join(parts)


def _work(task_plan: Any) -> float:
    return float(sum(t.prompt_tokens + t.completion_expected for t in task_plan.roles.values()))


def planned_work(plan: Any) -> tuple[dict[str, float], float | None]:
    """(`ROW on MODEL` -> the plan's prompt + expected completion tokens of that row's calls to make, for the rows
    the plan could plan (the others do not run, or fail at once); the judging's the same, None without it) of a
    suite/plan.py Plan."""
    out = {f"{c.row} on {c.model}": _work(c.plan) for c in plan.cells if c.plan is not None}
    return out, None if plan.judging is None else _work(plan.judging)


__all__ = ["EtaTracker", "HEARTBEAT_AFTER_S", "SuiteProgress", "duration", "planned_work"]
