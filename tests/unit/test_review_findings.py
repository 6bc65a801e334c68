"""Findings of the engine review (group commit, limiter, pooled runs), each pinned by a test."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.core.model import model_state
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import GenerateResponse

from .asking_task import AskingTask

UNSTORABLE = "\ud83d"
"""Half a surrogate pair: a str Python holds (a JSON reply may carry the escape "\\ud83d") that SQLite
cannot store (UTF-8 has no encoding for it)."""


def committed_keys(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT key FROM calls")}


def test_a_row_that_can_never_be_stored_does_not_wedge_the_queue(tmp_path: Path):
    """One unstorable row fails its own group commit, but the rows queued with it and every later
    write still commit, and the store still closes (before: every later commit failed the same way,
    so one bad reply failed every sample of every pooled task, and close() raised)."""
    store = RunStore(tmp_path / "s.sqlite")

    async def scenario() -> None:
        store.put_call("good-1", "fake", "generate", {"q": 1}, {"text": "fine"}, 0.01)
        store.put_call("bad", "fake", "generate", {"q": 2}, {"text": UNSTORABLE}, 0.01)
        with pytest.raises(UnicodeEncodeError):
            await store.synced()
        store.put_call("good-2", "fake", "generate", {"q": 3}, {"text": "fine too"}, 0.01)
        await store.synced()
        assert store.get_call("bad") is None, "a call that was not stored is not served either"

    asyncio.run(scenario())
    assert committed_keys(store.path) == {"good-1", "good-2"}
    store.close()


class HalfSurrogateBackend(FakeBackend):
    """Answers sample q0 with an unstorable reply, the others normally."""

    async def generate(self, request):
        response = await super().generate(request)
        if request.messages[-1].content == "q0":
            return GenerateResponse(text="A" + UNSTORABLE, finish_reason="stop", prompt_tokens=1,
                                    completion_tokens=1)
        return response


def test_an_unstorable_reply_fails_its_sample_and_the_run_goes_on(tmp_path: Path):
    """Issue 26 item 5: a reply holding half a surrogate pair fails that call with a reason naming it; every other
    sample is solved and stored, the run ends incomplete, and a rerun asks only that call again."""
    store = RunStore(tmp_path / "s.sqlite")
    first = asyncio.run(run_task(AskingTask(), {"model": HalfSurrogateBackend()}, store, RunOptions(concurrency=1)))
    assert first.results["status"] == "incomplete"
    failed = [r for r in first.records if r.failed]
    assert [r.id for r in failed] == ["s0"] and "not valid Unicode" in failed[0].failed and failed[0].transient
    assert first.results["counts"]["failure_kinds"] == {"bad_reply": 1}
    assert first.results["counts"]["calls"] == len(first.records) - 1
    rerun = asyncio.run(run_task(AskingTask(), {"model": FakeBackend()}, store, RunOptions(concurrency=1)))
    assert rerun.results["status"] == "complete" and rerun.results["counts"]["calls"] == 1
    store.close()


# -- checked and sound: pinned so it stays so ---------------------------------------------------------

class BlockingBackend(FakeBackend):
    """Every call waits until the test releases it."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.release = asyncio.Event()
        self.started = 0

    async def generate(self, request):
        self.started += 1
        await self.release.wait()
        return await super().generate(request)


def test_a_cancelled_run_gives_back_every_limiter_slot(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = BlockingBackend()
    shared: dict = {}

    async def scenario() -> None:
        run = asyncio.create_task(run_task(AskingTask(n=8), {"model": backend}, store, RunOptions(concurrency=2), out_dir=None, shared_handles=shared))
        while backend.started < 2:  # both slots taken, the other samples waiting for one
            await asyncio.sleep(0)
        limiter = model_state(shared, backend, 2)["limiter"]
        assert limiter.in_use == 2 and limiter._waiters
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert limiter.in_use == 0 and not limiter._waiters
        assert model_state(shared, backend, 2)["counters"] == [], "a finished run is no longer counted"

    asyncio.run(scenario())
    store.close()
