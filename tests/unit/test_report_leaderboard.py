"""The leaderboard's tie rule: paired tests on shared items, CI overlap otherwise, Arena-style ranks."""

from __future__ import annotations

import pytest

from finharness.report.leaderboard import CI_OVERLAP, Entry, compare, rank_entries, rank_labels


def scores(correct: int, n: int, prefix: str = "q") -> dict[str, float]:
    return {f"{prefix}{i}": float(i < correct) for i in range(n)}


def entry(label: str, per_sample: dict[str, float] | None, ci=None, value=None) -> Entry:
    if value is None and per_sample:
        value = sum(per_sample.values()) / len(per_sample)
    return Entry(label, value, ci, len(per_sample) if per_sample else None, per_sample)


def test_paired_test_separates_a_consistent_difference():
    # B is right on 30 more of the same 100 items: McNemar separates them
    a, b = entry("a", scores(80, 100)), entry("b", scores(50, 100))
    c = compare(a, b)
    assert c.basis == "mcnemar-score" and c.separable and c.n_shared == 100
    assert abs(c.diff - 0.30) < 1e-9 and c.p_value < 1e-6


def test_paired_test_keeps_a_small_difference_tied():
    a, b = entry("a", scores(52, 100)), entry("b", scores(50, 100))
    c = compare(a, b)
    assert c.basis == "mcnemar-score" and not c.separable and c.p_value > 0.05


def test_paired_test_needs_shared_items_else_ci_overlap():
    # same scores but disjoint ids: no pairing; the intervals decide
    a = entry("a", scores(80, 100, "x"), ci=(0.71, 0.87))
    b = entry("b", scores(50, 100, "y"), ci=(0.40, 0.60))
    c = compare(a, b)
    assert c.basis == CI_OVERLAP and c.separable and c.p_value is None
    overlapping = compare(Entry("a", 0.6, (0.5, 0.7)), Entry("b", 0.55, (0.45, 0.65)))
    assert overlapping.basis == CI_OVERLAP and not overlapping.separable


def test_significant_difference_against_the_headline_order_does_not_separate():
    # headline says a > b (e.g. a macro average) but per item b wins clearly: not separable
    a = Entry("a", 0.9, (0.85, 0.95), 100, scores(40, 100))
    b = Entry("b", 0.5, (0.45, 0.55), 100, scores(80, 100))
    c = compare(a, b)
    assert c.p_value < 0.05 and c.diff < 0 and not c.separable


def test_ranks_are_one_plus_the_runs_separable_above():
    ids = 200
    strong = entry("strong", scores(170, ids))
    strong2 = entry("strong2", {**scores(168, ids)})
    weak = entry("weak", scores(60, ids))
    missing = Entry("missing", None, None)
    standings, comparisons = rank_entries([weak, missing, strong2, strong])
    assert [s.entry.label for s in standings] == ["strong", "strong2", "weak", "missing"]
    assert [s.rank for s in standings] == [1, 1, 3, None]
    assert rank_labels(standings) == ["=1", "=1", "3", "—"]
    assert standings[0].not_separable_from == ("strong2",)
    assert len(comparisons) == 3


def test_rank_groups_can_chain():
    # a ~ b, b ~ c, but a > c: ranks 1, =1... c is beaten only by a -> rank 2
    a = Entry("a", 0.70, (0.65, 0.75))
    b = Entry("b", 0.64, (0.58, 0.70))
    c = Entry("c", 0.58, (0.52, 0.64))
    standings, _ = rank_entries([a, b, c])
    assert [s.rank for s in standings] == [1, 1, 2]
    assert set(standings[1].not_separable_from) == {"a", "c"}


def test_lower_is_better_ranks_the_smallest_first():
    few, many = entry("few errors", scores(20, 100)), entry("many errors", scores(70, 100))
    standings, comparisons = rank_entries([many, few], lower_is_better=True)
    assert [s.entry.label for s in standings] == ["few errors", "many errors"] and [s.rank for s in standings] == [1, 2]
    assert comparisons[0].ahead == "few errors" and comparisons[0].separable and comparisons[0].diff < 0
    # the same values read higher-is-better put the other one first
    assert [s.entry.label for s in rank_entries([few, many])[0]] == ["many errors", "few errors"]
    apart = compare(Entry("low", 0.1, (0.05, 0.15)), Entry("high", 0.5, (0.4, 0.6)), lower_is_better=True)
    assert apart.basis == CI_OVERLAP and apart.separable
    wrong_way = compare(Entry("high", 0.5, (0.4, 0.6)), Entry("low", 0.1, (0.05, 0.15)), lower_is_better=True)
    assert not wrong_way.separable


def test_directions_come_from_results_or_the_built_in_task(tmp_path):
    from finharness.core.task import metric_direction
    from finharness.report.runs import RunData

    declared = {"unparseable_rate": "lower", "*.unparseable_rate": "lower", "agreement.*": "info"}
    assert [metric_direction(m, declared) for m in ("strict.score", "robust.unparseable_rate", "agreement.ll~gen")] \
        == ["higher", "lower", "info"]
    with pytest.raises(ValueError, match="'sideways' for 'x' is not one of higher, lower, info"):
        metric_direction("x", {"x": "sideways"})
    written = RunData(tmp_path, {"task": "ucfe", "metrics": {"rounds": {}}, "directions": {}}, ())
    assert written.direction("rounds") == "higher"  # results.json says so: it wins
    older = RunData(tmp_path, {"task": "ucfe", "metrics": {"rounds": {}}}, ())
    assert older.direction("rounds") == "info"  # written before directions: the built-in UCFE task declares it
    assert RunData(tmp_path, {"task": "mine", "metrics": {"x": {}}}, ()).direction("x") == "higher"

