"""The engine: load samples, solve them concurrently through the run store, score, write the run.

Data flows one way: Task.load -> Task.solve (model calls through CachedModel:
cache, one retry layer, budget, counters) -> Task.score -> Task.aggregate ->
results.json / samples.jsonl / manifest.json, each written atomically at the end.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import random
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Awaitable, Callable, Collection, Mapping, MutableMapping, Sequence

from ..data.errors import DataError
from ..data.io import atomic_write_text
from .backend import Backend, BackendError, CallFailed
from .limiter import AdaptiveLimiter
from .metrics import metrics_json
from .retry import RetryPolicy
from .store import RunStore, canonical_json, content_key, content_key_of_canonical
from .task import Aggregate, Models, SampleRecord, Task
from .types import (
    GenerateParams,
    GenerateRequest,
    GenerateResponse,
    LoglikelihoodRequest,
    LoglikelihoodResponse,
    Message,
    Sample,
    TokenLogprob,
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
    tokens_evaluated: int = 0
    """Prompt tokens a log-likelihood engine actually computed (KV reuse makes it small)."""
    length_stops: int = 0
    """Generations cut by max_tokens."""
    budget_truncations: int = 0
    """Prompts cut to fit the budget by a named policy."""
    concurrency_shrinks: int = 0
    """Times a model's concurrency limit was halved after a rate-limit refusal (429/529)."""
    concurrency_min_limit: int | None = None
    """The lowest concurrency limit any model ran at during this run (None: every model kept its maximum);
    a run that joins a model whose limit shrank earlier (a pooled run's later task) starts from it."""
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
            elif f.name.endswith("_min_limit"):  # a lowest value, not a count
                setattr(self, f.name, theirs if mine is None else min(mine, theirs))
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


class CachedModel:
    """A backend seen through the store: what Task.solve uses (ModelHandle)."""

    def __init__(self, backend: Backend, store: RunStore, counters: RunCounters, *, role: str = "model",
                 concurrency: int | None = None, retry: RetryPolicy | None = None,
                 budget: PromptBudget = PromptBudget(), trace: list[dict[str, Any]] | None = None,
                 _shared: dict[str, Any] | None = None):
        self.backend = backend
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
        if not any(c is counters for c in _shared["counters"]):  # `is`: equal counts are other runs
            _shared["counters"].append(counters)
            limiter: AdaptiveLimiter = _shared["limiter"]
            if limiter.limit < limiter.maximum:  # shrank before this run joined: it runs below its maximum
                note_limit(counters, limiter.limit)
        self._shared = _shared

    @property
    def limiter(self) -> AdaptiveLimiter:
        """This model's calls in flight: at most the configured concurrency, halved on rate limits."""
        return self._shared["limiter"]

    @property
    def identity(self) -> dict[str, Any]:
        return self._shared["identity"]

    def bind(self, trace: list[dict[str, Any]]) -> "CachedModel":
        """The same model, recording into one sample's trace."""
        return CachedModel(self.backend, self.store, self.counters, role=self.role, retry=self.retry,
                           budget=self.budget, trace=trace, _shared=self._shared)

    # -- ModelHandle ------------------------------------------------------------
    def count_tokens(self, text: str) -> int | None:
        return self.backend.count_tokens(text)

    def _prompt_tokens(self, msgs: Sequence[Message]) -> int | None:
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

    def fits(self, messages: Sequence[Message], max_tokens: int) -> bool | None:
        limit = self._limit(max_tokens)
        if limit is None:
            return None
        used = self._prompt_tokens(messages)
        return None if used is None else used <= limit

    def note_truncation(self, policy: str, detail: str = "") -> None:
        self.counters.budget_truncations += 1
        self.trace.append({"role": self.role, "event": "truncation", "policy": policy, "detail": detail})

    def note(self, event: str, detail: str = "") -> None:
        self.trace.append({"role": self.role, "event": event, "detail": detail})

    def _apply_budget(self, request: GenerateRequest) -> GenerateRequest:
        if self.fits(request.messages, request.params.max_tokens) in (True, None):
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
            if self.fits(msgs, request.params.max_tokens):
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
        request = self._apply_budget(request)
        resp = await self._call("generate", request, self.backend.generate)
        assert isinstance(resp, GenerateResponse)
        return resp

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        resp = await self._call("loglikelihood", request, self.backend.loglikelihood)
        assert isinstance(resp, LoglikelihoodResponse)
        return resp

    async def _call(self, kind: str, request: Any, method: Callable[[Any], Any]) -> Any:
        req_json = to_jsonable(request)
        req_text = canonical_json(req_json)  # encoded once: for the key and for the stored row
        identity_text = self._shared.get("identity_json")
        if identity_text is None:
            identity_text = self._shared["identity_json"] = canonical_json(self.identity)
        key = content_key_of_canonical(identity_text, canonical_json(kind), req_text)
        stored = self.store.get_call(key)
        if stored is not None:
            self.counters.cache_hits += 1
            resp = response_from_json(kind, stored["response"])
            self._record(kind, request, req_json, resp, stored["latency_s"], cache_hit=True)
            return resp

        def on_retry(attempt: int, err: BaseException, delay: float) -> None:
            self.counters.retries += 1

        started: float | None = None

        async def attempt() -> Any:
            nonlocal started
            if started is None:
                started = time.perf_counter()  # the latency leaves out the wait for a free slot
            return await method(request)

        try:
            # the limiter holds a slot per attempt and halves the limit on 429/529 (core/limiter.py)
            resp, retries = await self.limiter.call(attempt, self.retry, on_retry=on_retry)
        except (CallFailed, BackendError) as err:
            attempts = getattr(err, "attempts", 1)
            self.counters.failures += 1
            self.counters.failure_messages.append(f"{self.role}: {err}")
            self.store.put_failure(key, self.spec, kind, req_json, str(err), attempts)
            self.trace.append({"role": self.role, "kind": kind, "failed": str(err)})
            if isinstance(err, CallFailed):
                raise
            raise CallFailed(str(err), attempts=attempts, kind=kind) from err
        assert started is not None  # a response means an attempt ran
        latency = time.perf_counter() - started
        if retries:
            resp = replace(resp, retries=retries)
        self.counters.calls += 1
        self.store.put_call_json(key, self.spec, kind, req_text, canonical_json(to_jsonable(resp)), latency)
        self._record(kind, request, req_json, resp, latency, cache_hit=False)
        return resp

    def _record(self, kind: str, request: Any, req_json: Mapping[str, Any], resp: Any, latency: float, *,
                cache_hit: bool) -> None:
        """One trace entry; `req_json` is to_jsonable(request), reused rather than made again."""
        entry: dict[str, Any] = {"role": self.role, "kind": kind, "cache_hit": cache_hit, "latency_s": round(latency, 4)}
        if kind == "generate":
            self.counters.prompt_tokens += resp.prompt_tokens
            self.counters.completion_tokens += resp.completion_tokens
            if resp.truncated:
                self.counters.length_stops += 1
            entry.update(prompt=resp.prompt_text if resp.prompt_text is not None else req_json["messages"],
                         params=req_json["params"], response=resp.text,
                         finish_reason=resp.finish_reason, prompt_tokens=resp.prompt_tokens,
                         completion_tokens=resp.completion_tokens, retries=resp.retries)
        else:
            self.counters.tokens_evaluated += 0 if cache_hit else resp.tokens_evaluated
            entry.update(prompt=request.context, continuations=list(request.continuations),
                         logprobs=list(resp.logprobs), is_greedy=list(resp.is_greedy),
                         tokens_evaluated=0 if cache_hit else resp.tokens_evaluated)
        self.trace.append(entry)


@dataclass(frozen=True)
class RunConfig:
    """What identifies a run; hashed into the run key so a changed config never reuses samples."""

    task: str
    task_config: Mapping[str, Any]
    models: Mapping[str, Mapping[str, Any]]
    budget: PromptBudget = PromptBudget()
    limit: int | None = None
    subset: int | None = None
    seed: int = 0
    samples_sha256: str | None = None
    """Fingerprint of the samples run (ids and inputs): edited data (another exam in the same layout,
    a changed question) never reuses a finished sample of the old data."""
    code_sha256: str | None = None
    """Fingerprint of the harness's source: prompts written in code that changed (an upgrade, a fix)
    never reuse finished samples; unchanged requests still come from the call cache."""

    def to_json(self) -> dict[str, Any]:
        return to_jsonable(self)


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the package's Python sources (path and bytes), computed once per process."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def samples_fingerprint(samples: Sequence[Sample]) -> str:
    """sha256 over each sample's id and input (what solve() builds requests from)."""
    return content_key([[s.id, to_jsonable(s.input)] for s in samples])


@dataclass
class RunResult:
    # not in the repr: asyncio.run formats the main task's repr, result included, when it restores
    # the SIGINT handler (CPython 3.11), which took ~0.5 s for 10,000 records
    results: dict[str, Any] = field(repr=False)
    records: list[SampleRecord] = field(repr=False)
    out_dir: Path | None
    counters: RunCounters | None = None


def resumed(record: dict[str, Any]) -> dict[str, Any]:
    """A sample finished by an earlier run: every call in its trace is now served from the store."""
    trace = [dict(t, cache_hit=True) if "kind" in t else t for t in record.get("trace", [])]
    return dict(record, trace=trace)


def make_task(cls: type[Task], options: Mapping[str, Any]) -> Task:
    """Instantiate a task with the options it accepts; an option it does not take is an error."""
    given = {k: v for k, v in options.items() if v is not None}
    params = inspect.signature(cls.__init__).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(given) - set(params))
        if unknown:
            accepted = sorted(p for p in params if p != "self")
            raise ValueError(f"task {cls.name!r} does not take option(s) {unknown}; it takes {accepted}")
    return cls(**given)


def check_unique_ids(samples: Sequence[Sample], task: str) -> None:
    seen: set[str] = set()
    for s in samples:
        if s.id in seen:
            raise DataError(f"duplicate sample id {s.id!r} in task {task}", path=s.metadata.get("path"),
                            line=s.metadata.get("line"))
        seen.add(s.id)


def score_records(task: Task, samples: Sequence[Sample], raw: Mapping[str, Mapping[str, Any]]) -> list[SampleRecord]:
    records = []
    for s in samples:
        rec = raw.get(s.id)
        if rec is None:
            continue
        failed = rec.get("failed")
        score = None if failed else task.score(s, rec["prediction"])
        records.append(SampleRecord(id=s.id, prediction=rec.get("prediction"), score=score,
                                    trace=rec.get("trace", ()), failed=failed, metadata=s.metadata,
                                    target=s.target))
    return records


def sample_line(rec: SampleRecord) -> dict[str, Any]:
    """One line of samples.jsonl."""
    gen = [t for t in rec.trace if t.get("kind") in ("generate", "loglikelihood")]
    first = gen[0] if gen else {}
    last = gen[-1] if gen else {}
    score = rec.score
    return {
        "id": rec.id,
        "prompt": first.get("prompt"),
        "response": last.get("response", last.get("logprobs")),
        "prediction": rec.prediction,
        "target": to_jsonable(rec.target),
        "extraction": None if score is None else {"value": to_jsonable(score.extracted), "rule": score.rule,
                                                  "parsed": score.parsed},
        "score": None if score is None else {"value": score.value, "values": dict(score.values)},
        "truncated": rec.prompt_truncated or rec.length_stopped,
        "prompt_truncated": rec.prompt_truncated,
        "tokens": {"prompt": sum(t.get("prompt_tokens", 0) for t in gen),
                   "completion": sum(t.get("completion_tokens", 0) for t in gen)},
        "latency_s": round(sum(t.get("latency_s", 0.0) for t in gen), 4),
        "cache_hit": bool(gen) and all(t.get("cache_hit") for t in gen),
        "failed": rec.failed,
        "metadata": to_jsonable(rec.metadata),
        "trace": list(rec.trace),
    }


_SAMPLE_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""What json.dumps(..., ensure_ascii=False) builds per call, made once (same bytes)."""


def write_run(out_dir: Path, records: Sequence[SampleRecord], results: Mapping[str, Any]) -> None:
    """samples.jsonl, then results.json, each atomically: a results.json on disk means the run ended."""
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "samples.jsonl",
                      "".join(_SAMPLE_LINE_ENCODER.encode(sample_line(r)) + "\n" for r in records))
    atomic_write_text(out_dir / "results.json", json.dumps(results, ensure_ascii=False, indent=2) + "\n")


def build_results(task: Task, config: RunConfig, agg: Aggregate, records: Sequence[SampleRecord],
                  counters: RunCounters, *, model: str, wall_s: float, versions: Mapping[str, Any],
                  run_key: str) -> dict[str, Any]:
    scored = [r for r in records if r.score is not None]
    failed = [r for r in records if r.failed]
    counts = counters.to_json()
    counts.update(samples=len(records), scored=sum(1 for r in scored if r.score.value is not None),
                  failed_samples=len(failed), unparseable=sum(1 for r in scored if not r.score.parsed),
                  truncated_samples=sum(1 for r in records if r.prompt_truncated or r.length_stopped))
    notes = list(agg.notes)
    if failed:
        notes.append(f"{len(failed)} sample(s) failed (a call failed for good) and are not scored; "
                     "rerun the same command to retry them")
    return {
        "task": task.name,
        "model": model,
        "status": "complete" if not failed and len(records) == counters.samples_total else "incomplete",
        "config": config.to_json(),
        "run_key": run_key,
        "headline": task.headline if task.headline in agg.metrics else next(iter(agg.metrics), None),
        "metrics": metrics_json(agg.metrics),
        "groups": {g: {k: metrics_json(ms) for k, ms in vals.items()} for g, vals in agg.groups.items()},
        "counts": counts,
        "notes": notes,
        "extra": to_jsonable(agg.extra),
        "timing": {"wall_s": round(wall_s, 3),
                   "completion_tokens_per_s": round(counters.completion_tokens / wall_s, 2) if wall_s > 0 else None,
                   "tokens_per_s": (round((counters.prompt_tokens + counters.completion_tokens
                                           + counters.tokens_evaluated) / wall_s, 2) if wall_s > 0 else None)},
        "versions": dict(versions),
    }


def input_size(value: Any) -> int:
    """A cheap size estimate of a sample's input: the characters of all the text in it."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(input_size(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(input_size(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return input_size(to_jsonable(value))
    return 0


def dispatch_order(samples: Sequence[Sample], slots: int) -> list[Sample]:
    """The order samples are started in (results keep the task's order whatever it is).

    With several slots the longest inputs go first, so the run does not end waiting on one long
    sample started last (longest-processing-time-first); the sort is stable, so equal sizes keep
    the task's order. With one slot the order cannot change the total time, and the task's order
    keeps samples that share a prompt prefix (same subject, same shots) adjacent for KV reuse."""
    if slots <= 1:
        return list(samples)
    return sorted(samples, key=lambda s: input_size(s.input), reverse=True)


SampleExecutor = Callable[[str, Sequence[Sample], RunStore, RunCounters, Callable[[RunCounters], None] | None],
                          Awaitable[Mapping[str, dict[str, Any]]]]
"""Solves a run's pending samples elsewhere: (run_key, pending, store, counters, progress) -> raw
results by sample id ({"prediction", "trace"}, plus "failed" for a sample that could not finish).
It stores every finished sample and its calls in `store` under `run_key` and adds its counts to
`counters`, so the run's results are those of a local run."""


async def run_task(task: Task, backends: Mapping[str, Backend], store: RunStore, *, data_dir: Path | None,
                   out_dir: Path | None, limit: int | None = None, subset: int | None = None,
                   concurrency: int | None = None,
                   seed: int = 0, budget: PromptBudget = PromptBudget(), retry: RetryPolicy | None = None,
                   progress: Callable[[RunCounters], None] | None = None,
                   versions: Mapping[str, Any] | None = None, only_ids: Collection[str] | None = None,
                   executor: SampleExecutor | None = None,
                   shared_handles: SharedHandles | None = None) -> RunResult:
    """Run `task` and write `out_dir`; finished samples and calls are read from and written to `store`.

    only_ids: solve only these samples of the selection (one shard of a distributed run: the run
    key stays the whole run's). executor: solves the pending samples elsewhere (core/ray_executor.py)
    instead of in this process; loading, resuming, scoring and writing stay here. shared_handles:
    each backend's limiter and identity, shared with the other tasks of a pooled run (run_tasks);
    roles naming the same backend instance share one limiter in any case."""
    started = time.perf_counter()
    missing = [r for r in task.roles if r not in backends]
    if missing:
        raise ValueError(f"task {task.name!r} needs model(s) for role(s) {missing} "
                         f"(--judge SPEC / --user-model SPEC)")
    samples = task.load(data_dir)
    check_unique_ids(samples, task.name)
    if subset is not None and subset < len(samples):
        # a seeded random subset, kept in the task's order (stratification left to the task's own options)
        keep = set(random.Random(seed).sample(range(len(samples)), subset))
        samples = [s for i, s in enumerate(samples) if i in keep]
    if limit is not None:
        samples = samples[:limit]
    fingerprint = samples_fingerprint(samples)  # of the whole selection, in a shard too: one run key
    if only_ids is not None:
        wanted = set(only_ids)
        samples = [s for s in samples if s.id in wanted]
    counters = RunCounters(samples_total=len(samples))
    shared = shared_handles if shared_handles is not None else {}
    handles = {role: CachedModel(b, store, counters, role=role, retry=retry, budget=budget,
                                 _shared=model_state(shared, b, concurrency))
               for role, b in backends.items() if role in task.roles}
    config = RunConfig(task=task.name, task_config=dict(task.config()),
                       models={role: h.identity for role, h in handles.items()}, budget=budget, limit=limit,
                       subset=subset, seed=seed, samples_sha256=fingerprint,
                       code_sha256=code_fingerprint())
    run_key = content_key(config.to_json())
    store.put_run(run_key, config.to_json())
    done = {sid: resumed(rec) for sid, rec in store.get_samples(run_key).items()}
    counters.samples_done = sum(1 for s in samples if s.id in done)
    counters.cache_hits += sum(1 for s in samples if s.id in done for t in done[s.id]["trace"] if "kind" in t)
    if progress:
        progress(counters)

    # Enough samples in flight to keep every backend slot busy; each model's limiter bounds its calls.
    slots = max(h.limiter.maximum for h in handles.values())
    in_flight = asyncio.Semaphore(max(4, 2 * slots))
    results: dict[str, dict[str, Any]] = dict(done)

    async def solve_one(sample: Sample) -> None:
        async with in_flight:
            trace: list[dict[str, Any]] = []
            models = Models({role: h.bind(trace) for role, h in handles.items()})
            try:
                prediction = await task.solve(sample, models)
            except CallFailed as err:
                results[sample.id] = {"prediction": None, "trace": trace, "failed": f"{err.kind}: {err}"}
            else:
                record = {"prediction": to_jsonable(prediction), "trace": trace}
                store.put_sample(run_key, sample.id, record)
                results[sample.id] = record
            await store.synced()  # counted done only once its calls and its record are committed
            counters.samples_done += 1
            if progress:
                progress(counters)

    try:
        pending = [s for s in samples if s.id not in done]
        if executor is None:
            await asyncio.gather(*(solve_one(s) for s in dispatch_order(pending, slots)))
        elif pending:
            results.update(await executor(run_key, pending, store, counters, progress))
        records = score_records(task, samples, results)
        agg = task.aggregate(samples, [r for r in records if r.score is not None])
    finally:
        task.close()
        for state in {id(h._shared): h._shared for h in handles.values()}.values():
            # this run's counts are final: later halvings belong to the runs still going
            state["counters"][:] = [c for c in state["counters"] if c is not counters]
    wall = time.perf_counter() - started
    model_spec = backends["model"].spec if "model" in backends else ""
    results_json = build_results(task, config, agg, records, counters, model=model_spec, wall_s=wall,
                                 versions=versions or {}, run_key=run_key)
    if out_dir is not None:
        write_run(out_dir, records, results_json)
    return RunResult(results_json, records, out_dir, counters)


@dataclass(frozen=True)
class PooledTask:
    """One task of a pooled run (run_tasks)."""

    task: Task
    backends: Mapping[str, Backend]
    """Backend by role; a backend instance named by several tasks or roles is shared by all of them."""
    out_dir: Path | None
    """Where this task's results.json / samples.jsonl go (None: nowhere)."""
    progress: Callable[[RunCounters], None] | None = None
    """This task's progress callback."""


def dispatch_lanes(jobs: Sequence[PooledTask], shared: SharedHandles) -> list[list[int]]:
    """Indices of `jobs` grouped into lanes: the tasks of a lane run one after another, lanes at once.

    Tasks that use a common single-slot backend (a local llama.cpp model) share a lane, so that
    backend sees one task's samples back to back, in the task's order: their shared prompt prefixes
    (same instructions, same shots) stay adjacent for KV reuse, and with one slot the order cannot
    shorten the run anyway. Every other task gets a lane of its own, so multi-slot backends (servers)
    get the requests of all tasks interleaved and every slot stays busy. Lanes keep the given order."""
    lane_of = list(range(len(jobs)))  # union-find over the tasks

    def find(i: int) -> int:
        while lane_of[i] != i:
            lane_of[i] = lane_of[lane_of[i]]
            i = lane_of[i]
        return i

    first_user: dict[int, int] = {}
    for i, job in enumerate(jobs):
        for role, backend in job.backends.items():
            if role in job.task.roles and shared[id(backend)]["limiter"].maximum <= 1:
                j = first_user.setdefault(id(backend), i)
                lane_of[find(i)] = find(j)
    lanes: dict[int, list[int]] = {}
    for i in range(len(jobs)):
        lanes.setdefault(find(i), []).append(i)
    return sorted(lanes.values())


async def run_tasks(jobs: Sequence[PooledTask], store: RunStore, *, data_dir: Path | None,
                    concurrency: int | None = None, return_exceptions: bool = False,
                    **run_options: Any) -> list[RunResult | Exception]:
    """Run several tasks as one pool of requests: each backend's slots are shared by every task.

    Each task is run by run_task as if alone (same run key, same store, same files in its out_dir),
    so a task run in a pool resumes from, and is resumable by, the same task run alone. One limiter
    per backend instance (`concurrency`, else the backend's own maximum) bounds the calls in flight
    across all tasks. Dispatch policy (dispatch_lanes): tasks sharing a single-slot backend run one
    after another, so it sees each task's samples adjacent (prefix reuse); all other tasks run at
    once, their requests interleaved on multi-slot backends, each task's longest samples first.

    data_dir, run_options: as for run_task (limit, subset, seed, budget, retry, versions), the same
    for every task. return_exceptions: a task that fails (bad data, a task error) gives its
    exception in its place instead of stopping the others, as in asyncio.gather. Results come in
    the order of `jobs`."""
    shared: SharedHandles = {}
    for job in jobs:
        for role, backend in job.backends.items():
            if role in job.task.roles:
                model_state(shared, backend, concurrency)
    results: list[RunResult | Exception | None] = [None] * len(jobs)

    async def run_lane(indices: list[int]) -> None:
        for i in indices:
            job = jobs[i]
            try:
                results[i] = await run_task(job.task, job.backends, store, data_dir=data_dir,
                                            out_dir=job.out_dir, progress=job.progress,
                                            concurrency=concurrency, shared_handles=shared, **run_options)
            except Exception as err:  # handed back in the task's place, as asyncio.gather does
                if not return_exceptions:
                    raise
                results[i] = err

    await asyncio.gather(*(run_lane(lane) for lane in dispatch_lanes(jobs, shared)))
    return results  # type: ignore[return-value]
