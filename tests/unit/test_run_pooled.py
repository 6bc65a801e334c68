"""Pooled runs (`finharness run TASK TASK...`, core/runner.py run_tasks, core/pool.py run_pool): several
tasks share each backend's slots, give what each gives alone, under the same run keys, and each writes
OUT/<task>/."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.cfinbench.task import CFinBenchTask
from finharness.benchmarks.demo.task import DemoTask
from finharness.core.backend import BackendError
from finharness.core.model import model_state
from finharness.core.runner import PooledTask, RunOptions, dispatch_lanes, run_task, run_tasks
from finharness.core.store import RunStore
from finharness.core.task import Models, Task
from finharness.core.types import GenerateParams, GenerateRequest, Message, Sample, Score

from ..benchmarks.test_cfinbench_task import write_exam


class TaggedTask(Task):
    """n samples whose prompts start with the task's tag ('tag:i'), so a backend can tell tasks apart."""

    name = "tagged"
    roles = ("model",)

    def __init__(self, tag: str, n: int = 6):
        super().__init__(tag=tag, n=n)
        self.tag, self.n = tag, n

    def load(self, data_dir):
        return [Sample(id=f"{self.tag}{i}", input=f"{self.tag}:{i}", target="A") for i in range(self.n)]

    async def solve(self, sample, models: Models):
        return (await models.model.chat([Message("user", sample.input)], GenerateParams(max_tokens=8))).text

    def score(self, sample, prediction):
        return Score(value=float("A" in prediction), extracted=prediction)


class JudgedTaggedTask(TaggedTask):
    """TaggedTask whose every sample also asks the judge: two roles, two calls at once per sample."""

    name = "tagged-judged"
    roles = ("model", "judge")

    async def solve(self, sample, models: Models):
        both = await asyncio.gather(
            models.model.chat([Message("user", sample.input)], GenerateParams(max_tokens=8)),
            models["judge"].chat([Message("user", "judge " + sample.input)], GenerateParams(max_tokens=8)))
        return both[0].text


class CountingBackend(FakeBackend):
    """A fake model that records, per call, the tag of the prompt and how many calls run at once."""

    def __init__(self, latency: float = 0.01, **kw):
        super().__init__(latency=latency, **kw)
        self.order: list[str] = []
        self.running: dict[str, int] = {}
        self.most_running = 0
        self.tags_at_once: set[frozenset[str]] = set()
        """The sets of tasks that had calls in flight together."""

    async def generate(self, request: GenerateRequest):
        tag = request.messages[-1].content.removeprefix("judge ").split(":")[0]
        self.order.append(tag)
        self.running[tag] = self.running.get(tag, 0) + 1
        self.most_running = max(self.most_running, sum(self.running.values()))
        self.tags_at_once.add(frozenset(t for t, n in self.running.items() if n))
        try:
            return await super().generate(request)
        finally:
            self.running[tag] -= 1


def single(task: Task, backends: dict, store: RunStore, out: Path | None, **kw):
    return asyncio.run(run_task(task, backends, store, RunOptions(**kw), out_dir=out))


def pooled(jobs: list[PooledTask], store: RunStore, return_exceptions: bool = False, **kw):
    return asyncio.run(run_tasks(jobs, store, RunOptions(**kw), return_exceptions=return_exceptions))


# --- results and run keys ---------------------------------------------------------------------

def test_a_pooled_run_gives_each_task_what_it_gives_alone(tmp_path: Path):
    exam = write_exam(tmp_path / "exam")
    model = FakeBackend()
    alone_store, pool_store = RunStore(tmp_path / "alone.sqlite"), RunStore(tmp_path / "pool.sqlite")
    try:
        alone = [single(DemoTask(), {"model": model}, alone_store, tmp_path / "alone" / "demo"),
                 single(CFinBenchTask(), {"model": model}, alone_store, tmp_path / "alone" / "cfinbench",
                        data_dir=exam)]
        together = pooled([PooledTask(DemoTask(), {"model": model}, tmp_path / "pool" / "demo"),
                           PooledTask(CFinBenchTask(), {"model": model}, tmp_path / "pool" / "cfinbench")],
                          pool_store, data_dir=exam)
    finally:
        alone_store.close()
        pool_store.close()
    assert [r.results["task"] for r in together] == ["demo", "cfinbench"]
    for a, p in zip(alone, together):
        assert p.results["status"] == "complete"
        assert p.results["run_key"] == a.results["run_key"]
        assert p.results["metrics"] == a.results["metrics"] and p.results["groups"] == a.results["groups"]
        assert [(r.id, r.prediction) for r in p.records] == [(r.id, r.prediction) for r in a.records]
        assert p.results["counts"]["calls"] == a.results["counts"]["calls"] == len(a.records)
    for name in ("demo", "cfinbench"):  # the same per-sample lines, cache flags and latencies aside
        def strip(line):
            return {k: v for k, v in json.loads(line).items() if k not in ("latency_s", "trace")}
        lines = [[strip(line) for line in (tmp_path / side / name / "samples.jsonl").read_text().splitlines()]
                 for side in ("alone", "pool")]
        assert lines[0] == lines[1] and len(lines[0]) > 0


def test_a_pooled_run_resumes_single_runs_and_single_runs_resume_a_pooled_one(tmp_path: Path):
    exam = write_exam(tmp_path / "exam")
    model = FakeBackend()
    store = RunStore(tmp_path / "s.sqlite")
    try:
        single(DemoTask(), {"model": model}, store, None)
        single(CFinBenchTask(), {"model": model}, store, None, data_dir=exam)
        made = model.calls
        again = pooled([PooledTask(DemoTask(), {"model": model}, None),
                        PooledTask(CFinBenchTask(), {"model": model}, None)], store, data_dir=exam)
        assert model.calls == made, "a pooled run after the same single runs makes no call"
        assert [r.results["counts"]["calls"] for r in again] == [0, 0]
        assert all(r.results["counts"]["cache_hits"] == len(r.records) > 0 for r in again)

        other = FakeBackend(name="other")  # a fresh model: the pool computes, a single run then resumes
        first = pooled([PooledTask(TaggedTask("a"), {"model": other}, None),
                        PooledTask(TaggedTask("b"), {"model": other}, None)], store)
        made = other.calls
        assert made == 12
        alone = single(TaggedTask("b"), {"model": other}, store, None)
        assert other.calls == made and alone.results["counts"]["calls"] == 0
        assert alone.results["run_key"] == first[1].results["run_key"]
    finally:
        store.close()


# --- sharing the backend's slots --------------------------------------------------------------

@pytest.mark.parametrize("concurrency", [2, 3])
def test_the_tasks_of_a_pool_share_one_bound_on_each_backends_calls(tmp_path: Path, concurrency: int):
    backend = CountingBackend()  # each task alone could fill `concurrency` slots: three would triple it
    store = RunStore(tmp_path / "s.sqlite")
    try:
        results = pooled([PooledTask(TaggedTask(tag), {"model": backend}, None) for tag in "abc"], store,
                         concurrency=concurrency)
    finally:
        store.close()
    assert all(r.results["status"] == "complete" for r in results)
    assert backend.most_running == concurrency


def test_small_tasks_pooled_fill_the_slots_none_fills_alone(tmp_path: Path):
    backend = CountingBackend()
    store = RunStore(tmp_path / "s.sqlite")
    try:
        single(TaggedTask("alone", n=2), {"model": backend}, store, None, concurrency=6)
        assert backend.most_running == 2
        pooled([PooledTask(TaggedTask(tag, n=2), {"model": backend}, None) for tag in "abc"], store,
               concurrency=6)
    finally:
        store.close()
    assert backend.most_running == 6
    assert frozenset("abc") in backend.tags_at_once, "a multi-slot backend serves the tasks at once"


def test_roles_on_one_backend_instance_share_its_slots(tmp_path: Path):
    backend = CountingBackend()  # model and judge: one instance, as the CLI builds for equal specs
    store = RunStore(tmp_path / "s.sqlite")
    try:
        result = single(JudgedTaggedTask("j", n=8), {"model": backend, "judge": backend}, store, None,
                        concurrency=2)
    finally:
        store.close()
    assert result.results["counts"]["calls"] == 16
    assert backend.most_running == 2, "two roles on one backend must not double its concurrency"


def test_a_single_slot_backend_sees_one_tasks_samples_after_the_others(tmp_path: Path):
    backend = CountingBackend()
    store = RunStore(tmp_path / "s.sqlite")
    try:
        pooled([PooledTask(TaggedTask(tag, n=5), {"model": backend}, None) for tag in "ab"], store,
               concurrency=1)
    finally:
        store.close()
    assert backend.order == ["a"] * 5 + ["b"] * 5  # the task's own order kept: shared prefixes adjacent
    assert backend.most_running == 1


def test_dispatch_lanes_chain_the_tasks_that_share_a_single_slot_backend():
    local = FakeBackend(name="local")  # one slot (concurrency 1)
    server = FakeBackend(name="server")  # eight slots
    shared: dict = {}
    model_state(shared, local, 1)
    model_state(shared, server, None)
    jobs = [PooledTask(TaggedTask("a"), {"model": local}, None),
            PooledTask(TaggedTask("b"), {"model": server}, None),
            PooledTask(JudgedTaggedTask("c"), {"model": server, "judge": local}, None),
            PooledTask(TaggedTask("d"), {"model": server, "judge": local}, None)]  # no judge role: not chained
    assert dispatch_lanes(jobs, shared) == [[0, 2], [1], [3]]


def test_a_failing_task_is_handed_back_in_its_place_and_the_others_finish(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    try:
        results = pooled([PooledTask(CFinBenchTask(), {"model": FakeBackend()}, None),
                          PooledTask(DemoTask(), {"model": FakeBackend()}, None)], store,
                         data_dir=tmp_path / "no-exam", return_exceptions=True)
    finally:
        store.close()
    assert isinstance(results[0], ValueError) and "split folder" in str(results[0])
    assert results[1].results["status"] == "complete"


def test_run_pool_decides_the_pool_without_the_command_line(tmp_path: Path, monkeypatch):
    """core/pool.py: one backend per spec, OUT/<task>/ with a manifest for each task that ran, bad input
    told apart from a bug; the CLI only prints this outcome."""
    from finharness.core.pool import backends_by_role, run_pool

    made: list[str] = []
    backends = backends_by_role({"model": "fake", "judge": "fake", "user": "fake?name=u"},
                                lambda spec: made.append(spec) or FakeBackend(spec))
    assert made == ["fake", "fake?name=u"] and backends["model"] is backends["judge"]

    def broken(self, samples, records):
        raise RuntimeError("aggregate bug")

    monkeypatch.setattr(TaggedTask, "aggregate", broken)
    seen: list[str] = []
    out = tmp_path / "out"
    pool = run_pool(["cfinbench", "bizbench/demo", "tagged"], [CFinBenchTask(), DemoTask(), TaggedTask("t")],
                    backends, out=out, store_path=out / "store.sqlite", started=0.0,
                    options=RunOptions(data_dir=tmp_path / "no-exam", versions={"v": 1}),
                    progress_for=lambda name: seen.append(name) or None)
    assert seen == ["cfinbench", "bizbench/demo", "tagged"]
    cfin, demo, tagged = pool.tasks
    assert isinstance(cfin.error, ValueError) and not cfin.bug and cfin.result is None
    assert isinstance(tagged.error, RuntimeError) and tagged.bug and pool.bugs == [tagged.error]
    assert demo.out_dir == out / "bizbench_demo" and demo.complete and not pool.complete
    manifest = json.loads((demo.out_dir / "manifest.json").read_text())
    assert manifest["run_key"] == demo.result.results["run_key"] and manifest["versions"] == {"v": 1}
    assert manifest["store"] == str(out / "store.sqlite") and manifest["data_dir"] == str(tmp_path / "no-exam")
    assert not (out / "cfinbench" / "manifest.json").exists() and not (out / "tagged" / "manifest.json").exists()
    assert pool.wall_s > 0


# --- the CLI ----------------------------------------------------------------------------------

class FailsOnChinese(FakeBackend):
    """Fails for good on prompts asking for a CFinBench-style Chinese answer; answers the rest."""

    async def generate(self, request: GenerateRequest):
        if "答案" in request.messages[-1].content and "请回答下面的单项选择题" not in request.messages[-1].content:
            raise BackendError("refused", retryable=False, status=400)
        return await super().generate(request)


@pytest.fixture
def built_backends(monkeypatch):
    """Patch the spec registry: record every backend the CLI builds."""
    import finharness.backends as registry

    built: list[tuple[str, FakeBackend]] = []
    real = registry.from_spec

    def from_spec(spec: str, **options):  # options as the real one takes them (batch=...)
        backend = FailsOnChinese(spec) if spec == "fake?name=picky" else real(spec, **options)
        built.append((spec, backend))
        return backend

    monkeypatch.setattr(registry, "from_spec", from_spec)
    return built


def cli(*args: str):
    from finharness.cli import app

    return CliRunner().invoke(app, ["run", *args, "-q"], catch_exceptions=False)


def test_cli_pools_tasks_into_one_store_and_one_folder_each(tmp_path: Path, built_backends):
    exam = write_exam(tmp_path / "exam")
    out = tmp_path / "out"
    result = cli("demo", "cfinbench", "--model", "fake", "--judge", "fake", "--data-dir", str(exam),
                 "--out", str(out))
    assert result.exit_code == 0, result.output
    assert [spec for spec, _ in built_backends] == ["fake"], "one backend per distinct spec"
    assert (out / "store.sqlite").exists()
    for name, n in (("demo", 12), ("cfinbench", 7)):
        res = json.loads((out / name / "results.json").read_text())
        manifest = json.loads((out / name / "manifest.json").read_text())
        assert res["task"] == name and res["status"] == "complete" and res["counts"]["samples"] == n
        assert manifest["run_key"] == res["run_key"] and manifest["store"] == str(out / "store.sqlite")
        assert len((out / name / "samples.jsonl").read_text().splitlines()) == n
        assert name in result.output
    # the same task alone, on the pool's store: resumed, not recomputed
    alone = cli("demo", "--model", "fake", "--store", str(out / "store.sqlite"), "--out", str(tmp_path / "alone"))
    assert alone.exit_code == 0, alone.output
    res = json.loads((tmp_path / "alone" / "results.json").read_text())
    assert res["counts"]["calls"] == 0 and res["run_key"] == json.loads((out / "demo" / "results.json").read_text())["run_key"]


def test_cli_exits_non_zero_when_a_pooled_task_is_incomplete(tmp_path: Path, built_backends):
    exam = write_exam(tmp_path / "exam")
    out = tmp_path / "out"
    result = cli("demo", "cfinbench", "--model", "fake?name=picky", "--data-dir", str(exam), "--out", str(out))
    assert result.exit_code == 1
    statuses = {name: json.loads((out / name / "results.json").read_text())["status"] for name in ("demo", "cfinbench")}
    assert statuses == {"demo": "complete", "cfinbench": "incomplete"}


def test_cli_refuses_ray_and_a_task_named_twice_with_a_clear_message(tmp_path: Path):
    ray = cli("demo", "cfinbench", "--model", "fake", "--executor", "ray", "--out", str(tmp_path / "o"))
    assert ray.exit_code != 0 and "one task at a time" in ray.output
    twice = cli("demo", "demo", "--model", "fake", "--out", str(tmp_path / "o"))
    assert twice.exit_code != 0 and "give each task once" in twice.output


def test_a_pooled_task_that_hits_a_bug_still_leaves_the_others_manifests(tmp_path: Path, built_backends, monkeypatch):
    exam = write_exam(tmp_path / "exam")
    out = tmp_path / "out"

    def broken(self, samples, records):
        raise RuntimeError("aggregate bug")

    monkeypatch.setattr(CFinBenchTask, "aggregate", broken)
    with pytest.raises(RuntimeError, match="aggregate bug"):  # a bug keeps its traceback
        cli("cfinbench", "demo", "--model", "fake", "--data-dir", str(exam), "--out", str(out))
    manifest = json.loads((out / "demo" / "manifest.json").read_text())
    assert manifest["run_key"] == json.loads((out / "demo" / "results.json").read_text())["run_key"]
    assert not (out / "cfinbench" / "manifest.json").exists()
