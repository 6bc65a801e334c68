"""Agreement between rating tables and Cohen's kappa."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from finharness.rating import cohen_kappa, compare_ratings, load_rating_values


def test_compare_on_shared_models():
    a = {"x": 1100.0, "y": 1000.0, "z": 900.0, "w": 950.0, "only_a": 1.0}
    b = {"x": 1120.0, "y": 990.0, "z": 880.0, "w": 960.0, "only_b": 2.0}
    agreement = compare_ratings(a, b)
    assert agreement.models == ("w", "x", "y", "z")
    assert agreement.only_in_a == ("only_a",) and agreement.only_in_b == ("only_b",)
    assert agreement.mae == pytest.approx((10 + 20 + 10 + 20) / 4)
    assert agreement.spearman == pytest.approx(1.0)
    expected = stats.pearsonr([950, 1100, 1000, 900], [960, 1120, 990, 880])
    assert agreement.pearson == pytest.approx(expected.statistic)
    assert agreement.pearson_p == pytest.approx(expected.pvalue)


def test_reversed_order_is_negative():
    a = {"x": 3.0, "y": 2.0, "z": 1.0}
    agreement = compare_ratings(a, {"x": 1.0, "y": 2.0, "z": 3.0})
    assert agreement.spearman == pytest.approx(-1.0) and agreement.pearson == pytest.approx(-1.0)


def test_degenerate_inputs_give_nan_not_errors():
    assert math.isnan(compare_ratings({"x": 1.0}, {"x": 2.0}).pearson)
    assert math.isnan(compare_ratings({"x": 1.0, "y": 1.0}, {"x": 2.0, "y": 3.0}).spearman)
    two = compare_ratings({"x": 1.0, "y": 2.0}, {"x": 2.0, "y": 3.0})
    assert two.pearson == pytest.approx(1.0) and math.isnan(two.pearson_p)
    assert math.isnan(compare_ratings({}, {"x": 1.0}).mae)


def test_kappa_textbook_example():
    # 50 items: both yes 20, a-yes/b-no 5, a-no/b-yes 10, both no 15 → po 0.7, pe 0.5, κ 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_kappa_edge_cases():
    verdicts = ["model_a", "tie", "model_b", "model_a"]
    assert cohen_kappa(verdicts, verdicts) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa(["tie"] * 3, ["tie"] * 3))
    assert math.isnan(cohen_kappa([], []))
    with pytest.raises(ValueError, match="different numbers of items"):
        cohen_kappa(["a"], ["a", "b"])


def test_load_rating_values_accepts_rate_output_and_flat_maps(tmp_path):
    rate_out = tmp_path / "r.json"
    rate_out.write_text(json.dumps({"method": "elo", "overall": {"ratings": {
        "x": {"rating": 1010.5, "ci95": [1000, 1020], "wins": 1, "ties": 0, "losses": 0}}}}))
    flat = tmp_path / "h.json"
    flat.write_text(json.dumps({"x": 3, "y": 1.5}))
    assert load_rating_values(rate_out) == {"x": 1010.5}
    assert load_rating_values(flat) == {"x": 3.0, "y": 1.5}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": "high"}))
    with pytest.raises(ValueError, match=r"bad\.json: no numeric rating for 'x'"):
        load_rating_values(bad)
