"""Paired comparison of two runs on the same items: B − A, its 95% interval and p-value, both from one test.

The interval is the set of differences the test does not reject at ALPHA, and the p-value is that test at a
difference of 0, so an interval that excludes 0 always comes with p < ALPHA and a verdict that orders the runs, and
one that holds 0 with p ≥ ALPHA and `tied` (issue 36: an exact McNemar p of 0.070 beside an effective-n interval of
[1.8 %, 45.6 %] said two things at once).

- 0/1 scores: McNemar's score test, z = (c − b) / √(b + c) over the discordant items (b: only A right, c: only B
  right), and Tango's (1998) score interval for the difference of paired proportions, the values Δ whose score
  statistic (c − b − nΔ) / √(n (2 π̃ + Δ − Δ²)) (π̃ the restricted maximum-likelihood share of A-only items) stays
  within ±z₀.₉₇₅. At Δ = 0 that statistic is McNemar's. Fagerland, Lydersen & Laake (2013, 2014) recommend both
  over the exact conditional test, which is conservative; `bench/ci_coverage.py` measures the interval at n = 3 …
  300 (worst case 0.947 by exact enumeration). The interval never collapses when the runs agree on every item.
- Other scores in [0, 1], below RELIABLE_N shared items: the differences lie in [−1, 1] and get the bounded
  family's interval there (stats.ci: the binomial interval on an effective number of trials, never zero-width),
  and the p-value is the binomial test that interval inverts (exact below 30 effective trials, the score test
  above). The sign-flip permutation test (`sign_flip_p_value`) is exact under symmetric differences, but with
  most differences exactly 0 (judge grades) its few distinct sums make a too narrow interval when inverted, so it
  decides no verdict.
- Other scores from RELIABLE_N on (and unbounded ones at any n): the paired t-test and the t interval.

Fewer than 2 shared items are refused: the result says so and carries no p-value or interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .ci import RELIABLE_N, mean_ci

ALPHA = 0.05
"""Level at which a comparison orders two runs (PairedResult.verdict)."""

EXACT_FLIPS_MAX_N = 20
"""Up to this many items every sign pattern is enumerated (2^20 sums); above, a Monte Carlo sample."""

SIGN_FLIP_DRAWS = 100_000
"""Sign patterns sampled (seed 0) when there are too many to enumerate."""

_Z = 1.959963984540054
"""z₀.₉₇₅."""


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
    """95% interval of the mean paired difference: the differences `test` does not reject (`ci_method`)."""

    p_value: float
    """Two-sided p-value of `test` at a difference of 0 (NaN when refused)."""

    test: str
    """'mcnemar-score', 'effective-n binomial', 'paired-t'; 'none' without shared items, 'refused' with one."""

    ci_method: str = ""
    """How ci95 was made: 'tango-score', the bounded family's 'effective-n ...' methods (stats.ci), 't'."""

    warning: str | None = None
    """Why the result should not be read at face value (too few items), or None."""

    @property
    def verdict(self) -> str:
        """'B higher' or 'A higher' when the interval excludes 0 (the test then rejects at ALPHA too); else 'tied'
        (the data do not order the two runs: never shown as a ranking)."""
        lo, hi = self.ci95
        if math.isnan(self.p_value) or math.isnan(lo) or math.isnan(hi) or lo <= 0.0 <= hi:
            return "tied"
        return "B higher" if self.diff > 0 else "A higher"


# --- 0/1 scores: McNemar's score test and Tango's interval ------------------------------------------------------

def mcnemar_score_p(b: int, c: int) -> float:
    """Two-sided p of McNemar's score (asymptotic) test: z = (c − b) / √(b + c); 1 without discordant items."""
    if b + c == 0:
        return 1.0
    z = abs(c - b) / math.sqrt(b + c)
    return math.erfc(z / math.sqrt(2.0))


def _tango_z(b: int, c: int, n: int, delta: float) -> float:
    """Tango's score statistic for the paired difference Δ = P(only B right) − P(only A right) at `delta`."""
    # restricted MLE of the A-only share π under π_B-only = π + Δ: the root of
    # 2n π² − [(b + c) − Δ(2n + b − c)] π − b Δ (1 − Δ) = 0 in the feasible range
    linear = (b + c) - delta * (2 * n + b - c)
    root = (linear + math.sqrt(max(linear * linear + 8.0 * n * b * delta * (1.0 - delta), 0.0))) / (4.0 * n)
    variance = n * (2.0 * root + delta - delta * delta)
    numerator = c - b - n * delta
    if variance <= 0.0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def tango_interval(b: int, c: int, n: int, z: float = _Z) -> tuple[float, float]:
    """Tango's score interval of (c − b) / n: the Δ in [−1, 1] whose |score statistic| is at most `z` (it falls
    as Δ grows, so each end is one root, found by bisection)."""
    estimate = (c - b) / n

    def root(low: float, high: float, target: float) -> float:
        # _tango_z(low) > target >= _tango_z(high)
        for _ in range(100):
            mid = 0.5 * (low + high)
            if _tango_z(b, c, n, mid) > target:
                low = mid
            else:
                high = mid
            if high - low < 1e-12:
                break
        return 0.5 * (low + high)

    edge = 1.0 - 1e-12
    lower = -1.0 if _tango_z(b, c, n, -edge) <= z else root(-edge, estimate, z)
    upper = 1.0 if _tango_z(b, c, n, edge) >= -z else root(estimate, edge, -z)
    return (max(-1.0, lower), min(1.0, upper))


# --- other scores: the sign-flip test and its inversion --------------------------------------------------------

def sign_flip_p_value(differences, seed: int = 0) -> tuple[float, str]:
    """Two-sided p-value of the mean difference against every (or a sample of) sign pattern: the share of
    patterns whose |Σ ±d_i| reaches the observed |Σ d_i| (exact under the null of symmetric differences). Zero
    differences change no sum and are left out (up to EXACT_FLIPS_MAX_N others, every pattern is enumerated)."""
    import numpy as np

    d = np.asarray(differences, dtype=float)
    return _SignFlips(int(np.count_nonzero(d)), seed).p_value(d[d != 0])


class _SignFlips:
    """A sign-flip test on n items: every pattern up to EXACT_FLIPS_MAX_N items, SIGN_FLIP_DRAWS seeded ones
    above (the same patterns for every shift of an inversion, so its p-values are one test's)."""

    def __init__(self, n: int, seed: int = 0):
        import numpy as np

        self.n = n
        self.exact = n <= EXACT_FLIPS_MAX_N
        self.signs = None if self.exact else np.random.default_rng(seed).choice((-1.0, 1.0), size=(SIGN_FLIP_DRAWS, n))
        self._sums: tuple[Any, Any, Any] | None = None

    @property
    def name(self) -> str:
        return "sign-flip-exact" if self.exact else "sign-flip-monte-carlo"

    def _pattern_sums(self, d) -> tuple[Any, Any]:
        """(Σ ε_i d_i, Σ ε_i) over the patterns ε, made once per d: Σ ε_i (d_i − δ) of any shift δ is then
        S − δ K, one vector operation."""
        import numpy as np

        if self._sums is None or self._sums[0] is not d:
            if self.exact:
                sums, counts = np.zeros(1), np.zeros(1)
                for value in d:  # the 2^n sums, built up one item at a time
                    sums = np.concatenate([sums + value, sums - value])
                    counts = np.concatenate([counts + 1, counts - 1])
            else:
                sums, counts = self.signs @ d, self.signs.sum(axis=1)
            self._sums = (d, sums, counts)
        return self._sums[1], self._sums[2]

    def p_value(self, d, delta: float = 0.0) -> tuple[float, str]:
        """The test's two-sided p of d − delta: the share of patterns whose |Σ ε_i (d_i − delta)| reaches the
        observed |Σ (d_i − delta)| (a Monte Carlo sample counts the observed pattern once more)."""
        import numpy as np

        shifted = d - delta
        if not np.any(shifted != 0):
            return 1.0, self.name
        sums, counts = self._pattern_sums(d)
        observed = float(abs(shifted.sum()))
        tolerance = 1e-9 * max(1.0, float(np.abs(shifted).sum()))
        hits = int(np.sum(np.abs(sums - delta * counts) >= observed - tolerance))
        if self.exact:
            return hits / sums.size, self.name
        return (hits + 1) / (SIGN_FLIP_DRAWS + 1), self.name


def _t_interval(d) -> tuple[tuple[float, float], float]:
    """(the paired t interval of the mean difference, the t-test's p) for differences with spread."""
    from scipy import stats  # imported here: scipy.stats costs about a second at start-up

    n, mean = d.size, float(d.mean())
    se = float(d.std(ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) * se
    p = float(2 * stats.t.sf(abs(mean) / se, n - 1))
    return (mean - half, mean + half), p


# --- the comparison ---------------------------------------------------------------------------------------------

def paired_test(a: Mapping[str, float], b: Mapping[str, float]) -> PairedResult:
    """B − A on the items both mappings (item id -> score) hold: module docstring."""
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
    warning = None
    if n < RELIABLE_N:
        warning = (f"n = {n} < {RELIABLE_N} shared items: the test has little power; a tied result says little")
    if bool(np.all(np.isin(x, (0, 1))) and np.all(np.isin(y, (0, 1)))):
        b_only = int(((x == 1) & (y == 0)).sum())
        c_only = int(((y == 1) & (x == 0)).sum())
        return PairedResult(n, float(x.mean()), float(y.mean()), diff, tango_interval(b_only, c_only, n),
                            mcnemar_score_p(b_only, c_only), "mcnemar-score", "tango-score", warning)
    bounded = bool(x.min() >= 0 and y.min() >= 0 and x.max() <= 1 and y.max() <= 1)
    spread = bool(d.max() - d.min() > 1e-12 * max(1.0, float(np.abs(d).max())))
    if n >= RELIABLE_N and spread:
        ci, p = _t_interval(d)
        if bounded:
            ci = (max(-1.0, ci[0]), min(1.0, ci[1]))
        return PairedResult(n, float(x.mean()), float(y.mean()), diff, ci, p, "paired-t", "t", warning)
    if not bounded:  # unbounded scores: the t interval and its test at any n
        if not spread:
            ci = (diff, diff)
            p = 1.0 if diff == 0 else 0.0
        else:
            ci, p = _t_interval(d)
        return PairedResult(n, float(x.mean()), float(y.mean()), diff, ci, p, "paired-t", "t", warning)
    estimate = mean_ci(d, bounds=(-1.0, 1.0))
    p = _binomial_p(estimate)
    return PairedResult(n, float(x.mean()), float(y.mean()), diff, estimate.ci95, p, "effective-n binomial",
                        estimate.method, warning)


def _binomial_p(estimate: Any) -> float:
    """The two-sided p at a difference of 0 of the test the bounded interval inverts: on its effective number of
    trials N and successes k = N · (mean + 1) / 2, the exact (central) binomial test of ½ where the interval is
    Clopper–Pearson's (N < RELIABLE_N), else the score test Wilson's interval inverts. Its few-event bounds are
    Clopper–Pearson's only on a side whose bound cannot reach ½, so p < ALPHA exactly when the interval excludes 0."""
    trials = float(estimate.effective_n)
    k = trials * (estimate.value + 1.0) / 2.0
    if trials < RELIABLE_N:
        from scipy.special import betainc

        upper = 1.0 if k <= 0 else float(betainc(k, trials - k + 1, 0.5))  # P(X >= k)
        lower = 1.0 if k >= trials else 1.0 - float(betainc(k + 1, trials - k, 0.5))  # P(X <= k)
        return min(1.0, 2.0 * min(upper, lower))
    return math.erfc(abs(k - trials / 2) / math.sqrt(trials / 4) / math.sqrt(2.0))


def paired_differences(a: Mapping[str, float], b: Mapping[str, float]) -> Sequence[float]:
    """B − A per shared item, in id order (what paired_test tests)."""
    return [b[i] - a[i] for i in sorted(set(a) & set(b))]
