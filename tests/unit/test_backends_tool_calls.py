"""Tool calling (OpenAI-style function calling) in every backend: what each one sends (the exact JSON bodies, against
the local provider stand-ins of tests/servers/provider_stubs.py, which refuse a conversation their API would refuse),
what it reads back, the local engines' chat templates and strict `<tool_call>` reading, the fake's scripted calls,
replay, and what the model handle keys, traces and counts."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest

from finharness import open_model
from finharness.backends import embedded, from_spec
from finharness.backends.fake import FakeBackend
from finharness.backends.http_common import RemoteError, StatusError
from finharness.backends.openai_compat import parse_chat_reply
from finharness.backends.replay import ReplayBackend
from finharness.backends.tool_format import openai_tools
from finharness.core.backend import BackendError, Capabilities
from finharness.core.hashing import canonical_json, content_key
from finharness.core.store import RunStore
from finharness.core.types import (
    GenerateParams,
    GenerateRequest,
    GenerateResponse,
    Message,
    ToolCall,
    ToolCallError,
    ToolSpec,
    messages,
    to_jsonable,
)
from tests.fakes import fake_models
from tests.servers.provider_stubs import anthropic_conversation_problem, provider_server

PRICE = ToolSpec("lookup_price", "The last close of a ticker, in USD.",
                 {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]})
FX = ToolSpec("fx_rate", "The exchange rate of a currency pair.",
              {"type": "object", "properties": {"pair": {"type": "string"}}, "required": ["pair"]})
ADD = ToolSpec("add", "Add two numbers a and b and return their sum.",
               {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]})
QUESTION = "What is AAPL's close in EUR? Use lookup_price and fx_rate."


def ask(*turns: Message, tools: tuple[ToolSpec, ...] = (PRICE, FX), max_tokens: int = 32) -> GenerateRequest:
    return GenerateRequest(tuple(turns), GenerateParams(max_tokens=max_tokens), tools=tools)


def answered(first: GenerateResponse, *results: str, then: tuple[Message, ...] = ()) -> tuple[Message, ...]:
    """The conversation after `first` called tools: the question, its calls, one tool turn per result."""
    tool_turns = tuple(Message("tool", result, tool_call_id=call.id, name=call.name)
                       for call, result in zip(first.tool_calls, results, strict=True))
    return (Message("user", QUESTION), Message("assistant", first.text, tool_calls=first.tool_calls),
            *tool_turns, *then)


# --- the call cache ----------------------------------------------------------------------------------------------

def test_tools_are_in_the_call_key_and_a_call_without_them_is_keyed_as_before(tmp_path):
    handle = open_model(FakeBackend(), RunStore(tmp_path / "run.sqlite"))
    plain = GenerateRequest(messages(("user", "What is 2 + 3?")))
    numbers = replace(plain, tools=(ADD,))
    strings = replace(plain, tools=(replace(ADD, parameters={**ADD.parameters, "properties": {
        "a": {"type": "string"}, "b": {"type": "number"}}}),))
    keys = {handle.call_key("generate", r)[0] for r in (plain, numbers, strings)}
    assert len(keys) == 3, "a tool's schema alone changes the key"
    plain_json = handle.call_key("generate", plain)[1]
    assert plain_json == {"messages": [{"role": "user", "content": "What is 2 + 3?"}],
                          "params": to_jsonable(plain.params), "sample_index": 0, "kind": "generate"}
    assert handle.call_key("generate", numbers)[1]["tools"] == [to_jsonable(ADD)]


# --- openai: chat completions ------------------------------------------------------------------------------------

def test_openai_sends_the_tools_reads_parallel_calls_and_sends_their_results_back():
    with provider_server("openai-tools") as server:
        backend = from_spec(f"openai:tool-stub@{server.base_url}")
        first = asyncio.run(backend.generate(ask(Message("user", QUESTION))))
        second = asyncio.run(backend.generate(ask(*answered(first, "189.5", "0.92"))))
    assert server.refusals == []
    assert server.bodies[0]["tools"] == [
        {"type": "function", "function": {"name": "lookup_price", "description": PRICE.description,
                                          "parameters": PRICE.parameters}},
        {"type": "function", "function": {"name": "fx_rate", "description": FX.description,
                                          "parameters": FX.parameters}}]
    assert server.bodies[0]["messages"] == [{"role": "user", "content": QUESTION}]
    assert (first.text, first.finish_reason) == ("", "tool_calls")
    assert [(c.name, c.parsed_arguments()) for c in first.tool_calls] == [
        ("lookup_price", {"text": QUESTION}), ("fx_rate", {"text": QUESTION})], "parallel calls, in order"
    price_id, fx_id = (c.id for c in first.tool_calls)
    assert server.bodies[1]["messages"] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": price_id, "type": "function",
             "function": {"name": "lookup_price", "arguments": json.dumps({"text": QUESTION})}},
            {"id": fx_id, "type": "function",
             "function": {"name": "fx_rate", "arguments": json.dumps({"text": QUESTION})}}]},
        {"role": "tool", "tool_call_id": price_id, "content": "189.5"},
        {"role": "tool", "tool_call_id": fx_id, "content": "0.92"}]
    assert (second.text, second.finish_reason, second.tool_calls) == ("results: 189.5; 0.92", "stop", ())


def test_openai_a_call_left_unanswered_is_refused_by_the_stand_in_as_by_the_api():
    with provider_server("openai-tools") as server:
        backend = from_spec(f"openai:tool-stub@{server.base_url}")
        first = asyncio.run(backend.generate(ask(Message("user", QUESTION))))
        history = answered(first, "189.5", "0.92")
        with pytest.raises(StatusError) as refused:
            asyncio.run(backend.generate(ask(*history[:3])))  # the fx_rate result left out
    assert refused.value.status == 400 and not refused.value.retryable
    assert "did not have response messages: " + first.tool_calls[1].id in server.refusals[0]


def test_openai_arguments_that_are_not_json_are_kept_as_the_server_sent_them():
    with provider_server("openai-tools", calls=lambda body: [("lookup_price", "{ticker: AAPL")]) as server:
        reply = asyncio.run(from_spec(f"openai:tool-stub@{server.base_url}").generate(ask(Message("user", QUESTION))))
    (call,) = reply.tool_calls
    assert call.arguments == "{ticker: AAPL" and reply.tool_call_error is None
    with pytest.raises(ToolCallError, match="the arguments of 'lookup_price' are not JSON"):
        call.parsed_arguments()


def chat_body(message: dict, finish_reason: str | None) -> dict:
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish_reason}], "usage": {}}


def test_openai_replies_of_other_servers_tool_calls_are_read_or_named_as_unreadable():
    request = ask(Message("user", QUESTION))
    # 'stop' after calls (some servers), an object for arguments, no id, content "" and no finish reason
    reply = parse_chat_reply(chat_body({"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "lookup_price", "arguments": {"ticker": "AAPL"}}}]}, "stop"),
        "test", request)
    assert reply.tool_calls == (ToolCall("call_0", "lookup_price", '{"ticker":"AAPL"}'),)
    assert reply.finish_reason == "tool_calls" and reply.text == ""
    bare = parse_chat_reply(chat_body({"content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "fx_rate", "arguments": "{}"}}]}, None), "test", request)
    assert bare.finish_reason == "tool_calls" and bare.tool_calls[0].id == "c1"
    cut = parse_chat_reply(chat_body({"content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "fx_rate", "arguments": '{"pa'}}]}, "length"), "test", request)
    assert cut.finish_reason == "length", "a reply cut by the limit stays truncated"
    broken = parse_chat_reply(chat_body({"content": None, "tool_calls": [{"id": "c1", "function": {}}]}, "tool_calls"),
                              "test", request)
    assert broken.tool_calls == () and broken.tool_call_error.startswith("tool call 1: no function name")
    plain = parse_chat_reply(chat_body({"content": "答案：A", "tool_calls": []}, "stop"), "test", request)
    assert (plain.text, plain.tool_calls, plain.tool_call_error) == ("答案：A", (), None), "vLLM's empty list"


def test_openai_completions_generates_through_chat_and_sends_the_tools_too():
    backend = from_spec("openai-completions:m@http://127.0.0.1:9/v1")
    body = backend.payload(ask(Message("user", QUESTION)))
    assert body["tools"] == openai_tools([PRICE, FX])
    assert "tools" not in backend.payload(GenerateRequest(messages(("user", "hi")))), "no tools: the body as before"


# --- anthropic: messages -----------------------------------------------------------------------------------------

def test_anthropic_sends_the_tools_reads_parallel_tool_use_and_merges_the_results_into_one_user_turn():
    system = Message("system", "You are a careful analyst.")
    with provider_server("anthropic-tools") as server:
        backend = from_spec(f"anthropic:claude-stub@{server.base_url}")
        first = asyncio.run(backend.generate(ask(system, Message("user", QUESTION))))
        history = answered(first, "189.5", "0.92", then=(Message("user", "Answer in one line."),))
        second = asyncio.run(backend.generate(ask(system, *history)))
    assert server.refusals == []
    assert server.bodies[0]["tools"] == [
        {"name": "lookup_price", "description": PRICE.description, "input_schema": PRICE.parameters},
        {"name": "fx_rate", "description": FX.description, "input_schema": FX.parameters}]
    assert server.bodies[0]["messages"] == [{"role": "user", "content": QUESTION}]
    assert (first.text, first.finish_reason) == ("I'll use the tools.", "tool_calls")
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("lookup_price", canonical_json({"text": QUESTION})), ("fx_rate", canonical_json({"text": QUESTION}))]
    price_id, fx_id = (c.id for c in first.tool_calls)
    assert price_id.startswith("toolu_") and fx_id != price_id
    assert server.bodies[1]["system"] == "You are a careful analyst."
    assert server.bodies[1]["messages"] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I'll use the tools."},
            {"type": "tool_use", "id": price_id, "name": "lookup_price", "input": {"text": QUESTION}},
            {"type": "tool_use", "id": fx_id, "name": "fx_rate", "input": {"text": QUESTION}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": price_id, "content": "189.5"},
            {"type": "tool_result", "tool_use_id": fx_id, "content": "0.92"},
            {"type": "text", "text": "Answer in one line."}]}]
    assert (second.text, second.finish_reason) == ("results: 189.5; 0.92", "stop")


def test_the_anthropic_stand_in_refuses_tool_results_sent_as_separate_turns():
    uses = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}},
                                             {"type": "tool_use", "id": "t2", "name": "b", "input": {}}]}
    apart = [{"role": "user", "content": "q"}, uses,
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "2"}]}]
    assert "without `tool_result` blocks immediately after: t2" in anthropic_conversation_problem(apart)
    text_first = [*apart[:2], {"role": "user", "content": [
        {"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "t1", "content": "1"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "2"}]}]
    assert "must come first" in anthropic_conversation_problem(text_first)


def test_anthropic_refuses_to_send_a_history_it_cannot_express():
    backend = from_spec("anthropic:claude-stub@http://127.0.0.1:9/v1")
    with pytest.raises(RemoteError, match="without tool_call_id") as no_id:
        backend.payload(ask(Message("user", "q"), Message("tool", "3")))
    bad_arguments = Message("assistant", "", tool_calls=(ToolCall("t1", "add", "{a: 1"),))
    with pytest.raises(RemoteError, match="input must be an object") as not_json:
        backend.payload(ask(Message("user", "q"), bad_arguments, Message("tool", "3", tool_call_id="t1")))
    assert not no_id.value.retryable and not not_json.value.retryable
    plain = backend.payload(GenerateRequest(messages(("user", "hi"))))
    assert plain["messages"] == [{"role": "user", "content": "hi"}] and "tools" not in plain


# --- the fake ----------------------------------------------------------------------------------------------------

CALLING_SCRIPT = [{"match": "EUR", "reply": "Looking both up.",
                   "tool_calls": [{"name": "lookup_price", "arguments": {"ticker": "AAPL"}},
                                  {"name": "fx_rate", "arguments": {"pair": "USD/EUR"}}]},
                  {"match": "0.92", "reply": "AAPL closed at 174.34 EUR."}]


def test_a_fake_script_calls_tools_then_answers_the_tools_result(tmp_path):
    models = fake_models(tmp_path, model=FakeBackend(script=CALLING_SCRIPT))
    first = asyncio.run(models.model.generate(ask(Message("user", QUESTION))))
    second = asyncio.run(models.model.generate(ask(*answered(first, "189.5", "0.92"))))
    assert (first.text, first.finish_reason) == ("Looking both up.", "tool_calls")
    assert first.tool_calls == (ToolCall("call_0", "lookup_price", '{"ticker":"AAPL"}'),
                                ToolCall("call_1", "fx_rate", '{"pair":"USD/EUR"}'))
    assert (second.text, second.tool_calls) == ("AAPL closed at 174.34 EUR.", ()), "matched on the tool's result"
    calling, answering = models.model.trace
    assert calling["tools"] == ["lookup_price", "fx_rate"] and calling["finish_reason"] == "tool_calls"
    assert calling["tool_calls"] == [{"id": "call_0", "name": "lookup_price", "arguments": '{"ticker":"AAPL"}'},
                                     {"id": "call_1", "name": "fx_rate", "arguments": '{"pair":"USD/EUR"}'}]
    assert "tool_calls" not in answering and "tool_call_error" not in answering
    assert (models.model.counters.tool_calls, models.model.counters.tool_call_errors) == (2, 0)
    again = fake_models(tmp_path, model=FakeBackend(script=CALLING_SCRIPT))  # the same store
    cached = asyncio.run(again.model.generate(ask(Message("user", QUESTION))))
    assert again.model.backend.calls == 0 and cached.tool_calls == first.tool_calls, "read back from the store"


def test_a_call_without_tools_leaves_its_trace_entry_and_counts_as_they_were(tmp_path):
    models = fake_models(tmp_path, model="答案：B")
    asyncio.run(models.model.chat([Message("user", "question")]))
    (entry,) = models.model.trace
    assert set(entry) == {"role", "kind", "cache_hit", "latency_s", "prompt", "params", "response", "finish_reason",
                          "prompt_tokens", "completion_tokens", "retries"}
    counts = models.model.counters.to_json()
    assert (counts["tool_calls"], counts["tool_call_errors"]) == (0, 0)


def test_fake_replies_in_turn_and_from_a_function_may_be_responses_or_dicts_and_a_parse_failure_is_counted(tmp_path):
    made = GenerateResponse("", "tool_calls", tool_calls=(ToolCall("x9", "add", '{"a":1,"b":2}'),))
    malformed = {"text": "<tool_call>{", "tool_call_error": "tool call 1: <tool_call> is never closed by </tool_call>"}
    fake = FakeBackend(replies=[made, malformed],
                       reply=lambda last: {"tool_calls": [{"name": "add", "arguments": "a=1"}]} if "add" in last
                       else "no tool")
    models = fake_models(tmp_path, model=fake)
    replies = [asyncio.run(models.model.generate(ask(Message("user", f"add {i}"), tools=(ADD,)))) for i in range(3)]
    assert replies[0] == made
    assert (replies[1].tool_calls, replies[1].tool_call_error) == ((), malformed["tool_call_error"])
    assert replies[2].tool_calls == (ToolCall("call_0", "add", "a=1"),), "string arguments are kept as they are"
    assert asyncio.run(fake.generate(ask(Message("user", "other")))).text == "no tool"
    assert models.model.trace[1]["tool_call_error"] == malformed["tool_call_error"]
    assert (models.model.counters.tool_calls, models.model.counters.tool_call_errors) == (2, 1)
    with pytest.raises(ValueError, match="unknown key"):
        asyncio.run(FakeBackend(replies=[{"txt": "typo"}]).generate(ask(Message("user", "q"))))


def test_the_fakes_identity_follows_its_tool_script_and_a_dry_run_plans_the_same_calls(tmp_path):
    other = [{**CALLING_SCRIPT[0], "tool_calls": [{"name": "lookup_price", "arguments": {"ticker": "MSFT"}}]}]
    identities = [FakeBackend(script=s).identity() for s in (CALLING_SCRIPT, other)]
    assert content_key(identities[0]) != content_key(identities[1])
    with_response = FakeBackend(replies=[GenerateResponse("a", "stop")]).identity()
    assert canonical_json(with_response) != canonical_json(FakeBackend(replies=[GenerateResponse("b", "stop")]).identity())
    fake = FakeBackend(script=CALLING_SCRIPT)
    request = ask(Message("user", QUESTION))
    assert asyncio.run(fake.planned_reply(request)) == asyncio.run(fake.generate(request))
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(json.dumps(rule) for rule in CALLING_SCRIPT), encoding="utf-8")
    from_file = asyncio.run(from_spec(f"fake?script={script}").generate(request))
    assert from_file.tool_calls == asyncio.run(fake.generate(request)).tool_calls


# --- replay ------------------------------------------------------------------------------------------------------

def test_a_recorded_tool_call_replays_from_the_store_and_from_its_jsonl_export(tmp_path):
    store = RunStore(tmp_path / "run.sqlite")
    request = ask(Message("user", QUESTION))
    recorded = asyncio.run(open_model(FakeBackend(script=CALLING_SCRIPT), store).generate(request))
    export = tmp_path / "calls.jsonl"
    export.write_text("".join(json.dumps(call) + "\n" for call in store.iter_calls()), encoding="utf-8")
    store.close()
    for path in (tmp_path / "run.sqlite", export):
        replayed = asyncio.run(ReplayBackend(f"replay:{path}", path).generate(request))
        assert replayed.tool_calls == recorded.tool_calls and isinstance(replayed.tool_calls[0], ToolCall)
        assert replayed.finish_reason == "tool_calls" and replayed.text == "Looking both up."


# --- hf and vllm: the tokenizer's chat template (stand-ins; the real template is checked below) ------------------

TOOL_TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{{ tools }}{% endif %}"


class TemplateTokenizer:
    """Stands in for a Hugging Face tokenizer: renders the turns and the tools it is handed, one token a word."""

    bos_token_id = None
    bos_token = None
    eos_token_id = 0

    def __init__(self, chat_template: str = TOOL_TEMPLATE):
        self.chat_template = chat_template
        self.rendered: list[tuple[list[dict], dict]] = []

    def apply_chat_template(self, turns, tokenize=False, add_generation_prompt=True, **kwargs):
        self.rendered.append((turns, kwargs))
        text = " ".join(str(t["content"]) for t in turns)
        return text + (" tools: " + json.dumps(kwargs["tools"]) if "tools" in kwargs else "") + " <assistant>"

    def encode(self, text, add_special_tokens=True):
        return list(range(len(text.split())))


ADD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@pytest.fixture
def hf_stand_in(tmp_path):
    from finharness.backends.hf import HfBackend

    folder = tmp_path / "model"  # apart from the run store: a local model's identity hashes its folder's files
    folder.mkdir()
    backend = HfBackend(str(folder), local=True)
    backend._tokenizer = TemplateTokenizer()
    backend._capabilities = Capabilities(generate=True, loglikelihood=True, context_length=4096, max_concurrency=1)

    async def decoded(batcher, job):  # the model's reply, without a model
        return {"text": backend.reply_text, "finish_reason": "stop", "completion_tokens": 20, "logprobs": None}

    backend._submit = decoded
    backend.reply_text = ADD_CALL
    return backend


def test_hf_renders_the_tools_counts_them_and_reads_the_call(hf_stand_in, tmp_path):
    backend = hf_stand_in
    request = ask(Message("user", "What is 2 + 3?"), tools=(ADD,))
    reply = asyncio.run(backend.generate(request))
    turns, kwargs = backend._tokenizer.rendered[-1]
    assert kwargs == {"tools": openai_tools([ADD])} and turns == [{"role": "user", "content": "What is 2 + 3?"}]
    assert reply.tool_calls == (ToolCall("call_0", "add", '{"a":2,"b":3}'),) and reply.finish_reason == "tool_calls"
    asyncio.run(backend.generate(replace(request, tools=())))
    assert backend._tokenizer.rendered[-1][1] == {}, "a plain chat is rendered without the tools argument"
    handle = open_model(backend, RunStore(tmp_path / "run.sqlite"))
    with_tools, counted = handle.prompt_size("generate", request)
    without, _ = handle.prompt_size("generate", replace(request, tools=()))
    assert counted and with_tools > without + 10, "the prompt's size counts the tool schemas"


def test_hf_and_vllm_refuse_tools_when_the_template_cannot_show_them(hf_stand_in, tmp_path, monkeypatch):
    hf_stand_in._tokenizer = TemplateTokenizer("{% for m in messages %}{{ m.content }}{% endfor %}")
    with pytest.raises(BackendError, match="does not render tools") as refused:
        asyncio.run(hf_stand_in.generate(ask(Message("user", "q"), tools=(ADD,))))
    assert refused.value.kind == "unsupported" and not refused.value.retryable
    vllm = vllm_stand_in(monkeypatch, tmp_path, "x")
    vllm._tokenizer = TemplateTokenizer("{{ messages }}")
    with pytest.raises(BackendError, match="does not render tools"):
        asyncio.run(vllm.generate(ask(Message("user", "q"), tools=(ADD,))))


def test_a_malformed_local_call_is_kept_as_text_with_its_error(hf_stand_in):
    hf_stand_in.reply_text = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": }}\n</tool_call>'
    reply = asyncio.run(hf_stand_in.generate(ask(Message("user", "What is 2 + 3?"), tools=(ADD,))))
    assert (reply.text, reply.finish_reason, reply.tool_calls) == (hf_stand_in.reply_text, "stop", ())
    assert reply.tool_call_error.startswith("tool call 1: invalid JSON at char 43: Expecting value")


def vllm_stand_in(monkeypatch, tmp_path: Path, reply_text: str):
    from finharness.backends.vllm import VllmBackend, VllmOptions

    class StandInLLM:
        def __init__(self, **kwargs):
            pass

        def generate(self, prompts, params, use_tqdm=True):
            completion = types.SimpleNamespace(text=reply_text, finish_reason="stop", token_ids=[1, 2, 3], logprobs=None)
            return [types.SimpleNamespace(outputs=[completion]) for _ in prompts]

    module = types.ModuleType("vllm")
    module.LLM = StandInLLM
    module.SamplingParams = lambda **kwargs: types.SimpleNamespace(**kwargs)
    monkeypatch.setitem(sys.modules, "vllm", module)
    backend = VllmBackend(str(tmp_path), options=VllmOptions(max_model_len=512))
    backend._tokenizer = TemplateTokenizer()
    return backend


def test_vllm_renders_the_tools_and_reads_the_calls(monkeypatch, tmp_path):
    two_calls = ADD_CALL + "\n" + ADD_CALL.replace('"a": 2', '"a": 7')
    backend = vllm_stand_in(monkeypatch, tmp_path, two_calls)
    request = ask(Message("user", "What is 2 + 3 and 7 + 3?"), tools=(ADD,))
    reply = asyncio.run(backend.generate(request))
    assert backend._tokenizer.rendered[-1][1] == {"tools": openai_tools([ADD])}
    assert [c.parsed_arguments()["a"] for c in reply.tool_calls] == [2, 7]
    assert [c.id for c in reply.tool_calls] == ["call_0", "call_1"] and reply.finish_reason == "tool_calls"
    assert "tools: " in reply.prompt_text and backend.render_tokens(request)[0] == reply.prompt_text


# --- the local engine on the embedded model ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine():
    model = embedded.from_spec("embedded?n_ctx=2048&threads=2")
    yield model
    model.close()


@pytest.mark.model
def test_the_gguf_template_shows_the_tools_and_the_calls_and_results_of_earlier_turns(engine):
    history = (Message("user", "What is 2 + 3?"),
               Message("assistant", "", tool_calls=(ToolCall("call_0", "add", '{"a":2,"b":3}'),)),
               Message("tool", "5", tool_call_id="call_0", name="add"))
    prompt, tokens = engine.render_tokens(ask(*history, tools=(ADD,)))
    assert json.dumps(openai_tools([ADD])[0]) in prompt, "the schema, as the template's tojson writes it"
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>' in prompt
    assert "<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>" in prompt
    plain_prompt, plain_tokens = engine.render_tokens(GenerateRequest(history[:1]))
    assert plain_prompt == ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                            "<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    assert len(tokens) > len(plain_tokens) + 100, "the token count (budgets, spending) includes the tools"


@pytest.mark.model
def test_a_gguf_whose_template_never_names_tools_refuses_them_before_the_engine_starts(engine):
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from finharness.backends.llamacpp import LlamaCppBackend

    bare = LlamaCppBackend(engine.model_path, model_sha256="unused")
    bare._formatter = Jinja2ChatFormatter(template="{% for m in messages %}{{ m.content }}\n{% endfor %}",
                                          eos_token="", bos_token="")
    with pytest.raises(BackendError, match="does not render tools") as refused:
        asyncio.run(bare.generate(ask(Message("user", "q"), tools=(ADD,))))
    assert refused.value.kind == "unsupported" and bare._engine is None
    bare.close()


@pytest.mark.model
def test_hf_renders_the_same_tool_prompt_as_the_local_engine_from_the_same_template(engine, tmp_path):
    from transformers import AutoTokenizer

    from finharness.backends.hf import HfBackend

    path = Path(engine.model_path)
    hf_backend = HfBackend(str(path.parent), local=True)
    hf_backend._tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    request = ask(Message("system", "Use tools when they help."), Message("user", "What is 2 + 3?"),
                  Message("assistant", "", tool_calls=(ToolCall("call_0", "add", '{"a":2,"b":3}'),)),
                  Message("tool", "5", tool_call_id="call_0", name="add"), tools=(ADD, PRICE))
    assert hf_backend.render_tokens(request)[0] == engine.render_tokens(request)[0]


@pytest.mark.model
def test_the_embedded_model_asked_with_one_tool_calls_it_or_says_why_its_call_cannot_be_read(engine, tmp_path):
    handle = open_model(engine, RunStore(tmp_path / "run.sqlite"))
    request = ask(Message("user", "Use the add tool: what is 1234.5 + 678.25?"), tools=(ADD,), max_tokens=96)
    reply = asyncio.run(handle.generate(request))
    print(f"\nembedded model, one tool 'add': finish_reason={reply.finish_reason!r} tool_calls={reply.tool_calls} "
          f"tool_call_error={reply.tool_call_error!r} text={reply.text!r}")
    assert '"name": "add"' in reply.prompt_text and json.dumps(ADD.parameters) in reply.prompt_text
    if reply.tool_calls:
        assert [c.name for c in reply.tool_calls] == ["add"] and reply.finish_reason == "tool_calls"
        assert set(reply.tool_calls[0].parsed_arguments()) == {"a", "b"}
    else:
        assert reply.tool_call_error is not None, "a reply to a tool question is a call, or says why it is not one"
    (entry,) = handle.trace
    assert entry["tools"] == ["add"]
    assert handle.counters.tool_calls + handle.counters.tool_call_errors >= 1
