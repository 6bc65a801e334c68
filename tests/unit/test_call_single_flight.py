"""One call in flight per content key: the same request sent at once by two samples (or rows) of one process is made
once; the others wait for it and read its answer from the store (a cache hit). A call that failed is made again by
a waiting caller (a failure is not an answer)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from finharness.backends.fake import FakeBackend
from finharness.core.backend import CallFailed
from finharness.core.model import CachedModel, RunCounters
from finharness.core.retry import RetryPolicy
from finharness.core.store import RunStore
from finharness.core.types import GenerateParams, GenerateRequest, Message

REQUEST = GenerateRequest((Message("user", "What is 2 + 2?"),), GenerateParams(max_tokens=8))
OTHER = GenerateRequest((Message("user", "What is 3 + 3?"),), GenerateParams(max_tokens=8))


async def at_once(model: CachedModel, requests: list[GenerateRequest]) -> list:
    handles = [model.bind([]) for _ in requests]  # one handle per sample, sharing the backend's state
    return await asyncio.gather(*(h.generate(r) for h, r in zip(handles, requests)), return_exceptions=True)


def test_the_same_request_sent_at_once_is_made_once(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend(latency=0.05)
    counters = RunCounters()
    model = CachedModel(backend, store, counters, concurrency=4)
    replies = asyncio.run(at_once(model, [REQUEST, REQUEST, OTHER, REQUEST]))
    assert backend.calls == 2 and counters.calls == 2 and counters.cache_hits == 2
    assert replies[0].text == replies[1].text == replies[3].text
    assert len(list(store.iter_calls())) == 2
    store.close()


def test_a_waiting_caller_makes_the_call_itself_when_the_first_failed(tmp_path: Path):
    store = RunStore(tmp_path / "s.sqlite")
    backend = FakeBackend(latency=0.05, script=[{"match": "2 + 2", "fail": "bad request", "times": 1},
                                                {"match": "2 + 2", "reply": "4"}])
    counters = RunCounters()
    model = CachedModel(backend, store, counters, concurrency=4, retry=RetryPolicy(max_attempts=1))
    first, second = asyncio.run(at_once(model, [REQUEST, REQUEST]))
    assert isinstance(first, CallFailed) and second.text == "4"
    assert backend.calls == 2 and counters.calls == 1 and counters.cache_hits == 0
    store.close()
