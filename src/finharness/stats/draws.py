"""Several answers per item (draws): the item-clustered interval, the share of variance from the model's own
sampling, majority vote and pass@k.

With K draws per item the items, not the draws, are the independent units: the mean's variance is
Var(item means) / n = (σ²_between + σ²_within / K) / n ("Adding Error Bars to Evals", Miller 2024, §3),
so the interval is the usual one computed over the item means (stats.ci.mean_ci: for scores in [0, 1]
the bounded family). With one draw per item every function here gives exactly what mean_ci gives.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Hashable, Sequence

from .ci import Estimate, mean_ci


@dataclass(frozen=True)
class VarianceComponents:
    """How the variance of the per-draw scores splits between items and the model's sampling."""

    items: int
    """Items with at least one draw."""
    draws: float
    """Mean number of draws per item (K)."""
    between: float
    """σ²_between: variance of the items' true means (estimated, ≥ 0)."""
    within: float
    """σ²_within: mean over items (with ≥ 2 draws) of the sample variance of their draws."""
    sampling_share: float
    """Share of the reported mean's variance that comes from sampling: (σ²_within / K) / Var(item means),
    in [0, 1]; NaN with one draw per item or no variance."""
    per_draw_share: float
    """Share of one draw's variance that is sampling noise: σ²_within / (σ²_within + σ²_between)."""

    def to_json(self) -> dict[str, float | int | None]:
        def num(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {"items": self.items, "draws": self.draws, "between": num(self.between), "within": num(self.within),
                "sampling_share": num(self.sampling_share), "per_draw_share": num(self.per_draw_share)}


def _draws_of(per_item: Sequence[Sequence[float | None]]) -> list[list[float]]:
    return [kept for kept in ([float(v) for v in draws if v is not None] for draws in per_item) if kept]


def clustered_mean_ci(per_item: Sequence[Sequence[float | None]], confidence: float = 0.95, counts: bool = False,
                      bounds: tuple[float, float] | None = None) -> Estimate:
    """Mean over items of each item's mean over its draws, with the interval over items (module docstring).

    `per_item`: the scores of each item's draws (None: a draw that could not be scored, left out). With one
    draw per item this is mean_ci of the scores, unchanged."""
    items = _draws_of(per_item)
    if all(len(d) == 1 for d in items):
        return mean_ci([d[0] for d in items], confidence, counts=counts, bounds=bounds)
    if bounds is None and not counts and all(0.0 <= v <= 1.0 for d in items for v in d):
        bounds = (0.0, 1.0)  # item means of [0, 1] scores are bounded even where they are not all 0 or 1
    estimate = mean_ci([sum(d) / len(d) for d in items], confidence, counts=counts, bounds=bounds)
    return replace(estimate, method=f"clustered {estimate.method}")


def variance_components(per_item: Sequence[Sequence[float | None]]) -> VarianceComponents:
    """σ²_between and σ²_within of per-draw scores, and the sampling share (VarianceComponents)."""
    items = _draws_of(per_item)
    if not items:
        return VarianceComponents(0, 0.0, math.nan, math.nan, math.nan, math.nan)
    import numpy as np

    means = np.asarray([sum(d) / len(d) for d in items])
    draws = float(np.mean([len(d) for d in items]))
    repeated = [np.var(d, ddof=1) for d in items if len(d) >= 2]
    within = float(np.mean(repeated)) if repeated else math.nan
    var_means = float(means.var(ddof=1)) if len(items) > 1 else math.nan
    if math.isnan(within) or math.isnan(var_means):
        return VarianceComponents(len(items), draws, var_means, within, math.nan, math.nan)
    # 1/K averaged over items estimates the within part of Var(item means) when K varies
    within_of_means = within * float(np.mean([1.0 / len(d) for d in items]))
    between = max(var_means - within_of_means, 0.0)
    share = min(within_of_means / var_means, 1.0) if var_means > 0 else math.nan
    per_draw = within / (within + between) if within + between > 0 else math.nan
    return VarianceComponents(len(items), draws, between, within, share, per_draw)


def majority_vote(answers: Sequence[Hashable | None]) -> Hashable | None:
    """The most frequent answer among the draws (None: unreadable, not counted); a tie goes to the tied answer
    drawn first, so the vote is deterministic. None when no draw could be read."""
    readable = [a for a in answers if a is not None]
    if not readable:
        return None
    counts = Counter(readable)
    top = max(counts.values())
    return next(a for a in readable if counts[a] == top)


def pass_at_k(n: int, correct: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k draws is correct) from n draws of which `correct` were
    (Chen et al. 2021): 1 − C(n − c, k) / C(n, k), computed as a product (no huge binomials)."""
    if not 0 < k <= n or not 0 <= correct <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= correct <= n; got n={n}, correct={correct}, k={k}")
    if n - correct < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - correct + 1, n + 1))


def pass_at_k_ci(per_item: Sequence[Sequence[bool | float | None]], k: int, confidence: float = 0.95) -> Estimate:
    """pass@k over items: each item's unbiased estimate from its draws (truthy: correct; None, a draw that
    could not be scored, counts as a wrong one), averaged over items with the bounded interval over items."""
    values = [pass_at_k(len(draws), sum(bool(v) for v in draws), k) for draws in per_item if draws]
    estimate = mean_ci(values, confidence, bounds=(0.0, 1.0))
    return replace(estimate, method=f"clustered {estimate.method}") if values else estimate
