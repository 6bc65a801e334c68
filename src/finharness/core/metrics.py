"""Metric values as they appear in results.json: value, ci95, n, the interval's method and, where n is too small
for it, a warning (docs/statistics.md)."""

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

    method: str = ""
    """How ci95 was computed ('wilson', 'clopper-pearson', 'effective-n wilson', 'log-t', ...); '' unknown."""

    warning: str | None = None
    """Why the interval should not be read at face value (n below what its method needs), or None."""

    effective_n: float | None = None
    """Bounded metrics: the 0/1 trials with the same variance (stats.Estimate.effective_n), for combining."""

    @classmethod
    def of(cls, est: Estimate) -> "Metric":
        if est.n == 0 or math.isnan(est.value):
            return cls(None, None, est.n, 0.0)
        ci = None if any(math.isnan(b) for b in est.ci95) else (float(est.ci95[0]), float(est.ci95[1]))
        return cls(est.value, ci, est.n, est.variance, est.method, est.warning, est.effective_n)

    def estimate(self) -> Estimate:
        if self.value is None:
            return Estimate(math.nan, (math.nan, math.nan), self.n, math.nan)
        return Estimate(self.value, self.ci95 or (math.nan, math.nan), self.n, self.variance, self.method,
                        self.effective_n, self.warning)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "ci95": list(self.ci95) if self.ci95 else None, "n": self.n}
        if self.method and self.value is not None:
            out["method"] = self.method
        if self.warning and self.value is not None:
            out["warning"] = self.warning
        return out


def mean_metrics(scores: Iterable[Score], headline: str = "accuracy",
                 counts: Collection[str] = ()) -> dict[str, Metric]:
    """`headline` = mean of Score.value; every key of Score.values averaged the same way (keys in
    `counts` hold counts: they get the counts' interval, never a binomial one, even when all 0 or 1)."""
    scores = [s for s in scores if s is not None]
    out = {headline: Metric.of(mean_ci([s.value for s in scores if s.value is not None]))}
    columns: dict[str, list[float]] = defaultdict(list)
    for s in scores:
        for k, v in s.values.items():
            columns[k].append(v)
    for k, vs in columns.items():
        out[k] = Metric.of(mean_ci(vs, counts=k in counts))
    return out


def small_n_warnings(metrics: Mapping[str, Any]) -> dict[str, str]:
    """Metric name → warning, for the metrics (Metric objects or their JSON) that carry one."""
    out = {}
    for name, m in metrics.items():
        warning = m.get("warning") if isinstance(m, Mapping) else getattr(m, "warning", None)
        if warning:
            out[name] = warning
    return out


SMALL_N_MARK = "!"
"""Put beside the n of a metric with a warning in printed tables."""


def small_n_lines(metrics: Mapping[str, Any], listed: int = 4) -> list[str]:
    """One line per distinct warning: the mark, the metrics that carry it (a count beyond `listed`), the reason."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for name, warning in small_n_warnings(metrics).items():
        by_reason[warning].append(name)
    lines = []
    for reason, names in by_reason.items():
        shown = ", ".join(names[:listed]) + (f" and {len(names) - listed} more" if len(names) > listed else "")
        lines.append(f"{SMALL_N_MARK} {shown}: {reason}")
    return lines


def grouped(items: Iterable[tuple[str, Score]], headline: str = "accuracy") -> dict[str, dict[str, Metric]]:
    """Metrics per group value; unscored items (a failed sample's None) are left out, as by mean_metrics."""
    buckets: dict[str, list[Score]] = defaultdict(list)
    for key, s in items:
        if s is not None:
            buckets[key].append(s)
    return {k: mean_metrics(v, headline) for k, v in sorted(buckets.items())}


def metrics_json(metrics: Mapping[str, Metric]) -> dict[str, Any]:
    return {k: m.to_json() for k, m in metrics.items()}
