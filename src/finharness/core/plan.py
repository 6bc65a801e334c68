"""A run planned without calling any model (`--dry-run`): what it would call, how many tokens, what is stored.

plan_task runs the task's own `solve` on the samples a run would select, under the run key a run would use,
against PlannedModel handles: a CachedModel (the same call keys, prompt budget and token counting) that answers
a call the store holds from the store (it is free, and the task follows its real path) and records every
other call, answering it with a stand-in:

- the backend's own free reply where it has one (`planned_reply(request)`, the fake's): the path is a run's
  exactly, tokens included;
- else a stand-in text of max_tokens tokens that reads as no answer, no verdict and no end of a dialogue: a
  dynamic path takes its longest course (every dialogue round up to max_rounds, every judge retry), so calls
  and prompt tokens are upper bounds. Programs in such a reply are not programs: nothing runs.

A call planned once is answered from the plan the next time it is asked (the run will have stored it by then).
A prompt that would not fit the budget fails its sample here as in a run, and is counted. Prompt tokens are
counted with the model's tokenizer where the backend has one (CachedModel.prompt_size), else estimated
(model.ESTIMATE_RULE). Completion tokens: the backend's own reply (fake), else max_tokens as the ceiling and,
where the store holds generations of the same task and model (resumed samples, calls found stored, else the store's
other runs of the task with that model in the role), their mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .backend import Backend, BackendError, CallFailed
from .hashing import content_key
from .model import (
    CachedModel,
    GenerationOverrides,
    PromptBudget,
    RunCounters,
    SharedHandles,
    billed_tokens,
    completion_ceiling,
    model_state,
)
from .results import draw_id, samples_fingerprint, task_error
from .retry import error_kind
from .runner import RunOptions, run_config, select_samples
from .store import RunStore, StoreError
from .task import Models, Task
from .types import GenerateRequest, GenerateResponse, LoglikelihoodResponse, Sample, to_jsonable

STAND_IN_UNIT = " ~"
"""What a stand-in reply is made of: no letter, digit or CJK character, so no extraction reads an answer in it."""

STAND_IN_MARKS = "!#$%&*+-/<=>?@^|"
"""Sixteen symbols that spell a stand-in's call key at its start (no letter, digit or CJK character either): two
calls asked differently get different stand-ins, so the turns after them differ as a run's would (without it, every
dialogue of a task whose items share a model prompt would repeat the first one's calls)."""


@dataclass
class RoleTally:
    """What one role (one model spec) of one task would spend."""

    spec: str
    """The model spec playing the role."""
    role: str
    """'model', 'judge', 'user'."""
    calls: int = 0
    """Calls a run would make (not in the store)."""
    stored_calls: int = 0
    """Calls the store already holds (free): found stored while planning, and those of finished samples."""
    repeats: int = 0
    """Calls asked again after they were planned: the run will find them stored (free)."""
    prompt_tokens: int = 0
    """Prompt tokens of the calls to make."""
    estimated_calls: int = 0
    """Calls whose prompt tokens are an estimate (no tokenizer)."""
    exact_calls: int = 0
    """Calls answered by the backend's own planned reply: their path and tokens are a run's."""
    exact_completion: int = 0
    """Completion tokens of the exact calls."""
    exact_ceiling: int = 0
    """max_tokens of the exact calls."""
    completion_ceiling: int = 0
    """max_tokens (plus any thinking budget) of every call to make."""
    failing: int = 0
    """Calls that would fail (a prompt too long for the budget, a scripted failure)."""
    stored_completion: int = 0
    """Completion tokens of the stored generations seen (for the stored mean)."""
    stored_generations: int = 0
    """Stored generations seen."""
    unknown_thinking_calls: int = 0
    """Calls whose backend cannot know before the first reply whether the model thinks (an `openai:` spec that states
    no reasoning form): a reasoning server refuses max_tokens and is then sent max_tokens plus a thinking budget."""
    ceiling_if_thinking: int = 0
    """completion_ceiling as it would be if every such call's model thinks (the limit the run then sends)."""
    largest_if_thinking: int = 0
    """The largest limit one such call would be sent with if its model thinks."""
    cached_estimate: int = 0
    """Of prompt_tokens, those the provider's prompt cache would serve (estimated: prompt_cache.PrefixCache replays
    the calls in plan order; 0 for a backend that reports no cache)."""
    written_estimate: int = 0
    """Of prompt_tokens, those written to the prompt cache (Anthropic's marked prefixes; estimated likewise)."""
    batched: bool = False
    """The role's calls go through the provider's batch interface (--batch)."""

    @property
    def prompt_counted(self) -> str:
        """'tokenizer', 'estimate' or 'mixed': how the prompt tokens were found."""
        if not self.estimated_calls:
            return "tokenizer"
        return "estimate" if self.estimated_calls == self.calls else "mixed"

    @property
    def stored_mean(self) -> float | None:
        """Mean completion tokens of the stored generations of this task and model (None: none stored)."""
        return self.stored_completion / self.stored_generations if self.stored_generations else None

    @property
    def completion_expected(self) -> int:
        """Completion tokens expected: exact where the backend answered, the stored mean (capped by each call's
        ceiling on the whole) for the rest, else the ceiling."""
        rest_ceiling = self.completion_ceiling - self.exact_ceiling
        rest = self.calls - self.exact_calls
        mean = self.stored_mean
        guess = rest_ceiling if mean is None else min(rest_ceiling, math.ceil(mean * rest))
        return self.exact_completion + guess

    @property
    def completion_source(self) -> str:
        if self.calls and self.exact_calls == self.calls:
            return "exact (the backend's own replies)"
        mean = self.stored_mean
        if mean is not None:
            return f"stored mean {mean:.0f} of {self.stored_generations} call(s)"
        return "ceiling (max_tokens)"

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "role": self.role, "calls": self.calls, "stored_calls": self.stored_calls,
                "repeats": self.repeats, "prompt_tokens": self.prompt_tokens, "prompt_counted": self.prompt_counted,
                "completion_expected": self.completion_expected, "completion_ceiling": self.completion_ceiling,
                "completion_source": self.completion_source, "stored_mean_completion": self.stored_mean,
                "exact": bool(self.calls) and self.exact_calls == self.calls, "failing": self.failing,
                "thinking": "unknown" if self.unknown_thinking_calls else "known",
                "completion_ceiling_if_thinking": self.ceiling_if_thinking if self.unknown_thinking_calls else None,
                "cached_tokens_estimate": self.cached_estimate, "cache_write_tokens_estimate": self.written_estimate,
                "batch": self.batched}


@dataclass
class TaskPlan:
    """What a run of one task would do."""

    name: str
    """The task (or suite row) planned."""
    run_key: str
    """The key a run of it would store its samples under ('' for calls made outside a task: suite judging)."""
    samples: list[Sample]
    """The samples a run selects."""
    items: int = 0
    """Items planned: the samples (or, for suite judging, the dialogues judged)."""
    draws: int = 1
    """Answers per item (--draws): each item is solved this many times."""
    stored_items: int = 0
    """Answers (items x draws) the store holds finished under the run key (a run skips them)."""
    roles: dict[tuple[str, str], RoleTally] = field(default_factory=dict)
    """(spec, role) -> its tally, in the order first called."""
    predictions: dict[str, Any] = field(default_factory=dict)
    """Sample id -> prediction: stored, or made on the planned path (stand-in or exact replies)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Sample id -> why it would fail (a prompt that does not fit...)."""
    stored_scores: list[float] = field(default_factory=list)
    """Headline scores of the finished samples (the per-item spread of this task and model)."""
    notes: list[str] = field(default_factory=list)
    """What the task says about how it was planned (Task.plan_notes: an agent's calls are a bound)."""

    @property
    def exact(self) -> bool:
        """Every call to make was answered by the backend's own reply: calls and tokens are a run's."""
        return all(t.exact_calls == t.calls for t in self.roles.values())

    def tally(self, spec: str, role: str) -> RoleTally:
        found = self.roles.get((spec, role))
        if found is None:
            found = self.roles[(spec, role)] = RoleTally(spec, role)
        return found

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "run_key": self.run_key, "items": self.items, "draws": self.draws,
                "stored_items": self.stored_items,
                "failing_items": len(self.failed), "exact": self.exact,
                "roles": [t.to_json() for t in self.roles.values()],
                "failures": dict(list(self.failed.items())[:10])}


@dataclass
class DryRun:
    """What every task planned in one dry run shares (a pool's or a suite's): the calls planned so far, each
    backend's identity and stand-in texts."""

    shared: SharedHandles = field(default_factory=dict)
    """id(backend) -> shared_model_state: each backend's identity computed once, as in a run."""
    answered: dict[str, Any] = field(default_factory=dict)
    """Call key -> the response it was planned with (asked again: the run finds it stored)."""
    stand_ins: dict[tuple[int, int], str] = field(default_factory=dict)
    """(id(backend), tokens) -> a stand-in text of about that many tokens under the backend's counting."""
    caches: dict[int, Any] = field(default_factory=dict)
    """id(backend) -> its provider's prompt cache replayed over the calls planned (the caching estimate: the backend's
    `prompt_cache()` and `cache_blocks(request)`, backends/prompt_cache.py), None where it caches nothing."""


def sent_limits(backend: Backend, kind: str, request: Any) -> tuple[int, int | None]:
    """(the completion tokens a call is sent with: its max_tokens plus the thinking budget the backend adds for a model
    that thinks; the limit it would be sent with if the model turns out to think, None where the backend knows).
    A backend without `completion_limits` sends max_tokens plus the task's thinking tokens (completion_ceiling)."""
    limits = getattr(backend, "completion_limits", None)
    if kind != "generate" or limits is None:
        return completion_ceiling(kind, request), None
    return limits(request.params)


class PlannedModel(CachedModel):
    """A CachedModel that calls nothing: stored calls come from the store, every other call is recorded in its
    task's plan and answered with a stand-in (module docstring)."""

    def __init__(self, backend: Backend, store: RunStore | None, counters: RunCounters, *, plan: TaskPlan,
                 dry: DryRun, role: str = "model", budget: PromptBudget = PromptBudget(),
                 trace: list[dict[str, Any]] | None = None, generation: GenerationOverrides | None = None,
                 draw: int = 0, _shared: dict[str, Any] | None = None):
        super().__init__(backend, store, counters, role=role, budget=budget, trace=trace,  # type: ignore[arg-type]
                         generation=generation, draw=draw, _shared=_shared)
        self.plan = plan
        self.dry = dry
        self.tally = plan.tally(self.spec, role)
        self.tally.batched = self.batched
        self.longest_course = getattr(backend, "planned_reply", None) is None
        """Calls are answered by stand-ins, not the backend's own replies: a loop that ends when the model says so
        (an agent episode) takes its longest course, so its calls and tokens are bounds."""

    def bind(self, trace: list[dict[str, Any]], draw: int = 0) -> "PlannedModel":
        return PlannedModel(self.backend, self.store, self.counters, plan=self.plan, dry=self.dry, role=self.role,
                            budget=self.budget, trace=trace, generation=self.generation, draw=draw,
                            _shared=self._shared)

    def stored_response(self, kind: str, key: str) -> tuple[Any, float] | None:
        return None if self.store is None else super().stored_response(kind, key)

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        try:
            return await super().generate(request)
        except CallFailed:  # the budget refused the prompt, or the backend's planned reply failed
            self.tally.failing += 1
            raise

    async def _call(self, kind: str, request: Any, method: Any) -> Any:
        key, req_json, _ = self.call_key(kind, request)
        stored = self.stored_response(kind, key)
        if stored is not None:
            self.tally.stored_calls += 1
            self._note_stored(kind, stored[0])
            self.counters.cache_hits += 1
            return self._record(kind, request, req_json, stored[0], stored[1], cache_hit=True)
        planned = self.dry.answered.get(key)
        if planned is not None:
            self.tally.repeats += 1
            self.counters.cache_hits += 1
            return self._record(kind, request, req_json, planned, 0.0, cache_hit=True)
        reply = getattr(self.backend, "planned_reply", None)  # optional: a Backend need not have it
        ceiling, if_thinking = sent_limits(self.backend, kind, request)
        if if_thinking is not None:
            self.tally.unknown_thinking_calls += 1
            self.tally.largest_if_thinking = max(self.tally.largest_if_thinking, if_thinking)
        self.tally.ceiling_if_thinking += ceiling if if_thinking is None else if_thinking
        if reply is not None:
            try:
                resp = await reply(request)
            except BackendError as err:  # a scripted failure: the call would be made, and fail
                self.tally.calls += 1
                raise CallFailed(str(err), attempts=1, kind=error_kind(err)) from err
            prompt, completion = billed_tokens(kind, resp)
            self.tally.exact_calls += 1
            self.tally.exact_completion += completion
            self.tally.exact_ceiling += ceiling
        else:
            prompt, counted = self.prompt_size(kind, request)
            self.tally.estimated_calls += not counted
            resp = self._stand_in(kind, request, prompt, key)
        self.tally.calls += 1
        self.tally.prompt_tokens += prompt
        self.tally.completion_ceiling += ceiling
        if kind == "generate":
            cached, written = self._cache_estimate(request, prompt)
            self.tally.cached_estimate += cached
            self.tally.written_estimate += written
        self.dry.answered[key] = resp
        self.counters.calls += 1
        return self._record(kind, request, req_json, resp, 0.0, cache_hit=False)

    def _cache_estimate(self, request: GenerateRequest, prompt: int) -> tuple[int, int]:
        """(prompt tokens the provider's cache would serve, those it would write) for a call to make: the backend's
        blocks (`cache_blocks`, optional) replayed through this plan's cache of that backend; at most `prompt`."""
        make_cache = getattr(self.backend, "prompt_cache", None)  # optional: a backend whose provider caches
        if make_cache is None:
            return 0, 0
        cache = self.dry.caches.get(id(self.backend))
        if cache is None:
            cache = self.dry.caches[id(self.backend)] = make_cache()
        if cache is None:
            return 0, 0
        try:
            blocks = self.backend.cache_blocks(request)  # type: ignore[attr-defined]
        except BackendError:  # a request the backend would refuse (no logprobs on Anthropic...): nothing cached
            return 0, 0
        cached, written = cache.see(blocks)
        cached = min(cached, prompt)
        return cached, min(written, prompt - cached)

    def _note_stored(self, kind: str, resp: Any) -> None:
        if kind == "generate":
            self.tally.stored_completion += int(resp.completion_tokens or 0)
            self.tally.stored_generations += 1

    def _stand_in(self, kind: str, request: Any, prompt_tokens: int, key: str) -> Any:
        if kind != "generate":
            n = len(request.continuations)
            counts = tuple(self.backend.count_tokens(c) or 1 for c in request.continuations)
            return LoglikelihoodResponse(logprobs=tuple(-1.0 - i for i in range(n)),
                                         is_greedy=tuple(i == 0 for i in range(n)), continuation_tokens=counts,
                                         context_tokens=max(prompt_tokens - sum(counts), 0),
                                         tokens_evaluated=prompt_tokens)
        tokens = request.params.max_tokens
        return GenerateResponse(text=self._stand_in_text(tokens, key), finish_reason="length",
                                prompt_tokens=prompt_tokens, completion_tokens=tokens)

    def _stand_in_text(self, tokens: int, key: str) -> str:
        """A text of about `tokens` tokens as this backend counts them (its tokenizer, else the estimate), starting
        with the call's key spelled in STAND_IN_MARKS."""
        mark = "".join(STAND_IN_MARKS[int(c, 16)] for c in key[:12])
        cached = (id(self.backend), tokens)
        body = self.dry.stand_ins.get(cached)
        if body is None:
            probe = STAND_IN_UNIT * 64
            per_unit = (self.backend.count_tokens(probe) or len(probe) / 4) / 64
            marked = self.backend.count_tokens(mark) or len(mark) / 4
            body = self.dry.stand_ins[cached] = STAND_IN_UNIT * max(1, round((tokens - marked) / per_unit))
        return mark + body


def _note_score(plan: TaskPlan, task: Task, sample: Sample, prediction: Any) -> None:
    """A finished sample's headline score, for the spread of this task and model's scores."""
    try:
        value = task.score(sample, prediction).value
    except Exception:  # a stored prediction the task cannot score: no spread from it, as in a run
        value = None
    if value is not None:
        plan.stored_scores.append(float(value))


def _note_finished(plan: TaskPlan, record: Mapping[str, Any], handles: Mapping[str, PlannedModel]) -> None:
    """A sample the store holds finished: its calls are stored, and its generations feed the stored mean."""
    for entry in record.get("trace", []):
        if "kind" not in entry or entry.get("role") not in handles:
            continue
        tally = handles[entry["role"]].tally
        tally.stored_calls += 1
        if entry["kind"] == "generate":
            tally.stored_completion += int(entry.get("completion_tokens") or 0)
            tally.stored_generations += 1


async def plan_task(task: Task, backends: Mapping[str, Backend], store: RunStore | None, options: RunOptions,
                    dry: DryRun, *, name: str | None = None) -> TaskPlan:
    """What run_task(task, backends, store, options) would call, on the samples and under the run key it would
    use; nothing is called and nothing is written (module docstring). `dry`: shared by every task of one plan."""
    missing = [r for r in task.roles if r not in backends]
    if missing:
        raise ValueError(f"task {task.name!r} needs model(s) for role(s) {missing} "
                         f"(--judge SPEC / --user-model SPEC)")
    samples = select_samples(task, options)
    used = {role: b for role, b in backends.items() if role in task.roles}
    states = {role: model_state(dry.shared, b, options.concurrency) for role, b in used.items()}
    config = run_config(task, {role: s["identity"] for role, s in states.items()}, options,
                        samples_fingerprint(samples))
    plan = TaskPlan(name or task.name, content_key(config.to_json()), samples, len(samples),
                    draws=max(1, options.draws))
    counters = RunCounters(samples_total=len(samples))
    handles = {role: PlannedModel(b, store, counters, plan=plan, dry=dry, role=role, budget=options.budget,
                                  generation=options.generation if role == "model" else None, _shared=states[role])
               for role, b in used.items()}
    done = store.get_samples(plan.run_key) if store is not None else {}
    try:  # in the run's order: draw 0 of every item, then each further draw (--draws)
        for draw, sample in ((k, s) for k in range(plan.draws) for s in samples):
            sid = draw_id(sample.id, draw)
            record = done.get(sid)
            if record is not None:
                plan.stored_items += 1
                _note_finished(plan, record, handles)
                if draw == 0:
                    plan.predictions[sample.id] = record.get("prediction")
                    _note_score(plan, task, sample, record.get("prediction"))
                continue
            trace: list[dict[str, Any]] = []
            try:
                prediction = await task.solve(sample, Models({role: h.bind(trace, draw)
                                                              for role, h in handles.items()}))
                if draw == 0:
                    plan.predictions[sample.id] = to_jsonable(prediction)
            except CallFailed as err:
                plan.failed[sid] = f"{err.kind}: {err}"
            except StoreError:
                raise
            except Exception as err:  # a task's bug fails its sample, as in a run
                plan.failed[sid] = task_error(task.name, "solve", err)
    finally:
        task.close()
    plan.notes += task.plan_notes()
    if store is not None:
        _note_earlier_runs(plan, store, task.name, {role: s["identity"] for role, s in states.items()}, handles)
    return plan


def _note_earlier_runs(plan: TaskPlan, store: RunStore, task: str, identities: Mapping[str, Any],
                       handles: Mapping[str, PlannedModel]) -> None:
    """Where no stored generation of a role was met, the generations of the store's other runs of the same task
    and the same model in that role (other options or sizes) give the stored mean."""
    wanting = [role for role, h in handles.items() if not h.tally.stored_generations and h.tally.calls]
    if not wanting:
        return
    for key, config in store.run_configs().items():
        if key == plan.run_key or config.get("task") != task:
            continue
        same = [role for role in wanting if (config.get("models") or {}).get(role) == identities[role]]
        if not same:
            continue
        for record in store.get_samples(key).values():
            for entry in record.get("trace", []):
                if entry.get("kind") == "generate" and entry.get("role") in same:
                    tally = handles[entry["role"]].tally
                    tally.stored_completion += int(entry.get("completion_tokens") or 0)
                    tally.stored_generations += 1


def plan_tasks(jobs: Sequence[tuple[str, Task, Mapping[str, Backend], RunOptions]], store: RunStore | None,
               dry: DryRun | None = None) -> list[TaskPlan | Exception]:
    """plan_task for each (name, task, backends by role, options), one after another on one DryRun; a task that
    cannot be planned (bad data, a missing role) gives its exception in its place."""
    import asyncio

    dry = dry if dry is not None else DryRun()
    out: list[TaskPlan | Exception] = []
    for name, task, backends, options in jobs:
        try:
            out.append(asyncio.run(plan_task(task, backends, store, options, dry, name=name)))
        except StoreError:
            raise
        except (ValueError, OSError) as err:  # DataError is a ValueError
            out.append(err)
    return out
