"""95% intervals for means of per-item scores, one method per family (docs/statistics.md).

- Binary scores (every value 0 or 1): Clopper–Pearson below RELIABLE_N items (exact, conservative);
  Wilson from RELIABLE_N on, with Clopper–Pearson's bound on a side with fewer than FEW_EVENTS
  successes (or failures), where Wilson's coverage dips.
- Bounded scores (every value in [0, 1], or in the `bounds` given: judge grades /5, F1): the same
  binomial interval on an effective number of trials, n_eff = p(1 − p) / var(mean), times
  (z / t_{n−1})² (Korn & Graubard 1998). A score in [0, 1] with mean p varies at most as a 0/1
  score does, so equal scores (no sample variance) fall back to n_eff = n: conservative, never
  zero-width. Equality is decided on the scores themselves, not on a variance that floating-point
  noise leaves at 1e-33.
- Counts (tokens, rounds): the t interval of log(mean) (delta method), so it stays above 0; below RELIABLE_N
  counts the variance is floored at a Poisson count's. Equal counts (every zero-shot dialogue has 1 round)
  keep a zero-width interval, with a warning that says why.
- Anything else: Student's t.
- Weighted means of bounded parts (an exam's 0.4/0.4/0.2 by question type, macro means over categories): the binomial
  interval on n_eff = 1 / Σ w_i² / n_eff_i (weights summing to 1), the variance of a stratified
  binomial mean; other parts: a normal interval on Σ w_i² var_i.

Every Estimate names its method and, where n is below the size at which that method is reliable,
carries a warning that says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Sequence

RELIABLE_N = 30
"""Items below which an interval relies on its small-sample method (or on nothing) and is flagged."""

FEW_EVENTS = 5
"""Successes (or failures) below which Wilson's bound on that side is replaced by Clopper–Pearson's."""

UNIT = (0.0, 1.0)

BOUNDED_PRIOR_WEIGHT = 0.5
"""Items' worth of the widest spread, p(1 − p), a small sample of bounded scores is pooled with (below RELIABLE_N)."""

COUNT_PRIOR_CV2 = 0.3
"""Squared coefficient of variation of the one pseudo-count a small sample of counts is pooled with (below
RELIABLE_N): completion lengths measured about 0.7, dialogue totals 0.25 (bench/ci_coverage.py's settings)."""


@dataclass(frozen=True)
class Estimate:
    """A mean with its 95% interval and the number of items behind it."""

    value: float
    """Point estimate (NaN when n = 0)."""

    ci95: tuple[float, float]
    """Lower and upper bound of the 95% interval (NaN where there is none)."""

    n: int
    """Number of items."""

    variance: float = 0.0
    """Sampling variance of `value` (used to combine estimates)."""

    method: str = ""
    """How the interval was computed: 'clopper-pearson', 'wilson', 'effective-n clopper-pearson', 'log-t',
    't', 'normal', ... (docs/statistics.md); '' where nobody said."""

    effective_n: float | None = None
    """Bounded estimates on [0, 1]: the number of 0/1 trials with the same variance, so that weighted means
    of them keep a binomial interval; None for other estimates."""

    warning: str | None = None
    """Why the interval should not be read at face value (small n, no interval possible), or None."""


NAN_ESTIMATE = Estimate(math.nan, (math.nan, math.nan), 0, math.nan, "none")


def _z(p: float) -> float:
    """Standard normal quantile."""
    return NormalDist().inv_cdf(p)


def wilson_ci(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of successes / n (successes may be fractional)."""
    if n <= 0:
        return (math.nan, math.nan)
    z = _z(0.5 + confidence / 2)
    p = min(max(successes / n, 0.0), 1.0)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 or n successes the bound is exactly 0 or 1 (the formula leaves rounding dust like 7e-18)
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return (lo, hi)


def clopper_pearson_ci(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval of successes / n from beta quantiles; fractional successes are
    allowed (the beta distribution interpolates between the integer cases)."""
    if n <= 0:
        return (math.nan, math.nan)
    from scipy.special import betaincinv  # loaded only when needed: scipy costs a second at start-up

    alpha = 1 - confidence
    x = min(max(successes, 0.0), n)
    lo = 0.0 if x <= 0 else float(betaincinv(x, n - x + 1, alpha / 2))
    hi = 1.0 if x >= n else float(betaincinv(x + 1, n - x, 1 - alpha / 2))
    return (lo, hi)


def binomial_ci(successes: float, n: float, confidence: float = 0.95) -> tuple[tuple[float, float], str]:
    """The binomial interval the harness uses, and its name: Clopper–Pearson below RELIABLE_N trials;
    else Wilson, with Clopper–Pearson's bound on a side with fewer than FEW_EVENTS events."""
    if n < RELIABLE_N:
        return clopper_pearson_ci(successes, n, confidence), "clopper-pearson"
    lo, hi = wilson_ci(successes, n, confidence)
    if successes < FEW_EVENTS or n - successes < FEW_EVENTS:
        exact = clopper_pearson_ci(successes, n, confidence)
        lo = exact[0] if successes < FEW_EVENTS else lo
        hi = exact[1] if n - successes < FEW_EVENTS else hi
    return (lo, hi), "wilson"


def small_n_warning(n: float, method: str, label: str = "n") -> str | None:
    """The warning an estimate of n items (`label`: what n counts) gets under `method`, or None when n is
    large enough."""
    if n >= RELIABLE_N:
        return None
    size = f"{label} = {n:g}" if float(n).is_integer() else f"{label} = {n:.1f}"
    if method.endswith("clopper-pearson"):
        return f"{size} < {RELIABLE_N}: exact (Clopper–Pearson) interval, conservative; wide because the items are few"
    return f"{size} < {RELIABLE_N}: the {method} interval's coverage is not assured at this size"


def _binomial_estimate(successes: float, n: int, confidence: float, scale: tuple[float, float] = UNIT,
                       effective_n: float | None = None, method_prefix: str = "") -> Estimate:
    """successes / n trials (or effective_n trials with the same mean) on `scale`, with the binomial interval
    and the Agresti–Coull variance (never 0 at p = 0 or 1, so normal combinations of such parts keep a real
    interval)."""
    trials = float(n if effective_n is None else effective_n)
    p = successes / n
    (lo, hi), method = binomial_ci(p * trials, trials, confidence)
    z2 = float(_z(0.5 + confidence / 2)) ** 2
    p_adj = (p * trials + z2 / 2) / (trials + z2)
    low, width = scale[0], scale[1] - scale[0]
    method = method_prefix + method
    return Estimate(low + width * p, (low + width * lo, low + width * hi), n,
                    width * width * p_adj * (1 - p_adj) / (trials + z2), method, trials,
                    small_n_warning(n, method))


def _all_equal(x) -> bool:
    """Every value the same, to within rounding relative to their size."""
    return bool(x.max() - x.min() <= 1e-12 * max(1.0, float(abs(x).max())))


def mean_ci(values: Sequence[float | None], confidence: float = 0.95, counts: bool = False,
            bounds: tuple[float, float] | None = None) -> Estimate:
    """Mean with its 95% interval (module docstring). `counts`: the values are counts (rounds, tokens), never
    read as binary outcomes even when every one is 0 or 1. `bounds`: the range the scores can take (e.g.
    (1, 5) for raw grades); values all in [0, 1] are taken as bounded by it unless they are counts."""
    import numpy as np  # loaded when the metrics are computed, not at start-up

    x = np.asarray([v for v in values if v is not None], dtype=float)
    n = int(x.size)
    if n == 0:
        return NAN_ESTIMATE
    if counts:
        return _count_estimate(x, confidence)
    if bounds is None and x.min() >= 0.0 and x.max() <= 1.0:
        bounds = UNIT
    if bounds is not None:
        return _bounded_estimate(x, bounds, confidence)
    return _t_estimate(x, confidence)


def _t_estimate(x, confidence: float) -> Estimate:
    n, mean = int(x.size), float(x.mean())
    if n == 1:
        return Estimate(mean, (math.nan, math.nan), 1, math.nan, "t",
                        warning="n = 1: a mean of unbounded values has no interval from one item")
    var_of_mean = float(x.var(ddof=1) / n)
    if _all_equal(x):
        return Estimate(mean, (mean, mean), n, 0.0, "t",
                        warning=f"all {n} values are equal: the zero-width interval shows no spread, not certainty")
    from scipy.special import stdtrit  # loaded only when needed: scipy costs a second at start-up

    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * math.sqrt(var_of_mean)
    return Estimate(mean, (mean - half, mean + half), n, var_of_mean, "t", warning=small_n_warning(n, "t"))


def _bounded_estimate(x, bounds: tuple[float, float], confidence: float) -> Estimate:
    import numpy as np

    lo, hi = bounds
    if not lo < hi or x.min() < lo - 1e-12 * (hi - lo) or x.max() > hi + 1e-12 * (hi - lo):
        raise ValueError(f"scores outside their bounds [{lo}, {hi}]: {x.min()} .. {x.max()}")
    u = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    n, p = int(u.size), float(u.mean())
    if bool(np.all((u == 0) | (u == 1))):
        return _binomial_estimate(float(u.sum()), n, confidence, bounds)
    if _all_equal(u):  # no sample variance: a [0, 1] score varies at most as a 0/1 score with its mean
        return _binomial_estimate(float(u.sum()), n, confidence, bounds, method_prefix="effective-n ")
    spread = float(u.var(ddof=1))
    if n < RELIABLE_N:
        # a few scores that happen to be close say little of the spread (a weak judge's five grades of 1 or 2 out of
        # 5): the variance is pooled with one more item of the widest spread a score with this mean can have, a 0/1
        # item's p(1 − p); it fades as items come in
        spread = (n * spread + BOUNDED_PRIOR_WEIGHT * p * (1 - p)) / (n + BOUNDED_PRIOR_WEIGHT)
    var_of_mean = spread / n
    from scipy.special import stdtrit

    t = float(stdtrit(n - 1, 0.5 + confidence / 2))
    effective_n = p * (1 - p) / var_of_mean * (_z(0.5 + confidence / 2) / t) ** 2
    est = _binomial_estimate(float(u.sum()), n, confidence, bounds, effective_n, "effective-n ")
    return replace(est, variance=var_of_mean * (hi - lo) ** 2)


def _count_estimate(x, confidence: float) -> Estimate:
    """Log-scale t interval of a mean of non-negative counts (delta method: se(log mean) = se / mean)."""
    n, mean = int(x.size), float(x.mean())
    if x.min() < 0 or n == 1 or _all_equal(x):  # no spread to put on a log scale: as any other mean
        return replace(_t_estimate(x, confidence), method="log-t")
    from scipy.special import stdtrit

    var_of_mean = float(x.var(ddof=1) / n)
    spread = var_of_mean
    if n < RELIABLE_N:
        # a few counts that happen to be close say little of the spread: below RELIABLE_N the variance is pooled
        # with one more count of spread COUNT_PRIOR_CV2 · mean² where that widens it (never narrowed), and taken
        # at least as a Poisson count's (mean / n)
        observed = float(x.var(ddof=1))
        pooled = (n * observed + COUNT_PRIOR_CV2 * mean * mean) / (n + 1)
        spread = max(observed, pooled, mean) / n
    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * math.sqrt(math.log1p(spread / mean ** 2))
    return Estimate(mean, (mean * math.exp(-half), mean * math.exp(half)), n, var_of_mean, "log-t",
                    warning=small_n_warning(n, "log-t"))


def proportion_ci(hits: int, n: int, confidence: float = 0.95) -> Estimate:
    """`hits` of `n` as a binary mean (NaN with n 0), the same Estimate mean_ci gives 0/1 scores."""
    if n == 0:
        return NAN_ESTIMATE
    return _binomial_estimate(float(hits), n, confidence)


def weighted_mean_ci(parts: Sequence[tuple[float, Estimate]], confidence: float = 0.95,
                     renormalise: bool = True) -> Estimate:
    """Σ w_i·mean_i over independent estimates (module docstring for the interval).

    Parts with n = 0 are dropped; with `renormalise` the remaining weights are scaled to sum to
    their original total (e.g. 0.4/0.4/0.2 with judgment missing becomes 0.5/0.5)."""
    kept = [(w, e) for w, e in parts if e.n > 0 and not math.isnan(e.value)]
    if not kept:
        return NAN_ESTIMATE
    total = sum(w for w, _ in parts)
    kept_total = sum(w for w, _ in kept)
    scale = (total / kept_total) if renormalise and kept_total > 0 else 1.0
    weights = [w * scale for w, _ in kept]
    value = sum(w * e.value for w, (_, e) in zip(weights, kept))
    var = sum(w * w * e.variance for w, (_, e) in zip(weights, kept))
    n = sum(e.n for _, e in kept)
    weight_sum = sum(weights)
    binomial = weight_sum > 0 and all(e.effective_n and 0.0 <= e.ci95[0] and e.ci95[1] <= 1.0 for _, e in kept)
    if binomial:  # a stratified mean of [0, 1] parts: the binomial interval on its effective number of trials
        effective_n = 1.0 / sum((w / weight_sum) ** 2 / e.effective_n for w, (_, e) in zip(weights, kept))
        p = min(max(value / weight_sum, 0.0), 1.0)
        (lo, hi), method = binomial_ci(p * effective_n, effective_n, confidence)
        method = "effective-n " + method
        warning = small_n_warning(effective_n, method, "effective n")
        if warning is None and any(e.warning for _, e in kept):
            warning = "some parts have few items; the combined interval counts them by their weight"
        return Estimate(value, (weight_sum * lo, weight_sum * hi), n, var, method, effective_n, warning)
    half = float(_z(0.5 + confidence / 2)) * math.sqrt(var)
    lo, hi = value - half, value + half
    if all(0.0 <= e.ci95[0] and e.ci95[1] <= 1.0 for _, e in kept):  # fractions stay fractions
        lo, hi = max(0.0, lo), min(1.0, hi)
    warning = next((f"a part has few items ({e.warning})" for _, e in kept if e.warning), None)
    return Estimate(value, (lo, hi), n, var, "normal", warning=warning)
