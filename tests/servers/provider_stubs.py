"""Local stand-ins for what reasoning models' providers do, on 127.0.0.1 (an ephemeral port).

    with provider_server("openai-reasoning") as server:
        backend = from_spec(f"openai:o-stub@{server.base_url}")
        ...
        server.bodies  # what the client sent, in arrival order

Behaviours (one per server; `think` words of thinking, then the answer; a word is a token):

- `openai-reasoning`: a hosted OpenAI reasoning model. A body with `max_tokens` gets OpenAI's 400
  (`unsupported_parameter`, the exact body of the API), a temperature or top_p other than 1 its 400
  (`unsupported_value`); `max_completion_tokens` counts the hidden reasoning, reported in
  `usage.completion_tokens_details.reasoning_tokens`; a limit spent on reasoning gives content ""
  with finish_reason "length".
- `reasoning-field`: vLLM with a reasoning parser: the thinking in `message.reasoning_content` (or
  `reasoning`: `reasoning_key`), the answer in `content` (null when cut while thinking); no
  reasoning token count in usage, as vLLM sends none.
- `inline-think`: a server without a reasoning parser: `<think>…</think>` then the answer inside
  `content` (cut mid-thinking: an unclosed `<think>`).
- `anthropic-thinking`: the Messages API with extended thinking, and its rules: budget_tokens >= 1024,
  max_tokens > budget_tokens, no temperature other than 1, top_p only in [0.95, 1] -- each broken rule
  answered with the API's 400; thinking and text blocks; `usage.output_tokens_details.thinking_tokens`.
- `openai-tools` / `anthropic-tools`: a model that calls tools. Asked with `tools`, it calls the ones
  `calls(body)` names (default: every tool whose name occurs in the last user message, with the arguments
  `{"text": that message}`), several at once when there are several (parallel calls): OpenAI
  `message.tool_calls` with content null and finish_reason "tool_calls"; Anthropic a text block then one
  `tool_use` block per call, stop_reason "tool_use". Once the last turn holds tool results it answers
  'results: ' and the results joined by '; '. Both check the conversation as their API does and answer
  a broken one with the API's 400: OpenAI, every tool_call answered by a tool message right after it, and
  no tool message without a call; Anthropic, every tool_use answered by a tool_result in the very next
  (user) message, tool_results first in that message, and none without a tool_use before it.

Answers are deterministic: `answer(body)` (default: '答案：X', X a letter from a hash of the last
user message, so a letter exam can be scored).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any, Callable

from .local_http import JSONHandler, serving

BEHAVIOURS = ("openai-reasoning", "reasoning-field", "inline-think", "anthropic-thinking", "openai-tools",
              "anthropic-tools")

UNSUPPORTED_MAX_TOKENS = {"error": {
    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
               "Use 'max_completion_tokens' instead.",
    "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}
"""The OpenAI API's answer to `max_tokens` sent to a reasoning model."""


def unsupported_value(parameter: str, value: Any) -> dict:
    """The OpenAI API's answer to a sampling parameter a reasoning model does not take."""
    return {"error": {
        "message": f"Unsupported value: '{parameter}' does not support {value:g} with this model. "
                   "Only the default (1) value is supported.",
        "type": "invalid_request_error", "param": parameter, "code": "unsupported_value"}}


def anthropic_error(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


ANTHROPIC_TEMPERATURE = ("`temperature` may only be set to 1 when thinking is enabled or in interleaved "
                         "thinking mode. Please consult our documentation at https://docs.claude.com/en/docs/"
                         "build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking")


def last_user_text(body: dict) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    if not isinstance(content, str):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content


def letter_answer(body: dict) -> str:
    """'答案：X' with X in A-D from a hash of the last user message."""
    return "答案：" + "ABCD"[hashlib.sha256(last_user_text(body).encode()).digest()[0] % 4]


def tools_named_in_user_text(body: dict) -> list[tuple[str, Any]]:
    """The default tool-calling model: every tool offered whose name occurs in the last user message, in the
    order the tools were given, called with `{"text": that message}`."""
    text = last_user_text(body)
    names = [t.get("name") or t.get("function", {}).get("name") for t in body.get("tools", [])]
    return [(name, {"text": text}) for name in names if name and name in text]


def openai_conversation_problem(messages: list[dict]) -> str | None:
    """What the OpenAI API refuses in a conversation with tools (its 400 messages), None when it is well formed."""
    for i, message in enumerate(messages):
        calls = [c["id"] for c in message.get("tool_calls") or []] if message.get("role") == "assistant" else []
        answered = []
        for following in messages[i + 1:]:
            if following.get("role") != "tool":
                break
            answered.append(following.get("tool_call_id"))
        missing = [c for c in calls if c not in answered]
        if missing:
            return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}")
        if message.get("role") == "tool":
            before = next((m for m in reversed(messages[:i]) if m.get("role") != "tool"), {})
            if message.get("tool_call_id") not in [c["id"] for c in before.get("tool_calls") or []]:
                return ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        "with 'tool_calls'.")
    return None


def anthropic_conversation_problem(messages: list[dict]) -> str | None:
    """What the Messages API refuses about tool_use and tool_result blocks (its 400 messages), None when fine."""
    def blocks(message: dict) -> list[dict]:
        content = message.get("content")
        return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []

    for i, message in enumerate(messages):
        uses = [b["id"] for b in blocks(message) if b.get("type") == "tool_use"]
        following = blocks(messages[i + 1]) if i + 1 < len(messages) else []
        results = [b.get("tool_use_id") for b in following if b.get("type") == "tool_result"]
        missing = [u for u in uses if u not in results]
        if uses and missing:
            return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in "
                    "the next message.")
        types = [b.get("type") for b in blocks(message)]
        if "tool_result" in types:
            previous = blocks(messages[i - 1]) if i > 0 else []
            known = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for j, block in enumerate(blocks(message)):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in known:
                    return (f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                            "`tool_use` block in the previous message.")
            if types[:types.count("tool_result")] != ["tool_result"] * types.count("tool_result"):
                return f"messages.{i}: `tool_result` blocks must come first in the content of a user message."
    return None


@dataclass
class Reply:
    """One generation as the stub model makes it, cut at the token limit."""

    thinking: list[str]
    """The words of thinking produced (all of them, or as many as the limit allowed)."""
    answer: str | None
    """The answer, None when the limit was spent thinking; cut to the words that fit."""
    finished: bool
    """False when the limit cut the reply."""

    @property
    def tokens(self) -> int:
        return len(self.thinking) + (len(self.answer.split()) if self.answer else 0)


def make_reply(body: dict, limit: int, think: int, answer: str) -> Reply:
    seed = hashlib.sha256(last_user_text(body).encode()).hexdigest()[:8]
    words = [f"think-{seed}-{i}" for i in range(think)]
    if limit < think:
        return Reply(words[:limit], None, False)
    answer_words = answer.split()
    room = limit - think
    return Reply(words, " ".join(answer_words[:room]) if room < len(answer_words) else answer,
                 room >= len(answer_words))


class StubServer(ThreadingHTTPServer):
    """The running stub; read `bodies` after the client's calls have returned."""

    def __init__(self, behaviour: str, *, think: int, reasoning_key: str, answer: Callable[[dict], str],
                 calls: Callable[[dict], list[tuple[str, Any]]] = tools_named_in_user_text):
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}; known: {BEHAVIOURS}")
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.think = think
        self.reasoning_key = reasoning_key
        self.answer = answer
        self.calls = calls
        """The tool-calling behaviours' model: body -> [(tool name, arguments: an object, or text sent as is)]."""
        self.bodies: list[dict] = []
        """Every POST body, in arrival order (refused ones included)."""
        self.refusals: list[str] = []
        """The message of every 400 sent, in order."""
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def handle_error(self, request, client_address) -> None:
        pass

    # --- the behaviours: (status, payload) for one POST body -----------------------------------

    def openai_tools(self, body: dict) -> tuple[int, dict]:
        messages = body.get("messages", [])
        problem = openai_conversation_problem(messages)
        if problem is not None:
            return 400, {"error": {"message": problem, "type": "invalid_request_error", "param": "messages",
                                   "code": None}}
        usage = {"prompt_tokens": len(last_user_text(body).split()), "completion_tokens": 3, "total_tokens": 0}
        results: list[str] = []
        for turn in reversed(messages):  # the tool messages that end the conversation
            if turn.get("role") != "tool":
                break
            results.insert(0, turn["content"])
        if results:
            message: dict[str, Any] = {"role": "assistant", "content": "results: " + "; ".join(results)}
            finish = "stop"
        else:
            seed = hashlib.sha256(last_user_text(body).encode()).hexdigest()[:6]
            calls = self.calls(body) if body.get("tools") else []
            message = {"role": "assistant", "content": None if calls else self.answer(body)}
            if calls:
                message["tool_calls"] = [
                    {"id": f"call_{seed}_{i}", "type": "function",
                     "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                    for i, (name, args) in enumerate(calls)]
            finish = "tool_calls" if calls else "stop"
        return 200, {"id": "chatcmpl-stub", "object": "chat.completion", "model": body.get("model"),
                     "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}

    def anthropic_tools(self, body: dict) -> tuple[int, dict]:
        messages = body.get("messages", [])
        problem = anthropic_conversation_problem(messages)
        if problem is not None:
            return 400, anthropic_error(problem)
        last = messages[-1].get("content") if messages else ""
        results = [b["content"] for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(last, list) else []
        if results:
            content: list[dict] = [{"type": "text", "text": "results: " + "; ".join(results)}]
            stop = "end_turn"
        else:
            seed = hashlib.sha256(last_user_text(body).encode()).hexdigest()[:6]
            calls = self.calls(body) if body.get("tools") else []
            content = [{"type": "text", "text": "I'll use the tools." if calls else self.answer(body)}]
            content += [{"type": "tool_use", "id": f"toolu_{seed}_{i}", "name": name, "input": args}
                        for i, (name, args) in enumerate(calls)]
            stop = "tool_use" if calls else "end_turn"
        return 200, {"id": "msg_stub", "type": "message", "role": "assistant", "model": body.get("model"),
                     "content": content, "stop_reason": stop,
                     "usage": {"input_tokens": len(last_user_text(body).split()), "output_tokens": 3}}

    def openai(self, body: dict) -> tuple[int, dict]:
        if self.behaviour == "openai-tools":
            return self.openai_tools(body)
        if self.behaviour == "openai-reasoning":
            if "max_tokens" in body:
                return 400, UNSUPPORTED_MAX_TOKENS
            for name in ("temperature", "top_p"):
                if name in body and body[name] != 1:
                    return 400, unsupported_value(name, body[name])
            limit = int(body.get("max_completion_tokens") or 4096)
        else:
            limit = int(body.get("max_tokens") or 4096)
        reply = make_reply(body, limit, self.think, self.answer(body))
        message: dict[str, Any] = {"role": "assistant"}
        usage: dict[str, Any] = {"prompt_tokens": len(last_user_text(body).split()), "completion_tokens": reply.tokens}
        if self.behaviour == "openai-reasoning":
            message["content"] = reply.answer or ""
            usage["completion_tokens_details"] = {"reasoning_tokens": len(reply.thinking)}
        elif self.behaviour == "reasoning-field":
            message["content"] = reply.answer
            message[self.reasoning_key] = " ".join(reply.thinking)
        else:
            closed = reply.answer is not None
            message["content"] = ("<think>" + " ".join(reply.thinking) + ("</think>\n\n" + reply.answer if closed else ""))
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return 200, {"id": "chatcmpl-stub", "object": "chat.completion", "model": body.get("model"),
                     "choices": [{"index": 0, "message": message,
                                  "finish_reason": "stop" if reply.finished else "length"}],
                     "usage": usage}

    def anthropic(self, body: dict) -> tuple[int, dict]:
        if self.behaviour == "anthropic-tools":
            return self.anthropic_tools(body)
        thinking = body.get("thinking")
        max_tokens = int(body["max_tokens"])
        if thinking:
            budget = int(thinking["budget_tokens"])
            if budget < 1024:
                return 400, anthropic_error("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
            if max_tokens <= budget:
                return 400, anthropic_error("`max_tokens` must be greater than `thinking.budget_tokens`. Please "
                                            "consult our documentation at https://docs.claude.com/en/docs/"
                                            "build-with-claude/extended-thinking#max-tokens-and-context-window-size")
            if body.get("temperature", 1) != 1:
                return 400, anthropic_error(ANTHROPIC_TEMPERATURE)
            if not 0.95 <= body.get("top_p", 1) <= 1:
                return 400, anthropic_error("`top_p` must be greater than or equal to 0.95 or unset when thinking "
                                            "is enabled.")
            reply = make_reply(body, max_tokens, min(self.think, budget), self.answer(body))
        else:
            reply = make_reply(body, max_tokens, 0, self.answer(body))
        content = []
        if reply.thinking:
            content.append({"type": "thinking", "thinking": " ".join(reply.thinking), "signature": "sig-stub"})
        if reply.answer is not None:
            content.append({"type": "text", "text": reply.answer})
        usage: dict[str, Any] = {"input_tokens": len(last_user_text(body).split()), "output_tokens": reply.tokens}
        if thinking:
            usage["output_tokens_details"] = {"thinking_tokens": len(reply.thinking)}
        return 200, {"id": "msg_stub", "type": "message", "role": "assistant", "model": body.get("model"),
                     "content": content, "stop_reason": "end_turn" if reply.finished else "max_tokens",
                     "usage": usage}


class _Handler(JSONHandler):
    server: StubServer

    def do_GET(self) -> None:
        self.model_listing({"id": "stub-model", "owned_by": f"stub:{self.server.behaviour}"})

    def do_POST(self) -> None:
        body = self.read_json()
        server = self.server
        anthropic = server.behaviour.startswith("anthropic")
        if self.path != ("/v1/messages" if anthropic else "/v1/chat/completions"):
            return self.no_route()
        with server.lock:
            server.bodies.append(body)
        status, payload = server.anthropic(body) if anthropic else server.openai(body)
        if status != 200:
            with server.lock:
                server.refusals.append(payload["error"]["message"])
        self.send_json(status, payload)


def provider_server(behaviour: str, *, think: int = 40, reasoning_key: str = "reasoning_content",
                    answer: Callable[[dict], str] = letter_answer,
                    calls: Callable[[dict], list[tuple[str, Any]]] = tools_named_in_user_text,
                    ) -> contextlib.AbstractContextManager[StubServer]:
    """Run a stub of `behaviour` (BEHAVIOURS) in a daemon thread; `think`: words of thinking per reply; `calls`: the
    tools the tool-calling behaviours call for a body."""
    return serving(StubServer(behaviour, think=think, reasoning_key=reasoning_key, answer=answer, calls=calls))
