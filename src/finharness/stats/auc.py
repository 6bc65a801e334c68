"""The area under the ROC curve of a score that should rank positives above negatives, with its 95% interval.

AUC = P(score of a positive > score of a negative) + ½ P(equal), the Mann–Whitney statistic over every pair.
Interval: DeLong, DeLong & Clarke-Pearson (1988)'s variance from the placement values (each positive's share of
negatives below it, each negative's share of positives above it: var = s²₁₀ / m + s²₀₁ / n), taken on the logit
scale and mapped back, so it stays inside (0, 1) and leans away from the bound an AUC near 1 sits by
(`delong-logit`). Where the placements have no spread (perfect separation, all scores equal) DeLong's variance is
0 and says nothing: the interval is then Clopper–Pearson's on the AUC as a proportion of min(m, n) trials
(`exact-bound`), never zero-width. `bootstrap_auc_ci` is the seeded, stratified percentile bootstrap beside it.
`bench/ci_coverage.py` measures both (family "AUC").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .ci import clopper_pearson_ci

_Z = 1.959963984540054

PAIR_MATRIX_MAX = 250_000
"""Positive × negative pairs up to which the bootstrap tabulates every pair once (2 MB of outcomes)."""


@dataclass(frozen=True)
class AucEstimate:
    """An AUC with its 95% interval."""

    value: float
    """P(positive scores higher than negative) + ½ P(tie); NaN without both classes."""

    ci95: tuple[float, float]
    """95% interval (`method`)."""

    n_positive: int
    """Positives (texts the model saw, for a membership probe)."""

    n_negative: int
    """Negatives (texts it cannot have seen)."""

    method: str
    """'delong-logit', 'exact-bound', 'bootstrap' or 'none'."""

    @property
    def excludes_chance(self) -> bool:
        """The interval lies wholly above or below 0.5: the score separates the classes beyond chance."""
        lo, hi = self.ci95
        return not (math.isnan(lo) or math.isnan(hi)) and (lo > 0.5 or hi < 0.5)


def _midranks(values):
    """Ranks 1..n with ties given the mean of the ranks they span."""
    from scipy.stats import rankdata

    return rankdata(values, method="average")


def placements(positives: Sequence[float], negatives: Sequence[float]):
    """(each positive's share of negatives it beats, each negative's share of positives that beat it), ties
    counting ½: DeLong's structural components V₁₀ and V₀₁, whose means are both the AUC."""
    import numpy as np

    x, y = np.asarray(positives, dtype=float), np.asarray(negatives, dtype=float)
    m, n = x.size, y.size
    joint = _midranks(np.concatenate([x, y]))
    v10 = (joint[:m] - _midranks(x)) / n
    v01 = 1.0 - (joint[m:] - _midranks(y)) / m
    return v10, v01


def auc_ci(positives: Sequence[float], negatives: Sequence[float], confidence: float = 0.95) -> AucEstimate:
    """AUC of scores that should be higher for `positives`, with DeLong's interval on the logit scale (module
    docstring); NaN without at least one of each."""
    m, n = len(positives), len(negatives)
    if m == 0 or n == 0:
        return AucEstimate(math.nan, (math.nan, math.nan), m, n, "none")
    v10, v01 = placements(positives, negatives)
    auc = float(v10.mean())
    variance = (float(v10.var(ddof=1)) / m if m > 1 else 0.0) + (float(v01.var(ddof=1)) / n if n > 1 else 0.0)
    z = _Z if confidence == 0.95 else _normal_quantile(0.5 + confidence / 2)
    if variance <= 0.0 or auc <= 0.0 or auc >= 1.0 or min(m, n) < 2:
        trials = min(m, n)
        return AucEstimate(auc, clopper_pearson_ci(auc * trials, trials, confidence), m, n, "exact-bound")
    logit = math.log(auc / (1.0 - auc))
    half = z * math.sqrt(variance) / (auc * (1.0 - auc))
    return AucEstimate(auc, (_expit(logit - half), _expit(logit + half)), m, n, "delong-logit")


def bootstrap_auc_ci(positives: Sequence[float], negatives: Sequence[float], rounds: int = 2000, seed: int = 0,
                     confidence: float = 0.95) -> AucEstimate:
    """AUC with the percentile interval of `rounds` stratified resamples (positives and negatives resampled
    apart, seeded)."""
    import numpy as np

    m, n = len(positives), len(negatives)
    if m == 0 or n == 0:
        return AucEstimate(math.nan, (math.nan, math.nan), m, n, "none")
    x, y = np.asarray(positives, dtype=float), np.asarray(negatives, dtype=float)
    rng = np.random.default_rng(seed)
    values = np.empty(rounds)
    if m * n <= PAIR_MATRIX_MAX:
        # every pair's outcome once; a resample counts each item some number of times (multinomial), so its AUC is
        # wxᵀ P wy / (m n): two matrix products for all rounds at once
        pairs = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
        wx = rng.multinomial(m, np.full(m, 1.0 / m), size=rounds)
        wy = rng.multinomial(n, np.full(n, 1.0 / n), size=rounds)
        values = np.einsum("rj,rj->r", wx @ pairs, wy) / (m * n)
    else:
        for r in range(rounds):
            values[r] = placements(x[rng.integers(0, m, m)], y[rng.integers(0, n, n)])[0].mean()
    alpha = 1 - confidence
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return AucEstimate(float(placements(x, y)[0].mean()), (float(lo), float(hi)), m, n, "bootstrap")


def _expit(value: float) -> float:
    return 1.0 / (1.0 + math.exp(-value))


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)
