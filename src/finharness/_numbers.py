"""Numbers that may be missing (None, NaN, ±inf) on their way into JSON and into text tables.

JSON has no NaN or Infinity, so results files write a missing statistic as null; tables print a dash.
"""

from __future__ import annotations

import math

MISSING = "—"
"""How text tables show a missing number."""


def finite_or_none(x: float | None, digits: int | None = None) -> float | None:
    """x as a JSON number (rounded to `digits` when given), or None when it is None, NaN or infinite."""
    if x is None or not math.isfinite(x):
        return None
    return float(x) if digits is None else round(float(x), digits)


def format_number(x: float | None, digits: int, missing: str = MISSING) -> str:
    """x with `digits` decimals, or `missing` when it is None, NaN or infinite."""
    return missing if x is None or not math.isfinite(x) else f"{x:.{digits}f}"
