"""Agreement between raters (stats/agreement.py): κ, its bootstrap interval, per-label agreement, the confusion
matrix, checked against hand counts and the large-sample formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from finharness.stats.agreement import (
    cohen_kappa,
    cohen_kappa_ci,
    confusion_matrix,
    label_agreement,
)


def raters(seed: int, n: int, agree: float, labels=("c", "i", "r")):
    """Rater b copies rater a with probability `agree`, else draws a label at random."""
    rng = np.random.default_rng(seed)
    shares = (0.5, 0.3, 0.2) if len(labels) == 3 else None
    a = rng.choice(labels, size=n, p=shares).tolist()
    b = [x if rng.random() < agree else str(rng.choice(labels)) for x in a]
    return a, b


def test_kappa_by_hand():
    # 10 items: observed agreement 0.7; shares a (0.5, 0.5), b (0.6, 0.4): chance 0.5 -> κ = 0.4
    a = ["y"] * 5 + ["n"] * 5
    b = ["y", "y", "y", "y", "n", "y", "y", "n", "n", "n"]
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_kappa_interval_holds_the_estimate_and_is_seeded():
    a, b = raters(1, 300, 0.8)
    est = cohen_kappa_ci(a, b)
    assert est.value == pytest.approx(cohen_kappa(a, b))
    assert est.ci95[0] < est.value < est.ci95[1] and -1 <= est.ci95[0] and est.ci95[1] <= 1
    assert est.n == 300 and "bootstrap" in est.method and est.warning is None
    assert cohen_kappa_ci(a, b) == est  # the same seed, the same interval
    assert cohen_kappa_ci(a, b, seed=1).ci95 != est.ci95


def test_kappa_interval_width_matches_the_large_sample_standard_error():
    # Cohen (1960): se(κ) ≈ sqrt(p_o (1 - p_o) / (n (1 - p_e)^2)); the bootstrap sd should be close at large n
    a, b = raters(2, 2000, 0.7, labels=("y", "n"))
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    p_e = sum((a.count(label) / n) * (b.count(label) / n) for label in ("y", "n"))
    se = math.sqrt(p_o * (1 - p_o) / (n * (1 - p_e) ** 2))
    est = cohen_kappa_ci(a, b, resamples=1000)
    assert math.sqrt(est.variance) == pytest.approx(se, rel=0.15)
    assert (est.ci95[1] - est.ci95[0]) == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_narrower_confidence_gives_a_narrower_interval():
    a, b = raters(3, 200, 0.75)
    wide, narrow = cohen_kappa_ci(a, b, confidence=0.95), cohen_kappa_ci(a, b, confidence=0.5)
    assert narrow.ci95[0] > wide.ci95[0] and narrow.ci95[1] < wide.ci95[1]


def test_perfect_agreement_and_undefined_kappa():
    a = ["c", "i", "r", "c"] * 10
    assert cohen_kappa_ci(a, a).ci95 == (1.0, 1.0)
    same = cohen_kappa_ci(["c"] * 40, ["c"] * 40)
    assert math.isnan(same.value) and math.isnan(same.ci95[0]) and "undefined" in same.warning
    empty = cohen_kappa_ci([], [])
    assert empty.n == 0 and math.isnan(empty.value)


def test_few_items_are_flagged():
    assert "too narrow" in cohen_kappa_ci(["a", "b", "a", "b", "a"], ["a", "b", "b", "b", "a"]).warning


def test_raters_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="different numbers of items"):
        cohen_kappa_ci(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="different numbers of items"):
        label_agreement(["a"], [])
    with pytest.raises(ValueError, match="different numbers of items"):
        confusion_matrix(["a"], [], ["a"])


def test_label_agreement_by_hand():
    human = ["c", "c", "c", "i", "i", "r", "r", "r"]
    grader = ["c", "c", "i", "i", "c", "r", "r", "i"]
    per = label_agreement(human, grader, labels=("c", "i", "r"))
    assert list(per) == ["c", "i", "r"]
    c, i, r = per["c"], per["i"], per["r"]
    assert (c.support, c.predicted, c.agreed) == (3, 3, 2) and c.recall == pytest.approx(2 / 3)
    assert (i.support, i.predicted, i.agreed) == (2, 3, 1) and i.precision == pytest.approx(1 / 3)
    assert (r.support, r.predicted, r.agreed) == (3, 2, 2) and r.f1 == pytest.approx(0.8)
    assert r.kappa == pytest.approx(cohen_kappa([h == "r" for h in human], [g == "r" for g in grader]))


def test_a_label_nobody_used_has_no_rates():
    per = label_agreement(["a", "b"], ["a", "b"], labels=("a", "b", "z"))
    assert per["z"].support == 0 and math.isnan(per["z"].recall) and math.isnan(per["z"].precision)


def test_confusion_matrix_rows_are_the_reference():
    human = ["c", "c", "i", "r", "r"]
    grader = ["c", "i", "i", "r", "c"]
    matrix = confusion_matrix(human, grader, ("c", "i", "r"))
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 1]]
    assert matrix.trace() == sum(h == g for h, g in zip(human, grader))
