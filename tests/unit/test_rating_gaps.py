"""Gaps between neighbouring models in a rating table, with the gap's own (likelihood-based) interval."""

from __future__ import annotations

import math

import pytest

from finharness.rating import BTConfig, Match, bt_table
from finharness.rating.base import EncodedMatches
from finharness.rating.bt import fit_strengths, likelihood_gap_interval
from finharness.rating.elo import elo_table
from finharness.stats import clopper_pearson_ci, wilson_ci
from tests.unit.test_rating_bt import TRUE, _draw


def _points(p: float) -> float:
    return 400 * math.log10(p / (1 - p))


def test_two_players_gap_interval_is_the_binomial_interval_of_the_win_share():
    matches = [Match("t", "a", "b", "model_a")] * 30 + [Match("t", "a", "b", "model_b")] * 10
    table = bt_table(matches, BTConfig(l2=0.0), bootstrap=400, seed=1)
    (gap,) = table.gaps
    assert (gap.higher, gap.lower) == ("a", "b")
    assert gap.gap == pytest.approx(400 * math.log10(3), abs=0.05)  # 30:10 -> odds 3:1
    # two players, 0/1 verdicts: the information gives exactly 40 trials, and 40 >= 30 is Wilson's range
    low, high = wilson_ci(30, 40)
    assert gap.ci95 == pytest.approx((_points(low), _points(high)), abs=0.05)
    assert gap.method == "bt-likelihood wilson" and not gap.tied and gap.warning is None


def test_three_coin_flip_matches_do_not_order_two_models():
    # the case: three soft verdicts near ½; resampling them gave an interval far from 0
    soft = [Match("t", "a", "b", "model_a", outcome=o) for o in (0.52, 0.54, 0.555)]
    table = bt_table(soft, bootstrap=1000, seed=0)
    a = table.ratings["a"]
    bootstrap_gap = (2 * (a.ci95[0] - 1000), 2 * (a.ci95[1] - 1000))  # two players: ratings mirror around 1000
    assert bootstrap_gap[0] > 0
    (gap,) = table.gaps
    assert gap.tied and gap.method.startswith("bt-sandwich") and "3.0 effective matches" in gap.warning
    hard = bt_table([Match("t", "a", "b", w) for w in ("model_a", "model_b", "model_a")], bootstrap=100)
    (gap,) = hard.gaps
    low, high = clopper_pearson_ci(2, 3)  # exact: 3 trials
    assert gap.tied and gap.ci95 == pytest.approx((_points(low), _points(high)), abs=0.5)


def test_ties_shrink_the_gap_interval_below_the_binomial_one():
    verdicts = ["model_a"] * 20 + ["tie"] * 20 + ["model_b"] * 10
    table = bt_table([Match("t", "a", "b", w) for w in verdicts], bootstrap=100)
    (gap,) = table.gaps
    p = (20 + 10) / 50
    binomial = wilson_ci(p * 50, 50)
    assert gap.method == "bt-sandwich wilson"
    assert _points(binomial[0]) < gap.ci95[0] < gap.gap < gap.ci95[1] < _points(binomial[1])


def test_unbeaten_and_unconnected_models_have_unbounded_gaps():
    unbeaten = bt_table([Match("t", "a", "b", "model_a")] * 5, bootstrap=100)
    (gap,) = unbeaten.gaps
    assert gap.ci95[1] == math.inf and gap.to_json()["ci95"][1] is None
    assert gap.ci95[0] == pytest.approx(_points(clopper_pearson_ci(5, 5)[0]), abs=1.0) and gap.tied
    apart = [Match("t", "a", "b", "model_a"), Match("t", "b", "a", "tie"), Match("t", "c", "d", "model_a"),
             Match("t", "d", "c", "model_b")]
    table = bt_table(apart, bootstrap=100)
    unlinked = [g for g in table.gaps if {g.higher, g.lower} not in ({"a", "b"}, {"c", "d"})]
    assert unlinked and all(g.ci95 == (-math.inf, math.inf) for g in unlinked)


def test_elo_gaps_take_the_bradley_terry_interval_of_the_strength_gap():
    matches = _draw(2, 40)
    elo, bt = elo_table(matches, bootstrap=50, seed=0), bt_table(matches, bootstrap=50, seed=0)
    theta = fit_strengths(EncodedMatches.of(matches))
    index = {m: i for i, m in enumerate(sorted(TRUE))}
    for g in elo.gaps:
        expected = likelihood_gap_interval(EncodedMatches.of(matches), theta, index[g.higher], index[g.lower],
                                           BTConfig())
        assert g.ci95 == pytest.approx(expected.ci95) and g.method == expected.method
    assert {g.method for g in bt.gaps} == {"bt-likelihood wilson"}


def test_gaps_follow_the_table_order_and_cover_the_truth():
    table = bt_table(_draw(3, 300), bootstrap=200, seed=0)
    names = list(table.ratings)
    assert [(g.higher, g.lower) for g in table.gaps] == list(zip(names, names[1:]))
    for g in table.gaps:
        assert g.gap == pytest.approx(table.ratings[g.higher].rating - table.ratings[g.lower].rating)
        low, high = g.ci95
        assert low < g.gap < high
        # true neighbours are 100 points apart: with 300 matches a pair every gap is clearly above zero, its
        # interval some tens of points wide, and the truth within it or just outside (4 intervals at 95 %)
        assert 0 < low and 20 < high - low < 120
        assert low - (high - low) / 2 < TRUE[g.higher] - TRUE[g.lower] < high + (high - low) / 2


def test_no_bootstrap_no_gap_interval_and_elo_has_gaps_too():
    matches = [Match("t", "a", "b", "model_a"), Match("t", "b", "c", "model_a")]
    assert [g.ci95 for g in bt_table(matches, bootstrap=0).gaps] == [None, None]
    elo = elo_table(matches, bootstrap=50, seed=0)
    assert [(g.higher, g.lower) for g in elo.gaps] == [("a", "b"), ("b", "c")]
    assert elo.to_json()["gaps"][0]["gap"] == pytest.approx(elo.ratings["a"].rating - elo.ratings["b"].rating)
