"""Paired comparison of two runs on the same items.

p-value: the exact McNemar test for 0/1 scores; otherwise an exact sign-flip permutation test below
RELIABLE_N shared items (every one of the 2^n sign patterns up to EXACT_FLIPS_MAX_N items, a seeded
Monte Carlo sample of SIGN_FLIP_DRAWS patterns above) and the paired t-test from RELIABLE_N on.
Interval of the mean difference: for scores in [0, 1] the difference lies in [−1, 1] and gets the
bounded family's interval (stats.ci: it never collapses to zero width when the runs agree on every
item); other scores get Student's t. Fewer than 2 shared items are refused: the result says so and
carries no p-value or interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from .ci import RELIABLE_N, mean_ci

ALPHA = 0.05
"""Level at which a comparison orders two runs (PairedResult.verdict)."""

EXACT_FLIPS_MAX_N = 20
"""Up to this many items every sign pattern is enumerated (2^20 sums); above, a Monte Carlo sample."""

SIGN_FLIP_DRAWS = 100_000
"""Sign patterns sampled (seed 0) when there are too many to enumerate."""


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
    """95% interval of the mean paired difference (`ci_method`)."""

    p_value: float
    """Two-sided p-value of `test` (NaN when refused)."""

    test: str
    """'mcnemar-exact', 'sign-flip-exact', 'sign-flip-monte-carlo', 'paired-t'; 'none' without shared items,
    'refused' with one."""

    ci_method: str = ""
    """How ci95 was computed (stats.ci method names)."""

    warning: str | None = None
    """Why the result should not be read at face value (too few items), or None."""

    @property
    def verdict(self) -> str:
        """'B higher' or 'A higher' when the test rejects at ALPHA and the interval excludes 0; else 'tied'
        (the data do not order the two runs: never shown as a ranking)."""
        lo, hi = self.ci95
        if math.isnan(self.p_value) or self.p_value >= ALPHA or math.isnan(lo) or lo <= 0.0 <= hi:
            return "tied"
        return "B higher" if self.diff > 0 else "A higher"


def sign_flip_p_value(differences, seed: int = 0) -> tuple[float, str]:
    """Two-sided p-value of the mean difference against every (or a sample of) sign pattern: the share of
    patterns whose |Σ ±d_i| reaches the observed |Σ d_i| (exact under the null of symmetric differences)."""
    import numpy as np

    d = np.abs(np.asarray(differences, dtype=float))
    d = d[d > 0]  # zero differences change no sum
    observed = float(abs(np.sum(differences)))
    tolerance = 1e-9 * max(1.0, float(d.sum()))
    if d.size == 0:
        return 1.0, "sign-flip-exact"
    if d.size <= EXACT_FLIPS_MAX_N:
        sums = np.zeros(1)
        for value in d:
            sums = np.concatenate([sums + value, sums - value])
        return float(np.mean(np.abs(sums) >= observed - tolerance)), "sign-flip-exact"
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(SIGN_FLIP_DRAWS, d.size))
    hits = int(np.sum(np.abs(signs @ d) >= observed - tolerance))
    return (hits + 1) / (SIGN_FLIP_DRAWS + 1), "sign-flip-monte-carlo"


def paired_test(a: Mapping[str, float], b: Mapping[str, float]) -> PairedResult:
    import numpy as np

    ids = sorted(set(a) & set(b))
    x = np.asarray([a[i] for i in ids], dtype=float)
    y = np.asarray([b[i] for i in ids], dtype=float)
    n = len(ids)
    if n == 0:
        return PairedResult(0, math.nan, math.nan, math.nan, (math.nan, math.nan), math.nan, "none",
                            warning="no items in both runs")
    d = y - x
    diff = float(d.mean())
    if n < 2:
        return PairedResult(n, float(x.mean()), float(y.mean()), diff, (math.nan, math.nan), math.nan, "refused",
                            warning="1 item in both runs: a paired comparison needs at least 2")
    bounded = bool(x.min() >= 0 and y.min() >= 0 and x.max() <= 1 and y.max() <= 1)
    estimate = mean_ci(d, bounds=(-1.0, 1.0)) if bounded else mean_ci(d)
    binary = bool(np.all(np.isin(x, (0, 1))) and np.all(np.isin(y, (0, 1))))
    if binary:
        from scipy import stats  # imported here: scipy.stats costs about a second at start-up

        b_only = int(((y == 1) & (x == 0)).sum())
        a_only = int(((x == 1) & (y == 0)).sum())
        discordant = a_only + b_only
        p = float(stats.binomtest(b_only, discordant, 0.5).pvalue) if discordant else 1.0
        test = "mcnemar-exact"
    elif n < RELIABLE_N:
        p, test = sign_flip_p_value(d)
    else:
        from scipy import stats

        p = float(stats.ttest_rel(y, x).pvalue) if np.any(d != 0) else 1.0
        test = "paired-t"
        if not math.isfinite(p):  # every difference the same non-zero number: no variance for t
            p, test = sign_flip_p_value(d)
    warning = None
    if n < RELIABLE_N:
        warning = (f"n = {n} < {RELIABLE_N} shared items: the p-value is exact but the test has little power; "
                   "a non-significant result says little")
    return PairedResult(n, float(x.mean()), float(y.mean()), diff, estimate.ci95, p, test, estimate.method, warning)
