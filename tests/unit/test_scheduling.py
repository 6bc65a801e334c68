"""Scheduling in run_task: long samples start first (with several slots), results keep the task's
order, and enough samples are in flight to fill every slot of the model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from finharness.backends.fake import FakeBackend
from finharness.core.runner import dispatch_order, input_size, run_task
from finharness.core.store import RunStore
from finharness.core.task import Models, Task
from finharness.core.types import GenerateParams, GenerateRequest, Message, Sample, Score

LENGTHS = [3, 40, 7, 120, 7, 60, 1, 90]
"""Question lengths in the task's order (two equal ones, to check the sort is stable)."""


class SizedTask(Task):
    """One sample per length; the question is that many 'x' after a numbered label."""

    name = "sized"

    def __init__(self, lengths: tuple[int, ...] = tuple(LENGTHS)):
        super().__init__(lengths=lengths)
        self.lengths = lengths

    def load(self, data_dir):
        return [Sample(id=f"s{i}", input={"question": f"q{i}:" + "x" * n, "options": []}, target="A")
                for i, n in enumerate(self.lengths)]

    async def solve(self, sample, models: Models):
        return (await models.model.chat([Message("user", sample.input["question"])],
                                        GenerateParams(max_tokens=8))).text

    def score(self, sample, prediction):
        return Score(value=float("A" in prediction), extracted=prediction)


class RecordingBackend(FakeBackend):
    """Records the order of calls and how many run at once; each call takes a little while."""

    def __init__(self, **kw):
        super().__init__(latency=0.01, **kw)
        self.order: list[str] = []
        self.running = 0
        self.most_running = 0

    async def generate(self, request: GenerateRequest):
        self.order.append(request.messages[-1].content.split(":")[0])
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            return await super().generate(request)
        finally:
            self.running -= 1


def run(tmp_path: Path, backend, **kw):
    store = RunStore(tmp_path / "s.sqlite")
    try:
        return asyncio.run(run_task(SizedTask(), {"model": backend}, store, data_dir=None,
                                    out_dir=tmp_path / "out", **kw))
    finally:
        store.close()


def by_length_descending() -> list[str]:
    # stable: of the two samples of length 7, s2 (earlier in the task) goes first
    return [f"q{i}" for i in sorted(range(len(LENGTHS)), key=lambda i: -LENGTHS[i])]


def test_long_samples_are_dispatched_first_and_results_keep_the_task_order(tmp_path: Path):
    backend = RecordingBackend()
    result = run(tmp_path, backend, concurrency=2)
    assert backend.order == by_length_descending()
    assert [r.id for r in result.records] == [f"s{i}" for i in range(len(LENGTHS))]
    lines = [json.loads(line) for line in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == [f"s{i}" for i in range(len(LENGTHS))]


def test_with_one_slot_samples_run_in_the_task_order(tmp_path: Path):
    # one slot: the order cannot shorten the run, and the task's order keeps shared prefixes adjacent
    backend = RecordingBackend()
    run(tmp_path, backend, concurrency=1)
    assert backend.order == [f"q{i}" for i in range(len(LENGTHS))]
    assert backend.most_running == 1


def test_every_slot_of_the_model_is_kept_busy(tmp_path: Path):
    backend = RecordingBackend()  # the fake backend serves 8 calls at once
    result = run(tmp_path, backend)
    assert result.results["status"] == "complete"
    assert backend.most_running == len(LENGTHS) == backend.capabilities.max_concurrency


def test_no_more_calls_than_the_concurrency_asked_for(tmp_path: Path):
    backend = RecordingBackend()
    run(tmp_path, backend, concurrency=3)
    assert backend.most_running == 3


def test_the_size_estimate_counts_the_text_in_nested_inputs():
    assert input_size("abcd") == 4
    assert input_size({"question": "abc", "options": ["de", "f"], "n": 7, "none": None}) == 6
    assert input_size([{"a": "xy"}, ("z",)]) == 3
    assert input_size(Message("user", "hello")) == len("user") + len("hello")


def test_dispatch_order_is_a_stable_longest_first_sort():
    samples = [Sample(id=str(i), input="x" * n) for i, n in enumerate([2, 5, 2, 9])]
    assert [s.id for s in dispatch_order(samples, slots=4)] == ["3", "1", "0", "2"]
    assert [s.id for s in dispatch_order(samples, slots=1)] == ["0", "1", "2", "3"]
