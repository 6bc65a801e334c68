"""The engine: load samples, solve them concurrently through the run store, score, write the run.

Data flows one way: Task.load -> Task.solve (model calls through core/model.py's CachedModel: cache,
one retry layer, budget, counters) -> results.score_run (Task.score, Task.aggregate) ->
results.json / samples.jsonl (results.write_run), each written atomically at the end. What a run
is asked to do beyond the task itself (data root, selection, seed, concurrency, prompt budget,
retries) is one frozen RunOptions.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Collection, Mapping, Sequence

from ..data.errors import DataError
from .backend import Backend, CallFailed
from .hashing import content_key
from .model import (
    CachedModel,
    GenerationOverrides,
    PromptBudget,
    RunCounters,
    SharedHandles,
    model_state,
    reply_problem,
)
from .results import (
    RunConfig,
    RunResult,
    TaskError,
    build_results,
    code_fingerprint,
    draw_id,
    failed_record,
    format_exc,
    samples_fingerprint,
    score_draws,
    score_run,
    task_error,
    write_run,
)
from .retry import RetryPolicy
from .spending import Spending
from .store import RunStore, StoreError
from .task import Models, Task
from .types import Sample, to_jsonable


@dataclass(frozen=True)
class RunOptions:
    """How a run is asked to go, beside the task and its models: the same for every task of a pooled run."""

    data_dir: Path | None = None
    """The data root every task reads below (None: the task's own default, e.g. $FINHARNESS_DATA_DIR)."""

    limit: int | None = None
    """Only the first N samples (after `subset`)."""

    subset: int | None = None
    """A seeded random subset of N samples, kept in the task's order."""

    seed: int = 0
    """Seeds the subset; recorded in the run key."""

    concurrency: int | None = None
    """Calls in flight per model (None: each backend's own maximum)."""

    budget: PromptBudget = PromptBudget()
    """What happens to prompts that do not fit (part of the run key)."""

    retry: RetryPolicy | None = None
    """The one retry layer's policy (None: RetryPolicy())."""

    versions: Mapping[str, Any] = field(default_factory=dict)
    """Package and platform versions written to results.json (not part of the run key)."""

    generation: GenerationOverrides | None = None
    """Generation settings imposed on the model under test (--temperature, --max-tokens, --system): part of the run
    key and of every call key."""

    draws: int = 1
    """Answers per item (--draws K): each item is solved K times, draw k adding k to every generation's
    sample_index (another seed, another cache key); metrics then carry the item-clustered interval and the share
    of variance from sampling (results.json `draws`). 1: exactly a run without draws."""

    spending: Spending | None = None
    """Tokens and cost of the calls made, at the run's prices, and the token or cost budget that stops the run
    before the call that would cross it (core/spending.py); one object shared by every task of a pool or suite.
    Not part of the run key: it decides how far a run gets, not what it computes."""

    batch: bool | tuple[str, ...] = False
    """Models whose calls go through their provider's batch interface (backends/batch.py): True, every model that has
    one; or the specs or model names listed. Not part of the run key: a batch call is keyed as a live one."""


def resumed(record: dict[str, Any]) -> dict[str, Any]:
    """A sample finished by an earlier run: every call in its trace is now served from the store."""
    trace = [dict(t, cache_hit=True) if "kind" in t else t for t in record.get("trace", [])]
    return dict(record, trace=trace)


def check_unique_ids(samples: Sequence[Sample], task: str) -> None:
    seen: set[str] = set()
    for s in samples:
        if s.id in seen:
            raise DataError(f"duplicate sample id {s.id!r} in task {task}", path=s.metadata.get("path"),
                            line=s.metadata.get("line"))
        seen.add(s.id)


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


def select_samples(task: Task, options: RunOptions) -> list[Sample]:
    """The samples a run of `task` solves: loaded, their ids checked, then the seeded subset (kept in the task's
    order; stratification is left to the task's own options) and the limit."""
    samples = task.load(options.data_dir)
    check_unique_ids(samples, task.name)
    if options.subset is not None and options.subset < len(samples):
        keep = set(random.Random(options.seed).sample(range(len(samples)), options.subset))
        samples = [s for i, s in enumerate(samples) if i in keep]
    if options.limit is not None:
        samples = samples[:options.limit]
    return samples


def run_config(task: Task, identities: Mapping[str, Any], options: RunOptions, fingerprint: str) -> RunConfig:
    """What a run's key is made from: the task's config, each role's model identity, the selection and budget, the
    samples' and the harness's fingerprints."""
    generation = options.generation
    return RunConfig(task=task.name, task_config=dict(task.run_config()), models=dict(identities),
                     budget=options.budget, limit=options.limit, subset=options.subset, seed=options.seed,
                     samples_sha256=fingerprint, code_sha256=code_fingerprint(),
                     generation=to_jsonable(generation) if generation is not None and generation.active else None,
                     draws=options.draws)


SampleExecutor = Callable[[str, Sequence[Sample], RunStore, RunCounters, Callable[[RunCounters], None] | None],
                          Awaitable[Mapping[str, dict[str, Any]]]]
"""Solves a run's pending samples elsewhere: (run_key, pending, store, counters, progress) -> raw
results by sample id ({"prediction", "trace"}, plus "failed" for a sample that could not finish).
It stores every finished sample and its calls in `store` under `run_key` and adds its counts to
`counters`, so the run's results are those of a local run."""


async def run_task(task: Task, backends: Mapping[str, Backend], store: RunStore, options: RunOptions = RunOptions(),
                   *, out_dir: Path | None = None, progress: Callable[[RunCounters], None] | None = None,
                   only_ids: Collection[str] | None = None, executor: SampleExecutor | None = None,
                   shared_handles: SharedHandles | None = None) -> RunResult:
    """Run `task` with `options` and write `out_dir`; finished samples and calls are read from and written
    to `store`.

    only_ids: solve only these samples of the selection (one shard of a distributed run: the run
    key stays the whole run's). executor: solves the pending samples elsewhere (core/ray_executor.py)
    instead of in this process; loading, resuming, scoring and writing stay here. shared_handles:
    each backend's limiter and identity, shared with the other tasks of a pooled run (run_tasks);
    roles naming the same backend instance share one limiter in any case."""
    started = time.perf_counter()
    if executor is not None and options.draws > 1:
        raise ValueError("--draws runs on the local executor only; run without --executor ray")
    missing = [r for r in task.roles if r not in backends]
    if missing:
        raise ValueError(f"task {task.name!r} needs model(s) for role(s) {missing} "
                         f"(--judge SPEC / --user-model SPEC)")
    samples = select_samples(task, options)
    fingerprint = samples_fingerprint(samples)  # of the whole selection, in a shard too: one run key
    budget = options.budget
    if only_ids is not None:
        wanted = set(only_ids)
        samples = [s for s in samples if s.id in wanted]
    draws = max(1, options.draws)
    counters = RunCounters(samples_total=len(samples) * draws)
    shared = shared_handles if shared_handles is not None else {}
    handles = {role: CachedModel(b, store, counters, role=role, retry=options.retry, budget=budget,
                                 spending=options.spending, generation=options.generation if role == "model" else None,
                                 _shared=model_state(shared, b, options.concurrency))
               for role, b in backends.items() if role in task.roles}
    config = run_config(task, {role: h.identity for role, h in handles.items()}, options, fingerprint)
    run_key = content_key(config.to_json())
    store.put_run(run_key, config.to_json())
    done = {sid: resumed(rec) for sid, rec in store.get_samples(run_key).items()}
    jobs = [(s, k) for k in range(draws) for s in samples]  # draw 0 of every item first: a stopped run has one each
    counters.samples_done = sum(1 for s, k in jobs if draw_id(s.id, k) in done)
    counters.cache_hits += sum(1 for s, k in jobs if draw_id(s.id, k) in done
                               for t in done[draw_id(s.id, k)]["trace"] if "kind" in t)
    if progress:
        progress(counters)

    # Enough samples in flight to keep every backend slot busy; each model's limiter bounds its calls.
    slots = max((h.limiter.maximum for h in handles.values()), default=1)  # a task may grade without models
    bound = max(4, 2 * slots)
    if any(h.batched for h in handles.values()):  # a provider batch holds what is asked together: ask it all
        bound = max(1, len(jobs))
    in_flight = asyncio.Semaphore(bound)
    results: dict[str, dict[str, Any]] = dict(done)

    async def solve_one(sample: Sample, draw: int = 0) -> None:
        sid = draw_id(sample.id, draw)
        async with in_flight:
            trace: list[dict[str, Any]] = []
            models = Models({role: h.bind(trace, draw) for role, h in handles.items()})
            try:
                prediction = to_jsonable(await task.solve(sample, models))
                problem = reply_problem(prediction, "the prediction")
                if problem is not None:
                    raise TaskError(f"{task.name}.solve returned what cannot be stored: {problem}")
            except CallFailed as err:
                results[sid] = failed_record(trace, f"{err.kind}: {err}", transient=err.transient)
            except DataError:  # the store, or data the task needs (its prompt files): the run stops with what to do
                raise
            except Exception as err:  # a task's bug fails its sample, not the run; the traceback is kept
                results[sid] = failed_record(trace, task_error(task.name, "solve", err), transient=False,
                                             traceback=format_exc(err))
            else:
                record = {"prediction": prediction, "trace": trace}
                store.put_sample(run_key, sid, record)
                results[sid] = record
            await store.synced()  # counted done only once its calls and its record are committed
            counters.samples_done += 1
            if progress:
                progress(counters)

    invoked = time.time()
    outcome = "interrupted"  # until the samples are solved: a Ctrl-C or a bug leaves that in the invocation row
    try:
        pending = [s for s in samples if s.id not in done]
        if executor is None:
            await asyncio.gather(*(solve_one(s) for s in dispatch_order(pending, slots)))
            for k in range(1, draws):  # the further draws, one after another (each draw's samples at once)
                later = [s for s in samples if draw_id(s.id, k) not in done]
                await asyncio.gather(*(solve_one(s, k) for s in dispatch_order(later, slots)))
        elif pending:
            results.update(await executor(run_key, pending, store, counters, progress))
        outcome = "solved"
        records, agg = score_run(task, samples, results)
        draw_scores = score_draws(task, samples, results, draws) if draws > 1 else None
    finally:
        task.close()
        for state in {id(h._shared): h._shared for h in handles.values()}.values():
            # this run's counts are final: later halvings belong to the runs still going
            state["counters"][:] = [c for c in state["counters"] if c is not counters]
        if outcome == "interrupted":
            try:
                store.put_invocation(run_key, started=invoked, wall_s=time.perf_counter() - started,
                                     counts=counters.to_json(), outcome=outcome)
            except StoreError:  # the store's own failure interrupted the run: that error is the one to show
                pass
    wall = time.perf_counter() - started
    model_spec = backends["model"].spec if "model" in backends else ""
    failed = sum(1 for r in records if r.failed)
    store.put_invocation(run_key, started=invoked, wall_s=wall, counts=counters.to_json(),
                         outcome="budget" if counters.budget_refusals else "incomplete" if failed else "complete")
    results_json = build_results(task, config, agg, records, counters, model=model_spec, wall_s=wall,
                                 versions=options.versions, run_key=run_key, cumulative=store.cumulative(run_key),
                                 draws=draw_scores)
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


async def run_tasks(jobs: Sequence[PooledTask], store: RunStore, options: RunOptions = RunOptions(), *,
                    return_exceptions: bool = False) -> list[RunResult | Exception]:
    """Run several tasks as one pool of requests: each backend's slots are shared by every task.

    Each task is run by run_task as if alone (same run key, same store, same files in its out_dir),
    so a task run in a pool resumes from, and is resumable by, the same task run alone. One limiter
    per backend instance (`concurrency`, else the backend's own maximum) bounds the calls in flight
    across all tasks. Dispatch policy (dispatch_lanes): tasks sharing a single-slot backend run one
    after another, so it sees each task's samples adjacent (prefix reuse); all other tasks run at
    once, their requests interleaved on multi-slot backends, each task's longest samples first.

    options: as for run_task, the same for every task. return_exceptions: a task that fails (bad data, a task error) gives its
    exception in its place instead of stopping the others, as in asyncio.gather. Results come in
    the order of `jobs`."""
    shared: SharedHandles = {}
    for job in jobs:
        for role, backend in job.backends.items():
            if role in job.task.roles:
                model_state(shared, backend, options.concurrency)
    results: list[RunResult | Exception | None] = [None] * len(jobs)

    async def run_lane(indices: list[int]) -> None:
        for i in indices:
            job = jobs[i]
            try:
                results[i] = await run_task(job.task, job.backends, store, options, out_dir=job.out_dir,
                                            progress=job.progress, shared_handles=shared)
            except Exception as err:  # handed back in the task's place, as asyncio.gather does
                if not return_exceptions:
                    raise
                results[i] = err

    await asyncio.gather(*(run_lane(lane) for lane in dispatch_lanes(jobs, shared)))
    return results  # type: ignore[return-value]
