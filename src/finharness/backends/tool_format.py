"""Tool calls of local models: the chat-template side (tools and turns in the OpenAI dict shape that Hugging Face
chat templates take) and a strict parser of the Hermes / Qwen2.5 `<tool_call>` format the model answers in.

Qwen2.5's template tells the model, for each call, to write

    <tool_call>
    {"name": <function-name>, "arguments": <args-json-object>}
    </tool_call>

`parse_tool_calls` reads a reply written that way and nothing looser. A reply is malformed (no call is kept, the
reply's text is kept whole, and `tool_call_error` says which block is wrong and why) when a block

- is not closed (`<tool_call>` without `</tool_call>`, e.g. cut by max_tokens) or a `</tool_call>` has no opening,
- does not hold exactly one JSON object (the error names the character where the JSON breaks),
- has keys other than `name` and `arguments` (`parameters`, which some Qwen prompts use, is refused too: the
  template the model was shown asks for `arguments`),
- has a `name` that is not text, or that no tool of the request has, or `arguments` that are not an object;

and a reply with no block at all is malformed when the whole of it (in a ``` fence or not) is a JSON object with a
`name` (or a list of such): a call written without its tags, never taken as a call. Any other reply without a block
is a text answer.

Calls get the ids `call_0`, `call_1`... in order, and their arguments as canonical JSON (as a provider's object is
written). Only the answer is read: a `<tool_call>` inside a `<think>` block is thinking, not a call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from ..core.backend import BackendError
from ..core.hashing import canonical_json
from ..core.reasoning import THINK_CLOSE, THINK_OPEN
from ..core.types import GenerateResponse, Message, ToolCall, ToolCallError, ToolSpec

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
CALL_KEYS = ("name", "arguments")


# --- what the chat template gets --------------------------------------------------------------------------------

def openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Tools as the OpenAI API and chat templates take them: `{"type": "function", "function": {...}}`."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": dict(t.parameters)}} for t in tools]


def template_turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat turns for a Hugging Face style chat template. A plain turn is `{"role", "content"}` exactly as before
    tools existed (so its prompt does not change); an assistant turn's calls go in `tool_calls` with their arguments
    as an object (Qwen2.5's template writes `arguments | tojson`: a JSON string there would be quoted twice; calls
    whose arguments are not an object keep their text), a tool turn keeps its call id and tool name."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        turn: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            turn["tool_calls"] = [{"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": _arguments_object(c)}}
                                  for c in m.tool_calls]
        if m.tool_call_id is not None:
            turn["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            turn["name"] = m.name
        turns.append(turn)
    return turns


def _arguments_object(call: ToolCall) -> Any:
    try:
        return call.parsed_arguments()
    except ToolCallError:
        return call.arguments


def template_takes_tools(template: str | None) -> bool:
    """Whether a chat template renders tools at all (Qwen2.5's does; most older templates never name them)."""
    return bool(template) and "tools" in template  # type: ignore[operator]


def unsupported_tools(spec: str, model: str) -> BackendError:
    """The error for a request with tools to a model whose chat template cannot show them."""
    return BackendError(f"{spec}: the chat template of {model} does not render tools (it never names `tools`), so "
                        "the model cannot be asked to call them; use a model whose template supports tool calling "
                        "(Qwen2.5, Hermes, Llama 3.1...)", kind="unsupported", retryable=False)


# --- reading the reply ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedReply:
    """A reply read for tool calls: the text outside the calls, the calls, or why they could not be read."""

    text: str
    """The reply less its `<tool_call>` blocks (stripped); the whole reply when `error` is set."""

    calls: tuple[ToolCall, ...] = ()

    error: str | None = None
    """What is malformed, naming the block (1-based) and the fault; None: every block was read."""


def parse_tool_calls(text: str, tool_names: Iterable[str]) -> ParsedReply:
    """Read the `<tool_call>` blocks of a reply strictly (module docstring); `tool_names`: the request's tools."""
    known = list(tool_names)
    start = _answer_start(text)
    if start is None:
        return ParsedReply(text)
    if CALL_OPEN not in text[start:] and CALL_CLOSE not in text[start:]:
        return ParsedReply(text, error=_untagged_call(text[start:]))
    kept: list[str] = [text[:start]]
    calls: list[ToolCall] = []
    position = start
    while True:
        opening, closing = text.find(CALL_OPEN, position), text.find(CALL_CLOSE, position)
        number = len(calls) + 1
        if opening < 0:
            if closing >= 0:
                return ParsedReply(text, error=f"tool call {number}: a {CALL_CLOSE} with no {CALL_OPEN} before it")
            kept.append(text[position:])
            break
        if closing >= 0 and closing < opening:
            return ParsedReply(text, error=f"tool call {number}: a {CALL_CLOSE} with no {CALL_OPEN} before it")
        body_start = opening + len(CALL_OPEN)
        nested = text.find(CALL_OPEN, body_start)
        if closing < 0 or (0 <= nested < closing):
            return ParsedReply(text, error=f"tool call {number}: {CALL_OPEN} is never closed by {CALL_CLOSE}")
        call, problem = _read_call(text[body_start:closing], len(calls), known)
        if problem is not None:
            return ParsedReply(text, error=f"tool call {number}: {problem}")
        calls.append(call)  # type: ignore[arg-type]
        kept.append(text[position:opening])
        position = closing + len(CALL_CLOSE)
    return ParsedReply("".join(kept).strip(), tuple(calls))


def _answer_start(text: str) -> int | None:
    """Where the answer begins: after the last `</think>`; None for a reply cut while thinking (all thinking)."""
    close = text.rfind(THINK_CLOSE)
    if close >= 0:
        return close + len(THINK_CLOSE)
    return None if text.lstrip().startswith(THINK_OPEN) else 0


def _untagged_call(answer: str) -> str | None:
    """Why an answer without any block is still a malformed call: the whole of it (in a ``` fence or not) is a
    JSON object with a 'name', or a list of them -- a call written without its tags (what Qwen2.5-Coder-0.5B
    writes). None: a text answer."""
    body = answer.strip()
    if body.startswith("```") and body.endswith("```") and len(body) >= 6:
        body = body[3:-3].removeprefix("json").strip()
    if not body.startswith(("{", "[")):
        return None
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None
    objects = value if isinstance(value, list) else [value]
    if objects and all(isinstance(v, dict) and "name" in v for v in objects):
        return (f"tool call 1: written without {CALL_OPEN} tags (a bare JSON object with 'name'); the format asks "
                f"for {CALL_OPEN}{{\"name\": ..., \"arguments\": {{...}}}}{CALL_CLOSE}")
    return None


def read_untagged(text: str, tool_names: Iterable[str]) -> tuple[ToolCall, ...]:
    """The calls of a reply written without its tags (the whole answer one JSON object with `name` and `arguments`,
    or a list of them, in a ``` fence or not), each read as strictly as a tagged block; () when the reply is not
    that, or any of its calls is malformed. For a caller that chooses to accept such replies (an agent episode's
    `lenient` reading), never for the backend's own parse."""
    start = _answer_start(text)
    if start is None or _untagged_call(text[start:]) is None:
        return ()
    body = text[start:].strip()
    if body.startswith("```"):
        body = body[3:-3].removeprefix("json").strip()
    value = json.loads(body)
    known = list(tool_names)
    calls = []
    for index, item in enumerate(value if isinstance(value, list) else [value]):
        call, problem = _read_call(json.dumps(item), index, known)
        if problem is not None:
            return ()
        calls.append(call)
    return tuple(calls)  # type: ignore[arg-type]


def _read_call(body: str, index: int, known: list[str]) -> tuple[ToolCall | None, str | None]:
    """(the call a block holds, None) or (None, what is wrong with it)."""
    stripped = body.strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as err:
        return None, f"invalid JSON at char {err.pos}: {err.msg}: {stripped[:120]!r}"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object with 'name' and 'arguments'"
    if "parameters" in value and "arguments" not in value:
        return None, "'parameters' instead of 'arguments' (the format asks for 'arguments')"
    extra = sorted(set(value) - set(CALL_KEYS))
    missing = [key for key in CALL_KEYS if key not in value]
    if extra or missing:
        return None, (f"keys {sorted(value)}, expected exactly 'name' and 'arguments'"
                      + (f" (missing {', '.join(missing)})" if missing else ""))
    name, arguments = value["name"], value["arguments"]
    if not isinstance(name, str):
        return None, f"'name' is a {type(name).__name__}, not text"
    if name not in known:
        return None, f"unknown tool {name!r} (the request's tools: {', '.join(known) or 'none'})"
    if not isinstance(arguments, dict):
        return None, f"the 'arguments' of {name!r} are a {type(arguments).__name__}, not an object"
    return ToolCall(f"call_{index}", name, canonical_json(arguments)), None


def with_tool_calls(response: GenerateResponse, tools: Sequence[ToolSpec]) -> GenerateResponse:
    """A local model's response with its tool calls read (`parse_tool_calls`); unchanged without tools. Calls read:
    the text outside them, finish_reason 'tool_calls' (a reply cut by max_tokens stays 'length'). Malformed: the
    whole text and its finish_reason kept, `tool_call_error` set."""
    if not tools:
        return response
    parsed = parse_tool_calls(response.text, (t.name for t in tools))
    if parsed.error is not None:
        return replace(response, tool_call_error=parsed.error)
    if not parsed.calls:
        return response
    finish = response.finish_reason if response.finish_reason == "length" else "tool_calls"
    return replace(response, text=parsed.text, tool_calls=parsed.calls, finish_reason=finish)
