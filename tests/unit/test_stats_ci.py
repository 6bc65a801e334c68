"""Intervals and paired tests against independent computations (scipy, enumeration, the formulas)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from finharness.stats import (
    RELIABLE_N,
    binomial_ci,
    clopper_pearson_ci,
    mean_ci,
    paired_test,
    proportion_ci,
    weighted_mean_ci,
    wilson_ci,
)
from finharness.stats.ci import BOUNDED_PRIOR_WEIGHT, COUNT_PRIOR_CV2

Z = stats.norm.ppf(0.975)


def test_wilson_matches_scipy_binomtest():
    lo, hi = wilson_ci(7, 20)
    ref = stats.binomtest(7, 20).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(ref.low, abs=1e-9) and hi == pytest.approx(ref.high, abs=1e-9)


@pytest.mark.parametrize("k,n", [(0, 3), (1, 3), (3, 3), (7, 20), (2, 50)])
def test_clopper_pearson_matches_scipy_exact(k, n):
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert clopper_pearson_ci(k, n) == pytest.approx((ref.low, ref.high), abs=1e-9)


def test_binomial_interval_is_exact_below_the_reliable_size_and_wilson_with_exact_tails_above():
    assert binomial_ci(7, RELIABLE_N - 1) == (clopper_pearson_ci(7, RELIABLE_N - 1), "clopper-pearson")
    assert binomial_ci(20, 40) == (wilson_ci(20, 40), "wilson")
    # 2 successes in 100: Wilson's lower bound is too high there (its coverage dips); the exact one replaces it
    (lo, hi), method = binomial_ci(2, 100)
    assert method == "wilson" and lo == clopper_pearson_ci(2, 100)[0] < wilson_ci(2, 100)[0]
    assert hi == wilson_ci(2, 100)[1]
    (lo, hi), _ = binomial_ci(98, 100)
    assert lo == wilson_ci(98, 100)[0] and hi == clopper_pearson_ci(98, 100)[1]


def test_binary_means_name_their_method_and_warn_below_the_reliable_size():
    small = mean_ci([1, 0, 1, 1, 0])
    assert small.value == pytest.approx(0.6) and small.ci95 == pytest.approx(clopper_pearson_ci(3, 5))
    assert small.method == "clopper-pearson" and "n = 5 < 30" in small.warning
    large = mean_ci([1] * 20 + [0] * 20)
    assert large.method == "wilson" and large.warning is None and large.ci95 == pytest.approx(wilson_ci(20, 40))


@pytest.mark.parametrize("value", [0.2, 0.6, 0.8, 0.7, 0.9])
@pytest.mark.parametrize("n", [1, 3, 7, 10, 29, 30, 100])
def test_equal_fractions_are_never_zero_width(value, n):
    # the case: floating-point noise (~6e-33) in the variance of [0.8] * 3 made it look non-zero
    e = mean_ci([value] * n)
    trials = (value * n, n)
    expected = binomial_ci(*trials)[0]
    assert e.ci95 == pytest.approx(expected) and e.ci95[1] - e.ci95[0] > 0.04
    assert e.effective_n == n and e.method.startswith("effective-n")


def test_bounded_scores_get_the_korn_graubard_effective_n():
    x = np.asarray([0.2, 0.4, 0.4, 0.6, 0.8, 1.0, 0.8, 0.6, 0.4, 0.6])  # judge grades / 5
    n, p = len(x), x.mean()
    # below 30 items the variance is pooled with half an item of a 0/1 score's p(1 - p) (issue 36)
    pooled = (n * x.var(ddof=1) + BOUNDED_PRIOR_WEIGHT * p * (1 - p)) / (n + BOUNDED_PRIOR_WEIGHT)
    n_eff = p * (1 - p) / (pooled / n) * (Z / stats.t.ppf(0.975, n - 1)) ** 2
    e = mean_ci(x)
    assert e.effective_n == pytest.approx(n_eff) and n_eff < p * (1 - p) / (x.var(ddof=1) / n)
    assert e.ci95 == pytest.approx(clopper_pearson_ci(p * n_eff, n_eff))
    spread = mean_ci([0.0, 1.0, 0.2, 0.8, 0.6])  # more spread, fewer items: n_eff < 30, exact
    assert spread.effective_n < RELIABLE_N and spread.method == "effective-n clopper-pearson"
    assert spread.ci95 == pytest.approx(clopper_pearson_ci(0.52 * spread.effective_n, spread.effective_n))
    assert e.value == pytest.approx(p) and e.variance == pytest.approx(pooled / n)
    many = np.tile(x, 10)
    big = mean_ci(many)  # from 30 items on: the sample's own variance, Wilson on the effective n
    n_big = p * (1 - p) / (many.var(ddof=1) / many.size) * (Z / stats.t.ppf(0.975, many.size - 1)) ** 2
    assert big.method == "effective-n wilson" and big.effective_n == pytest.approx(n_big)
    assert big.ci95 == pytest.approx(wilson_ci(p * n_big, n_big)) and 0 < big.ci95[0] < p < big.ci95[1] < 1


def test_scores_with_other_bounds_are_rescaled():
    raw = [1, 2, 2, 3, 5, 4, 4]
    e, unit = mean_ci(raw, bounds=(1, 5)), mean_ci([(v - 1) / 4 for v in raw])
    assert e.value == pytest.approx(np.mean(raw))
    assert e.ci95 == pytest.approx((1 + 4 * unit.ci95[0], 1 + 4 * unit.ci95[1]))
    with pytest.raises(ValueError, match="outside their bounds"):
        mean_ci([0.5, 6], bounds=(1, 5))


def test_unbounded_scores_use_t_and_say_so_at_n_one_and_when_all_equal():
    x = [0.0, 0.0, 0.0, 1.5, 0.0, 0.25]  # one score above 1 (e.g. the release's unclipped F1)
    e = mean_ci(x)
    half = stats.t.ppf(0.975, 5) * np.std(x, ddof=1) / math.sqrt(6)
    assert e.method == "t" and e.ci95 == pytest.approx((np.mean(x) - half, np.mean(x) + half))
    one = mean_ci([3.0])
    assert math.isnan(one.ci95[0]) and "n = 1" in one.warning
    same = mean_ci([3.0] * 10)
    assert same.ci95 == (3.0, 3.0) and "equal" in same.warning


def test_counts_get_a_log_scale_interval_that_stays_positive():
    tokens = [36.0, 142.0, 151.0]  # the three dialogues: t gave [-49.21, 268.54]
    e = mean_ci(tokens, counts=True)
    m, s2 = np.mean(tokens), np.var(tokens, ddof=1) / 3
    assert m - stats.t.ppf(0.975, 2) * math.sqrt(s2) == pytest.approx(-49.21, abs=0.01)
    half = stats.t.ppf(0.975, 2) * math.sqrt(math.log1p(s2 / m ** 2))
    assert e.method == "log-t" and e.ci95 == pytest.approx((m * math.exp(-half), m * math.exp(half)))
    assert 0 < e.ci95[0] < m < e.ci95[1]


def test_few_close_counts_take_at_least_a_poisson_spread():
    rounds = [9.0, 9.0, 8.0]  # sample variance 1/3 is far below the mean's Poisson variance 26/9
    e = mean_ci(rounds, counts=True)
    m = np.mean(rounds)
    half = stats.t.ppf(0.975, 2) * math.sqrt(math.log1p((m / 3) / m ** 2))
    assert e.ci95 == pytest.approx((m * math.exp(-half), m * math.exp(half)))
    many = mean_ci([9.0, 8.0] * 20, counts=True)  # from 30 counts on, their own variance
    half = stats.t.ppf(0.975, 39) * math.sqrt(math.log1p(np.var([9.0, 8.0] * 20, ddof=1) / 40 / 8.5 ** 2))
    assert many.ci95 == pytest.approx((8.5 * math.exp(-half), 8.5 * math.exp(half)))


def test_equal_counts_keep_a_zero_width_interval_and_say_why():
    same = mean_ci([1.0, 1.0, 1.0], counts=True)  # every zero-shot dialogue has 1 round
    assert same.ci95 == (1.0, 1.0) and same.method == "log-t" and "no spread" in same.warning
    zeros = mean_ci([0, 0, 0, 0], counts=True)
    assert zeros.ci95 == (0.0, 0.0) and zeros.warning
    one = mean_ci([7], counts=True)
    assert math.isnan(one.ci95[0]) and "n = 1" in one.warning


def test_counts_of_one_are_not_read_as_successes():
    assert mean_ci([1, 1, 1]).method == "clopper-pearson"
    c = mean_ci([1, 0, 1, 1], counts=True)
    assert c.method == "log-t" and c.ci95[1] > 1  # counts are not fractions: not cut to [0, 1]


def test_empty_mean_is_nan_with_n_zero():
    e = mean_ci([])
    assert e.n == 0 and math.isnan(e.value)


def test_weighted_mean_of_bounded_parts_is_binomial_on_the_effective_n():
    a, b, missing = mean_ci([1, 1, 0, 0]), mean_ci([1, 1, 1, 0, 1, 1]), mean_ci([])
    w = weighted_mean_ci([(0.4, a), (0.4, b), (0.2, missing)])
    assert w.value == pytest.approx(0.5 * 0.5 + 0.5 * 5 / 6)  # renormalised over present parts
    assert w.variance == pytest.approx(0.25 * a.variance + 0.25 * b.variance)
    n_eff = 1 / (0.25 / 4 + 0.25 / 6)
    assert w.effective_n == pytest.approx(n_eff)
    assert w.ci95 == pytest.approx(clopper_pearson_ci(w.value * n_eff, n_eff))
    assert w.method == "effective-n clopper-pearson"


def test_macro_over_tiny_categories_is_as_wide_as_its_items():
    # the case: 0 of 4 spread over 4 categories was narrower than Wilson's 0 of 12
    macro = weighted_mean_ci([(0.25, mean_ci([0]))] * 4)
    assert macro.ci95 == pytest.approx(clopper_pearson_ci(0, 4))
    assert macro.ci95 == pytest.approx((0.0, 1 - 0.025 ** 0.25))
    assert macro.ci95[1] > wilson_ci(0, 12)[1] and "effective" in macro.warning


def test_weighted_mean_of_unbounded_parts_keeps_the_normal_interval():
    parts = [(0.5, mean_ci([1.0, 2.0, 4.0])), (0.5, mean_ci([2.0, 3.0, 3.5]))]
    w = weighted_mean_ci(parts)
    half = Z * math.sqrt(0.25 * parts[0][1].variance + 0.25 * parts[1][1].variance)
    assert w.method == "normal" and w.ci95 == pytest.approx((w.value - half, w.value + half))
    assert "few items" in w.warning


def test_proportion_ci_is_the_binary_mean_of_hits():
    e = proportion_ci(3, 10)
    assert e.value == pytest.approx(0.3) and e.n == 10 and e.ci95 == pytest.approx(mean_ci([1] * 3 + [0] * 7).ci95)
    assert proportion_ci(0, 0).n == 0


# -- paired ------------------------------------------------------------------------------------------

def _runs(a, b):
    return {str(i): v for i, v in enumerate(a)}, {str(i): v for i, v in enumerate(b)}


def test_paired_binary_uses_mcnemars_score_test_and_its_interval():
    r = paired_test(*_runs([1, 1, 0, 0, 1, 0, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 0, 1, 0]))
    assert r.test == "mcnemar-score" and r.ci_method == "tango-score" and r.n == 10
    assert r.diff == pytest.approx(0.4)
    assert r.p_value == pytest.approx(2 * stats.norm.sf(4 / np.sqrt(4)))  # 4 discordant items, all for B
    assert r.ci95[0] > 0 and r.verdict == "B higher"  # p < 0.05 and the interval excludes 0: one test


def test_small_counts_are_pooled_with_a_spread_of_their_own():
    x = np.asarray([100.0, 104.0, 98.0, 101.0, 99.0])  # five close counts: their own variance is tiny
    e = mean_ci(x, counts=True)
    n, m = x.size, x.mean()
    spread = max(x.var(ddof=1), (n * x.var(ddof=1) + COUNT_PRIOR_CV2 * m * m) / (n + 1), m) / n
    half = stats.t.ppf(0.975, n - 1) * np.sqrt(np.log1p(spread / m ** 2))
    assert e.ci95 == pytest.approx((m * np.exp(-half), m * np.exp(half)))
    wide = np.asarray([10.0, 400.0, 30.0, 900.0, 5.0])  # already spread more than the prior: left as it is
    n, m = wide.size, wide.mean()
    half = stats.t.ppf(0.975, n - 1) * np.sqrt(np.log1p(wide.var(ddof=1) / n / m ** 2))
    assert mean_ci(wide, counts=True).ci95 == pytest.approx((m * np.exp(-half), m * np.exp(half)))


def test_paired_agreement_on_every_item_is_not_a_zero_width_interval():
    r = paired_test(*_runs([1, 0, 1, 1, 0], [1, 0, 1, 1, 0]))
    assert r.diff == 0 and r.p_value == 1.0 and r.ci95[0] < -0.3 and r.ci95[1] > 0.3


def test_the_sign_flip_test_stays_exact():
    # no longer a verdict's test (its inversion under-covered graded differences, issue 36), still exported
    from finharness.stats import sign_flip_p_value

    a, b = [0.1, 0.4, 0.3, 0.2, 0.5, 0.6], [0.3, 0.5, 0.6, 0.15, 0.9, 0.8]
    d = np.subtract(b, a)
    sums = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d))]
    expected = np.mean([s >= abs(d.sum()) - 1e-12 for s in sums])
    assert sign_flip_p_value(d) == (pytest.approx(expected), "sign-flip-exact")
    r = paired_test(*_runs(a, b))
    assert r.test == "effective-n binomial" and "n = 6 < 30" in r.warning


def test_mid_sized_samples_take_the_bounded_test_and_large_ones_use_t():
    rng = np.random.default_rng(0)
    a = rng.random(25)
    b = np.clip(a + rng.normal(0.1, 0.2, 25), 0, 1)
    mid = paired_test(*_runs(a, b))
    assert mid.test == "effective-n binomial" and (mid.p_value < 0.05) == (mid.ci95[0] > 0 or mid.ci95[1] < 0)
    a, b = rng.random(40), rng.random(40)
    large = paired_test(*_runs(a, b))
    assert large.test == "paired-t" and large.p_value == pytest.approx(stats.ttest_rel(b, a).pvalue)
    assert large.warning is None


def test_paired_test_refuses_one_shared_item():
    r = paired_test({"x": 0.3, "only_a": 1.0}, {"x": 0.9})
    assert r.n == 1 and r.test == "refused" and math.isnan(r.p_value) and math.isnan(r.ci95[0])
    assert "at least 2" in r.warning
    assert paired_test({"x": 1.0}, {"y": 1.0}).test == "none"
