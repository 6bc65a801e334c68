"""Gaps found by mutation testing (`make mutation`, issue 19) in Elo and Bradley–Terry. Expected values are
computed independently (by hand, or by solving the one-dimensional optimality condition with brentq)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit

from finharness.rating import BTConfig, EloConfig, Match, bt_ratings, bt_table, elo_ratings, elo_table
from finharness.rating.base import EncodedMatches
from finharness.rating.bt import _Pairs
from finharness.rating.elo import run_elo

MATCHES = [Match("t", "a", "b", "model_a"), Match("t", "b", "c", "model_a"), Match("t", "a", "c", "tie"),
           Match("t", "c", "a", "model_b"), Match("t", "b", "a", "model_a"), Match("t", "c", "b", "tie")]


def test_every_bootstrap_row_of_elo_is_its_own_independent_run():
    # all rows advance together in one flat array; row r must give what row r alone gives
    encoded = EncodedMatches.of(MATCHES)
    order = np.array([[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 2, 0, 5, 1, 1]])
    together = run_elo(encoded, order, EloConfig(k=32))
    for r, row in enumerate(order):
        assert together[r] == pytest.approx(run_elo(encoded, row, EloConfig(k=32))[0], abs=1e-9)
    assert together[0].sum() == pytest.approx(3000.0)  # Elo moves points between players, never makes them


def test_elo_table_uses_its_config_for_the_point_and_the_intervals():
    k32 = elo_table(MATCHES, EloConfig(k=32), bootstrap=200)
    assert k32.values() == pytest.approx(elo_ratings(MATCHES, EloConfig(k=32)))
    k4 = elo_table(MATCHES, EloConfig(k=4), bootstrap=200)
    # the same resamples: eight times the step size gives much wider intervals
    width = {name: r.ci95[1] - r.ci95[0] for name, r in k4.ratings.items()}
    for name, r in k32.ratings.items():
        assert r.ci95[1] - r.ci95[0] > 4 * width[name]


@pytest.mark.parametrize("table", [elo_table, bt_table])
def test_rating_tables_default_to_1000_seeded_rounds_and_name_their_method(table):
    default = table(MATCHES)
    assert default.method == table.__name__.split("_")[0]
    assert default.bootstrap_rounds == 1000
    assert default.ratings == table(MATCHES, bootstrap=1000, seed=0).ratings
    assert default.ratings != table(MATCHES, bootstrap=1000, seed=1).ratings
    one = table(MATCHES, bootstrap=1)  # only 0 turns the intervals off
    assert one.bootstrap_rounds == 1 and all(r.ci95 is not None for r in one.ratings.values())


def test_bt_wins_count_every_pair_even_when_a_draw_misses_some():
    encoded = EncodedMatches.of(MATCHES)
    pairs = _Pairs.of(encoded)  # (a,b), (b,c), (a,c), (c,a), (b,a), (c,b): six distinct ordered pairs
    n_pairs = len(pairs.incidence)
    draws = np.array([[0, 0, 0, 0, 0, 0]])  # only a-b, won by a, six times
    wins_a, wins_b = pairs.wins(encoded, draws)
    assert wins_a.shape == wins_b.shape == (1, n_pairs)
    first = pairs.pair_of_match[0]
    assert wins_a[0, first] == 6 and wins_b[0, first] == 0
    assert wins_a.sum() == 6 and wins_b.sum() == 0


def test_bt_with_a_strong_penalty_matches_the_penalised_optimum():
    # 3 wins to 1, l2 = 1: θ_a = −θ_b = d/2 minimises −3·log σ(d) − log σ(−d) + ½·(d²/4 + d²/4),
    # whose derivative is −3·(1 − σ(d)) + σ(d) + d/2 = 0
    d = brentq(lambda x: -3 * (1 - expit(x)) + expit(x) + x / 2, 0.0, 5.0, xtol=1e-14)
    ratings = bt_ratings([Match("t", "a", "b", "model_a")] * 3 + [Match("t", "a", "b", "model_b")], BTConfig(l2=1.0))
    points = 400 / math.log(10) * d
    assert ratings["a"] == pytest.approx(1000 + points / 2, abs=1e-6)
    assert ratings["b"] == pytest.approx(1000 - points / 2, abs=1e-6)

