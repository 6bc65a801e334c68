"""The reliability tally: each reliability test records what it injected and what survived.

    def test_something(reliability_tally):
        ...
        reliability_tally("HTTP 429", injected=3, completed=1, lost=0, repeated=0)

With `FINHARNESS_RELIABILITY_TABLE=PATH` set, the rows of the whole session (with each
test's wall time and the session's) are written to PATH as JSON when the session ends;
`python tests/reliability/table.py PATH` prints them as the Markdown table of issue 9.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import pytest

TABLE_ENV = "FINHARNESS_RELIABILITY_TABLE"


@dataclass(frozen=True)
class TallyRow:
    """One case of one fault class, as a test saw it."""

    fault_class: str
    """What was injected ('HTTP 429 (no Retry-After)', 'kill -9 mid-judging', ...)."""

    test: str
    """The pytest node id that recorded the row (its wall time is looked up by it)."""

    injected: int
    """Faults (or kills, bad inputs) actually injected in this case."""

    completed: int
    """Runs that ended complete (results.json with status 'complete')."""

    lost: int
    """Samples that vanished: neither in the results nor visibly failed (goal 0)."""

    repeated: int
    """Model calls that had already completed and were made again (goal 0)."""

    runs: int | None = None
    """Runs made in this case (None: the test did not say)."""


_ROWS = pytest.StashKey[list]()
_WALL = pytest.StashKey[dict]()
_STARTED = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ROWS] = []
    config.stash[_WALL] = {}
    config.stash[_STARTED] = time.perf_counter()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    # setup + call + teardown: a server started in a fixture is part of the case's cost
    wall = item.config.stash[_WALL]
    wall[item.nodeid] = wall.get(item.nodeid, 0.0) + call.duration


@pytest.fixture
def reliability_tally(request: pytest.FixtureRequest) -> Callable[..., None]:
    """`reliability_tally(fault_class, *, injected, completed, lost, repeated, runs=None)`: record one case."""
    rows: list[TallyRow] = request.config.stash[_ROWS]

    def tally(fault_class: str, *, injected: int, completed: int, lost: int, repeated: int,
              runs: int | None = None) -> None:
        rows.append(TallyRow(fault_class, request.node.nodeid, injected, completed, lost, repeated, runs))

    return tally


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get(TABLE_ENV)
    config = session.config
    if not target or _ROWS not in config.stash:
        return
    rows: list[TallyRow] = config.stash[_ROWS]
    wall = config.stash[_WALL]
    payload = {
        "suite_wall_s": round(time.perf_counter() - config.stash[_STARTED], 3),
        "exit_status": int(exitstatus),
        "rows": [asdict(r) for r in rows],
        "test_wall_s": {test: round(wall.get(test, 0.0), 3) for test in sorted({r.test for r in rows})},
    }
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
