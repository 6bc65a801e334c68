"""Continuous batching in the llama.cpp engine process, on the real 0.5B model.

Generation with `parallel=N` decodes up to N sequences in one llama.cpp batch. Greedy replies must
equal the single-stream ones: the engine keeps the weights unrepacked and evaluates each prompt in
batches of its own (see backends/llamacpp_engine.py), so at 4 sequences a row rounds as it does alone
(bench/engine_batching.py measures 8 sequences too, where near ties can part).
"""

from __future__ import annotations

import asyncio

import pytest

from finharness.backends import embedded
from finharness.core.model import shared_model_state
from finharness.core.types import GenerateParams, GenerateRequest, messages

QUESTIONS = ("What is a bond?", "Define EBITDA in one sentence.", "什么是市盈率？", "Why do stock prices move?")


def _requests(max_tokens: int = 16, **params) -> list[GenerateRequest]:
    return [GenerateRequest(messages(("user", q)), GenerateParams(max_tokens=max_tokens, **params)) for q in QUESTIONS]


async def _all_at_once(backend, requests):
    return await asyncio.gather(*(backend.generate(r) for r in requests))


def _batched(spec: str, requests) -> tuple[list, dict]:
    """Every request at once on a fresh backend; the replies and the engine's batching counters."""
    backend = embedded.from_spec(spec)
    try:
        return asyncio.run(_all_at_once(backend, requests)), backend.engine_info()
    finally:
        backend.close()


@pytest.fixture(scope="module")
def single_stream():
    backend = embedded.from_spec("embedded?n_ctx=1024&threads=2")
    replies = [asyncio.run(backend.generate(r)) for r in _requests()]
    backend.close()
    return replies


@pytest.mark.model
def test_four_sequences_decode_together_and_match_single_stream(single_stream):
    replies, info = _batched("embedded?n_ctx=1024&threads=2&parallel=4", _requests())
    assert info["slots"] == 4 and info["peak_sequences"] >= 2  # sequences really shared decode steps
    assert info["decode_steps"] < sum(r.completion_tokens for r in replies)  # fewer steps than tokens
    assert [r.text for r in replies] == [r.text for r in single_stream]
    assert [r.prompt_tokens for r in replies] == [r.prompt_tokens for r in single_stream]
    assert all(r.finish_reason in ("stop", "length") for r in replies)


@pytest.mark.model
def test_more_requests_than_slots_queue_for_a_free_slot(single_stream):
    replies, info = _batched("embedded?n_ctx=1024&threads=2&parallel=2", _requests())
    assert info["peak_sequences"] == 2
    assert [r.text for r in replies] == [r.text for r in single_stream]


@pytest.mark.model
def test_seeded_sampling_is_reproducible_and_independent_of_batch_neighbours():
    sampled = _requests(max_tokens=12, temperature=1.0, seed=7)
    alone = embedded.from_spec("embedded?n_ctx=1024&threads=2")
    batched = embedded.from_spec("embedded?n_ctx=1024&threads=2&parallel=4")
    try:
        first = [asyncio.run(alone.generate(r)) for r in sampled]
        again = asyncio.run(_all_at_once(batched, sampled))
        other_seed = asyncio.run(alone.generate(_requests(max_tokens=12, temperature=1.0, seed=8)[0]))
    finally:
        alone.close()
        batched.close()
    assert [r.text for r in again] == [r.text for r in first]  # the seed is the request's, not the batch's
    assert other_seed.text != first[0].text  # and it matters


@pytest.mark.model
def test_the_run_concurrency_sizes_the_engine_when_the_spec_does_not():
    backend = embedded.from_spec("embedded?n_ctx=512&threads=2")
    fixed = embedded.from_spec("embedded?n_ctx=512&threads=2&parallel=2")
    try:
        assert backend.capabilities.max_concurrency == 1
        shared_model_state(backend, concurrency=6)  # what a run with --concurrency 6 does first
        assert backend.capabilities.max_concurrency == 6 and backend.engine_config().slots == 6
        shared_model_state(fixed, concurrency=6)  # ?parallel= wins: the run keeps 6 in flight, 2 decode
        assert fixed.engine_config().slots == 2
    finally:
        backend.close()
        fixed.close()


@pytest.mark.model
def test_logprobs_of_batched_sequences_are_their_own(single_stream):
    replies, _ = _batched("embedded?n_ctx=1024&threads=2&parallel=4", _requests(top_logprobs=2))
    for reply, alone in zip(replies, single_stream):
        assert reply.text == alone.text
        assert len(reply.logprobs) == reply.completion_tokens
        assert all(t.top[0][0] == t.token and t.top[0][1] >= t.top[1][1] for t in reply.logprobs)
