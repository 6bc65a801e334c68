"""Paired comparison of two runs on the same items."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class PairedResult:
    """B − A on the items both runs scored."""

    n: int
    """Items present in both runs."""

    mean_a: float
    mean_b: float
    diff: float
    """mean(B) − mean(A)."""

    ci95: tuple[float, float]
    """95% t-interval of the mean paired difference."""

    p_value: float
    """Exact McNemar test for binary scores, else the paired t-test."""

    test: str
    """Which test produced p_value."""


def paired_test(a: Mapping[str, float], b: Mapping[str, float]) -> PairedResult:
    import numpy as np
    from scipy import stats  # imported here: scipy.stats costs about a second at start-up

    ids = sorted(set(a) & set(b))
    x = np.asarray([a[i] for i in ids], dtype=float)
    y = np.asarray([b[i] for i in ids], dtype=float)
    n = len(ids)
    if n == 0:
        return PairedResult(0, math.nan, math.nan, math.nan, (math.nan, math.nan), math.nan, "none")
    d = y - x
    diff = float(d.mean())
    if n > 1 and d.std(ddof=1) > 0:
        half = float(stats.t.ppf(0.975, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    else:
        half = 0.0
    binary = bool(np.all(np.isin(x, (0, 1))) and np.all(np.isin(y, (0, 1))))
    if binary:
        b_only = int(((y == 1) & (x == 0)).sum())
        a_only = int(((x == 1) & (y == 0)).sum())
        discordant = a_only + b_only
        p = float(stats.binomtest(b_only, discordant, 0.5).pvalue) if discordant else 1.0
        test = "mcnemar-exact"
    else:
        p = float(stats.ttest_rel(y, x).pvalue) if n > 1 and np.any(d != 0) else 1.0
        test = "paired-t"
    return PairedResult(n, float(x.mean()), float(y.mean()), diff, (diff - half, diff + half), p, test)
