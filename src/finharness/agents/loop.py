"""A bounded agent episode: the model, a set of tools, limits, and a final answer.

Each step is one generation through the model handle, so it is one stored call: a run killed mid-episode
and started again gets every step it had reached from the run store (no model call is made twice) and
re-runs only the tools, which must therefore be deterministic (search, reading a page, arithmetic are).
The episode goes on while the model calls tools and stops at the first of:

  answer       a reply with no tool call: its text is the final answer
  steps        `max_steps` model calls made without an answer
  tokens       the episode's prompt + completion tokens passed `max_tokens`
  time         the model's recorded latency plus the tools' time passed `max_seconds` (the recorded latency,
               not the wall clock, so a resumed episode stops where the first one would have)
  tool_errors  more than `max_tool_errors` failed calls (a tool's error, arguments that are not a JSON
               object, an unknown tool, a `<tool_call>` the backend could not read)
  context      the next prompt would not fit the model's window
  length       the reply was cut at the step's token limit without a tool call (its text is still the answer)

Every stop but `answer` and `length` is a give-up: the episode has no answer. A failed tool call is shown to
the model as the tool's result (`error: ...`) so it can correct itself; an unreadable call is answered with a
user turn that says why.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Protocol, Sequence

from ..backends.tool_format import read_untagged
from ..core.types import GenerateParams, GenerateRequest, Message, ToolCall, ToolCallError, ToolSpec

STOPS = ("answer", "steps", "tokens", "time", "tool_errors", "context", "length")
ANSWERED = frozenset({"answer", "length"})

RESULT_CHARS = 6000
"""A tool result longer than this is cut (with a note) before the model sees it: a page of a filing fits."""


class ToolError(Exception):
    """A tool could not do what it was asked (bad arguments, nothing found): shown to the model as its result."""


class Tool(Protocol):
    """A tool the agent may call: its description and a coroutine that runs it on parsed arguments."""

    spec: ToolSpec

    async def __call__(self, arguments: dict[str, Any]) -> str: ...


@dataclass
class FunctionTool:
    """A tool made from a function of the arguments (sync or async) returning text."""

    spec: ToolSpec
    run: Callable[[dict[str, Any]], Awaitable[str] | str]

    async def __call__(self, arguments: dict[str, Any]) -> str:
        result = self.run(arguments)
        if hasattr(result, "__await__"):
            result = await result  # type: ignore[misc]
        return str(result)


@dataclass(frozen=True)
class AgentLimits:
    """Where an episode stops (each is part of the run key of a task that runs episodes)."""

    max_steps: int = 12
    """Model calls at most."""

    max_tokens: int = 120_000
    """Prompt + completion tokens over the episode at most."""

    max_seconds: float = 900.0
    """The model's recorded latency plus the tools' time at most."""

    max_tool_errors: int = 3
    """Failed tool calls tolerated; one more ends the episode."""

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.max_tokens < 1 or self.max_tool_errors < 0 or not self.max_seconds > 0:
            raise ValueError(f"agent limits must be positive: {self}")


@dataclass
class ToolRun:
    """One tool call of a step and what came of it."""

    id: str
    name: str
    arguments: str
    result: str
    error: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        # no seconds: a prediction must be the same whether its episode ran at once or was resumed
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "result": self.result,
                "error": self.error}


@dataclass
class Step:
    """One model call of an episode."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    tools: list[ToolRun] = field(default_factory=list)
    parse_error: str | None = None
    """The backend could not read the tool call the reply attempted."""
    read_untagged: bool = False
    """The reply's calls were written without their tags and read anyway (run_episode's `lenient`)."""

    def to_json(self) -> dict[str, Any]:
        # no latency (the sample's trace has each call's): the same episode run twice is the same prediction
        out = {"text": self.text, "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
               "completion_tokens": self.completion_tokens, "tools": [t.to_json() for t in self.tools]}
        if self.parse_error:
            out["parse_error"] = self.parse_error
        if self.read_untagged:
            out["read_untagged"] = True
        return out


@dataclass
class Episode:
    """A whole episode: its steps, how it stopped, and its answer (None: it gave up)."""

    steps: list[Step] = field(default_factory=list)
    stop: str = "steps"
    answer: str | None = None
    detail: str = ""
    """Why it stopped, in words."""

    @property
    def gave_up(self) -> bool:
        return self.stop not in ANSWERED

    def summary(self) -> dict[str, Any]:
        """The numbers results.json and the scorecard show."""
        runs = [t for s in self.steps for t in s.tools]
        return {"steps": len(self.steps), "tool_calls": len(runs), "tool_errors": sum(t.error for t in runs),
                "parse_failures": sum(1 for s in self.steps if s.parse_error),
                "read_untagged": sum(1 for s in self.steps if s.read_untagged), "gave_up": self.gave_up,
                "tokens": sum(s.prompt_tokens + s.completion_tokens for s in self.steps),
                "calls_by_tool": dict(Counter(t.name for t in runs))}

    def to_json(self) -> dict[str, Any]:
        return {"stop": self.stop, "detail": self.detail, "answer": self.answer, "summary": self.summary(),
                "steps": [s.to_json() for s in self.steps]}


def _cut(text: str) -> str:
    if len(text) <= RESULT_CHARS:
        return text
    return text[:RESULT_CHARS] + f"\n[... cut: {len(text) - RESULT_CHARS} more characters]"


def _recorded_latency(model: Any) -> float:
    """The latency the handle recorded for its last call (the store's, on a resumed run); 0 when unknown."""
    trace = getattr(model, "trace", None)
    for entry in reversed(trace or ()):
        if entry.get("kind") == "generate":
            return float(entry.get("latency_s") or 0.0)
    return 0.0


async def run_tool(tools: Mapping[str, Tool], call: ToolCall) -> ToolRun:
    """Run one call; every failure becomes an `error: ...` result the model sees."""
    started = time.perf_counter()
    tool = tools.get(call.name)
    try:
        if tool is None:
            raise ToolError(f"there is no tool {call.name!r}; the tools are: {', '.join(sorted(tools))}")
        result, error = await tool(call.parsed_arguments()), False
    except (ToolError, ToolCallError) as err:
        result, error = f"error: {err}", True
    return ToolRun(call.id, call.name, call.arguments, _cut(result), error, time.perf_counter() - started)


async def run_episode(model: Any, messages: Sequence[Message], tools: Sequence[Tool], limits: AgentLimits,
                      params: GenerateParams = GenerateParams(), *, lenient: bool = False) -> Episode:
    """Run one episode from `messages` (the task's system prompt and question) with `tools` (see the module
    docstring for how it stops). `model` is a ModelHandle (core/task.py): every step is a stored call. `lenient`:
    a reply that writes its calls without the `<tool_call>` tags (backends/tool_format.read_untagged) is still a
    parse failure, counted, but its calls are run; strict (the default) answers it with what was wrong."""
    by_name = {t.spec.name: t for t in tools}
    if len(by_name) != len(tools):
        raise ValueError("two tools share a name")
    specs = tuple(t.spec for t in tools)
    conversation = list(messages)
    episode = Episode()
    tokens = errors = 0
    seconds = 0.0
    for _ in range(limits.max_steps):
        if model.fits(conversation, params.max_tokens, specs) is False:
            episode.stop, episode.detail = "context", f"the next prompt does not fit the model's window after " \
                                                      f"{len(episode.steps)} steps"
            return episode
        reply = await model.generate(GenerateRequest(tuple(conversation), params, tools=specs))
        step = Step(reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens,
                    _recorded_latency(model), parse_error=reply.tool_call_error)
        episode.steps.append(step)
        tokens += reply.prompt_tokens + reply.completion_tokens
        seconds += step.latency_s
        calls = reply.tool_calls
        if reply.tool_call_error and lenient:
            calls = read_untagged(reply.text, by_name)
            step.read_untagged = bool(calls)
        if reply.tool_call_error and not calls:
            errors += 1
            conversation += [Message("assistant", reply.text),
                             Message("user", f"Your tool call could not be read: {reply.tool_call_error}. Call a tool "
                                             "with a JSON object of arguments, or give your final answer.")]
        elif not calls and getattr(model, "longest_course", False):  # a dry run: plan every step the limit allows
            conversation += [Message("assistant", reply.text), Message("user", "(planned: the episode goes on)")]
        elif not calls:
            episode.answer = reply.text
            episode.stop = "length" if reply.finish_reason == "length" else "answer"
            episode.detail = f"answered after {len(episode.steps)} steps"
            return episode
        else:
            conversation.append(Message("assistant", "" if step.read_untagged else reply.text, tool_calls=calls))
            for call in calls:
                ran = await run_tool(by_name, call)
                step.tools.append(ran)
                errors += ran.error
                seconds += ran.seconds
                conversation.append(Message("tool", ran.result, tool_call_id=call.id, name=call.name))
        if errors > limits.max_tool_errors:
            episode.stop, episode.detail = "tool_errors", f"{errors} failed tool calls (limit {limits.max_tool_errors})"
            return episode
        if tokens > limits.max_tokens:
            episode.stop, episode.detail = "tokens", f"{tokens:,} tokens (limit {limits.max_tokens:,})"
            return episode
        if seconds > limits.max_seconds:
            episode.stop, episode.detail = "time", f"{seconds:.0f} s (limit {limits.max_seconds:.0f} s)"
            return episode
    episode.stop, episode.detail = "steps", f"no answer after {limits.max_steps} steps"
    return episode
