"""The test suite's one fake model (backends/fake.py) and its handles (tests/fakes.py): replies in turn, from a
function or a script, scripted failures (for good, or flaky), log-likelihoods and per-token logprobs from
functions, what it was sent, and an identity (call-cache key) that is unchanged for what older fakes could say."""

from __future__ import annotations

import asyncio

import pytest

from finharness.backends.fake import FakeBackend, from_spec
from finharness.core.backend import BackendError, CallFailed
from finharness.core.types import GenerateParams, GenerateRequest, LoglikelihoodRequest, Message, TokenLogprob
from tests.fakes import fake_models


def ask(fake: FakeBackend, text: str, top_logprobs: int = 0):
    request = GenerateRequest((Message("user", text),), GenerateParams(max_tokens=64, top_logprobs=top_logprobs))
    return asyncio.run(fake.generate(request))


def test_replies_come_in_turn_then_the_script_then_the_reply_function():
    fake = FakeBackend(replies=["first", "second"], script=[{"match": "label", "reply": "Candidate 2"}],
                       reply=lambda user: f"echo {user}")
    assert [ask(fake, q).text for q in ("a", "label only", "label only", "b")] == [
        "first", "second", "Candidate 2", "echo b"]
    assert [r.messages[-1].content for r in fake.requests] == ["a", "label only", "label only", "b"]


def test_a_script_rule_fails_for_good_or_only_its_first_times():
    fake = FakeBackend(script=[{"match": "dead", "fail": "HTTP 503", "status": 503},
                               {"match": "flaky", "fail": "HTTP 429", "retryable": True, "times": 1},
                               {"match": "flaky", "reply": "recovered"}], reply="fine")
    with pytest.raises(BackendError) as dead:
        ask(fake, "dead")
    assert not dead.value.retryable and dead.value.status == 503
    with pytest.raises(BackendError) as flaky:
        ask(fake, "flaky")
    assert flaky.value.retryable
    assert ask(fake, "flaky").text == "recovered" and ask(fake, "other").text == "fine"


def test_logprobs_and_loglikelihoods_come_from_functions():
    tokens = (TokenLogprob("Answer", -0.1), TokenLogprob(": B", -0.2, ((": B", -0.2), (": A", -1.9))))
    fake = FakeBackend(reply="Answer: B", logprobs=lambda text: tokens,
                       logprob=lambda context, continuation: -len(continuation))
    assert fake.capabilities.next_token_logprobs
    assert ask(fake, "q", top_logprobs=5).logprobs == tokens
    assert ask(fake, "q").logprobs is None  # only when the request asks
    scored = asyncio.run(fake.loglikelihood(LoglikelihoodRequest("Q:", (" A", " BBB"))))
    assert scored.logprobs == (-2.0, -4.0) and scored.is_greedy == (True, False)


def test_the_identity_of_what_a_spec_can_say_is_unchanged():
    assert from_spec("fake?reply=A&name=x").identity() == {"backend": "fake", "name": "x", "reply": "A",
                                                           "script": []}
    with_function = FakeBackend(reply=str.upper).identity()
    assert with_function["reply"] == "function:str.upper"
    assert FakeBackend(replies=["a"]).identity()["replies"] == ["a"]
    assert FakeBackend(capabilities={"loglikelihood": False}).capabilities.loglikelihood is False


def test_fake_models_put_each_role_behind_a_real_handle(tmp_path):
    judge = FakeBackend(name="judge", replies=["[[1]]"])
    models = fake_models(tmp_path, model="Answer: A", judge=judge)
    reply = asyncio.run(models.model.chat([Message("user", "question")]))
    verdict = asyncio.run(models["judge"].chat([Message("user", "which is better?")]))
    assert (reply.text, verdict.text) == ("Answer: A", "[[1]]")
    assert [t["role"] for t in models.model.trace] == ["model"] and judge.requests[0].messages[-1].content == \
        "which is better?"
    again = fake_models(tmp_path, model="Answer: A")  # the same store: served from it, not asked again
    asyncio.run(again.model.chat([Message("user", "question")]))
    assert again.model.backend.calls == 0 and again.model.trace[0]["cache_hit"]


def test_a_failure_through_the_handle_is_a_call_failed(tmp_path):
    models = fake_models(tmp_path, model=FakeBackend(script=[{"match": "", "fail": "refused", "status": 400}]))
    with pytest.raises(CallFailed, match="refused"):
        asyncio.run(models.model.chat([Message("user", "anything")]))
