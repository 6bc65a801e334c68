"""Per-sample scoring modes and CFinBench's aggregation.

Scoring modes (every sample is scored under all three, and under both extraction modes):
  strict       the headline (the seed's metric): single and judgment 1 if equal; multiple 1 iff
               the predicted set of letters equals the gold set.
  paper        multiple: 0 if any predicted letter is not in gold, else |pred| / |gold|.
  opencompass  the official evaluator: multiple earns 2 points for an exact string match, 1 when
               every predicted letter is in gold (an empty prediction passes that test, as in the
               official code), score = points / (2·N); single and judgment as strict.

Aggregation (the official grouping): accuracy per category and type; a type's accuracy is the
mean over its categories (each weighted 1/K); final = 0.4·single + 0.4·multiple + 0.2·judgment,
renormalised over the types present. Confidence intervals follow the same weighting
(finharness.stats.weighted_mean_ci over per-category estimates: the binomial interval on the effective
number of items 1 / Σ w_i² / n_i, so a macro over tiny categories is as wide as its items warrant).

Metric names (values are fractions in [0, 1]), for the headline extraction mode E:
  `M.score`, `M.single`, `M.multiple`, `M.judgment` for M in strict, paper, opencompass;
  `micro` (strict accuracy over all items), `unparseable_rate`;
and the same for the other extraction mode with its name as prefix: `robust.strict.score`,
`robust.micro`, ... (or `official.…` when the headline is robust).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from ...core.metrics import Metric
from ...stats import Estimate, mean_ci, weighted_mean_ci
from ...stats.ci import NAN_ESTIMATE
from .categories import QUESTION_TYPES, TYPE_LABELS
from .extraction import EXTRACTION_MODES

SCORING_MODES: tuple[str, ...] = ("strict", "paper", "opencompass")
"""Named scoring modes; `strict` is the headline."""

TYPE_WEIGHTS: Mapping[str, float] = {"single_choice": 0.4, "multi_choice": 0.4, "judgment": 0.2}
"""The paper's final-score weights per question type."""


def score_answer(predicted: str, gold: str, question_type: str, mode: str) -> float:
    """One sample's score under a scoring mode; '' is an unparseable prediction."""
    if question_type != "multi_choice":
        return float(predicted == gold)
    predicted_set, gold_set = set(predicted), set(gold)
    if mode == "strict":
        return float(bool(predicted_set) and predicted_set == gold_set)
    if mode == "paper":
        return 0.0 if predicted_set - gold_set else len(predicted_set) / len(gold_set)
    if mode == "opencompass":
        if predicted == gold:
            return 1.0
        # the official `for i in pred: if i not in ref: break / else: +1` -- true for an empty pred
        return 0.5 if all(letter in gold for letter in predicted) else 0.0
    raise ValueError(f"unknown scoring mode {mode!r}; choose one of {SCORING_MODES}")


def value_key(extraction: str, scoring: str) -> str:
    """The key of a per-sample value in Score.values, e.g. 'robust.paper'."""
    return f"{extraction}.{scoring}"


@dataclass(frozen=True)
class ScoredItem:
    """One scored sample, reduced to what aggregation needs."""

    question_type: str
    """'single_choice', 'multi_choice' or 'judgment'."""

    category: str
    """Category id (file stem)."""

    values: Mapping[str, float]
    """Score.values: one per extraction x scoring mode ('official.strict', ...)."""

    parsed: Mapping[str, bool]
    """Per extraction mode: whether an answer could be read."""


def _metric(estimate: Estimate) -> Metric:
    """A Metric kept inside [0, 1] (normal intervals can overshoot) and rounded to 12 decimals, so
    that weights like 1/6 summed six times read 1.0, not 0.9999999999999999."""
    metric = Metric.of(estimate)
    if metric.value is None or metric.ci95 is None:
        return metric
    low, high = metric.ci95
    return replace(metric, value=round(metric.value, 12), ci95=(round(max(0.0, low), 12), round(min(1.0, high), 12)))


_EMPTY = NAN_ESTIMATE


def macro_over_categories(items: Sequence[ScoredItem], key: str) -> Estimate:
    """Mean over categories of each category's mean, each weighted 1/K, with the matching CI."""
    by_category: dict[str, list[float]] = {}
    for item in items:
        by_category.setdefault(item.category, []).append(item.values[key])
    if not by_category:
        return _EMPTY
    weight = 1.0 / len(by_category)
    return weighted_mean_ci([(weight, mean_ci(values)) for values in by_category.values()])


def present_types(items: Iterable[ScoredItem]) -> list[str]:
    found = {item.question_type for item in items}
    return [t for t in QUESTION_TYPES if t in found]


def renormalised_weights(types: Sequence[str]) -> dict[str, float]:
    """TYPE_WEIGHTS restricted to `types`, scaled to sum to 1."""
    total = sum(TYPE_WEIGHTS[t] for t in types)
    return {t: TYPE_WEIGHTS[t] / total for t in types} if total else {}


def item_weights(items: Sequence[tuple[str, str]]) -> list[float]:
    """Each item's weight in the final score, for (question_type, category) pairs: the type's renormalised weight
    over its categories present, over the category's items (what summarise's macro means give each item)."""
    per_cell: dict[tuple[str, str], int] = {}
    for item in items:
        per_cell[item] = per_cell.get(item, 0) + 1
    categories = {t: sum(1 for (tt, _) in per_cell if tt == t) for t, _ in per_cell}
    weights = renormalised_weights([t for t in QUESTION_TYPES if t in categories])
    return [weights[t] / categories[t] / per_cell[(t, c)] for t, c in items]


def summarise(items: Sequence[ScoredItem], headline_extraction: str) -> dict[str, Metric]:
    """Every metric named in the module docstring, for one set of scored items."""
    metrics: dict[str, Metric] = {}
    for extraction in sorted(EXTRACTION_MODES, key=lambda e: e != headline_extraction):
        prefix = "" if extraction == headline_extraction else extraction + "."
        for scoring in SCORING_MODES:
            key = value_key(extraction, scoring)
            per_type = {t: macro_over_categories([i for i in items if i.question_type == t], key)
                        for t in QUESTION_TYPES}
            final = weighted_mean_ci([(TYPE_WEIGHTS[t], per_type[t]) for t in QUESTION_TYPES], renormalise=True)
            metrics[f"{prefix}{scoring}.score"] = _metric(final)
            for t in QUESTION_TYPES:
                metrics[f"{prefix}{scoring}.{TYPE_LABELS[t]}"] = _metric(per_type[t])
        metrics[f"{prefix}micro"] = _metric(mean_ci([i.values[value_key(extraction, "strict")] for i in items]))
        metrics[f"{prefix}unparseable_rate"] = _metric(
            mean_ci([0.0 if i.parsed[extraction] else 1.0 for i in items]))
    return metrics
