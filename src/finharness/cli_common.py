"""What every `finharness` command shares: usage errors, `-o KEY=VALUE` options, the data root, the run
store, the progress display.

`finharness.cli` (the entry point) and every command group (data/, markets/, rating/, retrieval/, ui/,
the benchmarks' cli.py) import these from here; nothing in the package imports `finharness.cli`,
which imports the groups to register them. Heavy imports (rich) happen on use; `resolve_data_dir` (the data
root: --data-dir, else $FINHARNESS_DATA_DIR, else `<cache>/data`) is data/registry.py's, re-exported.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any, NoReturn, Optional, overload

import typer

from .data.registry import resolve_data_dir
from .redact import redact
from .util import output_console

__all__ = ["LiveProgress", "check_endpoints", "fail", "parse_options", "resolve_data_dir", "resolve_store", "user_error_message"]


INVOKED_ARGS: list[str] = []
"""The arguments this command was invoked with (after `finharness`), as the root group received them: the resume
command a stopped run prints is them."""


def fail(message: str) -> NoReturn:
    """Print `error: MESSAGE` to stderr (red on a terminal; redacted: no key it quotes) and exit with status 2,
    the CLI's usage-error code."""
    typer.secho(f"error: {redact(message)}", fg="red", err=True)
    raise typer.Exit(2)


RERUN = "then rerun the same command: what was stored is kept"

OS_ERRORS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on the device", f"free some space, or write elsewhere (--out DIR, --store FILE); {RERUN}"),
    errno.EDQUOT: ("disk quota exceeded", f"free some space, or write elsewhere (--out DIR, --store FILE); {RERUN}"),
    errno.EFBIG: ("file larger than this process may write (the file-size limit, `ulimit -f`)",
                  f"raise the limit (`ulimit -f unlimited`); {RERUN}"),
    errno.EACCES: ("permission denied", "write somewhere you may (--out DIR, --store FILE), or fix the permissions"),
    errno.EPERM: ("operation not permitted (an immutable file or folder?)",
                  "write somewhere else (--out DIR, --store FILE), or lift it (`chattr -i`)"),
    errno.EROFS: ("read-only file system", "write somewhere else (--out DIR, --store FILE)"),
    errno.ENOTDIR: ("a file stands where a folder belongs", "give a folder, or move the file aside"),
    errno.EEXIST: ("exists and is not a folder", "give a folder, or move the file aside"),
    errno.EISDIR: ("is a folder, where a file belongs", "give a file"),
    errno.ENAMETOOLONG: ("file name too long", "give a shorter path"),
    errno.EMFILE: ("too many open files", "raise the limit (`ulimit -n 4096`) and rerun"),
}
"""errno -> (what went wrong, what to do) of the operating-system errors a user can cause and fix."""


def user_error_message(err: BaseException) -> str | None:
    """The `error:` line's text for an error the user can fix: bad input data or an unusable run store (DataError,
    which names the file and line), or an OSError of OS_ERRORS (no space, no permission, a file where a folder
    belongs...), named with its file. None for anything else: a bug, whose traceback says more."""
    from .data.errors import DataError

    if isinstance(err, DataError):
        return str(err)
    if isinstance(err, OSError) and err.errno in OS_ERRORS:
        what, hint = OS_ERRORS[err.errno]
        where = "".join(f"{name}: " for name in (err.filename, err.filename2) if name is not None)
        return f"{where}{what} ({hint})"
    return None


def check_endpoints(backends: Any) -> None:
    """Before a run's first call: every remote endpoint answers one cheap request, else one error line per
    endpoint that does not (exit 2) — not a run that fails every sample after its timeouts."""
    seen: set[int] = set()
    problems = []
    for backend in backends:
        preflight = getattr(backend, "preflight", None)
        if id(backend) in seen or preflight is None:
            continue
        seen.add(id(backend))
        problem = preflight()
        if problem:
            problems.append(f"{backend.spec}: {problem}")
    if problems:
        fail("; ".join(problems) + " (is the server running, and is the URL in the spec right? nothing was run)")


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """`-o key=value` pairs; values parsed as JSON when they are JSON (numbers, booleans), else strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            fail(f"option {pair!r} is not KEY=VALUE")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


@overload
def resolve_store(value: Optional[Path], default: Path) -> Path: ...
@overload
def resolve_store(value: Optional[Path], default: None = None) -> Optional[Path]: ...


def resolve_store(value: Optional[Path], default: Optional[Path] = None) -> Optional[Path]:
    """The run store of a command: its --store when given, else $FINHARNESS_STORE when set, else `default`
    (the store beside the command's output; None for a command that has none, which then must say so)."""
    if value:
        return value
    env = os.environ.get("FINHARNESS_STORE")
    return Path(env) if env else default


class LiveProgress:
    """done/total, ETA, tokens/s, cache hits, retries, failures: a rich bar on a terminal, lines otherwise.

    Called with a run's counters it shows that run; `row(label)` gives the callback of one more run
    shown in the same display (the tasks of a pooled run), the first row then showing their sums."""

    TOTALS = ("samples_done", "samples_total", "completion_tokens", "cache_hits", "retries", "failures")
    """The counters a pooled run's first row adds up over its tasks."""

    HEARTBEAT_EVERY_S = 30.0
    """In line mode, a quiet running row (or the suite) prints a line at most this often: a call that takes minutes
    still shows that the run is alive and how long it has waited."""

    def __init__(self, label: str, enabled: bool = True, suite: Any = None, clock: Any = None):
        """suite: a suite/progress.py SuiteProgress: the first row then shows rows done of total, the rows under
        way and the suite's ETA; clock: time for tests."""
        self.console = output_console(stderr=True)
        self.label = label
        self.enabled = enabled
        self.suite = suite
        self.clock = clock or (lambda: time.perf_counter())  # looked up at each call: tests patch it
        self.started = self.clock()
        self.row_etas: dict[str, Any] = {}
        """Per row: its EtaTracker (an ETA that has been wrong shows a range, then `?`)."""
        self.row_finished: dict[str, float] = {}
        """Per row: when it finished, so its tok/s stays what it was rather than decaying to 0."""
        self.row_changed: dict[str, tuple[tuple[int, ...], float]] = {}
        """Per row: its counters' last values and when they changed (the heartbeat)."""
        self._ticker: Any = None
        self.last_line: dict[str, float] = {}
        self.row_clocks: dict[str, tuple[float, int, int]] = {}
        """Per row: (when its clock started, its samples done and completion tokens then)."""
        self.progress = None
        self.task_id = None
        self.rows: dict[str, Any] = {}
        """The latest counters of each row's run."""
        self._row_ids: dict[str, Any] = {self.label: None}
        import threading

        self._lock = threading.RLock()
        """The run's callbacks and the heartbeat's thread take turns."""

    PHASE_QUIET_S = 2.0
    """A preparation phase shorter than this leaves no line, on a terminal or not: cached loads stay silent
    (on a terminal its row may flash by). A failed phase always says so."""

    def _on_phase(self, event: str, description: str, value: float | str | None) -> None:
        """Show a long preparation phase (util.phase) while it runs: a row of its own on a terminal (with its
        steps done of total when it counts them), else a line once it has lasted PHASE_QUIET_S, and for a
        counted phase a `done/total` line at most every 5 s after that; then, when it lasted that long, a line
        saying how long it took (or, whatever its length, that it failed)."""
        import threading

        if event == "advance":
            self._phase_advance(description, int(value or 0))
            return
        if event == "status":  # a batch's state and counts, in the provider's words
            self._phase_status(description, str(value))
            return
        if event == "start":
            self._phase_started[description] = (time.perf_counter(), value)
            if self.progress is not None:
                self._phases[description] = self.progress.add_task(f"  {description}", total=value, stats="")
            else:
                timer = threading.Timer(self.PHASE_QUIET_S, lambda: self.console.print(f"{description} ...",
                                                                                       highlight=False))
                timer.daemon = True
                self._phases[description] = timer
                timer.start()
            return
        shown = self._phases.pop(description, None)
        self._phase_started.pop(description, None)
        self._phase_said.pop(description, None)
        if self.progress is not None:
            if shown is None:
                return
            self.progress.remove_task(shown)
        elif shown is not None:
            shown.cancel()
        seconds = value  # an ending phase's value is how long it ran
        if seconds is None:
            return
        if event == "failed":
            self.console.print(f"{description}: failed after {seconds:.0f} s", highlight=False)
        elif seconds >= self.PHASE_QUIET_S:
            self.console.print(f"{description}: done in {seconds:.0f} s", highlight=False)

    def _phase_status(self, description: str, text: str) -> None:
        """A phase's words: on a terminal beside its row; else a line when they change (at most every 5 s while
        only the counts move, and at once when the state itself changes)."""
        if self.progress is not None:
            if description in self._phases:
                self.progress.update(self._phases[description], stats=text)
            return
        previous = self._phase_said.get(description)
        state = text.split(" ", 1)[0]
        now = time.perf_counter()
        if previous == text:
            return
        if previous is None or previous.split(" ", 1)[0] != state or now - self.last_line.get(description, 0.0) > 5:
            self.last_line[description] = now
            self._phase_said[description] = text
            self.console.print(f"{description}: {text}", highlight=False, soft_wrap=True)

    def _phase_advance(self, description: str, done: int) -> None:
        started, total = self._phase_started.get(description, (None, None))
        if started is None:
            return
        if self.progress is not None:
            if description in self._phases:
                self.progress.update(self._phases[description], completed=done)
            return
        now = time.perf_counter()
        if now - started >= self.PHASE_QUIET_S and now - self.last_line.get(description, 0.0) > 5:
            self.last_line[description] = now
            self.console.print(f"{description}: {done}/{total:.0f}" if total else f"{description}: {done}",
                               highlight=False)

    def __enter__(self) -> "LiveProgress":
        from .util import add_phase_listener

        self._phases: dict[str, Any] = {}
        self._phase_started: dict[str, tuple[float, float | None]] = {}
        """(start time, total steps) of each phase running."""
        self._phase_said: dict[str, str] = {}
        """The last words each phase said (line mode prints a change)."""
        if self.enabled:
            add_phase_listener(self._on_phase)
        if self.enabled and self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            # no rich TimeRemainingColumn: its ETA promises seconds however wrong it was; ours says `?` or a range
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[stats]}"), console=self.console)
            self.progress.__enter__()
            self.task_id = self.progress.add_task(self.label, total=None, stats="")
            self._row_ids[self.label] = self.task_id
        if self.enabled:
            import threading

            self._stop = threading.Event()
            self._ticker = threading.Thread(target=self._tick, name="progress-heartbeat", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        from .util import remove_phase_listener

        remove_phase_listener(self._on_phase)
        if self._ticker is not None:
            self._stop.set()
            with self._lock:  # a heartbeat under way ends before the display does
                pass
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def _tick(self) -> None:
        """Every few seconds, the heartbeat: a row whose counters have not moved shows how long it has waited."""
        while not self._stop.wait(5.0):
            self.heartbeat()

    def heartbeat(self) -> None:
        """Refresh what the quiet rows say (a terminal), or print a line for each row quiet for HEARTBEAT_EVERY_S
        (line mode), and the suite's line."""
        now = self.clock()
        with self._lock:
            if self._ticker is not None and self._stop.is_set():
                return
            quiet = [label for label, (_, when) in self.row_changed.items()
                     if label not in self.row_finished and now - when >= self.HEARTBEAT_EVERY_S]
            for label in quiet:
                c = self.rows.get(label)
                if c is None:
                    continue
                if self.progress is not None:
                    self._show(self._row_ids.get(label), label, c, force=True)
                elif now - self.last_line.get(label, 0.0) >= self.HEARTBEAT_EVERY_S:
                    self._show(None, label, c, force=True)
            if self.suite is not None and (quiet or self.progress is not None):
                self._show_suite(force=self.progress is None and bool(quiet))

    def __call__(self, c: Any) -> None:
        with self._lock:
            self.rows[self.label] = c
            self._show(self.task_id, self.label, c)

    def row(self, label: str) -> Any:
        """The progress callback of one run among several shown together."""
        row_id = self.progress.add_task(label, total=None, stats="") if self.progress is not None else None
        self._row_ids[label] = row_id

        def update(c: Any) -> None:
            with self._lock:
                self.rows[label] = c
                finished_before = self.suite.finished_rows if self.suite is not None else 0
                if self.suite is not None:
                    self.suite.update(label, c)
                self._show(row_id, label, c)
                if self.suite is not None:  # a line when a row finishes (line mode), the first row on a terminal
                    self._show_suite(force=self.suite.finished_rows != finished_before)
                elif self.progress is not None:  # as lines, each task's own lines say enough
                    from types import SimpleNamespace

                    totals = {name: sum(getattr(r, name) for r in self.rows.values()) for name in self.TOTALS}
                    self._show(self.task_id, self.label, SimpleNamespace(**totals))

        return update

    def _show_suite(self, force: bool = False) -> None:
        """The suite's line: rows done of total, the rows under way, the suite's ETA."""
        if not self.enabled or self.suite is None:
            return
        text = self.suite.line()
        if self.progress is not None:
            self.progress.update(self.task_id, total=self.suite.total_rows, completed=self.suite.finished_rows,
                                 stats=text)
            return
        now = self.clock()
        if force or now - self.last_line.get("\0suite", 0.0) > self.HEARTBEAT_EVERY_S:
            self.last_line["\0suite"] = now
            self.console.print(f"{self.label}: {text}", highlight=False, soft_wrap=True)

    ROW_ACTIVITY = ("calls", "cache_hits", "failures", "samples_done")
    """Counters whose first change says a row's work has begun: its clock starts then."""

    def _row_clock(self, label: str, c: Any, now: float) -> tuple[float, int, int] | None:
        """(start, samples done, completion tokens) when the row's clock started; None before its work began.
        The whole run's own row starts with the run; a pooled task's row when its first call returns, so that a
        task that waited behind others is timed from its own start, not the run's."""
        clock = self.row_clocks.get(label)
        if clock is None:
            if label == self.label:
                clock = (self.started, 0, 0)
            elif any(getattr(c, name, 0) for name in self.ROW_ACTIVITY):
                clock = (now, c.samples_done, c.completion_tokens)
            else:
                return None
            self.row_clocks[label] = clock
        return clock

    def _show(self, row_id: Any, label: str, c: Any, force: bool = False) -> None:
        if not self.enabled:
            return
        from .eta import EtaTracker, duration

        now = self.clock()
        state = tuple(getattr(c, name, 0) for name in ("samples_done", "calls", "cache_hits", "failures",
                                                       "completion_tokens"))
        changed = self.row_changed.get(label)
        if changed is None or changed[0] != state:
            self.row_changed[label] = (state, now)
        quiet = now - self.row_changed[label][1]
        finished = c.samples_total and c.samples_done >= c.samples_total
        if finished and label not in self.row_finished:
            self.row_finished[label] = now
        clock = self._row_clock(label, c, now)
        # a finished row keeps the rate it ran at; it does not decay towards 0 tok/s while others run
        elapsed = (self.row_finished.get(label, now) - clock[0]) if clock else 0.0
        speed = f"{(c.completion_tokens - clock[2]) / elapsed:.1f} tok/s" if clock and elapsed > 0 else "— tok/s"
        stats = f"{speed}  cache {c.cache_hits}  retries {c.retries}  failures {c.failures}"
        done_since = c.samples_done - clock[1] if clock else 0
        tracker = self.row_etas.setdefault(label, EtaTracker(self.clock))
        if finished:
            tracker.done()
            eta = "0s"
        else:
            eta = tracker.text((c.samples_total - c.samples_done) * elapsed / done_since if done_since > 0 else None)
        beat = "" if finished or quiet < self.HEARTBEAT_EVERY_S else (
            f"  last reply {duration(quiet)} ago" if clock else f"  no reply yet in {duration(quiet)}")
        if self.progress is not None:
            self.progress.update(row_id, total=c.samples_total, completed=c.samples_done,
                                 stats=f"ETA {eta}  {stats}{beat}")
            return
        if force or finished or now - self.last_line.get(label, 0.0) > 5:
            self.last_line[label] = now
            self.console.print(f"{label}: {c.samples_done}/{c.samples_total}  ETA {eta}  {stats}{beat}",
                               highlight=False)
