"""Anthropic Messages API.

Spec: `anthropic:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS&thinking_budget=N]`
(BASE_URL default https://api.anthropic.com/v1; key from $ANTHROPIC_API_KEY).
Plain httpx, no SDK, so the harness's single retry layer sees every retry.

`thinking_budget=N` (N >= 1024, the API's minimum) turns on extended thinking with `budget_tokens` N,
under the API's rules: `max_tokens` must exceed the budget, so it is sent as the answer's max_tokens
plus N; the temperature must stay at its default 1, so it is left out (a greedy request is then
sampled), and top_p below 0.95 is left out too. Each such change is recorded in the response's
`adaptations`. The thinking blocks come back as `GenerateResponse.reasoning`, apart from the answer.

Prompt caching (`?cache=0` turns it off): `cache_control` breakpoints on the system prompt and, in a request with
earlier turns, on the history and the last turn, where the prefix is long enough to be cached
(backends/prompt_cache.py); the usage's cache reads and writes become `GenerateResponse.cached_tokens` and
`cache_write_tokens`, and `prompt_tokens` is every prompt token (fresh, read and written). The marks change what is
billed, not what the model answers: they are not part of the identity.

Tool calls: a request's tools go as `tools` ([{"name", "description", "input_schema"}]), an assistant turn's calls
as `tool_use` blocks, tool turns as `tool_result` blocks of one user message (`anthropic_messages`); the reply's
`tool_use` blocks become `GenerateResponse.tool_calls` (their input as canonical JSON), stop_reason `tool_use`
finish_reason 'tool_calls'.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..core.backend import BaseBackend, Capabilities
from ..core.hashing import canonical_json
from ..core.reasoning import thinking_limit
from ..core.types import Adaptation, GenerateRequest, GenerateResponse, Message, ToolCall, ToolCallError
from .http_common import (
    LoopBoundClient,
    RemoteError,
    RemoteOptions,
    RemoteSpec,
    bad_response,
    endpoint_problem,
    flag_option,
    int_option,
    parse_remote_spec,
    post_json,
    warn_once,
)
from .prompt_cache import block_tokens, breakpoints, min_cache_tokens, with_cache_control

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"

FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
"""Anthropic stop_reason -> the harness's finish_reason; others (refusal, pause_turn...) pass through."""

MIN_THINKING_BUDGET = 1024
"""The API's smallest `budget_tokens`."""

THINKING_TOP_P = 0.95
"""With thinking, the API takes top_p only in [0.95, 1]."""


class AnthropicBackend(BaseBackend):
    """A model behind POST {base_url}/messages."""

    def __init__(self, spec: str, remote: RemoteSpec):
        self.spec = spec
        self.remote = remote
        self.capabilities = Capabilities(
            generate=True, loglikelihood=False, next_token_logprobs=False,
            max_concurrency=remote.concurrency, penalties=False, seed=False)
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if remote.api_key:
            headers["x-api-key"] = remote.api_key
        self._client = LoopBoundClient(remote, headers)
        self._headers = headers
        self._warned: set[str] = set()
        self.thinking_budget = int_option(spec, remote.options, "thinking_budget", minimum=MIN_THINKING_BUDGET)
        """Extended thinking's budget_tokens (None: no thinking)."""
        self.cache = flag_option(spec, remote.options, "cache") if "cache" in remote.options else True
        """Mark the stable prefix for the prompt cache (`?cache=0`: never)."""
        self.cache_minimum = min_cache_tokens(remote.model)
        """The shortest prefix (estimated tokens) the model caches: shorter ones are never marked."""

    def preflight(self) -> str | None:
        """Why the server cannot be used (None: it answers): GET {base_url}/models, before a run's first call."""
        return endpoint_problem(f"{self.remote.base_url}/models", self._headers)

    def identity(self) -> Mapping[str, Any]:
        identity = {"api": "anthropic", "model": self.remote.model, "base_url": self.remote.base_url,
                    "anthropic_version": ANTHROPIC_VERSION}
        if self.thinking_budget is not None:  # only when asked: a plain spec's identity stays as it was
            identity["thinking_budget"] = self.thinking_budget
        return identity

    def completion_limits(self, params: Any) -> tuple[int, int | None]:
        """(the completion limit a call is sent with: max_tokens, plus the budget with extended thinking; None: the
        spec says whether the model thinks)."""
        if self.thinking_budget is None:
            return params.max_tokens, None
        return thinking_limit(params, self.thinking_budget)[0], None

    def prompt_cache(self) -> Any:
        """A replay of the provider's prompt cache for the dry run's caching estimate (prompt_cache.PrefixCache: the
        marked prefixes only); None with `?cache=0` (nothing is marked, nothing cached)."""
        from .prompt_cache import PrefixCache

        return PrefixCache("breakpoints", self.cache_minimum) if self.cache else None

    def cache_blocks(self, request: GenerateRequest) -> list[Any]:
        """The request as the prompt cache sees it, with the marks the backend puts (prompt_cache.anthropic_blocks)."""
        from .prompt_cache import anthropic_blocks

        return anthropic_blocks(self.payload(request))

    def payload(self, request: GenerateRequest) -> dict[str, Any]:
        """The JSON body of one Messages call: system turns go to the top-level `system` field."""
        return self.payload_and_adaptations(request)[0]

    def payload_and_adaptations(self, request: GenerateRequest) -> tuple[dict[str, Any], tuple[Adaptation, ...]]:
        """The body, and what in it differs from what the request asked (the thinking rules)."""
        params = request.params
        if params.top_logprobs:
            raise RemoteError(f"{self.spec}: the Anthropic API returns no logprobs "
                              "(check capabilities.next_token_logprobs before asking)",
                              kind="unsupported", retryable=False)
        if params.frequency_penalty or params.presence_penalty:
            warn_once(self._warned, "penalties", f"{self.spec}: Anthropic has no frequency/presence "
                      "penalties; they are ignored (capabilities.penalties is False)")
        if params.seed is not None:
            warn_once(self._warned, "seed", f"{self.spec}: Anthropic has no sampling seed; it is "
                      "ignored (capabilities.seed is False)")
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.remote.model,
            "max_tokens": params.max_tokens,
            "messages": anthropic_messages(request.messages, self.spec),
            "temperature": params.temperature,
        }
        if system:
            body["system"] = system
        if request.tools:  # only when asked: a body without tools is what it always was
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                             for t in request.tools]
        # Newer Claude models refuse temperature and top_p together: send top_p only when it matters.
        if params.top_p < 1.0:
            body["top_p"] = params.top_p
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        if self.cache:
            mark_cache(body, self.cache_minimum)
        adaptations: list[Adaptation] = []
        budget = self.thinking_budget
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"], budgeted = thinking_limit(
                params, budget, rule="the API counts thinking in max_tokens, which must exceed budget_tokens")
            adaptations.append(budgeted)
            del body["temperature"]
            if params.temperature != 1.0:
                adaptations.append(Adaptation("temperature", params.temperature, None,
                                              "extended thinking takes only the default temperature 1"))
            if params.top_p < THINKING_TOP_P:
                del body["top_p"]
                adaptations.append(Adaptation("top_p", params.top_p, None,
                                              f"extended thinking takes top_p only in [{THINKING_TOP_P}, 1]"))
        return body, tuple(adaptations)

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        what = f"POST {self.remote.base_url}/messages (model {self.remote.model})"
        sent, adaptations = self.payload_and_adaptations(request)
        body = await post_json(self._client.get(), "/messages", sent, what)
        return parse_message(body, what, adaptations)

    async def aclose(self) -> None:
        await self._client.aclose()


def mark_cache(body: dict[str, Any], minimum: int) -> None:
    """Put cache_control breakpoints into a Messages body (prompt_cache.breakpoints): the system prompt becomes a text
    block when marked, and each marked message's last block carries the mark."""
    system = body.get("system")
    before = sum(block_tokens(json.dumps(t, ensure_ascii=False)) for t in body.get("tools", ())) + (
        block_tokens(system) if system else 0)
    marks = breakpoints(before, body["messages"], minimum)
    if marks.system and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    for i in marks.messages:
        body["messages"][i] = with_cache_control(body["messages"][i])


def parse_message(body: Mapping[str, Any], what: str, adaptations: tuple[Adaptation, ...] = ()) -> GenerateResponse:
    """A Messages reply (a live call's body, or a batch result's `message`) -> GenerateResponse: text, thinking apart,
    tool calls, usage with the prompt cache's reads and writes apart."""
    content = body.get("content")
    stop_reason = body.get("stop_reason")
    if not isinstance(content, list):
        raise bad_response(what, f"no content list in {str(body)[:120]}")
    blocks = [block for block in content if isinstance(block, dict)]
    text = "".join(block.get("text", "") for block in blocks if block.get("type") == "text")
    thinking = [block.get("thinking", "") if block.get("type") == "thinking" else "[redacted thinking]"
                for block in blocks if block.get("type") in ("thinking", "redacted_thinking")]
    tool_calls, tool_call_error = read_tool_uses(blocks)
    # An empty answer is real only when the server says why it stopped, or it called tools.
    if not text and not stop_reason and not (tool_calls or tool_call_error):
        raise bad_response(what, f"empty content and no stop_reason in {str(body)[:120]}")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    details = usage.get("output_tokens_details") if isinstance(usage.get("output_tokens_details"), dict) else {}
    # input_tokens counts only what follows the last cache hit or write: the prompt is all three
    read = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    return GenerateResponse(
        text=text,
        finish_reason=FINISH_REASONS.get(stop_reason, str(stop_reason or "unknown")),
        prompt_tokens=int(usage.get("input_tokens") or 0) + read + written,
        completion_tokens=int(usage.get("output_tokens") or 0),
        reasoning="\n\n".join(thinking) if thinking else None,
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
        adaptations=adaptations,
        tool_calls=tool_calls,
        tool_call_error=tool_call_error,
        cached_tokens=read,
        cache_write_tokens=written,
    )


def anthropic_messages(messages: Sequence[Message], spec: str) -> list[dict[str, Any]]:
    """The non-system turns in the API's shape. A plain turn is `{"role", "content": text}` as before tools
    existed. An assistant turn's calls are `tool_use` blocks (after a text block when it says something too); tool
    turns become `tool_result` blocks of one user message -- consecutive ones merged, and a user turn right after
    them joins that message as a text block -- since the API wants user and assistant to alternate and every
    tool_use answered in the very next message."""
    out: list[dict[str, Any]] = []
    answering = False  # the last message is a user message made of tool results
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            if m.tool_call_id is None:
                raise RemoteError(f"{spec}: a tool turn without tool_call_id: the Anthropic API needs the id of the "
                                  "tool_use it answers", kind="client_error", retryable=False)
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if answering:
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
                answering = True
            continue
        if m.role == "user" and answering:
            out[-1]["content"].append({"type": "text", "text": m.content})
            continue
        answering = False
        if m.role == "assistant" and m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c, spec)}
                       for c in m.tool_calls]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _tool_input(call: ToolCall, spec: str) -> dict[str, Any]:
    """A call's arguments as the object `tool_use.input` must be; one that is not an object cannot be sent."""
    try:
        return call.parsed_arguments()
    except ToolCallError as err:
        raise RemoteError(f"{spec}: an assistant turn's tool call cannot be sent to the Anthropic API, whose "
                          f"tool_use input must be an object: {err}", kind="client_error", retryable=False) from None


def read_tool_uses(blocks: Sequence[Mapping[str, Any]]) -> tuple[tuple[ToolCall, ...], str | None]:
    """The reply's `tool_use` blocks -> (calls in order, with their input as canonical JSON, None), or ((), why
    one cannot be read)."""
    calls = []
    for i, block in enumerate(b for b in blocks if b.get("type") == "tool_use"):
        call_id, name, given = block.get("id"), block.get("name"), block.get("input")
        if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
            return (), f"tool call {i + 1}: a tool_use block without an id or a name: {str(block)[:120]}"
        if not isinstance(given, dict):
            return (), f"tool call {i + 1}: the input of {name!r} is a {type(given).__name__}, not an object"
        calls.append(ToolCall(call_id, name, canonical_json(given)))
    return tuple(calls), None


@dataclass(frozen=True)
class AnthropicOptions(RemoteOptions):
    """The query options of an `anthropic:` spec."""

    thinking_budget: int | None = None
    """Extended thinking with this many tokens (at least 1,024, the API's minimum); its tokens are added to the
    answer's limit."""

    cache: bool = True
    """Mark the stable prompt prefix for the provider's prompt cache (`cache=0`: never)."""


SpecOptions = AnthropicOptions
"""What `finharness list --backends` shows for the scheme."""


def from_spec(spec: str) -> AnthropicBackend:
    """`anthropic:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS&thinking_budget=N]`."""
    remote = parse_remote_spec(spec, scheme="anthropic", default_base_url=DEFAULT_BASE_URL,
                               default_key_env="ANTHROPIC_API_KEY", declared=AnthropicOptions)
    return AnthropicBackend(spec, remote)
