"""How many items a comparison needs: the smallest difference a paired test detects.

Two models answer the same n items; d_i is the difference of their scores on item i, with standard
deviation σ_d. A two-sided paired test at level α detects a true mean difference δ with power 1 − β
when δ ≥ (t_{1−α/2, n−1} + t_{1−β, n−1}) · σ_d / √n (the usual normal-approximation formula, with t
quantiles so that small n is not flattered). A weighted score (0.4/0.4/0.2 of macro means)
counts its items by their weights: n becomes the effective n (Σw)² / Σw².

σ_d comes from two stored runs on the same items (their per-item differences), from one run and an
assumed correlation ρ between the two models' per-item scores (σ_d² = 2σ²(1 − ρ), same variance for both),
or from a planned accuracy p of binary scores (σ² = p(1 − p)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

ALPHA = 0.05
POWER = 0.8
DEFAULT_CORRELATION = 0.5
"""Assumed correlation of two models' per-item scores when only one run is stored (models tend to find the
same items hard; 0 would be the most pessimistic)."""


def _quantiles(n: float, alpha: float, power: float) -> float:
    from scipy.special import stdtrit

    df = max(n - 1.0, 1.0)
    return float(stdtrit(df, 1 - alpha / 2)) + float(stdtrit(df, power))


def detectable_difference(n: float, sd: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest true mean difference a paired test on n items (or effective items) detects (module docstring)."""
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 items; got n = {n}")
    if sd < 0 or math.isnan(sd):
        raise ValueError(f"the per-item standard deviation must be a number >= 0; got {sd}")
    return _quantiles(n, alpha, power) * sd / math.sqrt(n)


def required_items(difference: float, sd: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Fewest items (effective items for a weighted score) whose paired test detects `difference`."""
    if difference <= 0:
        raise ValueError(f"the difference to detect must be > 0; got {difference}")
    if sd == 0:
        return 2
    n = max(2, math.ceil(((_quantiles(1e9, alpha, power) * sd / difference) ** 2)))
    while detectable_difference(n, sd, alpha, power) > difference:  # t quantiles: a few more than the normal's
        n += max(1, n // 100)
    while n > 2 and detectable_difference(n - 1, sd, alpha, power) <= difference:
        n -= 1
    return n


def effective_n(weights: Sequence[float]) -> float:
    """(Σw)² / Σw²: how many equally weighted items carry the same information as these weighted ones."""
    total, squares = sum(weights), sum(w * w for w in weights)
    return total * total / squares if squares > 0 else 0.0


def _sd(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        raise ValueError(f"a standard deviation needs at least 2 scores; got {n}")
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def difference_sd(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """σ_d of two runs' per-item scores on the items both scored."""
    shared = sorted(set(a) & set(b))
    return _sd([b[i] - a[i] for i in shared])


def difference_sd_from_one(scores: Sequence[float], correlation: float = DEFAULT_CORRELATION) -> float:
    """σ_d when a second model is assumed to score with the same variance and the given correlation."""
    if not -1.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must lie in [-1, 1]; got {correlation}")
    return _sd(scores) * math.sqrt(2 * (1 - correlation))


TIE_SHARE = 0.2
"""Ties assumed among pairwise verdicts when no matches say (pairwise judges call about one in five a tie)."""


def pairwise_outcome_sd(tie_share: float = TIE_SHARE) -> float:
    """σ of one model's outcomes against an even other (1 win, ½ tie, 0 loss) with `tie_share` ties."""
    if not 0.0 <= tie_share <= 1.0:
        raise ValueError(f"the tie share must lie in [0, 1]; got {tie_share}")
    return math.sqrt((1 - tie_share) / 4)


def binary_difference_sd(accuracy: float, correlation: float = DEFAULT_CORRELATION) -> float:
    """σ_d of two models with 0/1 scores at the planned accuracy and per-item correlation."""
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy must lie in [0, 1]; got {accuracy}")
    return math.sqrt(2 * accuracy * (1 - accuracy) * (1 - correlation))


@dataclass(frozen=True)
class PowerPlan:
    """What a planned paired comparison can tell apart."""

    n: int
    """Items planned (or needed, when a difference was given)."""
    effective_n: float
    """n for plain means; (Σw)²/Σw² of the planned items' weights for a weighted score."""
    sd: float
    """σ_d: standard deviation of the per-item differences."""
    detectable: float
    """Smallest true difference detected at `power` with a two-sided test at `alpha`."""
    alpha: float
    power: float
    source: str
    """Where σ_d came from."""
    target: float | None = None
    """The difference asked about, when n was solved for."""
    rating_points: float | None = None
    """For pairwise outcomes (win share around ½): the detectable difference in rating points
    (scale·log_base of the odds), e.g. Elo points for scale 400 and base 10."""

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "effective_n": self.effective_n, "sd": self.sd, "detectable": self.detectable,
                "alpha": self.alpha, "power": self.power, "source": self.source, "target": self.target,
                "rating_points": self.rating_points}


def plan_comparison(sd: float, n: int | None = None, difference: float | None = None, *,
                    weight_ratio: float = 1.0, alpha: float = ALPHA, power: float = POWER, source: str = "given",
                    pairwise_scale: tuple[float, float] | None = None) -> PowerPlan:
    """For a planned n: the detectable difference; for a target `difference`: the n that detects it.
    `weight_ratio` = effective n / n of the planned items (1 for a plain mean; < 1 for a weighted score).
    `pairwise_scale` (scale, base): the scores are one model's outcome against the other (1 win, ½ tie, 0 loss),
    so the difference is the win share's distance from ½, also given in rating points."""
    if (n is None) == (difference is None):
        raise ValueError("give either a planned number of items or a difference to detect")
    if not 0 < weight_ratio <= 1:
        raise ValueError(f"weight_ratio must lie in (0, 1]; got {weight_ratio}")
    if difference is not None:
        needed = required_items(difference, sd, alpha, power)
        n = math.ceil(needed / weight_ratio)
    assert n is not None
    detectable = detectable_difference(n * weight_ratio, sd, alpha, power)
    points = None
    if pairwise_scale is not None:
        scale, base = pairwise_scale
        share = min(0.5 + detectable, 1.0)
        points = math.inf if share >= 1 else scale * math.log(share / (1 - share)) / math.log(base)
    return PowerPlan(n, n * weight_ratio, sd, detectable, alpha, power, source, difference, points)
