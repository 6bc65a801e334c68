"""Bradley–Terry maximum likelihood on the Elo scale, with bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit

from finharness.rating import BTConfig, Match, bt_ratings, bt_table
from finharness.rating.base import EncodedMatches
from finharness.rating.bt import _Pairs

from .test_rating_elo import MATCHES

TRUE = {"m0": 800.0, "m1": 900.0, "m2": 1000.0, "m3": 1100.0, "m4": 1200.0}  # mean 1000


def _draw(seed: int, per_pair: int) -> list[Match]:
    """Matches between every pair, outcomes drawn from the true Elo-scale strengths."""
    rng = np.random.default_rng(seed)
    names = list(TRUE)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p_a = 1 / (1 + 10 ** ((TRUE[b] - TRUE[a]) / 400))
            out += [Match("t", a, b, "model_a" if rng.random() < p_a else "model_b")
                    for _ in range(per_pair)]
    rng.shuffle(out)
    return out


def test_two_models_closed_form_without_penalty():
    # 3 wins to 1: MLE odds 3:1, i.e. 400·log10(3) points apart, centred on 1000
    matches = [Match("t", "a", "b", "model_a")] * 3 + [Match("t", "a", "b", "model_b")]
    r = bt_ratings(matches, BTConfig(l2=0.0))
    assert r["a"] - r["b"] == pytest.approx(400 * math.log10(3), abs=1e-3)
    assert (r["a"] + r["b"]) / 2 == pytest.approx(1000.0)


def test_tie_counts_half_a_win_each_way():
    # 1 win + 2 ties = 2 : 1 in wins
    matches = [Match("t", "a", "b", "model_a"), Match("t", "a", "b", "tie"), Match("t", "b", "a", "tie")]
    r = bt_ratings(matches, BTConfig(l2=0.0))
    assert r["a"] - r["b"] == pytest.approx(400 * math.log10(2), abs=1e-3)


def test_order_does_not_matter():
    matches = _draw(3, 20)
    assert bt_ratings(matches) == pytest.approx(bt_ratings(matches[::-1]), abs=1e-6)


def test_recovers_true_order_and_scale():
    table = bt_table(_draw(0, 300), bootstrap=0)
    assert list(table.ratings) == ["m4", "m3", "m2", "m1", "m0"]
    for name, true in TRUE.items():
        assert table.ratings[name].rating == pytest.approx(true, abs=40)


def test_intervals_cover_the_truth_about_95_percent():
    covered, total = 0, 0
    for seed in range(20):
        table = bt_table(_draw(seed, 60), bootstrap=200, seed=seed)
        for name, true in TRUE.items():
            lo, hi = table.ratings[name].ci95
            covered += lo <= true <= hi
            total += 1
    assert 0.85 <= covered / total <= 1.0


def test_unbeaten_model_gets_a_finite_top_rating():
    matches = [Match("t", "champ", "b", "model_a")] * 5 + [Match("t", "c", "champ", "model_b")] * 5 + \
        [Match("t", "b", "c", "model_a"), Match("t", "b", "c", "model_b")]
    table = bt_table(matches, bootstrap=100)
    top = table.ratings["champ"]
    assert list(table.ratings)[0] == "champ"
    assert math.isfinite(top.rating) and all(math.isfinite(x) for x in top.ci95)
    assert (top.wins, top.ties, top.losses) == (10, 0, 0)


def test_bootstrap_reproducible_with_seed():
    matches = _draw(5, 10)
    assert bt_table(matches, bootstrap=100, seed=1) == bt_table(matches, bootstrap=100, seed=1)
    assert bt_table(matches, bootstrap=100, seed=1) != bt_table(matches, bootstrap=100, seed=2)


# --- edges found by mutation testing (make mutation) ----------------------------------------------

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
