"""Metric values as they appear in results.json: value, ci95, n."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Mapping

from ..stats import Estimate, mean_ci
from .types import Score


@dataclass(frozen=True)
class Metric:
    """One number in results.json."""

    value: float | None
    """Point estimate (None when nothing could be scored)."""

    ci95: tuple[float, float] | None
    """95% interval."""

    n: int
    """Items behind the value."""

    variance: float = 0.0
    """Sampling variance, kept so weighted aggregates can combine metrics."""

    @classmethod
    def of(cls, est: Estimate) -> "Metric":
        if est.n == 0 or math.isnan(est.value):
            return cls(None, None, est.n, 0.0)
        return cls(est.value, (float(est.ci95[0]), float(est.ci95[1])), est.n, est.variance)

    def estimate(self) -> Estimate:
        if self.value is None:
            return Estimate(math.nan, (math.nan, math.nan), self.n, math.nan)
        return Estimate(self.value, self.ci95 or (self.value, self.value), self.n, self.variance)

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "ci95": list(self.ci95) if self.ci95 else None, "n": self.n}


def mean_metrics(scores: Iterable[Score], headline: str = "accuracy",
                 counts: Collection[str] = ()) -> dict[str, Metric]:
    """`headline` = mean of Score.value; every key of Score.values averaged the same way (keys in
    `counts` hold counts, so all-0/1 columns of them get a t interval, not a binomial one)."""
    scores = [s for s in scores if s is not None]
    out = {headline: Metric.of(mean_ci([s.value for s in scores if s.value is not None]))}
    columns: dict[str, list[float]] = defaultdict(list)
    for s in scores:
        for k, v in s.values.items():
            columns[k].append(v)
    for k, vs in columns.items():
        out[k] = Metric.of(mean_ci(vs, counts=k in counts))
    return out


def grouped(items: Iterable[tuple[str, Score]], headline: str = "accuracy") -> dict[str, dict[str, Metric]]:
    """Metrics per group value; unscored items (a failed sample's None) are left out, as by mean_metrics."""
    buckets: dict[str, list[Score]] = defaultdict(list)
    for key, s in items:
        if s is not None:
            buckets[key].append(s)
    return {k: mean_metrics(v, headline) for k, v in sorted(buckets.items())}


def metrics_json(metrics: Mapping[str, Metric]) -> dict[str, Any]:
    return {k: m.to_json() for k, m in metrics.items()}
