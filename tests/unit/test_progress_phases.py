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
    util.add_phase_listener(lambda event, description, seconds: events.append((event, description)))
    try:
        refs = discover_filings(shared_data, tickers={"ADSK"})[:1]
        build_index(refs, IndexParams(), cache=tmp_path)  # built: announced
        build_index(refs, IndexParams(), cache=tmp_path)  # from the cache: no phase
    finally:
        util._phase_listeners.clear()
    assert [e for e, _ in events] == ["start", "end"]
    assert "retrieval index of ADSK" in events[0][1]
