"""Scheduling in run_task: long samples start first (with several slots), results keep the task's
order, and enough samples are in flight to fill every slot of the model.

No latencies that must overlap: each fake call is held until as many calls are in flight as the run
should allow (an asyncio.Condition, not a race between sleeps), then until the run has stopped
starting calls (counted in event-loop turns, not seconds), so the calls the run lets overlap do
overlap, and one too many would show, however fast or slow the machine."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from finharness.backends.fake import FakeBackend
from finharness.core.runner import RunOptions, dispatch_order, input_size, run_task
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


QUIET_TURNS = 50
"""Event-loop turns without a new call after which a held call returns. The run starts a call
within a few turns of a free slot (a slot freed, a waiter woken, a commit), so a run that went
this long without starting one is not about to start one more than it should."""

NEVER_S = 10.0
"""Only a run that never lets the expected calls overlap waits this long, once (then fails on its count)."""


class RecordingBackend(FakeBackend):
    """Records the order of calls and how many run at once. Each call is held until `at_once` calls
    (or all those left, at the end) are in flight together, then until no new call has started for
    QUIET_TURNS turns of the event loop: `most_running` is what the run allows, not a race."""

    def __init__(self, at_once: int, total: int = len(LENGTHS), **kw):
        super().__init__(**kw)
        self.at_once, self.total = at_once, total
        self.order: list[str] = []
        self.started = self.running = self.finished = self.most_running = 0
        self.never_overlapped = False
        """The run kept fewer than `at_once` calls in flight for NEVER_S: held calls wait no more."""
        self._changed: asyncio.Condition | None = None

    async def generate(self, request: GenerateRequest):
        self.order.append(request.messages[-1].content.split(":")[0])
        self.started += 1
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await self._hold()
            return await super().generate(request)
        finally:
            self.running -= 1
            self.finished += 1
            await self._notify()

    async def _notify(self) -> None:
        changed = self._condition()
        async with changed:
            changed.notify_all()

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:  # made inside the run's event loop
            self._changed = asyncio.Condition()
        return self._changed

    async def _hold(self) -> None:
        await self._notify()  # this call is in flight now
        changed = self._condition()
        async with changed:
            try:
                await asyncio.wait_for(changed.wait_for(
                    lambda: self.never_overlapped or self.running >= min(self.at_once, self.total - self.finished)),
                    NEVER_S)
            except asyncio.TimeoutError:
                self.never_overlapped = True  # `most_running` tells; the rest of the run goes on unheld
                changed.notify_all()
        seen, quiet = self.started, 0
        while quiet < QUIET_TURNS:  # room for one call too many to start, should the run allow it
            await asyncio.sleep(0)  # one turn of the event loop
            if self.started != seen:
                seen, quiet = self.started, 0
            else:
                quiet += 1


def run(tmp_path: Path, backend, **kw):
    store = RunStore(tmp_path / "s.sqlite")
    try:
        return asyncio.run(run_task(SizedTask(), {"model": backend}, store, RunOptions(**kw), out_dir=tmp_path / "out"))
    finally:
        store.close()


def by_length_descending() -> list[str]:
    # stable: of the two samples of length 7, s2 (earlier in the task) goes first
    return [f"q{i}" for i in sorted(range(len(LENGTHS)), key=lambda i: -LENGTHS[i])]


def test_long_samples_are_dispatched_first_and_results_keep_the_task_order(tmp_path: Path):
    backend = RecordingBackend(at_once=2)
    result = run(tmp_path, backend, concurrency=2)
    assert backend.most_running == 2
    assert backend.order == by_length_descending()
    assert [r.id for r in result.records] == [f"s{i}" for i in range(len(LENGTHS))]
    lines = [json.loads(line) for line in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == [f"s{i}" for i in range(len(LENGTHS))]


def test_with_one_slot_samples_run_in_the_task_order(tmp_path: Path):
    # one slot: the order cannot shorten the run, and the task's order keeps shared prefixes adjacent
    backend = RecordingBackend(at_once=1)
    run(tmp_path, backend, concurrency=1)
    assert backend.order == [f"q{i}" for i in range(len(LENGTHS))]
    assert backend.most_running == 1


def test_every_slot_of_the_model_is_kept_busy(tmp_path: Path):
    backend = RecordingBackend(at_once=len(LENGTHS))  # the fake backend serves 8 calls at once
    result = run(tmp_path, backend)
    assert result.results["status"] == "complete"
    assert backend.most_running == len(LENGTHS) == backend.capabilities.max_concurrency


def test_no_more_calls_than_the_concurrency_asked_for(tmp_path: Path):
    backend = RecordingBackend(at_once=3)
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
