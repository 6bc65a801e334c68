"""The suite-wide progress on a fake clock (suite/progress.py, cli_common.LiveProgress): rows done of total, the rows
under way, a heartbeat while a call takes minutes, the suite's ETA from the plan's tokens and the rate measured, and
ETAs that turn into a range, then `?`, once they have been wrong; a finished row's tok/s does not decay."""

from __future__ import annotations

import io
from types import SimpleNamespace

from finharness.cli_common import LiveProgress
from finharness.eta import EtaTracker, duration
from finharness.suite.progress import SuiteProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def counters(done: int, total: int, tokens: int = 0, calls: int = 0) -> SimpleNamespace:
    return SimpleNamespace(samples_done=done, samples_total=total, prompt_tokens=tokens, completion_tokens=0,
                           tokens_evaluated=0, calls=calls, cache_hits=0, retries=0, failures=0)


def test_durations_read_as_people_write_them():
    assert [duration(s) for s in (4.6, 59, 61, 3599, 3725)] == ["5s", "59s", "1m01s", "59m59s", "1h02m"]


def test_an_eta_that_was_kept_stays_an_eta_and_one_missed_becomes_a_range_then_unknown():
    clock = Clock()
    eta = EtaTracker(clock)
    assert eta.text(60) == "1m00s"
    clock.now += 30
    assert eta.text(30) == "30s"  # on time: as promised
    clock.now += 60  # both promises are due: the first took 90 s of 60, the second 60 s of 30 (twice)
    assert eta.text(30) == "30s–1m00s"
    clock.now += 600  # far behind: the last promise, 30 s, has taken 600
    assert eta.text(30) == "?"
    assert eta.text(None) == "?"


def test_the_suite_eta_is_the_planned_work_left_over_the_measured_rate():
    clock = Clock()
    suite = SuiteProgress({"a on m": 1000.0, "b on m": 3000.0}, clock=clock)
    assert suite.line() == "rows 0/2 done · suite ETA ?"
    suite.update("a on m", counters(0, 2))
    clock.now += 10
    suite.update("a on m", counters(1, 2, tokens=500, calls=1))
    clock.now += 10
    suite.update("a on m", counters(2, 2, tokens=1000, calls=2))  # 1000 tokens in 10 s of activity
    assert suite.finished_rows == 1
    # 3000 tokens left at 100 tokens/s measured since the first reply
    assert suite.line() == "rows 1/2 done · suite ETA 30s"
    suite.update("b on m", counters(0, 4))
    clock.now += 10
    suite.update("b on m", counters(1, 4, tokens=1000, calls=1))
    assert suite.line() == "rows 1/2 done · running: b on m 1/4 · suite ETA 20s"  # 2000 left at 2000/20 s


def test_a_quiet_call_shows_a_heartbeat_and_a_judging_row_comes_with_its_planned_work():
    clock = Clock()
    suite = SuiteProgress({"a on m": 100.0}, clock=clock, extra=(1, 50.0))
    suite.update("a on m", counters(0, 3))
    clock.now += 1
    suite.update("a on m", counters(1, 3, tokens=10, calls=1))
    clock.now += 125  # one call of minutes: nothing changes
    assert "running: a on m 1/3 (last reply 2m05s ago)" in suite.line()
    assert suite.total_rows == 2  # the judging pair to come counts
    suite.update("a on m", counters(3, 3, tokens=100, calls=3))
    suite.update("a step: m vs gpt-4o (released)", counters(0, 5))  # a label the plan did not name
    assert suite.rows["a step: m vs gpt-4o (released)"].planned == 50.0 and suite.extra_rows == 0


def test_live_progress_prints_the_suite_line_and_keeps_a_finished_rows_rate():
    clock = Clock()
    live = LiveProgress("suite s", suite=SuiteProgress({"a on m": 100.0, "b on m": 100.0}, clock=clock), clock=clock)
    live.console.file = out = io.StringIO()
    with live:
        row = live.row("a on m")
        row(counters(0, 2))
        clock.now += 5
        first = counters(1, 2, tokens=50, calls=1)
        first.completion_tokens = 25
        row(first)  # the row's clock starts at its first reply
        clock.now += 5
        finished = counters(2, 2, tokens=100, calls=2)
        finished.completion_tokens = 50
        row(finished)
        clock.now += 100
        row(finished)  # later calls of the callback (another row ran meanwhile)
        b = live.row("b on m")
        b(counters(0, 1))
        clock.now += 40  # b's first call takes minutes
        live.heartbeat()
    text = out.getvalue()
    assert "suite s: rows 1/2 done" in text
    assert text.count("a on m: 2/2  ETA 0s  5.0 tok/s") == 2  # the rate it ran at, not 25 tokens over 105 s
    assert "b on m: 0/1  ETA ?" in text and "no reply yet in 40s" in text
    assert "running: b on m 0/1 (no reply yet in 40s)" in text
