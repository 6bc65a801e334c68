"""`fake`: deterministic scripted answers for tests and dry runs.

The same request always gets the same answer (derived from a hash of the
request), so reruns and resumes are checkable. Options:
`fake?latency=SECONDS` sleeps per call; `fake?script=FILE` reads JSONL lines
`{"match": SUBSTRING, "reply": TEXT}` and answers the first rule whose
substring occurs in the last user (or tool) message; `fake?reply=TEXT` answers TEXT to all;
`fake?name=X` changes the identity (two distinct fake models); `fake?log=FILE` appends one
JSON line per call actually made (never for answers served from the run store) -- `{"key", "kind",
"name", "pid", "started"}`, where `key` is the run store's content key of the call and `started` the
wall-clock time the call began -- so a test can count what a run really computed. Latency and log
are not part of the identity: they change no answer.

Tool calls: a script rule may give `"tool_calls": [{"name": ..., "arguments": {...}}, ...]` (with an optional
`"reply"` text beside them, and `"tool_call_error"` to play a malformed local call); the calls get the ids
`call_0`, `call_1`... in order, their arguments as canonical JSON (a string is kept as it is: arguments that are
not JSON), finish_reason 'tool_calls'. Rules are matched against the last user or tool message, so a rule can
answer a tool's result.

The one fake model of the test suite (docs/testing.md), made in Python with what tests need beyond the
spec: `reply` may be a function of the last user (or tool) message, returning text, a `GenerateResponse` (given
back as it is) or a dict `{"text", "tool_calls", "tool_call_error"}` (as a script rule's); `replies` (each one of
those three forms) are given in turn, one per call,
before anything else answers; a script rule may `fail` instead of replying (a BackendError, `retryable`
or not, for its first `times` matching calls only when given: a flaky server); `logprob(context,
continuation)` scores log-likelihood requests (default: seeded noise); `logprobs(text)` gives the
per-token logprobs of a reply when a request asks for them (next_token_logprobs); `capabilities` replaces
any Capabilities field; `count_tokens(text)` counts tokens its own way (None: as a backend without a tokenizer).
Every request is kept in `requests`, in order (not for a spec: a dry run of any
size keeps none). A function is named in the identity
(the call-cache key) by its qualified name only: fakes that share a store and answer differently need
distinct names. One fake per role (model, judge, user) gives per-role answers: tests/fakes.py makes the
handles.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..core.backend import BackendError, BaseBackend, Capabilities, SpecError
from ..core.hashing import canonical_json, content_key
from ..core.types import (
    GenerateRequest,
    GenerateResponse,
    LoglikelihoodRequest,
    LoglikelihoodResponse,
    TokenLogprob,
    ToolCall,
    to_jsonable,
)
from ..redact import redact
from .spec_options import float_option, split_options

LETTERS = "ABCD"

SCRIPTED_REPLY_KEYS = ("reply", "tool_calls", "tool_call_error")
"""What a script rule answering with tool calls may give (a dict reply takes "text" for "reply" too)."""

Reply = str | GenerateResponse | Mapping[str, Any]
"""What `reply`, `replies` and the script may answer: text, a whole response, or a dict with tool calls."""


def _named(value: Any) -> Any:
    """A value as the identity holds it: a function by its qualified name, anything else as it is."""
    return f"function:{getattr(value, '__qualname__', repr(value))}" if callable(value) else value


class FakeBackend(BaseBackend):
    def __init__(self, spec: str = "fake", *, latency: float = 0.0, script: list[dict] | None = None,
                 reply: str | Callable[[str], Reply] | None = None, name: str = "fake", context_length: int = 32768,
                 log: str | Path | None = None, replies: Sequence[Reply] = (),
                 logprob: Callable[[str, str], float] | None = None,
                 logprobs: Callable[[str], Sequence[TokenLogprob] | None] | None = None,
                 capabilities: Mapping[str, Any] | None = None, record: bool = True,
                 count_tokens: Callable[[str], int | None] | None = None):
        self.spec = spec
        self.latency = latency
        self.log = Path(log) if log is not None else None
        self.script = script or []
        self.reply = reply
        self.replies = tuple(replies)
        self.logprob, self.logprobs = logprob, logprobs
        self.name = name
        self.calls = 0
        self.requests: list[GenerateRequest | LoglikelihoodRequest] = []
        """Every request received, in order (what a test checks was sent); kept only with `record`."""
        self.record = record
        self._count_tokens = count_tokens
        """Token counting instead of 3 characters a token (None from it: the backend cannot count, as a hosted API);
        it changes how tasks and budgets cut prompts, not the fake's answers (not in the identity)."""
        self._replied = 0
        self._failed: dict[int, int] = {}
        self.capabilities = Capabilities(generate=True, loglikelihood=True, next_token_logprobs=logprobs is not None,
                                         context_length=context_length, max_concurrency=8,
                                         penalties=True, seed=True)
        if capabilities:
            self.capabilities = replace(self.capabilities, **capabilities)

    def identity(self):
        out = {"backend": "fake", "name": self.name, "reply": _named(self.reply), "script": self.script}
        extra = {"replies": [to_jsonable(r) for r in self.replies], "logprob": _named(self.logprob),
                 "logprobs": _named(self.logprobs)}
        return {**out, **{k: v for k, v in extra.items() if v}}  # only what is set: older identities unchanged

    def _scripted(self, last_user: str) -> Reply | None:
        """The reply of the first script rule matching `last_user`, or its failure (a BackendError)."""
        for index, rule in enumerate(self.script):
            if rule["match"] not in last_user:
                continue
            if "fail" in rule:
                failed = self._failed.get(index, 0)
                if rule.get("times") is None or failed < rule["times"]:
                    self._failed[index] = failed + 1
                    raise BackendError(rule["fail"], retryable=bool(rule.get("retryable", False)),
                                       status=rule.get("status"), retry_after=0 if rule.get("retryable") else None)
                continue
            if "tool_calls" in rule or "tool_call_error" in rule:
                return {k: rule[k] for k in SCRIPTED_REPLY_KEYS if k in rule}
            return rule["reply"]
        return None

    def _rng(self, request) -> random.Random:
        digest = hashlib.sha256(canonical_json([self.name, to_jsonable(request)]).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def count_tokens(self, text: str) -> int | None:
        if self._count_tokens is not None:
            return self._count_tokens(text)
        return max(1, len(text) // 3) if text else 0

    def _log_call(self, kind: str, request: GenerateRequest | LoglikelihoodRequest, started: float) -> None:
        """One line per answered call, written once the answer exists (a call killed mid-way is not logged)."""
        if self.log is None:
            return
        key = content_key(dict(self.identity()), kind, to_jsonable(request))  # as CachedModel keys it
        line = json.dumps({"key": key, "kind": kind, "name": self.name, "pid": os.getpid(),
                           "started": started}) + "\n"
        # one O_APPEND write per line: lines of concurrent processes sharing the file never interleave
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    async def planned_reply(self, request: GenerateRequest | LoglikelihoodRequest
                            ) -> GenerateResponse | LoglikelihoodResponse:
        """The answer a dry run plans with (core/plan.py): the one this fake gives, made without a call (nothing is
        counted, logged, recorded or waited for), so a dry run follows a fake run's path exactly."""
        if isinstance(request, LoglikelihoodRequest):
            return self._loglikelihood(request)
        return self._generate(request)

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        started = time.time()
        self.calls += 1
        if self.record:
            self.requests.append(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        response = self._generate(request)
        self._log_call("generate", request, started)
        return response

    def _generate(self, request: GenerateRequest) -> GenerateResponse:
        # a tool's result is what the model answers next, as a user's message is
        last_user = next((m.content for m in reversed(request.messages) if m.role in ("user", "tool")), "")
        text: Reply | None = None
        if self._replied < len(self.replies):
            text = self.replies[self._replied]
            self._replied += 1
        if text is None:
            text = self._scripted(last_user)
        if text is None and callable(self.reply):
            text = self.reply(last_user)
        if text is None:
            text = self.reply if self.reply is not None else f"答案：{self._rng(request).choice(LETTERS)}"
        prompt_tokens = sum(self.count_tokens(m.content) or 0 for m in request.messages)
        if isinstance(text, GenerateResponse):
            return text
        if isinstance(text, Mapping):
            return self._tool_reply(text, prompt_tokens)
        completion = self.count_tokens(text) or 1
        finish = "stop"
        if completion > request.params.max_tokens:
            text, completion, finish = text[: request.params.max_tokens * 3], request.params.max_tokens, "length"
        logprobs = self.logprobs(text) if self.logprobs is not None and request.params.top_logprobs else None
        return GenerateResponse(text=text, finish_reason=finish, prompt_tokens=prompt_tokens,
                                completion_tokens=completion, logprobs=tuple(logprobs) if logprobs else None)

    def _tool_reply(self, scripted: Mapping[str, Any], prompt_tokens: int) -> GenerateResponse:
        """A scripted reply with tool calls (or a malformed call's error): {"text" or "reply", "tool_calls",
        "tool_call_error"}."""
        unknown = set(scripted) - {"text", *SCRIPTED_REPLY_KEYS}
        if unknown:
            raise ValueError(f"fake reply {dict(scripted)!r}: unknown key(s) {sorted(unknown)}; it takes text (or "
                             "reply), tool_calls, tool_call_error")
        text = str(scripted.get("text", scripted.get("reply", "")))
        calls = tuple(ToolCall(f"call_{i}", call["name"], call["arguments"] if isinstance(call.get("arguments"), str)
                               else canonical_json(call.get("arguments", {})))
                      for i, call in enumerate(scripted.get("tool_calls") or ()))
        error = scripted.get("tool_call_error")
        completion = (self.count_tokens(text) or 0) + sum(self.count_tokens(c.name + c.arguments) or 1 for c in calls)
        return GenerateResponse(text=text, finish_reason="tool_calls" if calls else "stop",
                                prompt_tokens=prompt_tokens, completion_tokens=max(1, completion),
                                tool_calls=calls, tool_call_error=error)

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        started = time.time()
        self.calls += 1
        if self.record:
            self.requests.append(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        response = self._loglikelihood(request)
        self._log_call("loglikelihood", request, started)
        return response

    def _loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        if request.per_token:
            return self._per_token(request)
        if self.logprob is not None:
            lps = tuple(float(self.logprob(request.context, c)) for c in request.continuations)
        else:
            rng = self._rng(request)
            lps = tuple(-rng.uniform(0.1, 10.0) for _ in request.continuations)
        best = max(range(len(lps)), key=lps.__getitem__)
        counts = tuple(self.count_tokens(c) or 1 for c in request.continuations)
        ctx = self.count_tokens(request.context) or 0
        return LoglikelihoodResponse(logprobs=lps, is_greedy=tuple(i == best for i in range(len(lps))),
                                     continuation_tokens=counts, context_tokens=ctx,
                                     tokens_evaluated=ctx + sum(counts))


    def _per_token(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        """A per_token request: each continuation cut into fake_tokens; token i scores
        logprob(context + the tokens before it, token i) (seeded noise without `logprob`), the chain rule, so the
        sum is the continuation's logprob wherever `logprob` adds up over pieces; every token's next-token
        distribution has mean FAKE_TOKEN_MEAN and standard deviation FAKE_TOKEN_STD (a fake has no vocabulary)."""
        rng = self._rng(request)
        per_token = []
        for continuation in request.continuations:
            pieces, values, done = fake_tokens(continuation), [], ""
            for piece in pieces:
                values.append(float(self.logprob(request.context + done, piece)) if self.logprob is not None
                              else -rng.uniform(0.1, 10.0))
                done += piece
            per_token.append(tuple(values))
        lps = tuple(float(sum(values)) for values in per_token)
        best = max(range(len(lps)), key=lps.__getitem__)
        ctx = self.count_tokens(request.context) or 0
        return LoglikelihoodResponse(
            logprobs=lps, is_greedy=tuple(i == best for i in range(len(lps))),
            continuation_tokens=tuple(len(v) for v in per_token), context_tokens=ctx,
            tokens_evaluated=ctx + sum(len(v) for v in per_token), token_logprobs=tuple(per_token),
            token_means=tuple((FAKE_TOKEN_MEAN,) * len(v) for v in per_token),
            token_stds=tuple((FAKE_TOKEN_STD,) * len(v) for v in per_token))


FAKE_TOKEN_MEAN = -3.0
"""E[log p] the fake gives every token's next-token distribution (per_token requests)."""

FAKE_TOKEN_STD = 1.0
"""The standard deviation of log p the fake gives every token's next-token distribution."""


def fake_tokens(text: str) -> list[str]:
    """The fake's tokens of a text: 3 characters each, the last taking the rest (as many as count_tokens says)."""
    if len(text) < 6:
        return [text] if text else []
    cuts = list(range(0, len(text) // 3 * 3, 3))
    return [text[a:b] for a, b in zip(cuts, [*cuts[1:], len(text)])]


MAX_LATENCY = 3600.0
"""The longest `?latency=` a fake takes, in seconds (a fake slower than an hour is a typo)."""


@dataclass(frozen=True)
class FakeOptions:
    """The query options of a `fake` spec."""

    latency: float = 0.0
    """Seconds each call takes (0 to 3,600)."""

    script: str | None = None
    """A JSONL file of rules (match, reply, fail, times): replies by request (module docstring)."""

    reply: str | None = None
    """The reply to every request no rule matches (default: a deterministic one per request)."""

    name: str = "fake"
    """The model's name in its identity: two fakes of other names are two models."""

    log: str | None = None
    """A file that gets one line per call made (what was asked, by which process)."""


SpecOptions = FakeOptions
"""What `finharness list --backends` shows for the scheme."""


def from_spec(spec: str) -> FakeBackend:
    base, opts = split_options(spec, {f.name for f in fields(FakeOptions)})
    if base != "fake":
        raise SpecError(f"model spec {spec!r}: expected 'fake[?latency=S&script=FILE&reply=TEXT&name=X&log=FILE]'")
    script = None
    if "script" in opts:
        path = Path(opts["script"])
        if not path.exists():
            raise SpecError(f"model spec {spec!r}: script file {path} not found")
        script = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    latency = float_option(redact(spec), opts, "latency", minimum=0.0, maximum=MAX_LATENCY) or 0.0
    return FakeBackend(spec, latency=latency, script=script, reply=opts.get("reply"), name=opts.get("name", "fake"),
                       log=opts.get("log"), record=False)  # a dry run of any size keeps no requests
