"""Small helpers with no home of their own: numbers that may be missing, natural sort keys, lazy package exports.

Numbers that may be missing (None, NaN, ±inf) on their way into JSON and into text tables: JSON has
no NaN or Infinity, so results files write a missing statistic as null (finite_or_none); tables
print a dash (format_number).

Lazy package exports (lazy_exports): a package names its public API without importing the modules
behind it. Packages whose modules pull in pandas, scipy, bm25s or onnxruntime use this so that
importing the CLI (which imports every command group) stays light:

    __getattr__, __all__ = lazy_exports(__name__, {"load_prices": "prices", ...})

Terminal output (terminal_width, output_console): tables as wide as the terminal the user looks at,
even when stdout is piped, and a wide default where there is none, so rich wraps cells instead of cutting
them at 80 columns.

Long preparation phases (phase): an index build or a model assembly announces itself, and the live
progress display (cli_common.LiveProgress) shows it while it runs.

This module imports nothing from finharness: anything in the package may import it.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from typing import Any

# -- numbers that may be missing -------------------------------------------------------------------

MISSING = "—"
"""How text tables show a missing number."""


def finite_or_none(x: float | None, digits: int | None = None) -> float | None:
    """x as a JSON number (rounded to `digits` when given), or None when it is None, NaN or infinite."""
    if x is None or not math.isfinite(x):
        return None
    return float(x) if digits is None else round(float(x), digits)


def finite_json(value: Any) -> Any:
    """A JSON-able value with every NaN or infinite float inside it (lists, tuples, dicts) as None."""
    if isinstance(value, float):
        return finite_or_none(value)
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def format_number(x: float | None, digits: int, missing: str = MISSING) -> str:
    """x with `digits` decimals, or `missing` when it is None, NaN or infinite."""
    return missing if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


# -- text ------------------------------------------------------------------------------------------

_DIGIT_RUNS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """Sort key that orders digit runs by value: '1-2' before '1-10'; names without numbers sort
    alphabetically after numbered ones."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGIT_RUNS.split(text) if part)


# -- lazy package exports --------------------------------------------------------------------------


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """A module-level `__getattr__` (PEP 562) and `__all__` for `package`.

    `exports` maps each public name to the submodule (relative to `package`) that defines it;
    the submodule is imported on the first access to one of its names.
    """
    exports = dict(exports)

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{exports[name]}", package), name)

    return __getattr__, sorted(exports)


# -- terminal output -------------------------------------------------------------------------------

WIDE_DEFAULT = 160
"""Columns of printed tables when no terminal can be asked (a pipe to a file, CI logs)."""


def terminal_width(default: int = WIDE_DEFAULT) -> int:
    """COLUMNS when set, else the width of whichever of stdout, stderr and stdin is a terminal (piping stdout
    still leaves the terminal the user looks at), else `default`."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            continue
    return default


def output_console(**options: Any) -> Any:
    """A rich Console (options as rich takes them: stderr, file, highlight, ...) terminal_width() wide."""
    from rich.console import Console

    return Console(width=options.pop("width", None) or terminal_width(), **options)


# -- long preparation phases --------------------------------------------------------------------------

PhaseListener = Callable[[str, str, "float | str | None"], None]
"""Called with ("start", description, total steps or None), then ("advance", description, steps done) after each
step of a phase that counts its steps, ("status", description, text) when the phase says where it stands in words (a
provider's batch: its state and counts), then ("end", description, seconds) when the phase succeeded or
("failed", description, seconds) when it raised."""


class PhaseSteps:
    """What `phase` yields: call `advance()` after each of its `total` steps (a filing indexed), so a display
    can show how far the phase is."""

    def __init__(self, description: str, total: int | None, listeners: list[PhaseListener]):
        self.description = description
        self.total = total
        self.done = 0
        self._listeners = listeners

    def advance(self) -> None:
        self.done += 1
        for listener in self._listeners:
            listener("advance", self.description, float(self.done))

    def say(self, text: str) -> None:
        """Where the phase stands, in words (shown beside it; a line in line mode when it changes)."""
        for listener in self._listeners:
            listener("status", self.description, text)


_phase_listeners: list[PhaseListener] = []
_phase_lock = threading.Lock()


def add_phase_listener(listener: PhaseListener) -> None:
    with _phase_lock:
        _phase_listeners.append(listener)


def remove_phase_listener(listener: PhaseListener) -> None:
    with _phase_lock:
        if listener in _phase_listeners:
            _phase_listeners.remove(listener)


@contextlib.contextmanager
def phase(description: str, total: int | None = None) -> Iterator[PhaseSteps]:
    """A long preparation step (a retrieval index build, a model assembly): progress displays show it while
    it runs, so a bar standing at 0/N says what it is waiting for. With `total`, the step counts its parts:
    call `advance()` on what it yields after each."""
    with _phase_lock:
        listeners = list(_phase_listeners)
    for listener in listeners:
        listener("start", description, None if total is None else float(total))
    started = time.perf_counter()
    succeeded = False
    try:
        yield PhaseSteps(description, total, listeners)
        succeeded = True
    finally:
        event = "end" if succeeded else "failed"
        for listener in listeners:
            listener(event, description, time.perf_counter() - started)
