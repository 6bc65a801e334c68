"""The difference of the mean scores of two groups of different items (not paired), with its 95% interval.

MOVER (Zou & Donner 2008): each group's own interval from `mean_ci` (its family: Clopper–Pearson or Wilson for
0/1 scores, the effective-n binomial for bounded ones, t otherwise) is recovered into the difference,

    L = d − √((m₁ − l₁)² + (u₂ − m₂)²),   U = d + √((u₁ − m₁)² + (m₂ − l₂)²),

which for 0/1 scores with Wilson intervals is Newcombe's (1998) hybrid score interval. The verdict comes from the
interval alone: `differs` when it excludes 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .ci import Estimate, mean_ci


@dataclass(frozen=True)
class GroupDifference:
    """mean(first) − mean(second) over two groups of different items."""

    first: Estimate
    """The first group's mean and interval."""

    second: Estimate
    """The second group's."""

    diff: float
    """first − second (NaN when a group is empty)."""

    ci95: tuple[float, float]
    """95% MOVER interval of `diff` (NaN where a group has no interval)."""

    method: str = "mover"

    @property
    def differs(self) -> bool:
        """The interval excludes 0."""
        lo, hi = self.ci95
        return not (math.isnan(lo) or math.isnan(hi)) and (lo > 0.0 or hi < 0.0)


def group_difference(first: Sequence[float | None], second: Sequence[float | None],
                     bounds: tuple[float, float] | None = None) -> GroupDifference:
    """mean(first) − mean(second) with the MOVER interval over each group's mean_ci (module docstring)."""
    a, b = mean_ci(first, bounds=bounds), mean_ci(second, bounds=bounds)
    if a.n == 0 or b.n == 0:
        return GroupDifference(a, b, math.nan, (math.nan, math.nan))
    d = a.value - b.value
    (l1, u1), (l2, u2) = a.ci95, b.ci95
    if any(math.isnan(v) for v in (l1, u1, l2, u2)):
        return GroupDifference(a, b, d, (math.nan, math.nan))
    lower = d - math.sqrt((a.value - l1) ** 2 + (u2 - b.value) ** 2)
    upper = d + math.sqrt((u1 - a.value) ** 2 + (b.value - l2) ** 2)
    return GroupDifference(a, b, d, (lower, upper))
