"""Batch mode (backends/batch.py) against the batch stand-in (tests/servers/batch_server.py), in this process: a wave
sent as one batch and stored call by call, equal to live replies; per-call failures, expiry, cancellation, size
limits; a batch followed again from the store by a new backend (the process that made it gone)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from finharness.backends import from_spec, open_model
from finharness.backends.batch import BatchBackend, active_note, batch_wanted, request_from_json, split_batch_spec
from finharness.core.backend import CallFailed, SpecError
from finharness.core.hashing import canonical_json
from finharness.core.model import RunCounters
from finharness.core.retry import RetryPolicy
from finharness.core.spending import Price, Spending
from finharness.core.store import RunStore
from finharness.core.types import GenerateParams, GenerateRequest, Message, ToolSpec, to_jsonable
from tests.servers.batch_server import batch_server

FAST = "batch=1&batch_poll=0.01&batch_gather=0.05"
SCHEMES = ("openai", "anthropic")


def questions(n: int, prefix: str = "question") -> list[list[Message]]:
    return [[Message("system", "Answer with one letter."), Message("user", f"{prefix} {i}")] for i in range(n)]


async def ask_all(handle, prompts, max_tokens: int = 8):
    return await asyncio.gather(*(handle.chat(p, GenerateParams(max_tokens=max_tokens)) for p in prompts),
                                return_exceptions=True)


def batched(server, scheme: str, options: str = FAST) -> BatchBackend:
    backend = from_spec(f"{scheme}:m@{server.base_url}?{options}")
    assert isinstance(backend, BatchBackend)
    return backend


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_wave_is_one_batch_stored_call_by_call_as_live_calls_are(tmp_path: Path, scheme: str):
    prompts = questions(6)
    with batch_server() as server:
        backend = batched(server, scheme)
        handle = open_model(backend, tmp_path / "batch.sqlite")
        replies = asyncio.run(ask_all(handle, prompts))
        live = open_model(from_spec(f"{scheme}:m@{server.base_url}"), tmp_path / "live.sqlite")
        live_replies = asyncio.run(ask_all(live, prompts))
    assert backend.stats.batches == 1 and backend.stats.waves == [6] and backend.stats.submitted == 6
    assert sorted(server.submitted.values()) == [1] * 6 and server.live_calls == 6
    assert [to_jsonable(r) for r in replies] == [to_jsonable(r) for r in live_replies]
    assert handle.counters.billed["model/batch"]["calls"] == 6 and live.counters.billed["model/live"]["calls"] == 6
    with RunStore(tmp_path / "batch.sqlite") as a, RunStore(tmp_path / "live.sqlite") as b:
        stored = {c["key"]: c["response"] for c in a.iter_calls()}
        assert stored == {c["key"]: c["response"] for c in b.iter_calls()}  # same keys, same rows
        (row,) = a.batches()
        assert row["state"] == "collected" and row["requests"] == 6 and row["batch_id"] in server.jobs
        assert (row["input_file"] is not None) == (scheme == "openai")
        assert {k for k, _, _ in a.batch_calls(row["id"])} == set(stored)


def test_a_batch_is_priced_at_the_batch_share(tmp_path: Path):
    spending = Spending(prices={"m": Price(2.0, 8.0, batch=0.5)})
    with batch_server() as server:
        handle = open_model(batched(server, "openai"), tmp_path / "s.sqlite", spending=spending)
        asyncio.run(ask_all(handle, questions(2)))
        live = open_model(from_spec(f"openai:m@{server.base_url}"), tmp_path / "l.sqlite",
                          spending=Spending(prices={"m": Price(2.0, 8.0, batch=0.5)}))
        asyncio.run(ask_all(live, questions(2)))
    assert handle.counters.cost_usd == pytest.approx(live.counters.cost_usd / 2)
    assert handle.counters.billed["model/batch"]["cost_usd"] == pytest.approx(handle.counters.cost_usd)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cached_tokens_are_counted_from_the_provider(tmp_path: Path, scheme: str):
    history = [Message("system", "You are a careful analyst. " * 300), Message("user", "first question " * 10),
               Message("assistant", "an answer " * 10), Message("user", "and the second?")]
    with batch_server(cache_min=8) as server:
        handle = open_model(batched(server, scheme), tmp_path / "s.sqlite")
        (reply,) = asyncio.run(ask_all(handle, [history]))
    assert reply.cached_tokens > 0 and reply.cached_tokens < reply.prompt_tokens
    assert (reply.cache_write_tokens > 0) == (scheme == "anthropic")  # OpenAI charges no cache writes
    assert handle.counters.cached_tokens == reply.cached_tokens
    assert handle.counters.billed["model/batch"]["cached_tokens"] == reply.cached_tokens
    with RunStore(tmp_path / "s.sqlite") as store:
        (call,) = list(store.iter_calls())
    assert call["response"]["cached_tokens"] == reply.cached_tokens


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_failed_call_fails_alone_and_a_transient_one_goes_in_the_next_wave(tmp_path: Path, scheme: str):
    def fail(body: dict) -> tuple[int, str] | None:
        text = json.dumps(body)
        return (400, "bad request") if "question 1\"" in text else (500, "overloaded") if "question 2\"" in text \
            else None

    with batch_server() as server:
        server.fail, server.fail_once = fail, True
        backend = batched(server, scheme)
        handle = open_model(backend, tmp_path / "s.sqlite", retry=RetryPolicy(max_attempts=3, base_delay=0.01))
        replies = asyncio.run(ask_all(handle, questions(4)))
    assert isinstance(replies[1], CallFailed) and "bad request" in str(replies[1])  # a 400 is not retried
    assert all(isinstance(r, CallFailed) is (i == 1) for i, r in enumerate(replies))  # the 500 was retried: answered
    assert backend.stats.batches == 2 and backend.stats.waves == [4, 1]
    assert server.submitted.most_common(1)[0][1] == 2 and sum(server.submitted.values()) == 5  # only the 500 again


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_expired_batch_sends_again_only_what_it_did_not_process(tmp_path: Path, scheme: str):
    with batch_server(seed=3) as server:
        server.expire_after_polls, server.expire_batches = 2, 1  # half processed by then: a poll processes half
        backend = batched(server, scheme)
        handle = open_model(backend, tmp_path / "s.sqlite")
        replies = asyncio.run(ask_all(handle, questions(8)))
    assert not any(isinstance(r, Exception) for r in replies)
    first = next(iter(server.jobs.values()))
    processed = set(first.done)
    assert 0 < len(processed) < 8
    assert backend.stats.resent == 8 - len(processed)
    twice = {cid for cid, n in server.submitted.items() if n == 2}
    assert twice and not twice & processed and max(server.submitted.values()) <= 2


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_cancelled_batch_sends_again_what_it_did_not_process(tmp_path: Path, scheme: str):
    async def cancel_then_wait(handle, backend, server):
        calls = asyncio.ensure_future(ask_all(handle, questions(4)))
        while not server.jobs:
            await asyncio.sleep(0.01)
        job = next(iter(server.jobs.values()))
        await backend.api.cancel(job.id)
        return await calls

    with batch_server() as server:
        server.hold.set()  # nothing is processed: the cancel leaves all four undone
        backend = batched(server, scheme)
        handle = open_model(backend, tmp_path / "s.sqlite")

        async def release_later():
            await asyncio.sleep(0.5)
            server.hold.clear()

        async def both():
            asyncio.ensure_future(release_later())
            return await cancel_then_wait(handle, backend, server)

        replies = asyncio.run(both())
    assert not any(isinstance(r, Exception) for r in replies)
    assert backend.stats.resent == 4 and backend.stats.batches == 2


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_size_limits_split_a_wave(tmp_path: Path, scheme: str):
    with batch_server(max_requests=2) as server:
        backend = batched(server, scheme, FAST + "&batch_max_requests=2")
        handle = open_model(backend, tmp_path / "s.sqlite")
        replies = asyncio.run(ask_all(handle, questions(5)))
    assert not any(isinstance(r, Exception) for r in replies)
    assert backend.stats.waves == [5] and backend.stats.batches == 3
    assert sorted(len(job.requests) for job in server.jobs.values()) == [1, 2, 2]


def test_a_batch_the_provider_refuses_whole_fails_its_calls(tmp_path: Path):
    with batch_server(max_requests=2) as server:  # the harness does not know this server's lower limit
        handle = open_model(batched(server, "openai"), tmp_path / "s.sqlite")
        replies = asyncio.run(ask_all(handle, questions(3)))
    assert all(isinstance(r, CallFailed) and "refused" in str(r) for r in replies)
    with RunStore(tmp_path / "s.sqlite") as store:
        assert [row["state"] for row in store.batches()] == ["failed"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_unreadable_results_line_fails_the_collection_and_a_later_run_collects_without_resending(
        tmp_path: Path, scheme: str):
    prompts = questions(3)
    with batch_server() as server:
        server.garble_results = True
        first = open_model(batched(server, scheme), tmp_path / "s.sqlite")
        replies = asyncio.run(ask_all(first, prompts))
        assert all(isinstance(r, Exception) and "line 1 is not a JSON object" in str(r) for r in replies), replies
        with RunStore(tmp_path / "s.sqlite") as store:
            assert [row["state"] for row in store.batches()] == ["ended"]  # not collected: to be read again
        server.garble_results = False
        again = asyncio.run(ask_all(open_model(batched(server, scheme), tmp_path / "s.sqlite"), prompts))
    assert not any(isinstance(r, Exception) for r in again)
    assert len(server.jobs) == 1 and sorted(server.submitted.values()) == [1] * 3  # nothing sent (or billed) twice


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_new_process_follows_the_batch_an_earlier_one_left(tmp_path: Path, scheme: str):
    """The first process stops while its batch is in progress (its loop ends); a second one, with a new backend and
    the same store, gets every answer from that batch: nothing is sent twice."""
    prompts = questions(5)

    async def stop_when_submitted(handle, server):
        calls = asyncio.ensure_future(ask_all(handle, prompts))
        while not server.reached["polled"].is_set():
            await asyncio.sleep(0.01)
        calls.cancel()

    with batch_server() as server:
        server.hold.set()
        first = open_model(batched(server, scheme), tmp_path / "s.sqlite")
        asyncio.run(stop_when_submitted(first, server))
        server.hold.clear()
        backend = batched(server, scheme)
        second = open_model(backend, tmp_path / "s.sqlite")
        replies = asyncio.run(ask_all(second, prompts))
    assert not any(isinstance(r, Exception) for r in replies)
    assert backend.stats.batches == 0 and backend.stats.resumed == 1 and len(server.jobs) == 1
    assert sorted(server.submitted.values()) == [1] * 5


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_batch_whose_create_reply_was_lost_is_found_at_the_provider(tmp_path: Path, scheme: str):
    """Stopped while the create request was answered (the row says `creating`): the next process finds the batch at
    the provider (OpenAI: its metadata; Anthropic: the one batch of its size created since) instead of sending the
    calls again, and says so on a stop."""
    prompts = questions(3)

    async def stop_when_created(handle, server):
        calls = asyncio.ensure_future(ask_all(handle, prompts))
        while not server.reached["created"].is_set():
            await asyncio.sleep(0.01)
        calls.cancel()

    with batch_server() as server:
        server.pause_create = True
        first = open_model(batched(server, scheme), tmp_path / "s.sqlite")
        asyncio.run(stop_when_created(first, server))
        with RunStore(tmp_path / "s.sqlite") as store:
            assert [row["state"] for row in store.batches()] == ["creating"]
        note = active_note(tmp_path / "s.sqlite", tmp_path)
        assert "1 batch(es) (3 request(s))" in note and f"finharness batch cancel {tmp_path}" in note
        server.pause_create = False
        server.release.set()
        backend = batched(server, scheme)
        replies = asyncio.run(ask_all(open_model(backend, tmp_path / "s.sqlite"), prompts))
    assert not any(isinstance(r, Exception) for r in replies)
    assert len(server.jobs) == 1 and sorted(server.submitted.values()) == [1] * 3 and backend.stats.batches == 0


def test_a_batch_never_created_is_abandoned_and_its_calls_sent_once(tmp_path: Path):
    with RunStore(tmp_path / "s.sqlite") as store, batch_server() as server:
        backend = batched(server, "openai")
        handle = open_model(backend, store)
        request = GenerateRequest(tuple(questions(1)[0]), GenerateParams(max_tokens=8))
        key, text = backend.call_key(request)
        store.put_batch({"id": "stale", "backend": backend.spec, "identity": backend.identity_hash,
                         "provider": "openai", "state": "preparing", "requests": 1, "bytes": 10},
                        [(key, "generate", text)])
        (reply,) = asyncio.run(ask_all(handle, questions(1)))
        assert store.batch("stale")["state"] == "abandoned"
    assert not isinstance(reply, Exception) and sum(server.submitted.values()) == 1


def test_the_key_a_batch_records_is_the_model_handles_key(tmp_path: Path):
    with batch_server() as server:
        backend = batched(server, "openai")
        handle = open_model(backend, tmp_path / "s.sqlite", counters=RunCounters())
        request = GenerateRequest((Message("user", "hi"),), GenerateParams(max_tokens=4, stop=("\n",)),
                                  tools=(ToolSpec("calc", "adds", {"type": "object"}),))
        assert backend.call_key(request)[0] == handle.call_key("generate", request)[0]
        again = request_from_json(json.loads(backend.call_key(request)[1]))
        assert canonical_json(to_jsonable(again)) == backend.call_key(request)[1]


def test_spec_options():
    assert split_batch_spec("openai:m@http://h/v1?concurrency=4&batch=1") == (
        "openai:m@http://h/v1?concurrency=4", split_batch_spec("openai:m?batch=1")[1])
    assert split_batch_spec("openai:m?batch=0") == ("openai:m", None)
    assert split_batch_spec("openai:m") == ("openai:m", None)
    live, settings = split_batch_spec("anthropic:c?batch_poll=5&batch_gather=0.5&batch_max_requests=10")
    assert live == "anthropic:c" and (settings.poll_s, settings.gather_s, settings.max_requests) == (5, 0.5, 10)
    with pytest.raises(SpecError, match="batch_poll"):
        split_batch_spec("openai:m?batch=1&batch_poll=-1")
    with pytest.raises(SpecError, match="batch mode needs an openai: or anthropic:"):
        from_spec("fake?batch=1")
    assert not getattr(from_spec("fake", batch=True), "batched", False)  # --batch: the rest run live
    assert batch_wanted(("gpt-4o",), "openai:gpt-4o@http://h/v1") and not batch_wanted(("gpt-4o",), "openai:o1")


def test_a_request_two_samples_ask_at_once_is_sent_and_billed_once(tmp_path: Path):
    prompts = questions(3) + questions(2)  # questions 0 and 1 asked twice
    with batch_server() as server:
        backend = batched(server, "openai")
        handle = open_model(backend, tmp_path / "s.sqlite")
        replies = asyncio.run(ask_all(handle, prompts))
    assert [r.text for r in replies[3:]] == [r.text for r in replies[:2]]
    assert sum(server.submitted.values()) == 3 and backend.stats.waves == [3]
    assert handle.counters.calls == 3 and handle.counters.cache_hits == 2
    assert handle.counters.billed["model/batch"]["calls"] == 3
