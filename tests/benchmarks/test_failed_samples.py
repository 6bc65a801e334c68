"""Each benchmark's failed-sample accounting, through a real run with an injected failure (issue 28 item 4).

Every task's aggregate() now sees every record, failed ones included (`record.failed` set, no score). One call of
each run fails for good (the fake's first generation, with one slot so it is the first sample's): the run ends
incomplete, the failed sample is counted and named, no metric counts it, and the benchmark's own accounting
(CFinBench's failed count and note) fires from the run itself, not from a hand-made call of aggregate().
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.registry import make_task, task_class
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore

from .test_cfinbench_task import write_exam

FIRST_CALL_FAILS = [{"match": "", "fail": "injected: the server refused this request", "times": 1}]

CASES = {  # task -> (options, roles, data root: 'shared', 'exam' or None, limit)
    "demo": ({}, ("model",), None, 4),
    "cfinbench": ({"types": "single_choice"}, ("model",), "exam", None),
    "bizbench/tatqa-e": ({}, ("model",), "shared", 3),
    "bizbench/codetatqa": ({}, ("model",), "shared", 3),
    "bizbench/finknow": ({"method": "gen", "source": "fineval"}, ("model",), "shared", 3),
    "bizbench/formulaeval": ({"cases": 5}, ("model",), None, 3),
    "ucfe": ({"tasks": "0_股价预测"}, ("model",), "shared", 3),
    "fintradebench": ({"per_category": 1, "levels": "L1", "select": False}, ("model", "judge"), "shared", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_failed_call_fails_its_sample_and_the_benchmark_counts_it(name: str, tmp_path: Path, shared_data: Path):
    options, roles, data, limit = CASES[name]
    root = {"shared": shared_data, "exam": write_exam(tmp_path / "data") if data == "exam" else None}.get(data)
    backends = {"model": FakeBackend(script=FIRST_CALL_FAILS, reply="Answer: A")}
    if "judge" in roles:
        backends["judge"] = FakeBackend(name="judge", reply="Correctness: 4/5\nReasoning Depth: 3/5\n"
                                                             "Signal Integration: 3/5\nFundamental Integration: 3/5\n"
                                                             "Golden indicators mentioned: none")
    task = make_task(task_class(name), options)
    store = RunStore(tmp_path / "store.sqlite")
    try:
        result = asyncio.run(run_task(task, backends, store, RunOptions(data_dir=root, limit=limit, concurrency=1),
                                      out_dir=tmp_path / "out"))
    finally:
        store.close()
    results = result.results
    failed = [r for r in result.records if r.failed]
    assert len(failed) == 1 and "injected" in failed[0].failed and failed[0].score is None
    assert results["status"] == "incomplete"
    assert results["counts"]["failed_samples"] == 1 and results["counts"]["samples"] == len(result.records)
    assert results["counts"]["failure_kinds"] == {"error": 1}  # a refusal without a status: may pass next time
    assert any("1 sample(s) failed" in note for note in results["notes"])
    for metric in results["metrics"].values():  # the failed sample is in no metric's n
        assert metric["n"] <= len(result.records) - 1
    if name == "cfinbench":  # the benchmark's own accounting, reached through a run
        assert results["extra"]["counts"]["failed"] == 1
        assert any("1 samples failed (a model call failed for good)" in note for note in results["notes"])
