"""The strict `<tool_call>` parser of local models (backends/tool_format.py): good blocks become ToolCalls, every
malformed one becomes a tool_call_error that names the block and the fault, and the template side keeps plain
chats as they were."""

from __future__ import annotations

import json

import pytest

from finharness.backends.tool_format import (
    ParsedReply,
    parse_tool_calls,
    template_takes_tools,
    template_turns,
    with_tool_calls,
)
from finharness.core.types import GenerateResponse, Message, ToolCall, ToolSpec

TOOLS = ("add", "lookup_price")


def block(payload: str) -> str:
    return f"<tool_call>\n{payload}\n</tool_call>"


def test_one_call_is_read_with_its_arguments_as_canonical_json():
    parsed = parse_tool_calls(block('{"name": "add", "arguments": {"b": 2, "a": 1.5}}'), TOOLS)
    assert parsed.error is None and parsed.text == ""
    assert parsed.calls == (ToolCall("call_0", "add", '{"a":1.5,"b":2}'),)
    assert parsed.calls[0].parsed_arguments() == {"a": 1.5, "b": 2}


def test_parallel_calls_keep_their_order_and_the_text_around_them():
    text = ("Let me look both up.\n" + block('{"name": "lookup_price", "arguments": {"ticker": "AAPL"}}') + "\n"
            + block('{"name": "lookup_price", "arguments": {"ticker": "MSFT"}}') + "\nDone.")
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.error is None
    assert [(c.id, json.loads(c.arguments)["ticker"]) for c in parsed.calls] == [("call_0", "AAPL"), ("call_1", "MSFT")]
    assert parsed.text == "Let me look both up.\n\n\nDone."


def test_a_reply_without_blocks_is_a_text_answer():
    assert parse_tool_calls("The sum is 3.", TOOLS) == ParsedReply("The sum is 3.")
    assert parse_tool_calls('The JSON {"a": 1} is fine', TOOLS).error is None


@pytest.mark.parametrize("text, error", [
    (block('{"name": "add", "arguments": {"a": 1,}}'),
     "tool call 1: invalid JSON at char 37: Expecting property name enclosed in double quotes"),
    (block('{"name": "add", "arguments": {}} {"name": "add", "arguments": {}}'), "tool call 1: invalid JSON at char 33: Extra data"),
    ('<tool_call>\n{"name": "add", "arguments": {"a": 1', "tool call 1: <tool_call> is never closed by </tool_call>"),
    (block('{"name": "add", "arguments": {}}') + "<tool_call>{", "tool call 2: <tool_call> is never closed"),
    ("<tool_call>" + block('{"name": "add", "arguments": {}}'), "tool call 1: <tool_call> is never closed"),
    ('{"name": "add", "arguments": {}}</tool_call>', "tool call 1: a </tool_call> with no <tool_call> before it"),
    (block('["add", {"a": 1}]'), "tool call 1: a JSON list, not an object with 'name' and 'arguments'"),
    (block('{"name": "add", "parameters": {"a": 1}}'), "tool call 1: 'parameters' instead of 'arguments'"),
    (block('{"name": "add"}'), "tool call 1: keys ['name'], expected exactly 'name' and 'arguments' (missing arguments)"),
    (block('{"name": "add", "arguments": {}, "id": "x"}'), "tool call 1: keys ['arguments', 'id', 'name']"),
    (block('{"name": 7, "arguments": {}}'), "tool call 1: 'name' is a int, not text"),
    (block('{"name": "mul", "arguments": {}}'), "tool call 1: unknown tool 'mul' (the request's tools: add, lookup_price)"),
    (block('{"name": "add", "arguments": "{\\"a\\": 1}"}'), "tool call 1: the 'arguments' of 'add' are a str, not an object"),
    ('{"name": "add", "arguments": {"a": 1, "b": 2}}', "tool call 1: written without <tool_call> tags"),
    ('```json\n{"name": "add", "arguments": {"a": 1}}\n```', "tool call 1: written without <tool_call> tags"),
])
def test_a_malformed_call_names_the_block_and_the_fault_and_keeps_no_call(text, error):
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.error is not None and parsed.error.startswith(error), parsed.error
    assert parsed.calls == () and parsed.text == text, "the whole reply is kept for the reader"


def test_a_bad_second_block_discards_the_good_first_one():
    text = block('{"name": "add", "arguments": {"a": 1}}') + block('{"name": "add", "arguments": [1]}')
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.calls == () and parsed.error == "tool call 2: the 'arguments' of 'add' are a list, not an object"


def test_a_block_inside_thinking_is_not_a_call():
    thought = "<think>maybe " + block('{"name": "add", "arguments": {}}') + "</think>"
    parsed = parse_tool_calls(thought + "No tool needed: 3.", TOOLS)
    assert (parsed.calls, parsed.error, parsed.text) == ((), None, thought + "No tool needed: 3.")
    cut = parse_tool_calls("<think>I could call " + block('{"name": "add"'), TOOLS)  # cut while thinking
    assert (cut.calls, cut.error) == ((), None)
    after = parse_tool_calls(thought + block('{"name": "add", "arguments": {"a": 1}}'), TOOLS)
    assert after.calls[0].name == "add" and after.text == thought


def test_the_response_says_tool_calls_only_when_they_were_read():
    tools = (ToolSpec("add", "Add.", {"type": "object"}),)
    good = GenerateResponse(block('{"name": "add", "arguments": {"a": 1}}'), "stop")
    assert (with_tool_calls(good, tools).finish_reason, with_tool_calls(good, tools).text) == ("tool_calls", "")
    cut = GenerateResponse('<tool_call>\n{"name": "add", "argu', "length")
    read = with_tool_calls(cut, tools)
    assert (read.finish_reason, read.text, read.tool_calls) == ("length", cut.text, ())
    assert read.tool_call_error == "tool call 1: <tool_call> is never closed by </tool_call>"
    assert with_tool_calls(good, ()) is good, "without tools the text is never read for calls"


def test_plain_turns_stay_role_and_content_and_calls_carry_objects():
    assert template_turns([Message("user", "hi")]) == [{"role": "user", "content": "hi"}]
    turns = template_turns([
        Message("assistant", "", tool_calls=(ToolCall("call_0", "add", '{"a":1}'), ToolCall("call_1", "add", "{bad"))),
        Message("tool", "3", tool_call_id="call_0", name="add")])
    assert turns[0]["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}},
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{bad"}}]
    assert turns[1] == {"role": "tool", "content": "3", "tool_call_id": "call_0", "name": "add"}
    assert template_takes_tools("{% if tools %}x{% endif %}") and not template_takes_tools("{{ messages }}")
    assert not template_takes_tools(None)


def test_read_untagged_reads_bare_calls_as_strictly_as_tagged_ones():
    from finharness.backends.tool_format import read_untagged

    names = ["add", "search"]
    (call,) = read_untagged('```json\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```', names)
    assert (call.id, call.name, call.arguments) == ("call_0", "add", '{"a":1,"b":2}')
    both = read_untagged('[{"name": "add", "arguments": {}}, {"name": "search", "arguments": {"query": "x"}}]', names)
    assert [c.name for c in both] == ["add", "search"] and [c.id for c in both] == ["call_0", "call_1"]
    assert read_untagged('{"name": "nope", "arguments": {}}', names) == ()  # an unknown tool
    assert read_untagged('{"name": "add", "parameters": {}}', names) == ()  # the format's keys only
    assert read_untagged("The answer is 3.", names) == ()
    assert read_untagged('<think>{"name": "add", "arguments": {}}', names) == ()  # cut while thinking
