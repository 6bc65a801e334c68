"""95% intervals for means of per-item scores.

Binary scores (every value 0 or 1) get the Wilson score interval, which stays
inside [0, 1] and behaves at p near 0 or 1; other scores get Student's t, cut to
[0, 1] when every score lies in [0, 1] (a mean of such scores cannot leave it:
judge grades /5, F1 of small sets). Scores in [0, 1] that are all equal (or a
single one) have no sample variance, and t would give a zero-width interval;
they get the Wilson interval of their mean instead: a score in [0, 1] with mean
p varies at most as a 0/1 score does (variance p(1 - p)), so the interval is
conservative, not certain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence


@dataclass(frozen=True)
class Estimate:
    """A mean with its 95% interval and the number of items behind it."""

    value: float
    """Point estimate (NaN when n = 0)."""

    ci95: tuple[float, float]
    """Lower and upper bound of the 95% interval."""

    n: int
    """Number of items."""

    variance: float = 0.0
    """Sampling variance of `value` (used to combine estimates)."""


def _z(p: float) -> float:
    """Standard normal quantile."""
    return NormalDist().inv_cdf(p)


def wilson_ci(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    z = _z(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 or n successes the bound is exactly 0 or 1 (the formula leaves rounding dust like 7e-18)
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return (lo, hi)


def mean_ci(values: Sequence[float], confidence: float = 0.95, counts: bool = False) -> Estimate:
    """Mean with its 95% interval; `counts`: the values are counts (rounds, tokens), never read as
    binary outcomes even when every one is 0 or 1."""
    import numpy as np  # loaded when the metrics are computed, not at start-up

    x = np.asarray([v for v in values if v is not None], dtype=float)
    n = int(x.size)
    if n == 0:
        return Estimate(math.nan, (math.nan, math.nan), 0, math.nan)
    mean = float(x.mean())
    var_of_mean = float(x.var(ddof=1) / n) if n > 1 else 0.0
    fractions = not counts and bool(x.min() >= 0.0 and x.max() <= 1.0)
    if fractions and (var_of_mean == 0.0 or np.all((x == 0) | (x == 1))):
        return _binomial_estimate(float(x.sum()), n, confidence)
    if n == 1 or var_of_mean == 0.0:
        return Estimate(mean, (mean, mean), n, var_of_mean)
    from scipy.special import stdtrit  # loaded only when needed: scipy costs a second at start-up

    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * math.sqrt(var_of_mean)
    lo, hi = mean - half, mean + half
    if fractions:
        lo, hi = max(0.0, lo), min(1.0, hi)
    return Estimate(mean, (lo, hi), n, var_of_mean)


def _binomial_estimate(successes: float, n: int, confidence: float) -> Estimate:
    """successes / n with the Wilson interval and the Agresti-Coull variance (never 0 at p = 0 or 1, so macro
    averages of such parts keep a real interval)."""
    z2 = float(_z(0.5 + confidence / 2)) ** 2
    p_adj = (successes + z2 / 2) / (n + z2)
    return Estimate(successes / n, wilson_ci(successes, n, confidence), n, p_adj * (1 - p_adj) / (n + z2))


def proportion_ci(hits: int, n: int, confidence: float = 0.95) -> Estimate:
    """`hits` of `n` as a binary mean (Wilson interval; NaN with n 0), the same Estimate mean_ci gives 0/1 scores."""
    if n == 0:
        return Estimate(math.nan, (math.nan, math.nan), 0, math.nan)
    return _binomial_estimate(float(hits), n, confidence)


def weighted_mean_ci(parts: Sequence[tuple[float, Estimate]], confidence: float = 0.95,
                     renormalise: bool = True) -> Estimate:
    """Σ w_i·mean_i over independent estimates, with var = Σ w_i²·var_i (normal interval).

    Parts with n = 0 are dropped; with `renormalise` the remaining weights are scaled to sum to
    their original total (e.g. 0.4/0.4/0.2 with judgment missing becomes 0.5/0.5)."""
    kept = [(w, e) for w, e in parts if e.n > 0 and not math.isnan(e.value)]
    if not kept:
        return Estimate(math.nan, (math.nan, math.nan), 0, math.nan)
    total = sum(w for w, _ in parts)
    kept_total = sum(w for w, _ in kept)
    scale = (total / kept_total) if renormalise and kept_total > 0 else 1.0
    value = sum(w * scale * e.value for w, e in kept)
    var = sum((w * scale) ** 2 * e.variance for w, e in kept)
    z = float(_z(0.5 + confidence / 2))
    half = z * math.sqrt(var)
    lo, hi = value - half, value + half
    if all(0.0 <= e.ci95[0] and e.ci95[1] <= 1.0 for _, e in kept):  # fractions stay fractions
        lo, hi = max(0.0, lo), min(1.0, hi)
    return Estimate(value, (lo, hi), sum(e.n for _, e in kept), var)
