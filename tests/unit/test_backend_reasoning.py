"""Reasoning models through the remote backends, against local stubs that behave as each provider does
(tests/servers/provider_stubs.py), and log-likelihoods over /v1/completions against a weightless model
(tests/servers/completions_stub.py; the embedded-engine comparison is tests/unit/test_ll_over_http.py)."""

from __future__ import annotations

import asyncio

import pytest

from finharness.backends import from_spec
from finharness.backends.http_common import StatusError
from finharness.backends.openai_compat import refused_parameter
from finharness.backends.vllm import split_continuation_tokens
from finharness.core.backend import SpecError
from finharness.core.types import (
    DEFAULT_THINKING_TOKENS,
    GenerateParams,
    GenerateRequest,
    LoglikelihoodRequest,
    messages,
)
from tests.servers.completions_stub import ToyModel, completions_server
from tests.servers.fault_server import fault_server
from tests.servers.provider_stubs import UNSUPPORTED_MAX_TOKENS, provider_server, unsupported_value


def ask(text: str = "Which is a liability? A. cash B. debt", **params) -> GenerateRequest:
    return GenerateRequest(messages(("user", text)), GenerateParams(**{"max_tokens": 16, **params}))


def sent(body: dict) -> dict:
    return {k: v for k, v in body.items() if k not in ("model", "messages")}


# --- openai: a hosted reasoning model ---------------------------------------------------------------------

def test_openai_learns_the_accepted_form_once_and_keeps_it():
    with provider_server("openai-reasoning") as server:
        backend = from_spec(f"openai:o-stub@{server.base_url}")
        first = asyncio.run(backend.generate(ask()))
        second = asyncio.run(backend.generate(ask("another question")))
    budget = 16 + DEFAULT_THINKING_TOKENS
    assert [sent(b) for b in server.bodies] == [
        {"max_tokens": 16, "temperature": 0.0, "top_p": 1.0},                 # refused: max_tokens
        {"max_completion_tokens": budget, "temperature": 0.0, "top_p": 1.0},  # refused: temperature 0
        {"max_completion_tokens": budget, "top_p": 1.0},                      # answered
        {"max_completion_tokens": budget, "top_p": 1.0}]                      # remembered: no refusal
    assert server.refusals == [UNSUPPORTED_MAX_TOKENS["error"]["message"],
                               unsupported_value("temperature", 0.0)["error"]["message"]]
    assert server.refusals[1] == ("Unsupported value: 'temperature' does not support 0 with this model. "
                                  "Only the default (1) value is supported."), "the API's own words"
    assert first.text == "答案：" + first.text[-1] and first.reasoning is None and first.reasoning_tokens == 40
    assert first.adaptations == second.adaptations
    limit, temperature = first.adaptations
    assert (limit.parameter, limit.asked, limit.sent, limit.learned) == (
        "max_tokens", 16, f"max_completion_tokens={budget}", True)
    assert "Use 'max_completion_tokens' instead" in limit.reason and "thinking budget" in limit.reason
    assert (temperature.parameter, temperature.sent, temperature.learned, temperature.greedy_lost) == (
        "temperature", None, True, True)
    assert "request_form" not in backend.identity(), "what was learned at run time is not in the identity"


def test_requests_in_flight_when_the_refusal_comes_are_each_retried_once():
    with provider_server("openai-reasoning") as server:
        backend = from_spec(f"openai:o-stub@{server.base_url}?concurrency=4")

        async def four():
            return await asyncio.gather(*(backend.generate(ask(f"question {i}")) for i in range(4)))

        replies = asyncio.run(four())
    assert all(r.text.startswith("答案：") for r in replies)
    answered = [b for b in server.bodies if "max_tokens" not in b and "temperature" not in b]
    assert len(answered) == 4 and len(server.bodies) <= 4 * 3, "at most one retry per refused parameter"
    assert set(backend.form.learned) == {"max_completion_tokens", "temperature"}


def test_the_spec_states_the_form_up_front_and_it_enters_the_identity():
    with provider_server("openai-reasoning") as server:
        spec = f"openai:o-stub@{server.base_url}?max_completion_tokens=1&omit=temperature&reasoning_effort=low"
        backend = from_spec(spec)
        reply = asyncio.run(backend.generate(ask(thinking_tokens=100)))
        plain = from_spec(f"openai:o-stub@{server.base_url}")
    assert server.refusals == []
    assert [sent(b) for b in server.bodies] == [{"max_completion_tokens": 116, "top_p": 1.0, "reasoning_effort": "low"}]
    assert {a.parameter: a.learned for a in reply.adaptations} == {"max_tokens": False, "temperature": False}
    assert "the task's" in reply.adaptations[0].reason, "the request's own thinking budget was used"
    assert backend.identity()["request_form"] == {"reasoning_effort": "low", "token_limit": "max_completion_tokens",
                                                  "omit": ["temperature"]}
    assert set(plain.identity()) == {"api", "model", "base_url", "server_model"}, "a plain spec's identity as before"


def test_the_spec_thinking_budget_beats_the_tasks():
    with provider_server("reasoning-field") as server:
        backend = from_spec(f"openai:q@{server.base_url}?thinking_budget=64")
        asyncio.run(backend.generate(ask(thinking_tokens=999)))
    assert server.bodies[0]["max_tokens"] == 16 + 64


@pytest.mark.parametrize("spec_tail, complaint", [
    ("?reasoning_effort=extreme", "reasoning_effort must be one of"),
    ("?omit=seed", "omit takes temperature, top_p"),
    ("?max_completion_tokens=maybe", "max_completion_tokens takes 1 or 0"),
    ("?thinking_budget=-1", "thinking_budget must be >= 0"),
])
def test_bad_reasoning_options_say_what_to_write(spec_tail, complaint):
    with pytest.raises(SpecError, match=complaint):
        from_spec(f"openai:m@http://127.0.0.1:9/v1{spec_tail}")


def refusal(error: dict) -> StatusError:
    err = StatusError("HTTP 400", status=400, kind="client_error")
    err.error = error
    return err


def test_only_refusals_of_an_adaptable_parameter_are_learned():
    assert refused_parameter(refusal(UNSUPPORTED_MAX_TOKENS["error"])) == ("max_tokens", "max_completion_tokens")
    unnamed = {"message": "Unsupported value: 'top_p' does not support 0.5 with this model."}  # no code, no param
    assert refused_parameter(refusal(unnamed)) == ("top_p", None)
    assert refused_parameter(refusal({"message": "context too long", "code": "context_length_exceeded"})) == (None, None)
    backend = from_spec("openai:m@http://127.0.0.1:9/v1")
    stop = {"message": "Unsupported parameter: 'stop' is not supported with this model.", "param": "stop",
            "code": "unsupported_parameter"}
    assert not backend.learn(refusal(stop), {"stop": ["\n"]}), "leaving out stop would change the answers"
    assert not backend.learn(refusal(UNSUPPORTED_MAX_TOKENS["error"]), {"max_completion_tokens": 9}), (
        "a refusal of a parameter the body did not carry is not retried")
    assert backend.form.learned == {}


def test_any_other_400_fails_at_once_without_a_retry():
    with fault_server(script=["400"]) as server:
        backend = from_spec(f"openai:fault-model@{server.base_url}")
        with pytest.raises(StatusError):
            asyncio.run(backend.generate(ask()))
    assert server.counters.requests == 1


# --- openai: servers that send the thinking ------------------------------------------------------------

@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_a_reasoning_field_is_read_apart_from_the_answer(key):
    with provider_server("reasoning-field", think=5, reasoning_key=key) as server:
        backend = from_spec(f"openai:q@{server.base_url}")
        reply = asyncio.run(backend.generate(ask()))
        cut = asyncio.run(backend.generate(ask(max_tokens=3)))
    assert reply.text.startswith("答案：") and reply.reasoning.split()[0].startswith("think-")
    assert len(reply.reasoning.split()) == 5 and reply.adaptations == ()
    assert cut.text == "" and cut.finish_reason == "length" and cut.cut_in_thinking, "content null: cut thinking"


def test_inline_thinking_reaches_the_backend_whole_and_is_split_by_the_handle():
    with provider_server("inline-think", think=3) as server:
        reply = asyncio.run(from_spec(f"openai:q@{server.base_url}").generate(ask()))
    assert reply.text.startswith("<think>think-") and "</think>\n\n答案：" in reply.text  # the handle splits it


# --- anthropic: extended thinking -----------------------------------------------------------------------

def test_anthropic_thinking_follows_the_apis_rules_and_says_what_changed():
    with provider_server("anthropic-thinking") as server:
        backend = from_spec(f"anthropic:claude-stub@{server.base_url}?thinking_budget=1024")
        reply = asyncio.run(backend.generate(ask(temperature=0.0, top_p=0.9)))
        kept = asyncio.run(backend.generate(ask(temperature=1.0, top_p=0.97)))
    assert server.refusals == []
    assert sent(server.bodies[0]) == {"max_tokens": 1040, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert sent(server.bodies[1]) == {"max_tokens": 1040, "thinking": {"type": "enabled", "budget_tokens": 1024},
                                      "top_p": 0.97}
    assert [(a.parameter, a.sent) for a in reply.adaptations] == [
        ("max_tokens", "max_tokens=1040"), ("temperature", None), ("top_p", None)]
    assert [a.parameter for a in kept.adaptations] == ["max_tokens"], "temperature 1 and top_p 0.97 are allowed"
    assert reply.reasoning.startswith("think-") and reply.reasoning_tokens == 40
    assert reply.text.startswith("答案：")
    assert backend.identity()["thinking_budget"] == 1024


def test_the_anthropic_stub_refuses_what_the_api_refuses():
    # the request a naive client would send with thinking on: the stub answers as the API does
    import httpx

    with provider_server("anthropic-thinking") as server:
        body = {"model": "c", "max_tokens": 16, "temperature": 0.0, "messages": [{"role": "user", "content": "q"}],
                "thinking": {"type": "enabled", "budget_tokens": 1024}}
        too_small = httpx.post(f"{server.base_url}/messages", json=body)
        hot = httpx.post(f"{server.base_url}/messages", json={**body, "max_tokens": 2048})
    assert too_small.status_code == 400 and "must be greater than `thinking.budget_tokens`" in too_small.text
    assert hot.status_code == 400 and "`temperature` may only be set to 1" in hot.text


def test_anthropic_without_thinking_sends_what_it_always_sent():
    with provider_server("anthropic-thinking") as server:
        backend = from_spec(f"anthropic:claude-stub@{server.base_url}")
        reply = asyncio.run(backend.generate(ask()))
    assert sent(server.bodies[0]) == {"max_tokens": 16, "temperature": 0.0}
    assert reply.reasoning is None and reply.adaptations == () and "thinking_budget" not in backend.identity()


def test_anthropic_thinking_budget_below_the_apis_minimum_is_a_spec_error():
    with pytest.raises(SpecError, match="thinking_budget must be >= 1024"):
        from_spec("anthropic:c@http://127.0.0.1:9/v1?thinking_budget=500")


# --- log-likelihoods over /v1/completions (a weightless model) -----------------------------------------

@pytest.mark.parametrize("mode", ["echo", "prompt"])
@pytest.mark.parametrize("adds_bos", [False, True])
def test_loglikelihoods_over_http_score_the_local_engines_tokens(mode, adds_bos):
    toy = ToyModel(adds_bos=adds_bos)
    request = LoglikelihoodRequest("Question: which is debt?\nAnswer: ", ("A", "B", " bonds and notes", "A"))
    with completions_server(toy) as server:
        backend = from_spec(f"openai-completions:stub@{server.base_url}?logprobs={mode}")
        response = asyncio.run(backend.loglikelihood(request))
        (body,) = server.requests
    # the reference: the local engine's split (trailing space moved onto the continuations), scored directly
    context, continuations = split_continuation_tokens(request.context, request.continuations,
                                                       lambda text, bos: toy.tokenize(text, bos), 1)
    assert (context[0] == 1) is adds_bos
    assert body["prompt"] == [context + c for c in continuations], "token ids, one prompt per continuation"
    for total, greedy, tokens in zip(response.logprobs, response.is_greedy, continuations):
        prompt = context + tokens
        rows = [toy.row(prompt[:i]) for i in range(len(context), len(prompt))]
        assert total == pytest.approx(sum(row[t] for row, t in zip(rows, tokens)), abs=1e-9)
        assert greedy == all(int(row.argmax()) == t for row, t in zip(rows, tokens))
    # " A" is one token once the context's space moves onto it; "  bonds" (two spaces) is "  ", "bonds"
    assert response.continuation_tokens == tuple(len(c) for c in continuations) == (1, 1, 4, 1)
    assert response.context_tokens == len(context)
    assert backend.capabilities.loglikelihood and backend.identity()["loglikelihood"] == f"completions/{mode}"


def test_a_server_without_tokenize_is_named():
    with provider_server("reasoning-field") as server:  # no /tokenize route
        backend = from_spec(f"openai-completions:q@{server.base_url}")
        with pytest.raises(Exception, match="no /tokenize route"):
            asyncio.run(backend.loglikelihood(LoglikelihoodRequest("Q:", (" A",))))


def test_bad_completions_spec():
    with pytest.raises(SpecError, match="logprobs must be one of echo, prompt"):
        from_spec("openai-completions:m@http://127.0.0.1:9/v1?logprobs=top")
