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

Answers are deterministic: `answer(body)` (default: '答案：X', X a letter from a hash of the last
user message, so a letter exam can be scored).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any, Callable

from .local_http import JSONHandler, serving

BEHAVIOURS = ("openai-reasoning", "reasoning-field", "inline-think", "anthropic-thinking")

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

    def __init__(self, behaviour: str, *, think: int, reasoning_key: str, answer: Callable[[dict], str]):
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}; known: {BEHAVIOURS}")
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.think = think
        self.reasoning_key = reasoning_key
        self.answer = answer
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

    def openai(self, body: dict) -> tuple[int, dict]:
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
        anthropic = server.behaviour == "anthropic-thinking"
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
                    answer: Callable[[dict], str] = letter_answer) -> contextlib.AbstractContextManager[StubServer]:
    """Run a stub of `behaviour` (BEHAVIOURS) in a daemon thread; `think`: words of thinking per reply."""
    return serving(StubServer(behaviour, think=think, reasoning_key=reasoning_key, answer=answer))
