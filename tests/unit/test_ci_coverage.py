"""A small run of bench/ci_coverage.py: every interval family the harness reports holds the truth at least 90%
of the time at small and moderate n (fixed seed; the full table is in docs/statistics.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "ci_coverage.py"
FLOOR = 0.90


@pytest.fixture(scope="module")
def coverage():
    spec = importlib.util.spec_from_file_location("ci_coverage", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _low(rows):
    return [(r["family"], r["n"], r["worst_case"], round(r["coverage_min"], 3)) for r in rows
            if r.get("goal") and r["coverage_min"] < FLOOR]


def test_means_and_paired_differences_cover_at_small_n(coverage):
    names = [f.name for f in coverage.families() if "gap" not in f.name.lower()]
    rows = coverage.run(sizes=(3, 10, 100), reps=200, seed=0, only=names)
    assert {r["family"] for r in rows} == set(names) and not any(r.get("skipped") for r in rows)
    assert _low(rows) == []


def test_rating_gaps_cover_from_few_matches(coverage):
    # the sandwich path (soft outcomes, two models) and the information path with indirect matches (4 models,
    # Elo's table taking Bradley-Terry's interval); 2-model 0/1 verdicts are Clopper-Pearson's exactly
    rows = coverage.run(sizes=(5, 30), reps=1500, seed=0, only=["BT gap, soft outcomes"])
    rows += coverage.run(sizes=(5, 30), reps=600, seed=0, only=["Elo gaps, 4 models"])
    assert len(rows) == 4 and _low(rows) == []


def test_the_clustered_interval_is_the_single_draw_one_with_one_draw(coverage):
    import numpy as np

    from finharness.stats import mean_ci

    sample = (np.random.default_rng(0).random((12, 1)) < 0.4).astype(float)
    assert coverage.clustered_interval(sample) == tuple(mean_ci(sample.ravel()).ci95)
