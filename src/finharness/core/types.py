"""The data that flows through a run: samples, requests, responses, scores.

Everything here is a frozen dataclass so that it can be hashed into the run
store's content address and never changes after it is made.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from typing import Any, Literal, Mapping

OMITTED_AT_DEFAULT = {"omit_at_default": True}
"""Field metadata: `to_jsonable` leaves the field out while it holds its default, so a field added later
changes neither the content keys nor the stored rows of the calls made before it existed."""

DEFAULT_THINKING_TOKENS = 2048
"""Thinking budget of a model that thinks when neither its spec nor the task names one."""


@dataclass(frozen=True)
class Sample:
    """One item of a benchmark, as the task loaded it."""

    id: str
    """Stable id, unique within the task (documented per benchmark)."""

    input: Any
    """What the task needs to build the prompt (question, options, context...)."""

    target: Any = None
    """The gold answer, or None when the split has no answers (e.g. a test split)."""

    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Groups and provenance (category, type, source file and line...)."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool a model may call, described as every provider's API describes one (a JSON Schema of its arguments)."""

    name: str
    """The name the model calls it by (letters, digits, '_' and '-')."""

    description: str
    """What it does and when to use it, for the model."""

    parameters: Mapping[str, Any]
    """JSON Schema of the arguments object (`{"type": "object", "properties": {...}, "required": [...]}`)."""


class ToolCallError(ValueError):
    """A tool call whose arguments cannot be read (not JSON, not an object)."""


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool, as the model made it."""

    id: str
    """The provider's id of the call (what its result answers); a local model's calls get `call_<i>`."""

    name: str
    """The tool called."""

    arguments: str
    """The arguments as JSON text, as the model wrote them (a provider's object is written as canonical JSON)."""

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object; ToolCallError when they are not a JSON object."""
        import json

        try:
            value = json.loads(self.arguments) if self.arguments.strip() else {}
        except ValueError as err:
            raise ToolCallError(f"the arguments of {self.name!r} are not JSON ({err}): {self.arguments[:200]!r}") from None
        if not isinstance(value, dict):
            raise ToolCallError(f"the arguments of {self.name!r} are a {type(value).__name__}, not an object")
        return value


def _tool_calls_from_json(value: Any) -> tuple[ToolCall, ...]:
    """Tool calls read back from their JSON form (the store, a replay file)."""
    return tuple(c if isinstance(c, ToolCall) else ToolCall(**c) for c in value)


@dataclass(frozen=True)
class Message:
    """One chat turn."""

    role: Literal["system", "user", "assistant", "tool"]
    """Who speaks: 'tool' is a tool's result, answering the call `tool_call_id` names."""

    content: str
    """What is said (a tool's result as text)."""

    tool_calls: tuple[ToolCall, ...] = field(default=(), metadata=OMITTED_AT_DEFAULT)
    """An assistant turn's tool calls (its content may be empty then)."""

    tool_call_id: str | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """A tool turn: the id of the call it answers."""

    name: str | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """A tool turn: the tool's name (some chat templates show it)."""

    def __post_init__(self) -> None:
        if self.tool_calls and not isinstance(self.tool_calls[0], ToolCall):
            object.__setattr__(self, "tool_calls", _tool_calls_from_json(self.tool_calls))


@dataclass(frozen=True)
class GenerateParams:
    """Every parameter that changes what a generation returns; all are part of the cache key."""

    max_tokens: int = 512
    """Upper bound on generated tokens; hitting it marks the response truncated."""

    temperature: float = 0.0
    """0 means greedy decoding."""

    top_p: float = 1.0
    """Nucleus sampling mass."""

    stop: tuple[str, ...] = ()
    """Stop strings (not included in the returned text)."""

    seed: int | None = None
    """Sampling seed, where the backend honours one."""

    frequency_penalty: float = 0.0
    """OpenAI-style frequency penalty; backends that lack it record so."""

    presence_penalty: float = 0.0
    """OpenAI-style presence penalty; backends that lack it record so."""

    top_logprobs: int = 0
    """How many next-token alternatives to return per generated token (0: none)."""

    thinking_tokens: int | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """The task's thinking budget: tokens a model that thinks may spend before its answer, on top of
    `max_tokens` (the answer's budget). None: the backend's default (DEFAULT_THINKING_TOKENS); a spec's
    `thinking_budget=N` overrides both. A model that does not think ignores it."""


@dataclass(frozen=True)
class GenerateRequest:
    """A chat generation."""

    messages: tuple[Message, ...]
    """The conversation so far; the backend renders it with the model's chat template."""

    params: GenerateParams = GenerateParams()
    """Decoding parameters."""

    sample_index: int = 0
    """Distinguishes repeated draws of one sampled (temperature > 0) request in the cache, and goes into the seed
    sent to the backend (backend_seed), so another draw is another sample."""

    kind: Literal["generate"] = "generate"

    tools: tuple[ToolSpec, ...] = field(default=(), metadata=OMITTED_AT_DEFAULT)
    """Tools the model may call in its reply (none: a plain generation, keyed as before tools existed)."""

    @property
    def backend_seed(self) -> int | None:
        """The seed a backend samples with: the request's seed for draw 0 (as before draws existed), a seed of its
        own for every other draw (derived from both, so the same draw repeats); None: none asked for."""
        seed = self.params.seed
        if not self.sample_index:
            return seed
        return ((seed or 0) * 1_000_003 + self.sample_index * 7_919) % 2**31


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """Log-likelihood of each continuation after one shared context (raw text, no chat template)."""

    context: str
    """Shared prefix, evaluated once per group where the backend can reuse it."""

    continuations: tuple[str, ...]
    """Candidate continuations, scored independently after `context`."""

    kind: Literal["loglikelihood"] = "loglikelihood"

    per_token: bool = field(default=False, metadata=OMITTED_AT_DEFAULT)
    """Also return, for every continuation token, its log-probability and the mean and standard deviation of log p
    over the whole next-token distribution at its position (the membership probes, contamination/). False: the
    sums alone, keyed as every call made before the field existed."""


Request = GenerateRequest | LoglikelihoodRequest


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token and its most likely alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Adaptation:
    """A request parameter a backend sent in another form than the request asked, or left out, and why."""

    parameter: str
    """The request's parameter ('max_tokens', 'temperature', 'top_p')."""

    asked: Any
    """The value the request asked for."""

    sent: str | None
    """What went to the server instead ('max_completion_tokens=2064'); None: the parameter was left out."""

    reason: str
    """Why: the server's own refusal, or the API's rule."""

    learned: bool = False
    """True: learned from the server's refusal during the run; False: stated by the spec or an API rule."""

    @property
    def greedy_lost(self) -> bool:
        """A greedy request (temperature 0) whose temperature did not reach the server: it was sampled."""
        return self.parameter == "temperature" and self.asked == 0 and self.sent is None


@dataclass(frozen=True)
class GenerateResponse:
    """What a backend returned for a GenerateRequest."""

    text: str
    """The generated text: the answer, which tasks extract from (a `<think>` block is moved to `reasoning`)."""

    finish_reason: str
    """'stop', 'length' (hit max_tokens) or a backend-specific reason."""

    prompt_tokens: int = 0
    """Tokens in the prompt as the backend counted them (0 when unknown)."""

    completion_tokens: int = 0
    """Tokens generated."""

    prompt_text: str | None = None
    """The prompt exactly as the model saw it, when the backend renders it itself."""

    logprobs: tuple[TokenLogprob, ...] | None = None
    """Per-token logprobs when requested and supported."""

    retries: int = 0
    """How many times the call was retried before it succeeded."""

    reasoning: str | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """The model's thinking, kept apart from the answer and never scored: a server's reasoning field
    (`reasoning_content`, `reasoning`), Anthropic thinking blocks, or a `<think>` block of the text."""

    reasoning_tokens: int = field(default=0, metadata=OMITTED_AT_DEFAULT)
    """Of `completion_tokens`, those spent thinking, as the server counted them (0 when unknown or none)."""

    adaptations: tuple[Adaptation, ...] = field(default=(), metadata=OMITTED_AT_DEFAULT)
    """Parameters sent in another form than asked, or left out (a reasoning model's API refusing them)."""

    tool_calls: tuple[ToolCall, ...] = field(default=(), metadata=OMITTED_AT_DEFAULT)
    """The tools the model called in this reply, in order (finish_reason 'tool_calls')."""

    tool_call_error: str | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """Why a tool call the reply attempted could not be read (a local model's malformed `<tool_call>` block):
    the reply is kept, and the caller counts it as a tool-call parse failure."""

    cached_tokens: int = field(default=0, metadata=OMITTED_AT_DEFAULT)
    """Of `prompt_tokens`, those read from the provider's prompt cache (OpenAI `prompt_tokens_details.cached_tokens`,
    Anthropic `cache_read_input_tokens`, a llama.cpp server's `timings.cache_n`); billed at the cached rate."""

    cache_write_tokens: int = field(default=0, metadata=OMITTED_AT_DEFAULT)
    """Of `prompt_tokens`, those written to the prompt cache (Anthropic `cache_creation_input_tokens`); billed at the
    cache-write rate. The rest of `prompt_tokens` is fresh input."""

    def __post_init__(self) -> None:
        if self.adaptations and not isinstance(self.adaptations[0], Adaptation):  # read back from JSON
            object.__setattr__(self, "adaptations", tuple(Adaptation(**a) for a in self.adaptations))
        if self.tool_calls and not isinstance(self.tool_calls[0], ToolCall):
            object.__setattr__(self, "tool_calls", _tool_calls_from_json(self.tool_calls))

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    @property
    def cut_in_thinking(self) -> bool:
        """Cut by the token limit before any answer: the model was still thinking."""
        return self.truncated and not self.text.strip() and (bool(self.reasoning) or self.reasoning_tokens > 0)


@dataclass(frozen=True)
class LoglikelihoodResponse:
    """What a backend returned for a LoglikelihoodRequest."""

    logprobs: tuple[float, ...]
    """Sum of token log-probabilities (nats) of each continuation given the context."""

    is_greedy: tuple[bool, ...]
    """Whether each continuation is the greedy continuation, token by token."""

    continuation_tokens: tuple[int, ...]
    """Token count of each continuation."""

    context_tokens: int = 0
    """Token count of the shared context."""

    tokens_evaluated: int = 0
    """Prompt tokens the engine actually computed for this group (KV reuse makes it small)."""

    retries: int = 0

    token_logprobs: tuple[tuple[float, ...], ...] | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """A `per_token` request: each continuation's token log-probabilities (nats), in order; None: not asked for, or
    a backend that cannot give them."""

    token_means: tuple[tuple[float, ...], ...] | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """A `per_token` request: at each continuation token, E[log p(z)] over the model's next-token distribution z
    (minus its entropy), from the full distribution (local engines)."""

    token_stds: tuple[tuple[float, ...], ...] | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """A `per_token` request: at each continuation token, the standard deviation of log p(z) over the same
    distribution (Min-K%++ divides by it)."""

    def __post_init__(self) -> None:
        for name in ("token_logprobs", "token_means", "token_stds"):  # read back from JSON: lists of lists
            value = getattr(self, name)
            if value is not None and not (value and isinstance(value, tuple) and isinstance(value[0], tuple)):
                object.__setattr__(self, name, tuple(tuple(float(x) for x in row) for row in value))


Response = GenerateResponse | LoglikelihoodResponse


@dataclass(frozen=True)
class Score:
    """The score of one sample."""

    value: float | None
    """The headline score in [0, 1]; None when the sample cannot be scored (no gold)."""

    values: Mapping[str, float] = field(default_factory=dict)
    """Further per-sample metrics (other scoring modes), averaged like `value`."""

    extracted: Any = None
    """The answer read from the response."""

    rule: str | None = None
    """Which extraction rule fired (auditable); 'unparseable' when none did."""

    parsed: bool = True
    """False when no answer could be read from the response."""

    explanation: str | None = None
    """Free text for the reader (e.g. why a program failed)."""


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})
"""Types returned as they are (exact types: subclasses such as enums take the general path)."""

_DATACLASS_FIELDS: dict[type, tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]] = {}
"""The dataclasses met so far, the fast path's dispatch table: (names of the fields always written,
(name, default) of the fields written only when they differ from their default (OMITTED_AT_DEFAULT))."""


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, tuples and mappings to plain JSON values (on the hot path of every call: no asdict
    copy; exact types are dispatched first, anything else takes `_to_jsonable_general`)."""
    cls = type(obj)
    if cls in _PLAIN_TYPES:
        return obj
    layout = _DATACLASS_FIELDS.get(cls)
    if layout is not None:
        names, optional = layout
        out = {}
        for name in names:
            value = getattr(obj, name)
            out[name] = value if type(value) in _PLAIN_TYPES else to_jsonable(value)
        for name, default in optional:
            value = getattr(obj, name)
            if value != default:
                out[name] = value if type(value) in _PLAIN_TYPES else to_jsonable(value)
        return out
    if cls is list or cls is tuple:
        return [v if type(v) in _PLAIN_TYPES else to_jsonable(v) for v in obj]
    if cls is dict:
        return {str(k): (v if type(v) in _PLAIN_TYPES else to_jsonable(v)) for k, v in obj.items()}
    return _to_jsonable_general(obj)


def _to_jsonable_general(obj: Any) -> Any:
    """The rules in full (subclasses, mappings, dataclasses met for the first time)."""
    if obj is None or isinstance(obj, (str, int, float)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if hasattr(obj, "__dataclass_fields__"):
        layout = _field_layout(type(obj))
        if hasattr(type(obj), "__dataclass_fields__"):  # a dataclass type, not an odd instance
            _DATACLASS_FIELDS[type(obj)] = layout
            return to_jsonable(obj)
        return {name: to_jsonable(getattr(obj, name)) for name in layout[0]}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


@lru_cache(maxsize=None)
def _field_layout(cls: type) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]:
    """(fields always written, (name, default) of the fields left out at their default)."""
    always = tuple(f.name for f in fields(cls) if not f.metadata.get("omit_at_default"))
    optional = tuple((f.name, f.default) for f in fields(cls)
                     if f.metadata.get("omit_at_default") and f.default is not MISSING)
    return always, optional


def messages(*turns: tuple[str, str]) -> tuple[Message, ...]:
    """Shorthand: messages(("system", "..."), ("user", "..."))."""
    return tuple(Message(role, content) for role, content in turns)  # type: ignore[arg-type]
