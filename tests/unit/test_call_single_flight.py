"""One call in flight per content key: the same request sent at once by two samples (or rows) of one process is made
once; the others wait for it and read its answer from the store (a cache hit). A call that failed is made again by
a waiting caller (a failure is not an answer). Across processes sharing one store, a claim (core/store.py CallClaims)
does the same."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
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


# -- across processes: the claims on a shared store ----------------------------------------------------------------

CLAIMER = """
import sys, time
from finharness.core.store import RunStore
store = RunStore(sys.argv[1])
assert store.claim_call("k")
print("claimed", flush=True)
time.sleep(60)
"""


def test_a_claim_held_by_one_store_is_refused_to_another_until_the_call_is_committed(tmp_path: Path):
    first, second = RunStore(tmp_path / "s.sqlite"), RunStore(tmp_path / "s.sqlite")  # two open descriptions
    assert first.claim_call("k") and first.claim_call("k")
    assert not second.claim_call("k") and second.claim_call("other")
    first.put_call("k", "fake", "generate", {"q": 1}, {"text": "4"}, 0.1)  # no event loop: committed at once
    assert second.claim_call("k") and not first.claim_call("k")
    second.release_call("k")
    assert first.claim_call("k")
    first.release_call("k")  # a failed call's claim goes without a row
    assert second.claim_call("k")
    first.close()
    second.close()


def test_a_killed_claimer_leaves_no_claim(tmp_path: Path):
    db = tmp_path / "s.sqlite"
    RunStore(db).close()
    proc = subprocess.Popen([sys.executable, "-c", CLAIMER, str(db)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert proc.stdout.readline().strip() == "claimed"
        store = RunStore(db)
        assert not store.claim_call("k")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert store.claim_call("k")
        store.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_call_another_store_is_making_is_awaited_not_made_again(tmp_path: Path):
    """Two handles on one store file through two RunStores (as two processes have): the second waits for the first's
    answer and serves it from the store."""
    first_store, second_store = RunStore(tmp_path / "s.sqlite"), RunStore(tmp_path / "s.sqlite")
    first_backend, second_backend = FakeBackend(latency=0.3), FakeBackend(latency=0.3)
    first = CachedModel(first_backend, first_store, RunCounters())
    second_counters = RunCounters()
    second = CachedModel(second_backend, second_store, second_counters)

    async def both() -> list:
        one = asyncio.create_task(first.generate(REQUEST))
        await asyncio.sleep(0.05)  # the first has claimed the call and is making it
        return [await one, await second.generate(REQUEST)]

    one, two = asyncio.run(both())
    assert one.text == two.text
    assert first_backend.calls == 1 and second_backend.calls == 0 and second_counters.cache_hits == 1
    first_store.close()
    second_store.close()
