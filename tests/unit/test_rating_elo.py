"""Online Elo (UCFE's K = 4) and its bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from finharness.rating import EloConfig, Match, RatingOptions, bt_table, elo_ratings, elo_table, rate_matches
from finharness.rating.base import EncodedMatches
from finharness.rating.elo import run_elo


def test_first_win_between_equals_is_plus_minus_k_half():
    ratings = elo_ratings([Match("t", "a", "b", "model_a")])
    assert ratings == pytest.approx({"a": 1002.0, "b": 998.0})


def test_three_matches_hand_computed():
    matches = [Match("t", "A", "B", "model_a"),   # E=½: A 1002, B 998
               Match("t", "B", "C", "tie"),       # E_B = 1/(1+10^(2/400)) = 0.4971219: B +0.0115128
               Match("t", "C", "A", "model_a")]   # E_C = 1/(1+10^(2.0115128/400)) = 0.4942105
    ratings = elo_ratings(matches)
    # B = 998 + 4·(0.5 − 0.4971219);  C = 1000 − 0.0115128 + 4·(1 − 0.4942105);  A = 2000·1.5 − B − C
    assert ratings["B"] == pytest.approx(998.0115128, abs=1e-6)
    assert ratings["C"] == pytest.approx(1002.0000663, abs=1e-6)
    assert ratings["A"] == pytest.approx(999.9884209, abs=1e-6)
    assert sum(ratings.values()) == pytest.approx(3000.0)  # Elo is zero-sum


def test_parameters_are_configurable():
    ratings = elo_ratings([Match("t", "a", "b", "model_b")], EloConfig(k=32, init=1500))
    assert ratings == pytest.approx({"a": 1484.0, "b": 1516.0})


def test_tie_between_equals_changes_nothing_and_tie_pulls_together():
    assert elo_ratings([Match("t", "a", "b", "tie")]) == pytest.approx({"a": 1000, "b": 1000})
    after = elo_ratings([Match("t", "a", "b", "model_a"), Match("t", "a", "b", "tie")])
    assert 1000 < after["a"] < 1002 and 998 < after["b"] < 1000


def test_order_matters():
    matches = [Match("t", "a", "b", "model_a"), Match("t", "b", "c", "model_a"),
               Match("t", "c", "a", "model_a"), Match("t", "a", "b", "model_a")]
    forward, backward = elo_ratings(matches), elo_ratings(matches[::-1])
    assert forward != pytest.approx(backward)


def _random_matches(seed=1, n=300):
    rng = np.random.default_rng(seed)
    models, strength = ["m0", "m1", "m2", "m3"], [0.0, 0.5, 1.0, 1.5]
    out = []
    for _ in range(n):
        i, j = rng.choice(4, size=2, replace=False)
        p = 1 / (1 + np.exp(strength[j] - strength[i]))
        out.append(Match("t", models[i], models[j], "model_a" if rng.random() < p else "model_b"))
    return out


def test_table_has_counts_and_reproducible_ci():
    matches = _random_matches()
    a, b = elo_table(matches, bootstrap=200, seed=7), elo_table(matches, bootstrap=200, seed=7)
    other = elo_table(matches, bootstrap=200, seed=8)
    assert a == b
    assert a.ratings["m0"].ci95 != other.ratings["m0"].ci95
    for name, r in a.ratings.items():
        lo, hi = r.ci95
        assert lo < hi
        assert r.wins + r.losses == sum(name in (m.model_a, m.model_b) for m in matches)
    assert list(a.ratings)[0] == "m3" and list(a.ratings)[-1] == "m0"   # best first
    assert a.bootstrap_rounds == 200 and a.n_matches == 300
    assert elo_table(matches, bootstrap=0).ratings["m0"].ci95 is None


def test_by_task_starts_at_init_per_task():
    matches = [Match("T1", "a", "b", "model_a")] * 50 + [Match("T2", "a", "b", "model_b")]
    report = rate_matches(matches, RatingOptions(method="elo", bootstrap=0), by_task=True)
    assert report.by_task["T2"].values() == pytest.approx({"a": 998.0, "b": 1002.0})
    # overall carries T1's history: a is still far ahead after losing once
    assert report.overall.values()["a"] > 1050


def test_groups_are_rated_over_their_own_matches():
    matches = [Match("0_zs", "a", "b", "model_a"), Match("Analyst", "a", "b", "model_b"),
               Match("0_other", "a", "c", "tie"), Match("Credit", "b", "c", "model_a")]
    opts = RatingOptions(method="elo", bootstrap=0)
    report = rate_matches(matches, opts, by_task=True)
    assert set(report.groups) == {"zero_shot", "few_shot"}
    zero = [m for m in matches if m.task.startswith("0_")]
    assert report.groups["zero_shot"].n_matches == 2
    assert report.groups["zero_shot"].values() == pytest.approx(elo_ratings(zero))
    assert set(report.groups["few_shot"].ratings) == {"a", "b", "c"}
    assert report.groups["few_shot"].ratings["b"].wins == 2
    assert rate_matches(matches, opts).by_task is None


# --- edges found by mutation testing (make mutation) ----------------------------------------------

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
