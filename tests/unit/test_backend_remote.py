"""Remote backends (OpenAI-compatible, Anthropic) against a real local server that injects faults."""

from __future__ import annotations

import asyncio
import email.utils
import socket

import pytest

from finharness.backends import anthropic, openai_compat
from finharness.backends.http_common import RemoteError, parse_retry_after
from finharness.core.backend import BackendError, CallFailed, SpecError
from finharness.core.retry import RetryPolicy, call_with_retries
from finharness.core.types import GenerateParams, GenerateRequest, messages
from tests.servers.fault_server import (
    FAULT_KINDS,
    MODEL_ID,
    MODEL_ROOT,
    RETRYABLE_FAULTS,
    SLOW_OK,
    answer_text,
    fault_server,
)
from tests.servers.reconcile import CLIENT_KIND, ClientAttempts, reconcile

CLIENT_TIMEOUT = 1.0
"""Client read timeout of the tests about timeouts. The server holds a 'timeout' fault (and a
'slow_ok' reply) until the client hangs up, so the client's timeout always fires first, however
slow the machine; a healthy reply slower than this is accounted for, not miscounted."""

PATIENT = 60.0
"""Client read timeout of every other test: only a stalled machine could make a reply that late,
so a slow reply is never mistaken for the fault under test."""

FAST = RetryPolicy(max_attempts=10, base_delay=0.0, max_delay=0.0)

EXPECTED_ERRORS = {
    # fault -> (retryable, kind)
    "429": (True, "rate_limit"),
    "429_retry_after": (True, "rate_limit"),
    "429_retry_after_date": (True, "rate_limit"),
    "500": (True, "server_error"),
    "502": (True, "server_error"),
    "503": (True, "server_error"),
    "529": (True, "server_error"),
    "400": (False, "client_error"),
    "reset": (True, "connection"),
    "timeout": (True, "timeout"),
    "truncated_json": (True, "bad_response"),
    "empty_choices": (True, "bad_response"),
}


def ask(text: str, **params) -> GenerateRequest:
    return GenerateRequest(messages(("system", "Answer briefly."), ("user", text)),
                           GenerateParams(**params))


def openai_backend(server, query: str = "", *, timeout: float = PATIENT) -> openai_compat.OpenAICompatBackend:
    return openai_compat.from_spec(f"openai:{MODEL_ID}@{server.base_url}?timeout={timeout}{query}")


def anthropic_backend(server, query: str = "", *, timeout: float = PATIENT) -> anthropic.AnthropicBackend:
    return anthropic.from_spec(f"anthropic:claude-test@{server.base_url}?timeout={timeout}{query}")


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def test_the_test_table_covers_every_fault_kind():
    assert set(EXPECTED_ERRORS) | {"ok", "never_stops"} == set(FAULT_KINDS)
    assert {k for k, (retryable, _) in EXPECTED_ERRORS.items() if retryable} == RETRYABLE_FAULTS
    assert CLIENT_KIND == {fault: kind for fault, (_, kind) in EXPECTED_ERRORS.items()}  # what reconcile expects


# --- each fault maps to the right error ------------------------------------------------------

@pytest.mark.parametrize("make_backend", [openai_backend, anthropic_backend], ids=["openai", "anthropic"])
@pytest.mark.parametrize("fault", sorted(EXPECTED_ERRORS))
def test_each_fault_maps_to_the_right_error(make_backend, fault):
    with fault_server(script=[fault]) as server:
        # a short timeout only where it is the fault under test: the server holds that request until
        # the client gives up; any other reply, however slow the machine, arrives in time
        backend = make_backend(server, timeout=CLIENT_TIMEOUT if fault == "timeout" else PATIENT)
        with pytest.raises(RemoteError) as info:
            asyncio.run(backend.generate(ask("What is EBITDA?")))
        assert (info.value.retryable, info.value.kind) == EXPECTED_ERRORS[fault]
        assert server.counters.by_kind == {fault: 1}
        if fault.isdigit() or fault.startswith("429"):
            assert info.value.status == int(fault[:3])
        server.wait_settled()
        expected_outcome = {"reset": "reset", "timeout": "client_gone"}.get(fault, "sent")
        assert [s.outcome for s in server.counters.log] == [expected_outcome]


@pytest.mark.parametrize("make_backend", [openai_backend, anthropic_backend], ids=["openai", "anthropic"])
def test_a_healthy_reply_slower_than_the_timeout_is_a_timeout_retry_not_a_lost_answer(make_backend):
    # the server holds the first (healthy) reply until the client has given up on it
    errors: list[str] = []
    with fault_server(script=[SLOW_OK, "ok"]) as server:
        backend = make_backend(server, timeout=CLIENT_TIMEOUT)
        response, retries = asyncio.run(call_with_retries(
            lambda: backend.generate(ask("What is EBITDA?")), FAST,
            on_retry=lambda attempt, error, delay: errors.append(error.kind)))
        server.wait_settled()
        log = [(s.kind, s.outcome) for s in server.counters.log]
    assert (retries, errors) == (1, ["timeout"])
    assert response.text == answer_text({"messages": [{"role": "user", "content": "What is EBITDA?"}]})
    assert log == [(SLOW_OK, "client_gone"), ("ok", "sent")]


def test_ok_answer_is_the_servers_text_with_usage():
    with fault_server() as server:
        request = ask("What is EBITDA?")
        response = asyncio.run(openai_backend(server).generate(request))
    assert response.text == answer_text({"messages": [{"role": "user", "content": "What is EBITDA?"}]})
    assert response.finish_reason == "stop" and not response.truncated
    assert response.prompt_tokens == 5 and response.completion_tokens == 2


def test_a_model_that_never_stops_is_an_answer_marked_truncated_not_an_error():
    with fault_server(script=["never_stops"]) as server:
        response, retries = asyncio.run(call_with_retries(
            lambda: openai_backend(server).generate(ask("loop", max_tokens=7)), FAST))
    assert retries == 0 and response.truncated
    assert response.completion_tokens == 7


def test_retry_after_header_is_honoured_by_the_retry_layer():
    sleep = RecordingSleep()
    with fault_server(script=["429_retry_after", "429_retry_after_date", "429"], retry_after=3) as server:
        backend = openai_backend(server)
        response, retries = asyncio.run(call_with_retries(
            lambda: backend.generate(ask("q")), RetryPolicy(base_delay=0.01, max_delay=0.01), sleep=sleep))
    assert retries == 3 and response.text.startswith("echo ")
    assert sleep.delays[0] == 3.0                  # Retry-After: 3
    assert 1.0 <= sleep.delays[1] <= 3.0           # Retry-After: <date 3 s ahead>, second resolution
    assert 0.0 <= sleep.delays[2] <= 0.01          # no header: our own backoff


def test_parse_retry_after_forms():
    now = 1_700_000_000.0
    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30.0, abs=1.0)
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# --- retries end to end ----------------------------------------------------------------------

def test_mixed_faults_all_complete_and_every_retry_is_accounted_for():
    prompts = [f"question {i}: what was revenue growth?" for i in range(50)]
    limit, sleep, attempts = 4, RecordingSleep(), ClientAttempts()
    with fault_server(rate=0.3, seed=7, kinds=sorted(RETRYABLE_FAULTS) + ["never_stops"],
                      latency=0.02) as server:
        backend = openai_backend(server, timeout=CLIENT_TIMEOUT)
        generate = attempts.wrap(backend.generate)  # what each attempt got, as the client saw it
        gate = asyncio.Semaphore(limit)

        async def one(prompt: str):
            async with gate:
                return await call_with_retries(lambda: generate(ask(prompt, max_tokens=8)), FAST, sleep=sleep)

        async def main():
            try:
                return await asyncio.gather(*(one(p) for p in prompts))
            finally:
                await backend.aclose()

        results = asyncio.run(main())
        server.wait_settled()
        counters = server.counters
    # request by request, the server's log explains every attempt: each injected fault failed its
    # attempt, and a reply that came too late (a healthy one on a slow machine) was a timeout
    rec = reconcile(counters.log, attempts)
    retries = sum(r for _, r in results)
    assert rec.injected >= 10, "the seed should inject a real mix of faults"
    assert rec.accepted == len(prompts)
    # each retry is counted once, whatever the timing: the requests the server saw, less one per question
    assert retries == rec.retries == counters.requests - len(prompts) == len(sleep.delays)
    # every injected fault was retried; any other retry was a healthy reply the client timed out on
    assert retries == rec.injected + rec.late_healthy
    assert rec.client_kinds["timeout"] >= counters.by_kind["timeout"] + rec.late_healthy
    for prompt, (resp, _) in zip(prompts, results):
        assert resp.text  # never an empty answer
        # the accepted reply is one the server sent for this very question
        assert ("never_stops" if resp.truncated else "ok") in rec.healthy_sent(prompt)
        if not resp.truncated:  # and each answer belongs to its own question
            assert resp.text == answer_text({"messages": [{"role": "user", "content": prompt}]})
    # the client never had more than `limit` attempts out; the server saw them overlap, and may also
    # have held replies the client had given up on (none unless the machine made some late)
    assert attempts.max_in_flight <= limit
    assert 2 <= counters.max_in_flight <= limit + rec.abandoned


def test_a_request_that_keeps_failing_ends_as_call_failed():
    with fault_server(script=["503"] * 3) as server:
        backend = openai_backend(server)
        with pytest.raises(CallFailed) as info:
            asyncio.run(call_with_retries(lambda: backend.generate(ask("q")),
                                          RetryPolicy(max_attempts=3, base_delay=0.0), sleep=RecordingSleep()))
        assert server.counters.requests == 3
    assert (info.value.attempts, info.value.kind) == (3, "server_error")
    assert isinstance(info.value.__cause__, BackendError) and info.value.__cause__.status == 503


def test_a_bad_request_is_not_retried():
    with fault_server(script=["400", "ok"]) as server:
        backend = openai_backend(server)
        with pytest.raises(CallFailed) as info:
            asyncio.run(call_with_retries(lambda: backend.generate(ask("q")), FAST))
        assert server.counters.requests == 1
    assert (info.value.attempts, info.value.kind) == (1, "client_error")


def test_connection_pool_is_sized_to_the_concurrency():
    with fault_server(latency=0.1) as server:
        backend = openai_backend(server, "&concurrency=2")
        assert backend.capabilities.max_concurrency == 2

        async def main():
            try:
                return await asyncio.gather(*(backend.generate(ask(f"q{i}")) for i in range(6)))
            finally:
                await backend.aclose()

        assert len(asyncio.run(main())) == 6
        assert server.counters.max_in_flight == 2


def test_backend_survives_several_event_loops():
    with fault_server() as server:
        backend = openai_backend(server)
        first = asyncio.run(backend.generate(ask("a")))
        second = asyncio.run(backend.generate(ask("a")))
    assert first == second


# --- OpenAI request shape, identity, spec ----------------------------------------------------

def test_openai_payload_carries_every_parameter_and_the_key(monkeypatch):
    monkeypatch.setenv("MY_LOCAL_KEY", "sk-test")
    with fault_server() as server:
        backend = openai_backend(server, "&key_env=MY_LOCAL_KEY")
        params = dict(max_tokens=9, temperature=0.7, top_p=0.9, stop=("\n\n",), seed=3,
                      frequency_penalty=0.5, presence_penalty=0.25, top_logprobs=3)
        response = asyncio.run(backend.generate(ask("Is a bond a debt?", **params)))
        body, headers = server.counters.bodies[0], server.counters.headers[0]
    assert body["model"] == MODEL_ID
    assert body["messages"] == [{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": "Is a bond a debt?"}]
    assert {k: body[k] for k in ("max_tokens", "temperature", "top_p", "stop", "seed", "frequency_penalty",
                                 "presence_penalty", "logprobs", "top_logprobs")} == {
        **{k: v for k, v in params.items() if k != "stop"}, "stop": ["\n\n"], "logprobs": True}
    assert headers["authorization"] == "Bearer sk-test"
    assert response.logprobs is not None and len(response.logprobs) == response.completion_tokens
    assert all(len(t.top) == 3 for t in response.logprobs)


def test_openai_defaults_send_no_optional_fields_and_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with fault_server() as server:
        response = asyncio.run(openai_backend(server).generate(ask("q")))
        body, headers = server.counters.bodies[0], server.counters.headers[0]
    assert not {"stop", "seed", "frequency_penalty", "presence_penalty", "logprobs"} & set(body)
    assert "authorization" not in headers
    assert response.logprobs is None


def test_identity_reports_the_served_model_once():
    with fault_server() as server:
        backend = openai_backend(server)
        first, second = backend.identity(), backend.identity()
        assert server.counters.model_listings == 1
    assert first == second  # stable: a cache key must not change between calls
    assert first["api"] == "openai" and first["base_url"] == server.base_url
    assert first["server_model"] == {"id": MODEL_ID, "root": MODEL_ROOT, "owned_by": "fault-server"}
    assert "sk-" not in str(first)


def test_identity_does_not_fail_when_the_server_is_down():
    with socket.socket() as sock:  # a port that was free a moment ago and has no server
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = openai_compat.from_spec(f"openai:m@http://127.0.0.1:{port}/v1")
    assert backend.identity()["server_model"] is None
    with pytest.raises(RemoteError) as info:
        asyncio.run(backend.generate(ask("q")))
    assert (info.value.retryable, info.value.kind) == (True, "connection")


def test_spec_parsing(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    hosted = openai_compat.from_spec("openai:gpt-4o-mini")
    assert (hosted.remote.base_url, hosted.remote.concurrency, hosted.remote.timeout) == (
        "https://api.openai.com/v1", 8, 120.0)
    local = openai_compat.from_spec("openai:qwen@http://127.0.0.1:8080/v1/?concurrency=3&timeout=5")
    assert (local.remote.model, local.remote.base_url, local.capabilities.max_concurrency,
            local.remote.timeout) == ("qwen", "http://127.0.0.1:8080/v1", 3, 5.0)
    assert local.capabilities.seed and local.capabilities.penalties and not local.capabilities.loglikelihood


@pytest.mark.parametrize("spec, complaint", [
    ("openai:", "names no model"),
    ("openai:m@localhost:8080", "must start with http"),
    ("openai:m@http://h/v1?retries=3", "unknown option"),
    ("openai:m@http://h/v1?concurrency=many", "concurrency must be an integer"),
    ("openai:m@http://h/v1?concurrency=0", "concurrency must be >= 1"),
    ("openai:gpt-4o", "set $OPENAI_API_KEY"),
    ("anthropic:claude-x", "set $ANTHROPIC_API_KEY"),
])
def test_bad_specs_say_what_to_do(monkeypatch, spec, complaint):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    module = anthropic if spec.startswith("anthropic") else openai_compat
    with pytest.raises(SpecError, match=complaint.replace("$", r"\$")):
        module.from_spec(spec)


# --- Anthropic ------------------------------------------------------------------------------

def test_anthropic_request_shape_and_answer(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-test")
    with fault_server() as server:
        backend = anthropic_backend(server)
        request = GenerateRequest(
            messages(("system", "You are an analyst."), ("user", "Q1"), ("assistant", "A1"),
                     ("system", "Be terse."), ("user", "What is a 10-K?")),
            GenerateParams(max_tokens=20, stop=("END",)))
        response = asyncio.run(backend.generate(request))
        body, headers = server.counters.bodies[0], server.counters.headers[0]
    assert body["system"] == "You are an analyst.\n\nBe terse."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["stop_sequences"] == ["END"] and body["max_tokens"] == 20
    assert "top_p" not in body  # left at its default: newer models refuse temperature and top_p together
    assert headers["x-api-key"] == "ak-test" and headers["anthropic-version"] == "2023-06-01"
    assert response.text == answer_text({"messages": [{"role": "user", "content": "What is a 10-K?"}]})
    assert response.finish_reason == "stop"
    assert response.prompt_tokens == 12 and response.completion_tokens == 2  # words, system included


def test_anthropic_max_tokens_maps_to_length_and_capabilities():
    with fault_server(script=["never_stops"]) as server:
        backend = anthropic_backend(server)
        response = asyncio.run(backend.generate(ask("q", max_tokens=4)))
    assert response.truncated and response.text == "loop loop loop loop"
    caps = backend.capabilities
    assert not caps.penalties and not caps.seed and not caps.next_token_logprobs


def test_anthropic_overload_is_retried_and_logprobs_are_refused():
    with fault_server(script=["529", "529"]) as server:
        backend = anthropic_backend(server)
        response, retries = asyncio.run(call_with_retries(lambda: backend.generate(ask("q")), FAST))
        assert retries == 2 and response.text.startswith("echo ")
        with pytest.raises(RemoteError) as info:
            asyncio.run(backend.generate(ask("q", top_logprobs=2)))
        assert server.counters.requests == 3  # refused before sending
    assert (info.value.retryable, info.value.kind) == (False, "unsupported")
