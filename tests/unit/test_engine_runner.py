"""The engine: caching, resume, config drift, failures never scored, prompt budgets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.core.backend import BackendError, Capabilities
from finharness.core.model import CachedModel, PromptBudget, RunCounters
from finharness.core.retry import RetryPolicy
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.task import Models, Task
from finharness.core.types import GenerateParams, GenerateRequest, Message, Sample, Score, messages


class EchoTask(Task):
    """n samples; the prediction is the model's reply; correct when it contains the sample's letter."""

    name = "echo"

    def __init__(self, n: int = 5, prompt: str = "Question {i}", max_tokens: int = 16):
        super().__init__(n=n, prompt=prompt, max_tokens=max_tokens)
        self.n, self.prompt, self.max_tokens = n, prompt, max_tokens

    def load(self, data_dir):
        return [Sample(id=f"s{i}", input=self.prompt.format(i=i), target="A") for i in range(self.n)]

    async def solve(self, sample, models: Models):
        reply = await models.model.chat([Message("user", sample.input)], GenerateParams(max_tokens=self.max_tokens))
        return reply.text

    def score(self, sample, prediction):
        return Score(value=float(sample.target in prediction), extracted=prediction)


def run(task, backend, store, out=None, **kw):
    return asyncio.run(run_task(task, {"model": backend}, store, RunOptions(**kw), out_dir=out))


def test_rerun_makes_no_calls_and_gives_identical_metrics(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend()
    first = run(EchoTask(), backend, store, tmp_path / "a")
    assert backend.calls == 5 and first.results["counts"]["calls"] == 5
    second = run(EchoTask(), backend, store, tmp_path / "b")
    assert backend.calls == 5, "a rerun must not call the model again"
    assert second.results["counts"]["calls"] == 0
    assert second.results["counts"]["cache_hits"] == 5
    assert second.results["metrics"] == first.results["metrics"]
    lines = [json.loads(row) for row in (tmp_path / "b" / "samples.jsonl").read_text().splitlines()]
    assert all(row["cache_hit"] for row in lines)


def test_fresh_run_reuses_stored_calls_even_without_sample_records(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend()
    run(EchoTask(n=3), backend, store)
    # A different task config with overlapping prompts: those calls are cache hits.
    res = run(EchoTask(n=4), backend, store)
    assert backend.calls == 4
    assert res.results["counts"]["cache_hits"] == 3


def test_config_drift_never_reuses_stale_results(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend()
    run(EchoTask(), backend, store)
    run(EchoTask(max_tokens=17), backend, store)  # a generation parameter changed
    assert backend.calls == 10
    run(EchoTask(prompt="Q{i}"), backend, store)  # the prompt template changed
    assert backend.calls == 15
    run(EchoTask(), FakeBackend(name="other-model"), store)  # another model file/identity
    assert store.count_calls() == 20


class FlakyBackend(FakeBackend):
    """Fails the first `fail_times` calls of every request with a retryable error; `dead` requests always fail."""

    def __init__(self, fail_times=1, dead=()):
        super().__init__()
        self.fail_times, self.dead, self.seen = fail_times, set(dead), {}

    async def generate(self, request):
        text = request.messages[-1].content
        self.seen[text] = self.seen.get(text, 0) + 1
        if text in self.dead:
            raise BackendError("HTTP 503", retryable=True, status=503)
        if self.seen[text] <= self.fail_times:
            raise BackendError("HTTP 429", retryable=True, status=429, retry_after=0)
        return await super().generate(request)


def test_retries_are_counted_and_final_failures_never_scored(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FlakyBackend(fail_times=1, dead={"Question 2"})
    policy = RetryPolicy(max_attempts=3, base_delay=0, max_delay=0)
    res = run(EchoTask(), backend, store, tmp_path / "out", retry=policy)
    counts = res.results["counts"]
    assert counts["failed_samples"] == 1 and counts["failures"] == 1
    assert counts["retries"] == 4 + 2  # 4 healthy requests retried once, the dead one twice
    assert res.results["status"] == "incomplete"
    assert res.results["metrics"]["accuracy"]["n"] == 4, "a failed sample must not be scored"
    lines = [json.loads(row) for row in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    failed = [row for row in lines if row["failed"]]
    assert len(failed) == 1 and failed[0]["score"] is None and "503" in failed[0]["failed"]
    # The rerun retries only the failed sample; when the server heals it completes.
    backend.dead.clear()
    res2 = run(EchoTask(), backend, store, tmp_path / "out", retry=policy)
    assert res2.results["status"] == "complete" and res2.results["counts"]["calls"] == 1


def test_prompt_budget_policies(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    small = FakeBackend()
    small.capabilities = Capabilities(generate=True, context_length=60, max_concurrency=1)
    long_prompt = "x" * 300 + " END"  # ~100 fake tokens > 60 - 16
    res = run(EchoTask(n=2, prompt=long_prompt + "{i}"), small, store, budget=PromptBudget(policy="error"))
    assert res.results["counts"]["failed_samples"] == 2 and res.results["counts"]["failures"] == 2
    assert all("prompt-too-long" in r.failed for r in res.records)
    assert small.calls == 0, "a prompt that does not fit is never sent"
    res = run(EchoTask(n=2, prompt=long_prompt + "{i}"), small, store, tmp_path / "o", budget=PromptBudget(policy="left"))
    assert res.results["counts"]["budget_truncations"] == 2
    lines = [json.loads(row) for row in (tmp_path / "o" / "samples.jsonl").read_text().splitlines()]
    assert all(row["truncated"] for row in lines)
    sent = lines[0]["prompt"][0]["content"]
    assert sent.endswith("END0") and len(sent) < len(long_prompt)


def test_duplicate_sample_ids_are_an_error(tmp_path: Path):
    class Dup(EchoTask):
        def load(self, data_dir):
            return [Sample(id="x", input="a"), Sample(id="x", input="b")]

    from finharness.data.errors import DataError
    with pytest.raises(DataError, match="duplicate sample id"):
        run(Dup(), FakeBackend(), RunStore(tmp_path / "s.sqlite"))


def test_sampled_generations_are_keyed_by_sample_index(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend()
    counters = RunCounters()

    async def go():
        h = CachedModel(backend, store, counters)
        p = GenerateParams(temperature=0.7, seed=123)
        r = [await h.generate(GenerateRequest(messages(("user", "hi")), p, sample_index=i)) for i in (0, 1, 0)]
        return r

    asyncio.run(go())
    assert backend.calls == 2 and counters.cache_hits == 1


def test_changed_harness_code_solves_again_from_the_call_cache(tmp_path: Path, monkeypatch):
    """Prompts written in code may change with the harness: finished samples are not resumed across a
    code change (the run key has the source fingerprint), but unchanged requests come from the store."""
    from finharness.core import runner

    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend()
    first = run(EchoTask(n=3), backend, store)
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "another version of the harness")
    second = run(EchoTask(n=3), backend, store)
    assert second.results["run_key"] != first.results["run_key"]
    assert backend.calls == 3, "the same requests are served from the call cache"
    assert second.results["counts"]["cache_hits"] == 3
    assert second.results["metrics"] == first.results["metrics"]

