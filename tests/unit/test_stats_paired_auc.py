"""Issue 36's statistics: a paired verdict and its interval from one test, the AUC interval of the membership
probes, and the difference of two groups of different items."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from finharness.stats import auc_ci, bootstrap_auc_ci, group_difference, paired_test, tango_interval, wilson_ci
from finharness.stats.paired import ALPHA, _tango_z, mcnemar_score_p


def _runs(a, b):
    return {str(i): float(v) for i, v in enumerate(a)}, {str(i): float(v) for i, v in enumerate(b)}


def test_the_issues_cfinbench_case_gets_an_interval_and_p_value_that_agree():
    # 24 items, B alone right on 7, A alone right on 1: the exact conditional McNemar p was 0.070 beside an
    # interval that excluded 0; now both come from McNemar's score statistic
    a = [0] * 7 + [1] + [0] * 16
    b = [1] * 7 + [0] + [0] * 16
    r = paired_test(*_runs(a, b))
    assert stats.binomtest(1, 8, 0.5).pvalue == pytest.approx(0.0703, abs=1e-4)
    assert r.p_value == pytest.approx(math.erfc(6 / math.sqrt(8) / math.sqrt(2)))  # z = (7 - 1) / sqrt(8)
    assert r.p_value < ALPHA and r.ci95[0] > 0 and r.verdict == "B higher"


def test_tangos_bounds_are_where_the_score_statistic_reaches_z():
    for b, c, n in ((1, 7, 24), (3, 5, 40), (0, 4, 10), (10, 2, 100)):
        lo, hi = tango_interval(b, c, n)
        assert lo < (c - b) / n < hi
        if lo > -1:
            assert _tango_z(b, c, n, lo) == pytest.approx(1.959964, abs=1e-6)
        if hi < 1:
            assert _tango_z(b, c, n, hi) == pytest.approx(-1.959964, abs=1e-6)
        # at a difference of 0 the statistic is McNemar's
        assert abs(_tango_z(b, c, n, 0.0)) == pytest.approx(abs(c - b) / math.sqrt(b + c))


def test_no_discordant_items_still_give_an_interval_of_some_width():
    lo, hi = tango_interval(0, 0, 20)
    assert lo == pytest.approx(-3.8415 / (20 + 3.8415), abs=1e-4) and hi == pytest.approx(-lo)
    assert mcnemar_score_p(0, 0) == 1.0


@pytest.mark.parametrize("seed", range(6))
def test_the_verdict_follows_the_p_value_for_every_kind_of_score(seed):
    rng = np.random.default_rng(seed)
    for n in (4, 6, 9, 15, 24, 40, 120):
        binary_a = rng.random(n) < 0.5
        binary_b = np.where(rng.random(n) < 0.7, binary_a, rng.random(n) < 0.6)
        grades_a = rng.integers(1, 6, n) / 5
        grades_b = np.clip(grades_a + rng.choice((-0.2, 0.0, 0.2, 0.4), n), 0, 1)
        for a, b in ((binary_a.astype(float), binary_b.astype(float)), (grades_a, grades_b)):
            r = paired_test(*_runs(a, b))
            lo, hi = r.ci95
            excludes = lo > 0 or hi < 0
            assert excludes == (r.p_value < ALPHA), (n, r)
            assert (r.verdict != "tied") == excludes


def test_small_graded_comparisons_take_the_bounded_interval_and_the_binomial_test_it_inverts():
    from scipy.special import betainc

    from finharness.stats import mean_ci

    a = [0.2, 0.4, 0.4, 0.6, 0.2, 0.6, 0.4, 0.8]
    b = [0.4, 0.6, 0.4, 0.8, 0.6, 0.6, 0.8, 0.8]
    r = paired_test(*_runs(a, b))
    estimate = mean_ci(np.subtract(b, a), bounds=(-1, 1))
    assert r.test == "effective-n binomial" and r.ci95 == estimate.ci95
    trials = estimate.effective_n
    k = trials * (estimate.value + 1) / 2
    if trials < 30:  # Clopper-Pearson's interval: the exact central binomial test
        expected = min(1.0, 2 * min(betainc(k, trials - k + 1, 0.5), 1 - betainc(k + 1, trials - k, 0.5)))
    else:  # Wilson's: the score test
        expected = 2 * stats.norm.sf(abs(k - trials / 2) / math.sqrt(trials / 4))
    assert r.p_value == pytest.approx(expected)
    assert (r.p_value < ALPHA) == (r.ci95[0] > 0 or r.ci95[1] < 0)


def test_spread_grades_get_the_exact_binomial_test():
    a = [0.2, 1.0, 0.4, 0.6, 0.2, 0.0, 0.4, 0.8]
    b = [1.0, 0.2, 0.6, 0.8, 0.4, 0.8, 0.0, 1.0]
    r = paired_test(*_runs(a, b))
    from finharness.stats import mean_ci

    assert mean_ci(np.subtract(b, a), bounds=(-1, 1)).method == "effective-n clopper-pearson"
    assert r.verdict == "tied" and r.p_value > ALPHA


def test_runs_that_agree_on_every_graded_item_are_tied_with_an_interval():
    r = paired_test(*_runs([0.2, 0.4, 0.4, 0.6, 0.2], [0.2, 0.4, 0.4, 0.6, 0.2]))
    assert r.p_value == 1.0 and r.ci95[0] < -0.2 and r.ci95[1] > 0.2 and r.verdict == "tied"


def test_auc_and_delongs_variance_by_hand():
    pos, neg = [0.9, 0.8, 0.4, 0.7], [0.1, 0.4, 0.6]
    pairs = [(p > q) + 0.5 * (p == q) for p in pos for q in neg]
    est = auc_ci(pos, neg)
    assert est.value == pytest.approx(np.mean(pairs))  # 10.5 / 12
    v10 = [np.mean([(p > q) + 0.5 * (p == q) for q in neg]) for p in pos]
    v01 = [np.mean([(p > q) + 0.5 * (p == q) for p in pos]) for q in neg]
    variance = np.var(v10, ddof=1) / len(pos) + np.var(v01, ddof=1) / len(neg)
    auc = est.value
    half = 1.959964 * math.sqrt(variance) / (auc * (1 - auc))
    logit = math.log(auc / (1 - auc))
    assert est.method == "delong-logit"
    assert est.ci95 == pytest.approx((1 / (1 + math.exp(-(logit - half))), 1 / (1 + math.exp(-(logit + half)))),
                                     rel=1e-5)


def test_perfect_separation_is_not_a_zero_width_interval():
    est = auc_ci([5, 6, 7, 8], [1, 2, 3])
    assert est.value == 1.0 and est.method == "exact-bound" and est.ci95[0] < 0.6 and est.ci95[1] == 1.0
    assert not auc_ci([1, 2, 3], [1, 2, 3]).excludes_chance


def test_the_bootstrap_is_seeded_and_near_delong_on_plenty_of_data():
    rng = np.random.default_rng(3)
    pos, neg = rng.normal(0.6, 1, 150), rng.normal(0, 1, 150)
    first, second = bootstrap_auc_ci(pos, neg, rounds=400, seed=1), bootstrap_auc_ci(pos, neg, rounds=400, seed=1)
    assert first == second and first.method == "bootstrap"
    delong = auc_ci(pos, neg)
    assert delong.excludes_chance and abs(first.ci95[0] - delong.ci95[0]) < 0.03


def test_a_group_difference_of_0_1_scores_is_newcombes_hybrid_interval():
    a, b = [1] * 30 + [0] * 10, [1] * 15 + [0] * 15
    diff = group_difference(a, b)
    (l1, u1), (l2, u2) = wilson_ci(30, 40), wilson_ci(15, 30)
    d = 0.75 - 0.5
    assert diff.diff == pytest.approx(d)
    assert diff.ci95 == pytest.approx((d - math.sqrt((0.75 - l1) ** 2 + (u2 - 0.5) ** 2),
                                       d + math.sqrt((u1 - 0.75) ** 2 + (0.5 - l2) ** 2)))
    assert diff.differs and not group_difference([1, 0, 1], [0, 1, 1]).differs
    assert math.isnan(group_difference([], [1.0]).diff)
