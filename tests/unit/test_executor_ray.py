"""The Ray executor on a local two-CPU cluster: the same run as a local one, workers killed mid-shard
are retried without losing or duplicating anything, reruns and resumes make no new calls."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from finharness.backends import from_spec
from finharness.benchmarks.cfinbench.task import CFinBenchTask
from finharness.benchmarks.demo.task import DemoTask
from finharness.benchmarks.registry import make_task
from finharness.cli import app
from finharness.core.ray_executor import RayExecutor, ShardJob, split_shards
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from tests.conftest import skip_or_fail

from ..benchmarks.test_cfinbench_task import write_exam

REPO = Path(__file__).resolve().parents[2]
TIMING_FIELDS = ("latency_s",)


class DyingDemoTask(DemoTask):
    """The demo task whose worker process dies (os._exit) right after the model answered sample
    `victim`, once: the first worker to get there creates `flag` and dies; a retry finds the flag."""

    def __init__(self, flag: str, victim: str = "demo/7", max_tokens: int = 64):
        super().__init__(max_tokens=max_tokens)
        self.flag, self.victim = Path(flag), victim

    def config(self):
        return {"max_tokens": self.max_tokens}  # the flag changes nothing: the run key is the demo's

    async def solve(self, sample, models):
        prediction = await super().solve(sample, models)
        if sample.id == self.victim and not self.flag.exists():
            self.flag.write_text(str(os.getpid()))
            os._exit(1)
        return prediction


@pytest.fixture(scope="module")
def ray_cluster():
    try:
        import ray
    except ImportError as err:  # the `test` extra (or `ray`) brings it; CI requires it (FINHARNESS_REQUIRE_RAY)
        skip_or_fail("RAY", f"ray is not importable ({err}): pip install -e '.[test]'")
    # Workers import this module (DyingDemoTask is pickled by reference); they inherit the
    # environment of the cluster this process starts (a runtime_env would cost ~10 s more here).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def run(task_factory, spec: str, store: RunStore, out: Path | None, *, executor: RayExecutor | None = None,
        only_ids=None, **options: Any):
    backends = {"model": from_spec(spec)}
    return asyncio.run(run_task(task_factory(), backends, store, RunOptions(**options), out_dir=out,
                                executor=executor, only_ids=only_ids))


def ray_executor(task_factory, spec: str, options: dict[str, Any], **kw: Any) -> RayExecutor:
    return RayExecutor(ShardJob(task_factory=task_factory, backend_specs={"model": spec}, backend_factory=from_spec,
                                options=RunOptions(**options)), **kw)


def sample_lines(out: Path) -> list[dict[str, Any]]:
    """samples.jsonl without its timing fields."""
    lines = []
    for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for name in TIMING_FIELDS:
            record.pop(name)
            for entry in record["trace"]:
                entry.pop(name, None)
        lines.append(record)
    return lines


def store_rows(store: RunStore, run_key: str) -> tuple[int, int]:
    """(call rows, sample rows of the run)."""
    return store.count_calls(), len(store.get_samples(run_key))


def test_split_shards_covers_every_id_once_in_order():
    ids = [f"s{i}" for i in range(11)]
    shards = split_shards(ids, 4)
    assert [sid for shard in shards for sid in shard] == ids
    assert sorted(len(s) for s in shards) == [2, 3, 3, 3]
    assert split_shards(ids[:2], 8) == [["s0"], ["s1"]], "never an empty shard"


@pytest.mark.parametrize("name", ["demo", "cfinbench"])
def test_ray_run_equals_local_run(ray_cluster, tmp_path: Path, name: str):
    if name == "demo":
        factory, options = partial(make_task, DemoTask, {}), {"data_dir": None}
    else:
        factory = partial(make_task, CFinBenchTask, {"shots": 3})
        options = {"data_dir": write_exam(tmp_path / "exam")}
    spec = "fake?latency=0.01"
    local = run(factory, spec, RunStore(tmp_path / "local.sqlite"), tmp_path / "local", **options)
    store = RunStore(tmp_path / "ray.sqlite")
    on_ray = run(factory, spec, store, tmp_path / "ray", executor=ray_executor(factory, spec, options, shards=3),
                 **options)
    n = local.results["counts"]["samples"]
    assert n >= 7 and on_ray.results["status"] == local.results["status"] == "complete"
    assert on_ray.results["run_key"] == local.results["run_key"]
    headline = local.results["headline"]
    assert on_ray.results["metrics"][headline] == local.results["metrics"][headline]
    assert on_ray.results["metrics"] == local.results["metrics"] and on_ray.results["groups"] == local.results["groups"]
    assert on_ray.results["counts"] == local.results["counts"], "calls, cache hits, tokens: as if run here"
    assert sample_lines(tmp_path / "ray") == sample_lines(tmp_path / "local")
    assert store_rows(store, on_ray.results["run_key"]) == (local.results["counts"]["calls"], n)


def test_worker_killed_mid_shard_is_retried_without_loss_or_duplicates(ray_cluster, tmp_path: Path):
    flag = tmp_path / "died"
    dying = partial(DyingDemoTask, str(flag))
    spec, options = "fake?latency=0.01", {"data_dir": None}
    store = RunStore(tmp_path / "ray.sqlite")
    result = run(dying, spec, store, tmp_path / "ray", executor=ray_executor(dying, spec, options, shards=2),
                 **options)
    assert flag.exists(), "a worker must have died mid-shard"
    assert result.results["status"] == "complete"
    counts = result.results["counts"]
    # the dead worker's calls never reached the store or the counts: each call and sample once
    assert store_rows(store, result.results["run_key"]) == (12, 12)
    assert counts["calls"] == 12 and counts["cache_hits"] == 0 and counts["samples"] == 12
    local = run(partial(make_task, DemoTask, {}), spec, RunStore(tmp_path / "local.sqlite"), tmp_path / "local",
                **options)
    assert result.results["run_key"] == local.results["run_key"]
    assert sample_lines(tmp_path / "ray") == sample_lines(tmp_path / "local")


@pytest.mark.slow  # a worker death more (a new worker process): keeps the default suite short
def test_a_shard_whose_worker_keeps_dying_fails_its_samples_and_a_rerun_finishes_them(ray_cluster, tmp_path: Path):
    flag = tmp_path / "died"
    dying = partial(DyingDemoTask, str(flag))
    spec, options = "fake", {"data_dir": None}
    store = RunStore(tmp_path / "ray.sqlite")
    first = run(dying, spec, store, tmp_path / "first",
                executor=ray_executor(dying, spec, options, shards=2, max_retries=0), **options)
    lost = [r for r in first.records if r.failed]
    assert first.results["status"] == "incomplete" and len(lost) == 6, "the victim's whole shard is lost"
    assert all(r.failed.startswith("worker-lost") for r in lost)
    assert first.results["counts"]["failed_samples"] == 6 and first.results["counts"]["calls"] == 6
    assert store_rows(store, first.results["run_key"]) == (6, 6)
    second = run(dying, spec, store, tmp_path / "second", executor=ray_executor(dying, spec, options, shards=2),
                 **options)
    assert second.results["status"] == "complete"
    assert second.results["counts"]["calls"] == 6 and second.results["counts"]["cache_hits"] == 6
    assert store_rows(store, second.results["run_key"]) == (12, 12)


def test_rerun_and_resume_make_no_new_calls(ray_cluster, tmp_path: Path):
    factory, spec, options = partial(make_task, DemoTask, {}), "fake", {"data_dir": None}
    store = RunStore(tmp_path / "s.sqlite")
    # a run interrupted after 5 samples (the same run key: only_ids narrows what is solved, not the run)
    part = run(factory, spec, store, None, only_ids=[f"demo/{i}" for i in range(5)], **options)
    assert part.results["counts"]["calls"] == 5
    executor = ray_executor(factory, spec, options)
    resumed = run(factory, spec, store, tmp_path / "resumed", executor=executor, **options)
    assert resumed.results["run_key"] == part.results["run_key"] and resumed.results["status"] == "complete"
    assert resumed.results["counts"]["calls"] == 7 and resumed.results["counts"]["cache_hits"] == 5
    assert store_rows(store, resumed.results["run_key"]) == (12, 12)

    class NoShards(RayExecutor):
        async def __call__(self, *args):
            raise AssertionError("nothing is pending: no shard may be sent")

    again = run(factory, spec, store, tmp_path / "again", executor=NoShards(executor.job), **options)
    assert again.results["counts"]["calls"] == 0 and again.results["counts"]["cache_hits"] == 12
    assert again.results["metrics"] == resumed.results["metrics"]
    assert store_rows(store, again.results["run_key"]) == (12, 12)


def test_a_worker_that_sees_another_model_stops_the_run(ray_cluster, tmp_path: Path):
    factory, options = partial(make_task, DemoTask, {}), {"data_dir": None}
    store = RunStore(tmp_path / "s.sqlite")
    other = ray_executor(factory, "fake?name=other", options, shards=1)
    with pytest.raises(ValueError, match="different run than this driver") as err:
        run(factory, "fake", store, tmp_path / "out", executor=other, **options)
    assert "models" in str(err.value)
    assert store.count_calls() == 0, "nothing from a mismatched worker enters the store"
    assert not (tmp_path / "out" / "results.json").exists()


def test_cli_run_with_executor_ray(ray_cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "demo", "--model", "fake", "--executor", "ray", "--shards", "2",
                                      "--out", "out", "-q"])
    assert result.exit_code == 0, result.output
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["status"] == "complete" and res["counts"]["calls"] == 12
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["run_key"] == res["run_key"]


def test_cli_executor_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    wrong = runner.invoke(app, ["run", "demo", "--model", "fake", "--shards", "2", "-q"])
    assert wrong.exit_code != 0 and "--executor ray" in wrong.output
    unknown = runner.invoke(app, ["run", "demo", "--model", "fake", "--executor", "dask", "-q"])
    assert unknown.exit_code != 0 and "local or ray" in unknown.output
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real_find_spec(name, *a))
    missing = runner.invoke(app, ["run", "demo", "--model", "fake", "--executor", "ray", "-q"])
    assert missing.exit_code != 0 and "pip install 'finharness[ray]'" in missing.output
    assert not (tmp_path / "runs").exists(), "nothing is written before the executor is checked"


def test_cli_start_up_does_not_import_ray():
    code = ("import sys\nfrom finharness.cli import main\nsys.argv = ['finharness', 'run', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('RAY' if 'ray' in sys.modules else 'NO RAY')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "--executor" in proc.stdout
    assert proc.stdout.strip().endswith("NO RAY")
