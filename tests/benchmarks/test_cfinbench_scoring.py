"""CFinBench scoring modes and aggregation, on hand-built predictions with hand-computed numbers."""

from __future__ import annotations

import pytest
from scipy.stats import beta

from finharness.benchmarks.cfinbench.scoring import (
    ScoredItem,
    _metric,
    macro_over_categories,
    present_types,
    renormalised_weights,
    score_answer,
    summarise,
)
from finharness.stats import Estimate

# gold 'ACD': (prediction, strict, paper, opencompass)
MULTIPLE = [
    ("ACD", 1.0, 1.0, 1.0),
    ("CAD", 1.0, 1.0, 0.5),    # same set, not the same string: opencompass gives 1 of 2 points
    ("AC", 0.0, 2 / 3, 0.5),   # a subset: paper |pred|/|gold|, opencompass 1 point
    ("AB", 0.0, 0.0, 0.0),     # B is wrong
    ("ABCDE", 0.0, 0.0, 0.0),
    ("", 0.0, 0.0, 0.5),       # the official quirk: an empty prediction passes the subset test
]


@pytest.mark.parametrize("predicted, strict, paper, opencompass", MULTIPLE)
def test_multiple_choice_modes(predicted, strict, paper, opencompass):
    assert score_answer(predicted, "ACD", "multi_choice", "strict") == strict
    assert score_answer(predicted, "ACD", "multi_choice", "paper") == pytest.approx(paper)
    assert score_answer(predicted, "ACD", "multi_choice", "opencompass") == opencompass


def test_opencompass_mean_is_points_over_two_n():
    points = 2 + 1 + 1 + 0 + 0 + 1  # the official evaluator's counting for MULTIPLE
    mean = sum(score_answer(p, "ACD", "multi_choice", "opencompass") for p, *_ in MULTIPLE) / len(MULTIPLE)
    assert mean == pytest.approx(points / (2 * len(MULTIPLE)))


@pytest.mark.parametrize("mode", ["strict", "paper", "opencompass"])
def test_single_and_judgment_are_plain_equality_in_every_mode(mode):
    assert score_answer("B", "B", "single_choice", mode) == 1.0
    assert score_answer("T", "B", "single_choice", mode) == 0.0
    assert score_answer("", "B", "single_choice", mode) == 0.0
    assert score_answer("错误", "错误", "judgment", mode) == 1.0
    assert score_answer("正确", "错误", "judgment", mode) == 0.0


def item(question_type, category, strict, parsed=True):
    """A scored item with the same value under every extraction and scoring mode."""
    values = {f"{e}.{s}": strict for e in ("official", "robust") for s in ("strict", "paper", "opencompass")}
    return ScoredItem(question_type, category, values, {"official": parsed, "robust": parsed})


ITEMS = [
    item("single_choice", "1-1", 1.0), item("single_choice", "1-1", 0.0), item("single_choice", "2-8", 1.0),
    item("multi_choice", "1-1", 1.0), item("multi_choice", "1-1", 0.0, parsed=False),
    item("judgment", "4-11", 1.0), item("judgment", "4-11", 1.0),
]


def test_type_accuracy_is_the_mean_over_categories_with_a_matching_ci():
    single = macro_over_categories([i for i in ITEMS if i.question_type == "single_choice"], "official.strict")
    assert single.value == pytest.approx(0.75)  # (1/2 + 1) / 2, not the micro 2/3
    # var = (1/2)^2 * ac(1, 2) + (1/2)^2 * ac(1, 1), with the Agresti-Coull variance of each category
    z2 = 1.959963984540054 ** 2

    def ac(x, n):
        p = (x + z2 / 2) / (n + z2)
        return p * (1 - p) / (n + z2)

    var = 0.25 * ac(1, 2) + 0.25 * ac(1, 1)
    assert single.variance == pytest.approx(var)
    # the interval: a stratified binomial mean on its effective number of items 1 / Σ w²/n_c = 8/3, exact (< 30)
    n_eff = 1 / (0.25 / 2 + 0.25 / 1)
    x = 0.75 * n_eff
    assert single.effective_n == pytest.approx(8 / 3)
    assert single.ci95 == pytest.approx((beta.ppf(0.025, x, n_eff - x + 1), beta.ppf(0.975, x + 1, n_eff - x)))
    assert single.method == "effective-n clopper-pearson"


def test_final_score_weights_and_names():
    metrics = summarise(ITEMS, "official")
    assert metrics["strict.single"].value == pytest.approx(0.75)
    assert metrics["strict.multiple"].value == pytest.approx(0.5)
    assert metrics["strict.judgment"].value == pytest.approx(1.0)
    assert metrics["strict.score"].value == pytest.approx(0.4 * 0.75 + 0.4 * 0.5 + 0.2 * 1.0)
    assert metrics["micro"].value == pytest.approx(5 / 7)
    assert metrics["unparseable_rate"].value == pytest.approx(1 / 7)
    assert metrics["strict.score"].n == 7
    low, high = metrics["strict.score"].ci95
    assert 0.0 <= low < metrics["strict.score"].value < high <= 1.0
    names = {f"{prefix}{m}.{part}" for prefix in ("", "robust.") for m in ("strict", "paper", "opencompass")
             for part in ("score", "single", "multiple", "judgment")}
    assert names | {"micro", "unparseable_rate", "robust.micro", "robust.unparseable_rate"} == set(metrics)
    assert "official.strict.score" in summarise(ITEMS, "robust")


def test_weights_are_renormalised_when_a_type_is_missing():
    without_judgment = [i for i in ITEMS if i.question_type != "judgment"]
    metrics = summarise(without_judgment, "official")
    assert metrics["strict.judgment"].value is None and metrics["strict.judgment"].n == 0
    assert metrics["strict.score"].value == pytest.approx(0.5 * 0.75 + 0.5 * 0.5)
    assert renormalised_weights(["single_choice", "multi_choice"]) == {"single_choice": 0.5, "multi_choice": 0.5}
    assert renormalised_weights(["judgment"]) == {"judgment": 1.0}


def test_nothing_scored_gives_empty_metrics():
    metrics = summarise([], "official")
    assert all(m.value is None and m.n == 0 for m in metrics.values())


# --- edges found by mutation testing (make mutation) ----------------------------------------------

KEYS = [f"{e}.{s}" for e in ("official", "robust") for s in ("strict", "paper", "opencompass")]


def _item(question_type: str, category: str, value: float) -> ScoredItem:
    return ScoredItem(question_type, category, dict.fromkeys(KEYS, value), {"official": True, "robust": True})


def test_an_unknown_scoring_mode_is_named_in_the_error():
    with pytest.raises(ValueError, match=r"unknown scoring mode 'partial'; choose one of \('strict'"):
        score_answer("AB", "AB", "multi_choice", "partial")


def test_present_types_lists_the_types_found_in_the_official_order():
    items = [_item("judgment", "c1", 1.0), _item("single_choice", "c2", 0.0), _item("judgment", "c3", 0.0)]
    assert present_types(items) == ["single_choice", "judgment"]
    assert present_types([]) == []


def test_six_equal_category_weights_sum_to_exactly_one():
    # six categories, each 1/1 correct: 1/6 added six times is 0.9999999999999999 in floating point;
    # the published value is rounded to 12 decimals and reads 1.0
    items = [_item("single_choice", f"c{i}", 1.0) for i in range(6)]
    metrics = summarise(items, "official")
    assert metrics["strict.single"].value == 1.0
    assert metrics["strict.score"].value == 1.0


def test_metric_values_and_bounds_are_rounded_to_twelve_decimals():
    # one category, 3 of 7 correct: 3/7 = 0.428571428571428571... -> 0.428571428571
    items = [_item("single_choice", "c", float(i < 3)) for i in range(7)]
    metric = summarise(items, "official")["strict.single"]
    assert metric.value == 0.428571428571
    low, high = metric.ci95
    assert 0.0 < low < metric.value < high < 1.0  # a real interval, not rounded to whole numbers
    assert low == round(low, 12) and high == round(high, 12)
    assert (low, high) != (round(low, 11), round(high, 11))  # ...and not to fewer places either


def test_metric_keeps_the_estimates_variance():
    metric = _metric(Estimate(0.5, (0.4, 0.6), 10, 0.0025))
    assert (metric.value, metric.ci95, metric.n, metric.variance) == (0.5, (0.4, 0.6), 10, 0.0025)


def test_the_headline_extraction_mode_comes_first_unprefixed():
    items = [_item("single_choice", "c", 1.0)]
    for headline, other in (("robust", "official"), ("official", "robust")):
        names = list(summarise(items, headline))
        first_other = next(i for i, name in enumerate(names) if name.startswith(other + "."))
        assert names[0] == "strict.score"
        assert all("." not in name or name.split(".")[0] in ("strict", "paper", "opencompass")
                   for name in names[:first_other])
        assert all(name.startswith(other + ".") for name in names[first_other:])
