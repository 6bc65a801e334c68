"""Long preparation phases (util.phase) show in the live progress display, so a bar at 0/N says why."""

from __future__ import annotations

import io

from rich.console import Console

from finharness import util
from finharness.cli_common import LiveProgress


def _line_display(monkeypatch, quiet_s: float) -> tuple[LiveProgress, io.StringIO]:
    out = io.StringIO()
    live = LiveProgress("demo on fake")
    live.console = Console(file=out, force_terminal=False, width=200)  # line mode, as in CI logs
    monkeypatch.setattr(LiveProgress, "PHASE_QUIET_S", quiet_s)
    return live, out


def test_a_long_phase_prints_what_it_is_doing_and_how_long_it_took(monkeypatch):
    live, out = _line_display(monkeypatch, quiet_s=0.0)
    with live:
        with util.phase("building the retrieval index of NVDA"):
            live._phases["building the retrieval index of NVDA"].join(5)  # the delayed start line is out
    text = out.getvalue()
    assert "building the retrieval index of NVDA ..." in text
    assert "building the retrieval index of NVDA: done in 0 s" in text


def test_a_short_phase_stays_silent_and_listeners_go_with_the_display(monkeypatch):
    live, out = _line_display(monkeypatch, quiet_s=60.0)
    with live:
        with util.phase("loading a cached index"):
            pass
    assert out.getvalue() == ""
    seen = []
    with util.phase("after the display closed"):  # no listener left behind
        seen.append(len(util._phase_listeners))
    assert seen == [0]


def test_building_an_index_announces_itself(tmp_path, monkeypatch, shared_data):
    from finharness.markets.filings import discover_filings
    from finharness.retrieval.index import IndexParams, build_index

    events = []
    util.add_phase_listener(lambda event, description, value: events.append((event, description, value)))
    try:
        refs = discover_filings(shared_data, tickers={"ADSK"})[:2]
        build_index(refs, IndexParams(), cache=tmp_path)  # built: announced, counting its filings
        build_index(refs, IndexParams(), cache=tmp_path)  # from the cache: no phase
    finally:
        util._phase_listeners.clear()
    assert [(e, v) for e, _, v in events[:-1]] == [("start", 2.0), ("advance", 1.0), ("advance", 2.0)]
    assert events[-1][0] == "end" and "2 of the 2 filings of ADSK" in events[0][1]


def test_a_counted_phase_shows_how_far_it_is(monkeypatch):
    live, out = _line_display(monkeypatch, quiet_s=0.0)
    with live:
        with util.phase("retrieval: chunking 3 filings", total=3) as steps:
            live._phases["retrieval: chunking 3 filings"].join(5)
            for _ in range(3):
                steps.advance()
                live.last_line.clear()  # as if 5 s had passed between filings
    lines = out.getvalue().splitlines()
    assert lines[:4] == ["retrieval: chunking 3 filings ...", "retrieval: chunking 3 filings: 1/3",
                         "retrieval: chunking 3 filings: 2/3", "retrieval: chunking 3 filings: 3/3"]
    assert lines[4].startswith("retrieval: chunking 3 filings: done in")


def test_on_a_terminal_a_counted_phase_is_a_row_with_its_own_count():
    live = LiveProgress("fintradebench on embedded")
    live.console = Console(file=io.StringIO(), force_terminal=True, width=200)
    with live:
        with util.phase("retrieval: embedding 2 filings", total=2) as steps:
            row = next(t for t in live.progress.tasks if "embedding 2 filings" in t.description)
            assert (row.total, row.completed) == (2, 0)
            steps.advance()
            assert row.completed == 1
        assert all("embedding" not in t.description for t in live.progress.tasks)  # gone when it ends


def test_a_pooled_tasks_eta_and_speed_count_from_its_own_start(monkeypatch):
    """Line mode: a task that waited 300 s behind the others is timed from its first returned call, not from
    the run's start; before a second sample is done its ETA is '?', never 'nan'."""
    from finharness import cli_common
    from finharness.core.model import RunCounters

    now = [1000.0]
    monkeypatch.setattr(cli_common.time, "perf_counter", lambda: now[0])
    live, out = _line_display(monkeypatch, quiet_s=60.0)
    with live:
        update = live.row("secnum on m")
        counters = RunCounters(samples_total=5)
        update(counters)  # registered with the pool, nothing done yet
        now[0] += 300.0   # the other tasks run
        counters.calls, counters.samples_done, counters.completion_tokens = 1, 1, 20
        update(counters)  # its first call returns: the clock starts here
        now[0] += 10.0
        counters.calls, counters.samples_done, counters.completion_tokens = 2, 2, 60
        update(counters)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("secnum on m:")]
    assert lines[0].startswith("secnum on m: 0/5  ETA ?  — tok/s")
    assert lines[1].startswith("secnum on m: 1/5  ETA ?  — tok/s")
    assert lines[2].startswith("secnum on m: 2/5  ETA 30s  4.0 tok/s"), lines  # 1 sample in 10 s, 3 to go
