"""OpenAI-compatible chat completions: hosted OpenAI, vLLM, SGLang, llama.cpp server...

Spec: `openai:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS]`
(BASE_URL includes the version path, default https://api.openai.com/v1; the key
comes from $OPENAI_API_KEY or the variable named by key_env and may be absent
for local servers). Plain httpx, no SDK: the SDK retries on its own, and the
harness must see and count every retry (finharness.core.retry).

Reasoning models: `reasoning_effort=low|medium|high` (sent as is), `max_completion_tokens=1` (the token
limit under that name, which counts reasoning tokens too), `omit=temperature,top_p` (parameters the
model refuses) and `thinking_budget=N` state up front what the served model takes; they are part of
the identity. What the spec does not state the backend learns: a 400 that names an unsupported
parameter or value (`code: unsupported_parameter | unsupported_value`) is answered once with the
accepted form, which is then kept for the backend's life (`RequestForm`). Every call records, in
`GenerateResponse.adaptations`, what it sent in another form than asked, so results.json can say so.

Tool calls: a request's tools go as `tools` ([{"type": "function", "function": {...}}]), an assistant turn's calls
as its `tool_calls`, a tool turn as `{"role": "tool", "tool_call_id", "content"}`; the reply's
`message.tool_calls` become `GenerateResponse.tool_calls` in order (parallel calls), finish_reason 'tool_calls'.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Mapping

from ..core.backend import BaseBackend, Capabilities, SpecError
from ..core.hashing import canonical_json
from ..core.reasoning import thinking_limit
from ..core.types import Adaptation, GenerateRequest, GenerateResponse, Message, TokenLogprob, ToolCall
from .http_common import (
    LoopBoundClient,
    RemoteOptions,
    RemoteSpec,
    StatusError,
    bad_response,
    endpoint_problem,
    fetch_json_sync,
    flag_option,
    int_option,
    parse_remote_spec,
    post_json,
)
from .tool_format import openai_tools

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_SERVER_MODEL_FIELDS = ("id", "root", "owned_by", "max_model_len", "meta")
"""Stable fields of a /models entry; 'created' is left out: vLLM stamps it with the current time."""

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
"""Values of `reasoning_effort` the OpenAI API knows."""

OMITTABLE = {"temperature": 1.0, "top_p": 1.0}
"""Sampling parameters a reasoning model may refuse, and the API's default, which the model then uses."""

@dataclass(frozen=True)
class OpenAIOptions(RemoteOptions):
    """The query options of an `openai:` spec (docs/backends.md, reasoning models)."""

    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {"reasoning_effort": REASONING_EFFORTS}

    reasoning_effort: str | None = None
    """Sent as `reasoning_effort` (a reasoning model: its thinking effort)."""

    max_completion_tokens: int | None = None
    """1: the token limit goes under that name (what o-series models take instead of max_tokens)."""

    omit: str | None = None
    """Parameters left out of every request, comma-separated (temperature,top_p): the model uses its defaults."""

    thinking_budget: int | None = None
    """Thinking tokens added to the answer's limit (0 to 10,000,000)."""


SpecOptions = OpenAIOptions
"""What `finharness list --backends` shows for the scheme."""

_QUOTED = re.compile(r"'([A-Za-z_]+)'")
_USE_INSTEAD = re.compile(r"[Uu]se '([A-Za-z_]+)' instead")


@dataclass
class RequestForm:
    """What the served model accepts: stated by the spec, or learned from its refusals (kept for the
    backend's life, shared by every call)."""

    token_limit: str = "max_tokens"
    """The name the token limit is sent under: 'max_tokens', or 'max_completion_tokens', the only one reasoning
    models take (it counts their reasoning tokens too)."""

    omitted: dict[str, str] = field(default_factory=dict)
    """Parameters left out -> why (the spec, or the server's refusal)."""

    learned: dict[str, str] = field(default_factory=dict)
    """Parameters learned from a refusal -> the server's message."""

    thinking_budget: int | None = None
    """Thinking tokens stated by the spec (`thinking_budget=N`); beats the task's."""

    reasoning_effort: str | None = None
    """Sent as `reasoning_effort` when set."""

    @property
    def thinks(self) -> bool:
        """The model spends tokens thinking within its token limit, so a thinking budget is added to it."""
        return (self.token_limit == "max_completion_tokens" or self.thinking_budget is not None
                or self.reasoning_effort not in (None, "none"))

    def stated(self) -> dict[str, Any]:
        """What the spec stated (the identity's part of it)."""
        out: dict[str, Any] = {}
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        if self.token_limit != "max_tokens" and "max_completion_tokens" not in self.learned:
            out["token_limit"] = self.token_limit
        spec_omitted = sorted(name for name in self.omitted if name not in self.learned)
        if spec_omitted:
            out["omit"] = spec_omitted
        if self.thinking_budget is not None:
            out["thinking_budget"] = self.thinking_budget
        return out


def parse_form(spec: str, options: Mapping[str, str]) -> RequestForm:
    """The RequestForm a spec states; SpecError for values the API would not take."""
    form = RequestForm()
    effort = options.get("reasoning_effort")
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise SpecError(f"model spec {spec!r}: reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}, "
                            f"got {effort!r}")
        form.reasoning_effort = effort
    if flag_option(spec, options, "max_completion_tokens"):
        form.token_limit = "max_completion_tokens"
    for name in filter(None, (n.strip() for n in options.get("omit", "").split(","))):
        if name not in OMITTABLE:
            raise SpecError(f"model spec {spec!r}: omit takes {', '.join(OMITTABLE)}, got {name!r}")
        form.omitted[name] = "left out by the spec (omit=...)"
    form.thinking_budget = int_option(spec, options, "thinking_budget", minimum=0)
    return form


class OpenAICompatBackend(BaseBackend):
    """A model behind POST {base_url}/chat/completions."""

    def __init__(self, spec: str, remote: RemoteSpec):
        self.spec = spec
        self.remote = remote
        self.form = parse_form(spec, remote.options)
        self._form_lock = threading.Lock()
        self.capabilities = Capabilities(
            generate=True, loglikelihood=False, next_token_logprobs=True,
            max_concurrency=remote.concurrency, penalties=True, seed=True)
        headers = {"Authorization": f"Bearer {remote.api_key}"} if remote.api_key else {}
        self._headers = headers
        self._client = LoopBoundClient(remote, headers)
        self._server_model: Mapping[str, Any] | None = None
        self._server_model_fetched = False

    def identity(self) -> Mapping[str, Any]:
        identity = {"api": "openai", "model": self.remote.model, "base_url": self.remote.base_url,
                    "server_model": self.server_model()}
        stated = self.form.stated()
        if stated:  # only when stated: the identity of a plain spec stays what it always was
            identity["request_form"] = stated
        return identity

    def preflight(self) -> str | None:
        """Why the server cannot be used (None: it answers): GET {base_url}/models, before a run's first call."""
        return endpoint_problem(f"{self.remote.base_url}/models", self._headers)

    def server_model(self) -> Mapping[str, Any] | None:
        """What GET /models says about the served model (asked once, cached; None if it does not answer).

        A server that serves one model under another name (llama.cpp, vLLM
        --served-model-name) is described by its single entry."""
        if not self._server_model_fetched:
            self._server_model_fetched = True
            listing = fetch_json_sync(f"{self.remote.base_url}/models", self._headers)
            entries = listing.get("data") if isinstance(listing, dict) else None
            if isinstance(entries, list):
                entries = [e for e in entries if isinstance(e, dict)]
                match = [e for e in entries if e.get("id") == self.remote.model]
                entry = match[0] if match else entries[0] if len(entries) == 1 else None
                if entry is not None:
                    self._server_model = {k: entry[k] for k in _SERVER_MODEL_FIELDS if k in entry}
        return self._server_model

    def completion_limits(self, params: Any) -> tuple[int, int | None]:
        """(the completion limit a call with `params` is sent with, the one it would be sent with once the server
        shows that the model thinks; None where the spec says so or the backend has learned it): a dry run plans
        both, since a hosted reasoning model is only known by its first refusal of max_tokens."""
        with_thinking = thinking_limit(params, self.form.thinking_budget)[0]
        if self.form.thinks:
            return with_thinking, None
        if self.form.reasoning_effort == "none" or self.form.learned:  # stated, or the server has answered already
            return params.max_tokens, None
        return params.max_tokens, with_thinking

    def prompt_cache(self) -> Any:
        """A replay of the provider's prompt cache for the dry run's caching estimate (prompt_cache.PrefixCache):
        OpenAI caches every long prefix by itself."""
        from .prompt_cache import OPENAI_MIN_CACHE_TOKENS, PrefixCache

        return PrefixCache("automatic", OPENAI_MIN_CACHE_TOKENS)

    def cache_blocks(self, request: GenerateRequest) -> list[Any]:
        """The request as the prompt cache sees it (prompt_cache.openai_blocks)."""
        from .prompt_cache import openai_blocks

        return openai_blocks(request.messages, openai_tools(request.tools))

    def payload(self, request: GenerateRequest) -> dict[str, Any]:
        """The JSON body of one chat completion, in the form the model accepts."""
        return self.payload_and_adaptations(request)[0]

    def payload_and_adaptations(self, request: GenerateRequest) -> tuple[dict[str, Any], tuple[Adaptation, ...]]:
        """The body, and what in it differs from what the request asked (RequestForm)."""
        params = request.params
        form = self.form
        adaptations: list[Adaptation] = []
        body: dict[str, Any] = {
            "model": self.remote.model,
            "messages": [chat_message(m) for m in request.messages],
        }
        if request.tools:  # only when asked: a body without tools is what it always was
            body["tools"] = openai_tools(request.tools)
        limit = params.max_tokens
        if form.thinks:
            limit, budgeted = thinking_limit(params, form.thinking_budget, limit_name=form.token_limit)
            refusal = form.learned.get("max_completion_tokens")
            if refusal is not None:
                budgeted = replace(budgeted, reason=f"server: {refusal}; {budgeted.reason}", learned=True)
            adaptations.append(budgeted)
        body[form.token_limit] = limit
        for name, default in OMITTABLE.items():
            asked = getattr(params, name)
            if name not in form.omitted:
                body[name] = asked
            elif asked != default:  # left out at the API's default: a change only when another value was asked
                adaptations.append(Adaptation(name, asked, None, form.omitted[name], learned=name in form.learned))
        if form.reasoning_effort is not None:
            body["reasoning_effort"] = form.reasoning_effort
        if params.stop:
            body["stop"] = list(params.stop)
        if request.backend_seed is not None:
            body["seed"] = request.backend_seed
        # Sent only when set: some compatible servers reject fields they do not know.
        if params.frequency_penalty:
            body["frequency_penalty"] = params.frequency_penalty
        if params.presence_penalty:
            body["presence_penalty"] = params.presence_penalty
        if params.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = params.top_logprobs
        return body, tuple(adaptations)

    def learn(self, refusal: StatusError, sent: Mapping[str, Any]) -> bool:
        """Learn from a 400 that refuses a parameter `sent` carried; True when the same request can now go
        in a form the model accepts (each parameter is learned once: a request is retried at most once
        per parameter)."""
        parameter, substitute = refused_parameter(refusal)
        if parameter is None or parameter not in sent:
            return False
        message = str(refusal.error.get("message", refusal))
        with self._form_lock:
            form = self.form
            if parameter == "max_tokens" and substitute in (None, "max_completion_tokens"):
                if form.token_limit != "max_completion_tokens":
                    form.token_limit = "max_completion_tokens"
                    form.learned["max_completion_tokens"] = message
                return True
            if parameter in OMITTABLE:
                if parameter not in form.omitted:
                    form.omitted[parameter] = f"server: {message}"
                    form.learned[parameter] = message
                return True
        return False

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        what = f"POST {self.remote.base_url}/chat/completions (model {self.remote.model})"
        while True:
            body, adaptations = self.payload_and_adaptations(request)
            try:
                reply = await post_json(self._client.get(), "/chat/completions", body, what)
            except StatusError as err:
                if err.status == 400 and self.learn(err, body):
                    continue  # at once, in the accepted form: the refused parameter is no longer in the body
                raise
            break
        return parse_chat_reply(reply, what, request, adaptations)

    async def aclose(self) -> None:
        await self._client.aclose()


def refused_parameter(refusal: StatusError) -> tuple[str | None, str | None]:
    """(the parameter a 400 refuses, the name to use instead) when the refusal is OpenAI's
    unsupported_parameter / unsupported_value; (None, None) for any other 400."""
    error = refusal.error
    message = str(error.get("message") or "")
    code = error.get("code")
    if code not in ("unsupported_parameter", "unsupported_value") and not message.startswith(
            ("Unsupported parameter", "Unsupported value")):
        return None, None
    parameter = error.get("param")
    if not isinstance(parameter, str) or not parameter:
        quoted = _QUOTED.search(message)
        parameter = quoted.group(1) if quoted else None
    instead = _USE_INSTEAD.search(message)
    return parameter, instead.group(1) if instead else None


def chat_message(message: Message) -> dict[str, Any]:
    """One turn in the API's shape: an assistant turn's tool calls (content null when it says nothing else), a
    tool turn with the id of the call it answers; any other turn `{"role", "content"}` as before tools existed."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.tool_calls:
        return {"role": message.role, "content": message.content or None,
                "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                               for c in message.tool_calls]}
    return {"role": message.role, "content": message.content}


def read_tool_calls(raw: Any) -> tuple[tuple[ToolCall, ...], str | None]:
    """`message.tool_calls` of a reply -> (the calls in order, None), or ((), why they cannot be read). Arguments
    are kept as the server sent them (text: `ToolCall.parsed_arguments` judges it; an object, which some servers
    send, as canonical JSON); a call without an id gets `call_<i>`."""
    if raw is None:
        return (), None
    if not isinstance(raw, list):
        return (), f"tool_calls is a {type(raw).__name__}, not a list"
    calls = []
    for i, entry in enumerate(raw):
        function = entry.get("function") if isinstance(entry, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            return (), f"tool call {i + 1}: no function name in {str(entry)[:120]}"
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = canonical_json(arguments)
        elif arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            return (), f"tool call {i + 1}: the arguments of {name!r} are a {type(arguments).__name__}"
        call_id = entry.get("id")
        calls.append(ToolCall(call_id if isinstance(call_id, str) and call_id else f"call_{i}", name, arguments))
    return tuple(calls), None


def parse_chat_reply(reply: Mapping[str, Any], what: str, request: GenerateRequest,
                     adaptations: tuple[Adaptation, ...] = ()) -> GenerateResponse:
    """A chat completion's body -> GenerateResponse (the answer, the reasoning field apart, usage)."""
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise bad_response(what, f"empty choices in {str(reply)[:120]}")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    text = message.get("content")
    finish_reason = choice.get("finish_reason")
    # vLLM's reasoning parsers and others send the thinking apart (older name first).
    reasoning = next((message[k] for k in ("reasoning_content", "reasoning")
                      if isinstance(message.get(k), str) and message[k]), None)
    if text is None and message.get("refusal"):
        text, finish_reason = str(message["refusal"]), "refusal"
    if text is None and reasoning is not None:
        text = ""  # cut while thinking: a reasoning field and no answer yet
    tool_calls, tool_call_error = read_tool_calls(message.get("tool_calls"))
    if tool_calls or tool_call_error:
        text = text or ""  # a reply that only calls tools has no content (null or "")
        if tool_calls and finish_reason in (None, "stop"):  # some servers say 'stop' after calls
            finish_reason = "tool_calls"
    # An empty string is a real (if useless) answer only when the server says why it stopped, or it called tools.
    if not isinstance(text, str) or (not text and not finish_reason and not (tool_calls or tool_call_error)):
        raise bad_response(what, f"no message content in choice {str(choice)[:120]}")
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    details = usage.get("completion_tokens_details") if isinstance(usage.get("completion_tokens_details"), dict) else {}
    try:
        logprobs = parse_logprobs(choice.get("logprobs")) if request.params.top_logprobs else None
    except (KeyError, TypeError, ValueError) as exc:
        raise bad_response(what, f"malformed logprobs ({exc!r})") from None
    return GenerateResponse(
        text=text,
        finish_reason=str(finish_reason or "unknown"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        logprobs=logprobs,
        reasoning=reasoning,
        reasoning_tokens=int(details.get("reasoning_tokens") or 0),
        adaptations=adaptations,
        tool_calls=tool_calls,
        tool_call_error=tool_call_error,
        cached_tokens=cached_prompt_tokens(reply, usage),
    )


def cached_prompt_tokens(reply: Mapping[str, Any], usage: Mapping[str, Any]) -> int:
    """Prompt tokens the server read from its prompt cache: `usage.prompt_tokens_details.cached_tokens` (OpenAI, which
    caches prefixes of 1,024 tokens and more by itself; vLLM with --enable-prompt-tokens-details), else a llama.cpp
    server's `timings.cache_n` (the prompt tokens it reused from the slot's KV cache); 0 where neither is reported.
    At most the prompt tokens reported."""
    prompt = int(usage.get("prompt_tokens") or 0)
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        timings = reply.get("timings")
        cached = timings.get("cache_n") if isinstance(timings, dict) else None
    if isinstance(cached, bool) or not isinstance(cached, (int, float)) or cached <= 0:
        return 0
    return min(int(cached), prompt) if prompt else int(cached)


def parse_logprobs(raw: Any) -> tuple[TokenLogprob, ...] | None:
    """Chat-style logprobs ({"content": [{token, logprob, top_logprobs}]}) or the legacy
    completions style ({"tokens", "token_logprobs", "top_logprobs"}) some servers still send."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("content"), list):
        return tuple(
            TokenLogprob(token=t["token"], logprob=float(t["logprob"]),
                         top=tuple((a["token"], float(a["logprob"])) for a in t.get("top_logprobs") or ()))
            for t in raw["content"])
    tokens, values = raw.get("tokens"), raw.get("token_logprobs")
    if isinstance(tokens, list) and isinstance(values, list):
        tops = raw.get("top_logprobs") or [None] * len(tokens)
        return tuple(
            TokenLogprob(token=tok, logprob=float(lp),
                         top=tuple((k, float(v)) for k, v in (top or {}).items()))
            for tok, lp, top in zip(tokens, values, tops))
    return None


def from_spec(spec: str) -> OpenAICompatBackend:
    """`openai:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS&reasoning_effort=E
    &max_completion_tokens=1&omit=temperature,top_p&thinking_budget=N]`."""
    remote = parse_remote_spec(spec, scheme="openai", default_base_url=DEFAULT_BASE_URL,
                               default_key_env="OPENAI_API_KEY", declared=OpenAIOptions)
    return OpenAICompatBackend(spec, remote)
