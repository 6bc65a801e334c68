"""Small text helpers shared by benchmarks and the report."""

from __future__ import annotations

import re

_DIGIT_RUNS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """Sort key that orders digit runs by value: '1-2' before '1-10'; names without numbers sort
    alphabetically after numbered ones."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGIT_RUNS.split(text) if part)
