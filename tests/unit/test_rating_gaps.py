"""Gaps between neighbouring models in a rating table, with the gap's own bootstrap interval."""

from __future__ import annotations

import math

import pytest

from finharness.rating import BTConfig, Match, bt_table
from finharness.rating.elo import elo_table
from tests.unit.test_rating_bt import TRUE, _draw


def test_two_players_gap_is_twice_the_offset_and_its_interval_mirrors_the_ratings():
    matches = [Match("t", "a", "b", "model_a")] * 30 + [Match("t", "a", "b", "model_b")] * 10
    table = bt_table(matches, BTConfig(l2=0.0), bootstrap=400, seed=1)
    (gap,) = table.gaps
    assert (gap.higher, gap.lower) == ("a", "b")
    assert gap.gap == pytest.approx(400 * math.log10(3), abs=0.05)  # 30:10 -> odds 3:1
    a = table.ratings["a"]
    # with two players the ratings mirror each other around 1000, so the gap's interval is twice a's offset
    assert gap.ci95 == pytest.approx((2 * (a.ci95[0] - 1000), 2 * (a.ci95[1] - 1000)), abs=1e-6)


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
