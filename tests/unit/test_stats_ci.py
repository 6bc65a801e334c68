"""Intervals and paired tests against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from finharness.stats import mean_ci, paired_test, proportion_ci, weighted_mean_ci, wilson_ci


def test_wilson_matches_scipy_binomtest():
    lo, hi = wilson_ci(7, 20)
    ref = stats.binomtest(7, 20).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(ref.low, abs=1e-9) and hi == pytest.approx(ref.high, abs=1e-9)


def test_mean_ci_binary_uses_wilson_and_continuous_uses_t():
    b = mean_ci([1, 0, 1, 1, 0])
    assert b.value == pytest.approx(0.6) and b.n == 5 and 0 <= b.ci95[0] < 0.6 < b.ci95[1] <= 1
    x = [0.2, 0.5, 0.9, 0.4]
    c = mean_ci(x)
    half = stats.t.ppf(0.975, 3) * np.std(x, ddof=1) / 2
    assert c.ci95[1] - c.value == pytest.approx(half)


def test_t_interval_of_fractions_stays_in_unit_range_but_not_of_unbounded_scores():
    fractions = [0.0, 0.0, 0.0, 0.5, 0.0, 0.25]  # plain t: lower bound below 0
    raw_half = stats.t.ppf(0.975, 5) * np.std(fractions, ddof=1) / math.sqrt(6)
    assert np.mean(fractions) - raw_half < 0
    f = mean_ci(fractions)
    assert f.ci95[0] == 0.0 and f.ci95[1] == pytest.approx(np.mean(fractions) + raw_half)
    ratios = [0.0, 0.0, 0.0, 1.5, 0.0, 0.25]  # one score above 1 (e.g. the release's unclipped F1)
    r = mean_ci(ratios)
    assert r.ci95[0] < 0


def test_equal_fractions_get_the_wilson_interval_of_their_mean_not_zero_width():
    same = mean_ci([0.8] * 10)  # e.g. ten judge verdicts of 4/5
    assert same.value == pytest.approx(0.8)
    assert same.ci95 == pytest.approx(wilson_ci(8, 10)) and same.ci95[1] - same.ci95[0] > 0.3
    assert mean_ci([0.6]).ci95 == pytest.approx(wilson_ci(0.6, 1))
    assert mean_ci([3.0] * 10).ci95 == (3.0, 3.0)  # unbounded scores: no bound on their variance


@pytest.mark.parametrize("n", [20, 40, 333])
def test_wilson_bounds_are_exact_at_none_and_all(n):
    assert wilson_ci(0, n)[0] == 0.0 and wilson_ci(n, n)[1] == 1.0
    assert 0 < wilson_ci(0, n)[1] < 0.2 and 0.8 < wilson_ci(n, n)[0] < 1


def test_counts_of_one_are_not_read_as_successes():
    assert mean_ci([1, 1, 1]).ci95[0] < 1  # binary: Wilson
    assert mean_ci([1, 1, 1], counts=True).ci95 == (1.0, 1.0)
    c = mean_ci([1, 0, 1, 1], counts=True)
    assert c.ci95[0] < 0.75 < c.ci95[1] and c.ci95 != mean_ci([1, 0, 1, 1]).ci95
    assert c.ci95[0] < 0  # counts are not fractions: not cut to [0, 1]


def test_empty_mean_is_nan_with_n_zero():
    e = mean_ci([])
    assert e.n == 0 and math.isnan(e.value)


def test_weighted_mean_renormalises_over_present_parts():
    a, b, missing = mean_ci([1, 1, 0, 0]), mean_ci([1, 1, 1, 0]), mean_ci([])
    w = weighted_mean_ci([(0.4, a), (0.4, b), (0.2, missing)])
    assert w.value == pytest.approx(0.5 * 0.5 + 0.5 * 0.75)
    # variance follows the (renormalised) weights
    assert w.variance == pytest.approx(0.25 * a.variance + 0.25 * b.variance)
    assert w.ci95[0] < w.value < w.ci95[1]


def test_paired_binary_uses_exact_mcnemar():
    a = {str(i): v for i, v in enumerate([1, 1, 0, 0, 1, 0, 1, 0, 0, 0])}
    b = {str(i): v for i, v in enumerate([1, 1, 1, 1, 1, 1, 1, 0, 1, 0])}
    r = paired_test(a, b)
    assert r.test == "mcnemar-exact" and r.n == 10
    assert r.diff == pytest.approx(0.4)
    assert r.p_value == pytest.approx(stats.binomtest(4, 4, 0.5).pvalue)


def test_paired_continuous_uses_paired_t_on_common_items():
    a = {"x": 0.1, "y": 0.4, "z": 0.3, "only_a": 1.0}
    b = {"x": 0.3, "y": 0.5, "z": 0.6}
    r = paired_test(a, b)
    assert r.n == 3 and r.test == "paired-t"
    assert r.p_value == pytest.approx(stats.ttest_rel([0.3, 0.5, 0.6], [0.1, 0.4, 0.3]).pvalue)


def test_macro_mean_of_all_wrong_parts_keeps_a_real_interval():
    # per-part p = 0: a plain p(1-p)/n variance would give the degenerate interval [0, 0]
    parts = [(0.5, mean_ci([0] * 10)), (0.5, mean_ci([0] * 11))]
    w = weighted_mean_ci(parts)
    assert w.value == 0.0 and w.ci95[0] == 0.0 and 0.05 < w.ci95[1] < 0.3


def test_proportion_ci_is_the_binary_mean_of_hits():
    e = proportion_ci(3, 10)
    assert e.value == pytest.approx(0.3) and e.n == 10 and e.ci95 == pytest.approx(wilson_ci(3, 10))
    assert proportion_ci(0, 0).n == 0
