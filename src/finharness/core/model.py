"""The model handle: a backend seen through the run store, as every task, judge and script uses it.

`CachedModel` is what `Task.solve` receives (the `ModelHandle` protocol of core/task.py): each call is
looked up in the run store by its content key (backend identity + kind + request), made through one
retry layer and the backend's concurrency limiter when it is not there, stored, counted in a
`RunCounters`, and recorded in the sample's trace. Prompts that do not fit are cut or refused by the
run's `PromptBudget`.

Outside a run (a judge command, a build pipeline, a script of your own) make one with
`finharness.open_model(spec, store, role=...)` (backends/__init__.py: core never imports a backend),
which resolves a model spec or takes a backend already made.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Mapping, MutableMapping, Sequence

from .backend import Backend, BackendError, CallFailed
from .hashing import canonical_json, content_key_of_canonical
from .limiter import AdaptiveLimiter
from .reasoning import thinking_apart, thinking_fields
from .retry import RetryPolicy, error_kind
from .spending import BUDGET_KIND, BudgetRefused, Reservation, Spending
from .store import RunStore, merge_billed
from .types import (
    OMITTED_AT_DEFAULT,
    GenerateParams,
    GenerateRequest,
    GenerateResponse,
    LoglikelihoodRequest,
    LoglikelihoodResponse,
    Message,
    TokenLogprob,
    ToolSpec,
    to_jsonable,
)

TRUNCATION_POLICIES = ("error", "left", "right")


@dataclass
class RunCounters:
    """Everything a reader must see about how a run went; written to results.json['counts']."""

    calls: int = 0
    """Model calls actually made (not served from the store)."""
    cache_hits: int = 0
    """Calls served from the store."""
    retries: int = 0
    """Retried attempts (429, 5xx, timeouts...)."""
    failures: int = 0
    """Calls that failed for good after retries."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Of prompt_tokens, those the provider read from its prompt cache (billed at the cached rate)."""
    cache_write_tokens: int = 0
    """Of prompt_tokens, those written to the provider's prompt cache (billed at the cache-write rate)."""
    tokens_evaluated: int = 0
    """Prompt tokens a log-likelihood engine actually computed (KV reuse makes it small)."""
    length_stops: int = 0
    """Generations cut by max_tokens."""
    reasoning_tokens: int = 0
    """Of completion_tokens, those a model spent thinking (as its server counted them)."""
    thinking_replies: int = 0
    """Generations that came with thinking (a reasoning text, or reasoning tokens counted)."""
    thinking_truncations: int = 0
    """Generations cut by the token limit while still thinking, before any answer (also in length_stops)."""
    tool_calls: int = 0
    """Tool calls the model made, over every generation (parallel calls of one reply each count)."""
    tool_call_errors: int = 0
    """Generations whose attempted tool call could not be read (a local model's malformed `<tool_call>`)."""
    budget_truncations: int = 0
    """Prompts cut to fit the budget by a named policy."""
    concurrency_shrinks: int = 0
    """Times a model's concurrency limit was halved after a rate-limit refusal (429/529)."""
    concurrency_min_limit: int | None = None
    """The lowest concurrency limit any model ran at during this run (None: every model kept its maximum);
    a run that joins a model whose limit shrank earlier (a pooled run's later task) starts from it."""
    budget_refusals: int = 0
    """Calls the run's token or cost budget refused (core/spending.py): not made, not failures."""
    cost_usd: float | None = None
    """USD of the calls made, at the run's prices (None: no model of the run is priced)."""
    billed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The calls made (not served from the store), by role and mode ('model/live', 'judge/batch'): {"calls",
    "prompt_tokens", "cached_tokens", "cache_write_tokens", "completion_tokens", "cost_usd" (None: unpriced)}."""
    samples_done: int = 0
    samples_total: int = 0
    failure_messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "failure_messages"}
        d["failure_examples"] = self.failure_messages[:10]
        return d

    def add(self, part: "RunCounters") -> None:
        """Add the counts of a part of this run made elsewhere (a Ray worker's shard); the sample
        totals stay this run's own."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(part, f.name)
            if f.name in ("samples_done", "samples_total") or theirs is None:
                continue
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):  # billed: role/mode -> figures
                merge_billed(mine, theirs)
            elif f.name.endswith("_min_limit"):  # a lowest value, not a count
                setattr(self, f.name, theirs if mine is None else min(mine, theirs))
            elif mine is None:  # a sum that this part starts (cost_usd)
                setattr(self, f.name, theirs)
            else:
                setattr(self, f.name, mine + theirs)


def response_from_json(kind: str, data: Mapping[str, Any]) -> GenerateResponse | LoglikelihoodResponse:
    if kind == "generate":
        d = dict(data)
        if d.get("logprobs") is not None:
            d["logprobs"] = tuple(TokenLogprob(t["token"], t["logprob"], tuple(tuple(x) for x in t.get("top", ())))
                                  for t in d["logprobs"])
        return GenerateResponse(**d)
    d = dict(data)
    for k in ("logprobs", "is_greedy", "continuation_tokens"):
        d[k] = tuple(d[k])
    return LoglikelihoodResponse(**d)


READ_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError)
"""What a backend raises when a server's reply is not the shape it reads (an int of Infinity, a list where text
should be): that call fails (kind bad_reply), not the run."""

MAX_TOKEN_COUNT = 10_000_000
"""More tokens than this in one call's usage is not a count a server can mean: the reply is refused as broken."""


def billed_tokens(kind: str, resp: Any) -> tuple[int, int]:
    """(prompt, completion) tokens a call is billed for: a generation's usage (thinking is in its completion), a
    log-likelihood's context and continuations (all prompt)."""
    if kind == "generate":
        return int(resp.prompt_tokens or 0), int(resp.completion_tokens or 0)
    return int(resp.context_tokens or 0) + int(sum(resp.continuation_tokens or ())), 0


ESTIMATE_RULE = "1 token per CJK character, 1 per 4 other characters, 4 per chat message"
"""How prompt tokens are estimated for a backend without a tokenizer (a hosted API): against Qwen2.5's tokenizer,
1.03x its count on English exam text, 1.36x on Chinese (the high side), where 4 characters a token gives 0.37x."""

_CJK = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")


def estimate_tokens(text: str) -> int:
    """Tokens of `text` by ESTIMATE_RULE (without the per-message part)."""
    cjk = len(_CJK.findall(text))
    return cjk + -(-(len(text) - cjk) // 4)


def completion_ceiling(kind: str, request: Any) -> int:
    """The most completion tokens a call can be billed for: a generation's max_tokens plus its thinking budget (a
    log-likelihood generates none)."""
    if kind != "generate":
        return 0
    return request.params.max_tokens + (request.params.thinking_tokens or 0)


def reply_problem(value: Any, where: str = "reply") -> str | None:
    """Why a backend's response cannot be stored and used (None: it can): text that is not valid Unicode (a lone
    surrogate), a number that is NaN or infinite (a log-probability may be -inf), a token count that is not a
    whole number in [0, MAX_TOKEN_COUNT], a value of the wrong type. Walks the response's JSON form."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            return f"{where} is not valid Unicode (character {err.start}: {value[err.start]!r})"
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if where.endswith("tokens") and not 0 <= value <= MAX_TOKEN_COUNT:
            return f"{where} is {value}, not a token count"
        return None
    if isinstance(value, float):
        if where.endswith("tokens"):
            return f"{where} is {value!r}, not a whole number of tokens"
        if value != value or value == float("inf") or (value == float("-inf") and "logprob" not in where):
            return f"{where} is {value!r}"
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            problem = reply_problem(item, f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problem = reply_problem(item, f"{where}[{i}]" if not where.endswith("tokens") else where)
            if problem:
                return problem
        return None
    return f"{where} is a {type(value).__name__}"


def check_reply(kind: str, resp: Any) -> tuple[str | None, Any]:
    """(reply_problem of a response, its JSON form, made once: the store keeps it), after its type: a generate call
    must return a GenerateResponse whose text is a string, a log-likelihood call a LoglikelihoodResponse."""
    expected = GenerateResponse if kind == "generate" else LoglikelihoodResponse
    if not isinstance(resp, expected):
        return f"the backend returned a {type(resp).__name__}, not a {expected.__name__}", None
    if kind == "generate" and not isinstance(resp.text, str):
        return f"reply.text is a {type(resp.text).__name__}, not text", None
    resp_json = to_jsonable(resp)
    return reply_problem(resp_json), resp_json


@dataclass(frozen=True)
class GenerationOverrides:
    """Generation settings a run imposes on every generation of the model under test (`--temperature`,
    `--max-tokens`, `--system`): they change the requests, so they are part of the run key and of every call key."""

    temperature: float | None = None
    """The sampling temperature instead of the task's (0: greedy)."""

    max_tokens: int | None = None
    """The answer budget instead of the task's."""

    system: str | None = None
    """The system message instead of the task's (added where the task sends none)."""

    seed: int | None = None
    """The sampling seed of a generation whose task names none (the run's --seed: a sampled run repeats)."""

    thinking_tokens: int | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """The thinking budget instead of the task's (--thinking-budget): tokens a model that thinks may spend before
    its answer, on top of the answer's budget; a spec's thinking_budget still overrides it."""

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.temperature, self.max_tokens, self.system, self.thinking_tokens))

    def apply(self, request: GenerateRequest) -> GenerateRequest:
        params = request.params
        if self.temperature is not None:
            params = replace(params, temperature=self.temperature)
        if self.max_tokens is not None:
            params = replace(params, max_tokens=self.max_tokens)
        if self.thinking_tokens is not None:
            params = replace(params, thinking_tokens=self.thinking_tokens)
        if params.temperature > 0 and params.seed is None and self.seed is not None:
            params = replace(params, seed=self.seed)
        messages = request.messages
        if self.system is not None:
            rest = [m for m in messages if m.role != "system"]
            messages = (Message("system", self.system), *rest)
        return replace(request, messages=tuple(messages), params=params)


@dataclass(frozen=True)
class PromptBudget:
    """How prompts that do not fit are handled; part of the run key."""

    max_prompt_tokens: int | None = None
    """Cap below the model's context length (None: the context length minus max_tokens)."""

    policy: str = "error"
    """'error' (fail the sample, counted), 'left' (drop the start of the last user turn),
    'right' (drop the end of the last user turn)."""


def note_limit(counters: RunCounters, limit: int) -> None:
    """A model of the run is at `limit` below its maximum: keep the lowest in the run's counters."""
    lowest = counters.concurrency_min_limit
    counters.concurrency_min_limit = limit if lowest is None else min(lowest, limit)


def count_shrink(counters: RunCounters, limiter: AdaptiveLimiter) -> None:
    """Count one halving of a model's concurrency limit in a run's counters."""
    counters.concurrency_shrinks += 1
    note_limit(counters, limiter.limit)


def shared_model_state(backend: Backend, concurrency: int | None = None) -> dict[str, Any]:
    """What every handle on one backend shares, whatever its role or task: the limiter bounding the
    backend's calls in flight, its identity (computed once: it may hash the weights), and the counters
    of the runs now using it (a halving of the limit is counted in each of them)."""
    runs: list[RunCounters] = []

    def on_shrink(limiter: AdaptiveLimiter) -> None:
        for counters in runs:
            count_shrink(counters, limiter)

    limit = concurrency or backend.capabilities.max_concurrency or 1
    if getattr(backend, "batched", False):  # its calls wait in a provider's batch, not on a server's slots
        limit = backend.capabilities.max_concurrency
    plan = getattr(backend, "plan_concurrency", None)  # optional: a Backend need not have it
    if plan is not None:
        plan(limit)
    return {"limiter": AdaptiveLimiter(limit, on_shrink=on_shrink), "identity": dict(backend.identity()),
            "counters": runs, "backend": backend}  # the backend keeps its id() (the key) from being reused


SharedHandles = MutableMapping[int, dict[str, Any]]
"""id(backend) -> shared_model_state(backend): one limiter per backend for every role and task using it."""


def model_state(shared: SharedHandles, backend: Backend, concurrency: int | None) -> dict[str, Any]:
    """The backend's shared state, made on first use."""
    state = shared.get(id(backend))
    if state is None:
        state = shared[id(backend)] = shared_model_state(backend, concurrency)
    return state


def tool_fields(request: GenerateRequest, resp: GenerateResponse) -> dict[str, Any]:
    """A generation's trace fields about tools, only those it has (a call without tools gets none, so its trace
    entry is what it always was): the tools offered (names), the calls made, why a call could not be read."""
    out: dict[str, Any] = {}
    if request.tools:
        out["tools"] = [tool.name for tool in request.tools]
    if resp.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in resp.tool_calls]
    if resp.tool_call_error is not None:
        out["tool_call_error"] = resp.tool_call_error
    return out


def cache_fields(resp: GenerateResponse) -> dict[str, int]:
    """A generation's trace fields about the provider's prompt cache, only where it reported any (a trace without
    caching stays what it always was)."""
    return {name: getattr(resp, name) for name in ("cached_tokens", "cache_write_tokens") if getattr(resp, name)}


CLAIM_POLL_S, MAX_CLAIM_POLL_S = 0.05, 1.0
"""How often a call another process is making is looked for in the store: from every 50 ms, doubling, to every 1 s."""


class CachedModel:
    """A backend seen through the store: what Task.solve uses (ModelHandle)."""

    def __init__(self, backend: Backend, store: RunStore, counters: RunCounters, *, role: str = "model",
                 concurrency: int | None = None, retry: RetryPolicy | None = None,
                 budget: PromptBudget = PromptBudget(), trace: list[dict[str, Any]] | None = None,
                 spending: Spending | None = None, generation: GenerationOverrides | None = None, draw: int = 0,
                 _shared: dict[str, Any] | None = None):
        self.backend = backend
        self.generation = generation if generation is not None and generation.active else None
        """Settings the run imposes on this role's generations (GenerationOverrides)."""
        self.draw = draw
        """Which draw of the sample these calls are (runner --draws): added to every generation's sample_index."""
        self.spending = spending
        """Tokens and cost of the calls made, shared by the run (or suite) and checked against its budget."""
        self.store = store
        self.counters = counters
        self.role = role
        self.spec = backend.spec
        self.capabilities = backend.capabilities
        self.retry = retry or RetryPolicy()
        self.budget = budget
        self.trace = trace if trace is not None else []
        if _shared is None:
            _shared = shared_model_state(backend, concurrency)
        bind_store = getattr(backend, "bind_store", None)  # optional: a batching backend records its batches there
        if bind_store is not None and store is not None:
            bind_store(store)
        if not any(c is counters for c in _shared["counters"]):  # `is`: equal counts are other runs
            _shared["counters"].append(counters)
            limiter: AdaptiveLimiter = _shared["limiter"]
            if limiter.limit < limiter.maximum:  # shrank before this run joined: it runs below its maximum
                note_limit(counters, limiter.limit)
        self._shared = _shared

    @property
    def batched(self) -> bool:
        """This model's calls go through a provider's batch interface (backends/batch.py): priced at its batch share."""
        return bool(getattr(self.backend, "batched", False))

    @property
    def limiter(self) -> AdaptiveLimiter:
        """This model's calls in flight: at most the configured concurrency, halved on rate limits."""
        return self._shared["limiter"]

    @property
    def identity(self) -> dict[str, Any]:
        return self._shared["identity"]

    def bind(self, trace: list[dict[str, Any]], draw: int = 0) -> "CachedModel":
        """The same model, recording into one sample's trace, for one draw of it."""
        return CachedModel(self.backend, self.store, self.counters, role=self.role, retry=self.retry,
                           budget=self.budget, trace=trace, spending=self.spending, generation=self.generation,
                           draw=draw, _shared=self._shared)

    # -- ModelHandle ------------------------------------------------------------
    def count_tokens(self, text: str) -> int | None:
        return self.backend.count_tokens(text)

    def _prompt_tokens(self, msgs: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int | None:
        if tools:  # the tool schemas are part of the prompt: count it as the backend renders it, where it can
            render_tokens = getattr(self.backend, "render_tokens", None)
            if render_tokens is not None:
                return len(render_tokens(GenerateRequest(tuple(msgs), tools=tuple(tools)))[1])
            schemas = self.backend.count_tokens(canonical_json(to_jsonable(list(tools))))
            rest = self._prompt_tokens(msgs)
            return None if schemas is None or rest is None else schemas + rest
        render = getattr(self.backend, "render_prompt", None)
        if render is not None:
            return self.backend.count_tokens(render(msgs))
        counts = [self.backend.count_tokens(m.content) for m in msgs]
        if any(c is None for c in counts):
            return None
        return sum(counts) + 4 * len(msgs)  # type: ignore[arg-type]

    def _limit(self, max_tokens: int) -> int | None:
        limits = []
        if self.capabilities.context_length:
            limits.append(self.capabilities.context_length - max_tokens)
        if self.budget.max_prompt_tokens:
            limits.append(self.budget.max_prompt_tokens)
        return min(limits) if limits else None

    def fits(self, messages: Sequence[Message], max_tokens: int, tools: Sequence[ToolSpec] = ()) -> bool | None:
        limit = self._limit(max_tokens)
        if limit is None:
            return None
        used = self._prompt_tokens(messages, tools)
        return None if used is None else used <= limit

    def note_truncation(self, policy: str, detail: str = "") -> None:
        self.counters.budget_truncations += 1
        self.trace.append({"role": self.role, "event": "truncation", "policy": policy, "detail": detail})

    def note(self, event: str, detail: str = "") -> None:
        self.trace.append({"role": self.role, "event": event, "detail": detail})

    def _apply_budget(self, request: GenerateRequest) -> GenerateRequest:
        if self.fits(request.messages, request.params.max_tokens, request.tools) in (True, None):
            return request
        limit = self._limit(request.params.max_tokens)
        if self.budget.policy == "error":
            message = (f"prompt does not fit the budget of {limit} tokens (policy 'error'; "
                       "use --truncate left|right to cut it)")
            self.counters.failures += 1
            self.counters.failure_messages.append(f"{self.role}: {message}")
            raise CallFailed(message, attempts=0, kind="prompt-too-long")
        msgs = list(request.messages)
        users = [i for i, m in enumerate(msgs) if m.role == "user"]
        if not users:
            raise CallFailed(f"prompt does not fit the budget of {limit} tokens and has no user turn to cut",
                             attempts=0, kind="prompt-too-long")
        last_user = users[-1]
        text = msgs[last_user].content
        lo, hi = 0, len(text)  # longest cut of the last user turn that fits (binary search on characters)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            piece = text[len(text) - mid:] if self.budget.policy == "left" else text[:mid]
            msgs[last_user] = Message("user", piece)
            if self.fits(msgs, request.params.max_tokens, request.tools):
                lo = mid
            else:
                hi = mid - 1
        piece = text[len(text) - lo:] if self.budget.policy == "left" else text[:lo]
        msgs[last_user] = Message("user", piece)
        self.note_truncation(self.budget.policy, f"{len(text)} -> {lo} characters to fit {limit} tokens")
        return replace(request, messages=tuple(msgs))

    async def chat(self, messages: Sequence[Message], params: GenerateParams | None = None,
                   sample_index: int = 0) -> GenerateResponse:
        return await self.generate(GenerateRequest(tuple(messages), params or GenerateParams(), sample_index))

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        if self.generation is not None:
            request = self.generation.apply(request)
        if self.draw:  # another draw of a sampled call: another cache key and another seed (backend_seed)
            request = replace(request, sample_index=request.sample_index + self.draw)
        request = self._apply_budget(request)
        resp = await self._call("generate", request, self.backend.generate)
        assert isinstance(resp, GenerateResponse)
        return resp

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        resp = await self._call("loglikelihood", request, self.backend.loglikelihood)
        assert isinstance(resp, LoglikelihoodResponse)
        return resp

    def call_key(self, kind: str, request: Any) -> tuple[str, Any, str]:
        """(the content key the store holds a call under, the request's JSON form, its canonical JSON text)."""
        req_json = to_jsonable(request)
        req_text = canonical_json(req_json)  # encoded once: for the key and for the stored row
        identity_text = self._shared.get("identity_json")
        if identity_text is None:
            identity_text = self._shared["identity_json"] = canonical_json(self.identity)
        return content_key_of_canonical(identity_text, canonical_json(kind), req_text), req_json, req_text

    def stored_response(self, kind: str, key: str) -> tuple[Any, float] | None:
        """(response, latency) of a call the store holds (None: not stored); a damaged row is a StoreError."""
        stored = self.store.get_call(key)
        if stored is None:
            return None
        try:
            return response_from_json(kind, stored["response"]), stored["latency_s"]
        except (TypeError, KeyError, ValueError, AttributeError) as err:  # a row edited or damaged by hand
            raise self.store.broken_call(key, err) from None

    async def _call(self, kind: str, request: Any, method: Callable[[Any], Any]) -> Any:
        key, req_json, req_text = self.call_key(kind, request)
        in_flight: dict[str, asyncio.Future] = self._shared.setdefault("in_flight", {})
        loop = asyncio.get_running_loop()
        while True:
            stored = self.stored_response(kind, key)
            if stored is None and self.batched:  # the same request waiting in a provider batch: its reply
                stored = await self._joined(kind, key)
            if stored is not None:
                self.counters.cache_hits += 1
                return self._record(kind, request, req_json, stored[0], stored[1], cache_hit=True)
            other = in_flight.get(key)
            if other is None or other.get_loop() is not loop:
                break
            # the same call is being made for another sample or row (UCFE dialogues, a RAG prompt with no passage
            # equal to No-RAG's): wait for it, then read its answer from the store; if it failed, make it here
            await asyncio.shield(other)
        mine = in_flight[key] = loop.create_future()
        try:
            wait = CLAIM_POLL_S
            while not self.store.claim_call(key):  # another process on this store is making it: wait for its answer
                await asyncio.sleep(wait)
                wait = min(2 * wait, MAX_CLAIM_POLL_S)
                stored = self.stored_response(kind, key)
                if stored is not None:
                    self.counters.cache_hits += 1
                    return self._record(kind, request, req_json, stored[0], stored[1], cache_hit=True)
            try:
                stored = self.stored_response(kind, key)  # committed by another process since the first look
                if stored is not None:
                    self.store.release_call(key)
                    self.counters.cache_hits += 1
                    return self._record(kind, request, req_json, stored[0], stored[1], cache_hit=True)
                return await self._make_call(kind, request, method, key, req_json, req_text)
            except BaseException:
                self.store.release_call(key)  # kept until its commit where the answer was stored
                raise
        finally:
            if in_flight.get(key) is mine:
                del in_flight[key]
            mine.set_result(None)

    async def _make_call(self, kind: str, request: Any, method: Callable[[Any], Any], key: str,
                         req_json: Mapping[str, Any], req_text: str) -> Any:
        """Make a call the store does not hold, store its answer (or its failure) and record it."""
        def on_retry(attempt: int, err: BaseException, delay: float) -> None:
            self.counters.retries += 1

        reserved: Reservation | None = None
        if self.spending is not None and self.spending.limited:
            try:
                reserved = self.spending.admit(self.spec, *self._worst_case(kind, request), batch=self.batched)
            except BudgetRefused as refusal:
                raise self._refused(kind, refusal) from None

        started: float | None = None

        async def attempt() -> Any:
            nonlocal started, reserved
            if started is None:
                started = time.perf_counter()  # the latency leaves out the wait for a free slot
                if reserved is not None:  # a reply that came while this call waited may have reported more
                    reserved = self.spending.top_up(reserved)  # type: ignore[union-attr]
            try:
                return await method(request)
            except READ_ERRORS as err:  # a reply the backend could not turn into a response: this call fails
                raise BackendError(f"{self.spec}: the backend's reply cannot be used: it could not be read "
                                   f"({type(err).__name__}: {err})", kind="bad_reply") from err

        try:
            # the limiter holds a slot per attempt and halves the limit on 429/529 (core/limiter.py)
            resp, retries = await self.limiter.call(attempt, self.retry, on_retry=on_retry)
        except (CallFailed, BackendError) as err:
            if reserved is not None:
                self.spending.release(reserved)  # type: ignore[union-attr]
            failed = err if isinstance(err, CallFailed) else CallFailed(str(err), attempts=1, kind=error_kind(err))
            raise self._failed(key, kind, req_json, failed) from err
        except BudgetRefused as refusal:  # the top-up did not fit: never sent
            self.spending.release(reserved)  # type: ignore[union-attr,arg-type]
            raise self._refused(kind, refusal) from None
        except BaseException:  # cancelled (Ctrl-C): nothing was charged
            if reserved is not None:
                self.spending.release(reserved)  # type: ignore[union-attr]
            raise
        assert started is not None  # a response means an attempt ran
        latency = time.perf_counter() - started
        if retries:
            resp = replace(resp, retries=retries)
        problem, resp_json = check_reply(kind, resp)
        if problem is not None:  # stored, it would fail the store's commit and every sample waiting on it
            if reserved is not None:  # its usage cannot be read: nothing is charged
                self.spending.release(reserved)  # type: ignore[union-attr]
            raise self._failed(key, kind, req_json, CallFailed(
                f"the backend's reply cannot be used: {problem} (this call failed; the run goes on, and the same "
                "command asks again)", attempts=1, kind="bad_reply"))
        cost = None
        cached, written = (resp.cached_tokens, resp.cache_write_tokens) if kind == "generate" else (0, 0)
        if self.spending is not None:
            cost = self.spending.charge(self.spec, *billed_tokens(kind, resp), reserved=reserved, cached_tokens=cached,
                                        cache_write_tokens=written, batch=self.batched)
            if cost is not None:
                self.counters.cost_usd = (self.counters.cost_usd or 0.0) + cost
        prompt, completion = billed_tokens(kind, resp)
        merge_billed(self.counters.billed, {f"{self.role}/{'batch' if self.batched else 'live'}": {
            "calls": 1, "prompt_tokens": prompt, "cached_tokens": cached, "cache_write_tokens": written,
            "completion_tokens": completion, "cost_usd": cost}})
        self.counters.calls += 1
        self.store.put_call_json(key, self.spec, kind, req_text, canonical_json(resp_json), latency)
        return self._record(kind, request, req_json, resp, latency, cache_hit=False)

    async def _joined(self, kind: str, key: str) -> tuple[Any, float] | None:
        """The same request already waiting in a provider batch (another sample asked it): its reply once the batch
        has stored it, a store hit, neither sent nor billed twice (None: no such request, or it failed)."""
        join = getattr(self.backend, "join", None)  # optional: backends/batch.py's
        waiting = join(key) if join is not None else None
        if waiting is None:
            return None
        try:
            await waiting
        except (BackendError, CallFailed):  # it failed: this call goes its own way (retried as any call)
            return None
        return self.stored_response(kind, key)

    def prompt_size(self, kind: str, request: Any) -> tuple[int, bool]:
        """(prompt tokens of a call, whether the model's tokenizer counted them): a generation's prompt as the engine
        renders it where the backend can say (render_tokens, render_prompt), a log-likelihood's context and
        continuations; without a tokenizer, estimate_tokens (ESTIMATE_RULE)."""
        if kind == "generate":
            render_tokens = getattr(self.backend, "render_tokens", None)  # llama.cpp: the engine's own token ids
            counted = (len(render_tokens(request)[1]) if render_tokens
                       else self._prompt_tokens(request.messages, request.tools))
            if counted is not None:
                return counted, True
            return sum(estimate_tokens(m.content) for m in request.messages) + 4 * len(request.messages), False
        texts = (request.context, *request.continuations)
        counts = [self.backend.count_tokens(t) for t in texts]
        if None not in counts:
            return sum(counts), True  # type: ignore[arg-type]
        return sum(estimate_tokens(t) for t in texts), False

    def _refused(self, kind: str, refusal: BudgetRefused) -> CallFailed:
        """A call the budget refused, counted and traced: not a failure; the run stops here and resumes when the
        budget is raised."""
        self.counters.budget_refusals += 1
        self.trace.append({"role": self.role, "kind": kind, "failed": str(refusal)})
        return CallFailed(f"{refusal}; raise it and rerun the same command to resume", attempts=0, kind=BUDGET_KIND)

    def _worst_case(self, kind: str, request: Any) -> tuple[int, int]:
        """(prompt tokens, most completion tokens) a call can cost: prompt_size, and a generation's max_tokens plus
        its thinking budget (core/spending.py)."""
        return self.prompt_size(kind, request)[0], completion_ceiling(kind, request)

    def _failed(self, key: str, kind: str, req_json: Mapping[str, Any], err: CallFailed) -> CallFailed:
        """Count, store and trace a call that failed for good; returns `err` for the caller to raise."""
        self.counters.failures += 1
        self.counters.failure_messages.append(f"{self.role}: {err}")
        self.store.put_failure(key, self.spec, kind, req_json, str(err), err.attempts)
        self.trace.append({"role": self.role, "kind": kind, "failed": str(err)})
        return err

    def _record(self, kind: str, request: Any, req_json: Mapping[str, Any], resp: Any, latency: float, *,
                cache_hit: bool) -> Any:
        """One trace entry; `req_json` is to_jsonable(request), reused rather than made again. Returns the
        response the task gets: a generation's thinking moved out of its text (core/reasoning.py)."""
        entry: dict[str, Any] = {"role": self.role, "kind": kind, "cache_hit": cache_hit, "latency_s": round(latency, 4)}
        if kind == "generate":
            resp = thinking_apart(resp, self.backend.count_tokens)
            self.counters.prompt_tokens += resp.prompt_tokens
            self.counters.completion_tokens += resp.completion_tokens
            self.counters.cached_tokens += resp.cached_tokens
            self.counters.cache_write_tokens += resp.cache_write_tokens
            self.counters.reasoning_tokens += resp.reasoning_tokens
            self.counters.thinking_replies += resp.reasoning is not None or resp.reasoning_tokens > 0
            if resp.truncated:
                self.counters.length_stops += 1
                self.counters.thinking_truncations += resp.cut_in_thinking
            self.counters.tool_calls += len(resp.tool_calls)
            self.counters.tool_call_errors += resp.tool_call_error is not None
            entry.update(prompt=resp.prompt_text if resp.prompt_text is not None else req_json["messages"],
                         params=req_json["params"], response=resp.text,
                         finish_reason=resp.finish_reason, prompt_tokens=resp.prompt_tokens,
                         completion_tokens=resp.completion_tokens, retries=resp.retries, **thinking_fields(resp),
                         **tool_fields(request, resp), **cache_fields(resp))
        else:
            self.counters.tokens_evaluated += 0 if cache_hit else resp.tokens_evaluated
            entry.update(prompt=request.context, continuations=list(request.continuations),
                         logprobs=list(resp.logprobs), is_greedy=list(resp.is_greedy),
                         tokens_evaluated=0 if cache_hit else resp.tokens_evaluated)
        self.trace.append(entry)
        return resp
