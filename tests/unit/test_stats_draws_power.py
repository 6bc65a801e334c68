"""Draws (clustered intervals, variance shares, majority vote, pass@k) and power planning."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from finharness.stats import (
    clustered_mean_ci,
    detectable_difference,
    majority_vote,
    mean_ci,
    pass_at_k,
    pass_at_k_ci,
    plan_comparison,
    required_items,
    variance_components,
)
from finharness.stats.power import binary_difference_sd, difference_sd, difference_sd_from_one, effective_n


@pytest.mark.parametrize("scores", [[1, 0, 1, 1], [0.2, 0.4, 0.8], [120.0, 80.0, 300.0]])
def test_one_draw_per_item_is_exactly_the_single_draw_interval(scores):
    counts = max(scores) > 1
    assert clustered_mean_ci([[s] for s in scores], counts=counts) == mean_ci(scores, counts=counts)


def test_clustered_interval_is_the_interval_over_item_means():
    draws = [[1, 1, 0, 1, 1], [0, 0, 0, 1, 0], [1, 1, 1, 1, 1], [0, 1, 0, 1, 1]]
    e = clustered_mean_ci(draws)
    means = [np.mean(d) for d in draws]
    ref = mean_ci(means, bounds=(0, 1))
    assert e.value == pytest.approx(np.mean(means)) and e.ci95 == ref.ci95 and e.n == 4
    assert e.method == f"clustered {ref.method}"
    # treating the 20 draws as independent items would claim 5x the information
    assert e.ci95[1] - e.ci95[0] > mean_ci([v for d in draws for v in d]).ci95[1] - mean_ci(
        [v for d in draws for v in d]).ci95[0]


def test_variance_components_split_items_from_sampling():
    rng = np.random.default_rng(0)
    p = rng.beta(2, 2, 4000)  # item difficulty: Var(p) = 1/20
    k = 5
    draws = (rng.random((4000, k)) < p[:, None]).astype(float)
    vc = variance_components(draws.tolist())
    assert vc.items == 4000 and vc.draws == k
    # within-item variance E[p(1-p)] = 1/5 (ddof 1 is unbiased); between = Var(p) = 1/20
    assert vc.within == pytest.approx(0.2, abs=0.01) and vc.between == pytest.approx(0.05, abs=0.006)
    assert vc.sampling_share == pytest.approx((0.2 / k) / (0.05 + 0.2 / k), abs=0.04)
    assert vc.per_draw_share == pytest.approx(0.2 / 0.25, abs=0.03)
    single = variance_components([[1.0], [0.0], [1.0]])
    assert math.isnan(single.sampling_share) and math.isnan(single.within)


def test_majority_vote_breaks_ties_by_the_first_draw_and_skips_unreadable():
    assert majority_vote(["B", "A", "A", None, "B", None, None]) == "B"  # 2-2: B came first
    assert majority_vote(["C", "A", "A"]) == "A"
    assert majority_vote([None, None]) is None


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 1), (5, 2, 3), (10, 3, 4), (6, 6, 2), (8, 1, 8)])
def test_pass_at_k_is_the_share_of_k_subsets_with_a_correct_draw(n, c, k):
    draws = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    brute = sum(any(draws[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute)


def test_pass_at_k_refuses_impossible_arguments_and_averages_over_items():
    with pytest.raises(ValueError, match="0 < k <= n"):
        pass_at_k(3, 1, 4)
    e = pass_at_k_ci([[True, False, False, False], [False] * 4, [True, None, True, False]], k=2)
    assert e.value == pytest.approx((pass_at_k(4, 1, 2) + 0 + pass_at_k(4, 2, 2)) / 3) and e.n == 3


def test_detectable_difference_is_the_t_formula_and_required_items_inverts_it():
    n, sd = 100, 0.5
    expected = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / math.sqrt(n)
    assert detectable_difference(n, sd) == pytest.approx(expected)
    needed = required_items(0.1, sd)
    assert detectable_difference(needed, sd) <= 0.1 < detectable_difference(needed - 1, sd)
    with pytest.raises(ValueError, match="at least 2"):
        detectable_difference(1, sd)


def test_the_detectable_difference_has_the_power_it_claims():
    # simulate a paired t-test at the detectable difference: it rejects about 80% of the time
    rng = np.random.default_rng(1)
    n, sd = 40, 0.3
    delta = detectable_difference(n, sd)
    samples = rng.normal(delta, sd, (4000, n))
    t = samples.mean(axis=1) / (samples.std(axis=1, ddof=1) / math.sqrt(n))
    rejected = np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1))
    assert rejected == pytest.approx(0.8, abs=0.03)


def test_sources_of_the_difference_sd():
    a = {"1": 1.0, "2": 0.0, "3": 1.0, "4": 1.0}
    b = {"1": 1.0, "2": 1.0, "3": 0.0, "4": 1.0, "5": 0.0}
    assert difference_sd(a, b) == pytest.approx(np.std([0, 1, -1, 0], ddof=1))
    assert difference_sd_from_one([1, 0, 1, 1], 0.5) == pytest.approx(np.std([1, 0, 1, 1], ddof=1))
    assert binary_difference_sd(0.5, 0.0) == pytest.approx(math.sqrt(0.5))
    assert effective_n([1, 1, 1, 1]) == 4 and effective_n([3, 1]) == pytest.approx(16 / 10)


def test_plan_for_pairwise_outcomes_gives_rating_points():
    plan = plan_comparison(0.5, n=330, pairwise_scale=(400.0, 10.0))
    share = 0.5 + plan.detectable
    assert plan.rating_points == pytest.approx(400 * math.log10(share / (1 - share)))
    solved = plan_comparison(0.5, difference=plan.detectable)
    assert solved.n <= 330 and solved.detectable <= plan.detectable + 1e-12
    weighted = plan_comparison(0.5, n=1000, weight_ratio=0.5)
    assert weighted.detectable == pytest.approx(detectable_difference(500, 0.5))
    with pytest.raises(ValueError, match="either"):
        plan_comparison(0.5)
