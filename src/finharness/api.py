"""The Python API under the command line: `finharness.evaluate(...)`, what `finharness run` does, from a notebook or
a CI job.

    import finharness
    result = finharness.evaluate("demo", model="embedded", out="runs/demo")
    result["demo"].metric("accuracy")          # Value(value=0.33, ci95=(0.10, 0.65), n=12)
    result["demo"].records                     # every sample: prediction, score, trace

Tasks are specs (a built-in name, an entry point, FILE.py:Class, FILE.toml) or Task objects; several run as one pool
of requests sharing each model's slots, as `finharness run TASK TASK ...` does. Models are specs or Backend objects
(a FakeBackend in a test). Every call goes through the run store (OUT/store.sqlite unless `store` says otherwise),
so calling evaluate() again resumes and makes no call twice. Problems are raised, never printed: a bad spec or option
is a ValueError naming it, missing data a DataError naming the file and the pull that fetches it, an unreachable
server a ValueError saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .core.backend import Backend
from .core.model import GenerationOverrides, PromptBudget, RunCounters
from .core.results import RunResult
from .core.runner import RunOptions, run_task
from .core.spending import Price, Spending, parse_price
from .core.task import SampleRecord, Task


@dataclass(frozen=True)
class Value:
    """One metric of a run: its value, 95% interval and n."""

    value: float | None
    ci95: tuple[float, float] | None
    n: int
    warning: str | None = None
    """Why the interval should not be read at face value (few items), or None."""


@dataclass(frozen=True)
class TaskRun:
    """One task's run: what results.json holds, typed, and every sample."""

    name: str
    """The task's name (its run folder's)."""
    results: Mapping[str, Any]
    """results.json as written."""
    records: Sequence[SampleRecord]
    """Every sample's outcome (prediction, score, trace), failed ones included."""
    out_dir: Path
    """Where results.json, samples.jsonl and manifest.json are."""

    @property
    def status(self) -> str:
        """'complete', 'incomplete' (a sample failed) or 'budget' (the budget stopped it)."""
        return str(self.results.get("status"))

    @property
    def headline(self) -> str | None:
        return self.results.get("headline")

    @property
    def metrics(self) -> dict[str, Value]:
        """Every metric by name."""
        return {name: _value(m) for name, m in (self.results.get("metrics") or {}).items()}

    def metric(self, name: str | None = None) -> Value:
        """A metric by name (default: the headline); KeyError naming the ones there are."""
        name = name or self.headline
        found = (self.results.get("metrics") or {}).get(name)
        if found is None:
            raise KeyError(f"{self.name} has no metric {name!r}; it has: {', '.join(self.results.get('metrics') or {})}")
        return _value(found)


def _value(m: Mapping[str, Any]) -> Value:
    ci = m.get("ci95")
    return Value(m.get("value"), tuple(ci) if ci else None, int(m.get("n") or 0), m.get("warning"))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Evaluation:
    """What evaluate() did: each task's run, and where everything is."""

    runs: Mapping[str, TaskRun]
    """Task name -> its run."""
    errors: Mapping[str, BaseException] = field(default_factory=dict)
    """Task name -> why it could not run (a pool's other tasks ran on)."""
    store: Path | None = None
    """The run store every call is in."""
    spending: Spending | None = None
    """Tokens and cost spent, and why a budget stopped the run (`spending.reached`); None when nothing was priced
    or limited."""
    pool: Any = None
    """A pooled run's core.pool.PoolOutcome (wall time, each task's outcome), for the command line's table."""

    def __getitem__(self, name: str) -> TaskRun:
        try:
            return self.runs[name]
        except KeyError:
            raise KeyError(f"no run of {name!r}; the runs: {', '.join(self.runs)}") from None

    @property
    def complete(self) -> bool:
        return not self.errors and all(run.status == "complete" for run in self.runs.values())


TaskLike = str | Task
ModelLike = str | Backend


@dataclass
class Prepared:
    """A run made ready: tasks made from their specs and options, backends by role, the run's options. What
    `finharness run` and evaluate() both execute."""

    names: list[str]
    tasks: list[Task]
    backends: dict[str, Backend]
    options: RunOptions
    out: Path
    store_path: Path
    spending: Spending | None
    refs: list[Any] = field(default_factory=list)
    """The TaskRefs of the tasks given as specs (the command line's dry run and Ray executor need them)."""
    task_options: list[dict[str, Any]] = field(default_factory=list)
    """Each task's options, as it declares them."""
    executor: str = "local"
    """Where samples are solved: 'local' (this process), or 'ray' (shards over a Ray cluster)."""
    address: str | None = None
    """The Ray cluster (executor 'ray'; None: $RAY_ADDRESS, else a new local one)."""
    shards: int | None = None
    """Ray tasks the run is split into (executor 'ray'; None: one per CPU of the cluster)."""
    specs: dict[str, str] = field(default_factory=dict)
    """Role -> model spec of the models given as specs (what a Ray worker makes its backends from)."""


def options_per_task(refs: Sequence[Any], options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each option given to the tasks that declare it (and to no other); an option no task takes is a ValueError
    naming the closest known one."""
    declared = [{o.name for o in ref.cls.describe_options()} for ref in refs]
    unknown = sorted(set(options) - set().union(*declared))
    if unknown:
        known = sorted(set().union(*declared))
        close = {name: difflib.get_close_matches(name, known, n=1) for name in unknown}
        hints = "; ".join(f"did you mean {found[0]!r} for {name!r}?" for name, found in close.items() if found)
        raise ValueError(f"no task of this run takes option(s) {unknown}" + (f" ({hints})" if hints else "")
                         + "; `finharness list TASK` shows a task's options")
    return [{k: v for k, v in options.items() if k in names} for names in declared]


def run_versions() -> dict[str, Any]:
    """What a run records of the software it ran on: finharness, Python, the platform, the main libraries, the
    git commit of a source checkout."""
    import platform
    import subprocess
    from importlib import metadata

    try:
        own = metadata.version("finharness")
    except metadata.PackageNotFoundError:  # a source tree without installation
        own = "0.0.0+unknown"
    out: dict[str, Any] = {"finharness": own, "python": platform.python_version(),
                           "platform": platform.platform()}
    for dist in ("numpy", "scipy", "pandas", "httpx", "llama_cpp_python"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5)
        if sha.returncode == 0:
            out["git_sha"] = sha.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def make_spending(prices: Mapping[str, Any] | Sequence[str] | None, max_cost: float | None,
                  budget_tokens: int | None, base: Mapping[str, Price] | None = None) -> Spending | None:
    """The run's Spending: prices (MODEL -> Price, or 'MODEL=IN/OUT' texts) over `base` (a suite's [prices]), a
    cost and a token budget; None when none is given."""
    priced: dict[str, Price] = dict(base or {})
    if isinstance(prices, Mapping):
        priced.update({k: v if isinstance(v, Price) else parse_price(f"{k}={v}")[1] for k, v in prices.items()})
    else:
        priced.update(parse_price(text) for text in prices or ())
    if max_cost is not None and not priced:
        raise ValueError("a cost budget (--max-cost, max_cost=) needs prices: MODEL=IN/OUT, USD per million tokens "
                         "(--price or a suite's [prices], prices=), e.g. gpt-4o=2.5/10")
    if not priced and max_cost is None and budget_tokens is None:
        return None
    return Spending(prices=priced, max_tokens=budget_tokens, max_cost=max_cost)


def prepare(tasks: TaskLike | Sequence[TaskLike], model: ModelLike = "embedded", *, judge: ModelLike | None = None,
            user: ModelLike | None = None, options: Mapping[str, Any] | None = None, limit: int | None = None,
            sample: int | None = None, seed: int = 0, data_dir: str | Path | None = None,
            out: str | Path | None = None, store: str | Path | None = None, concurrency: int | None = None,
            spending: Spending | None = None, temperature: float | None = None, max_tokens: int | None = None,
            system: str | None = None, thinking_budget: int | None = None, draws: int = 1, truncate: str = "error",
            max_prompt_tokens: int | None = None, sandbox: str | None = None,
            versions: Mapping[str, Any] | None = None, batch: bool = False, executor: str = "local",
            address: str | None = None, shards: int | None = None) -> Prepared:
    """Resolve the tasks and models of a run and its options (evaluate()'s parameters, and where samples are solved:
    `executor` 'local' or 'ray', with the Ray cluster's `address` and `shards`); ValueError on bad input."""
    from .backends import from_spec
    from .benchmarks.registry import resolve_task
    from .core.model import TRUNCATION_POLICIES
    from .core.pool import run_dir_name
    from .data.registry import resolve_data_dir

    if truncate not in TRUNCATION_POLICIES:
        raise ValueError(f"truncate must be one of {', '.join(TRUNCATION_POLICIES)}, not {truncate!r}")
    if draws > 1 and temperature == 0:
        raise ValueError(f"draws {draws} at temperature 0: greedy decoding answers every draw the same (identical "
                         "draws), so the draws measure nothing; give a temperature above 0 (e.g. 0.7), or one draw")
    given = [tasks] if isinstance(tasks, (str, Task)) else list(tasks)
    if not given:
        raise ValueError("no task given")
    _check_executor(executor, address, shards, given, model)
    refs = [resolve_task(t) for t in given if isinstance(t, str)]
    spec_refs = iter(refs)
    per_task = options_per_task(refs, dict(options or {})) if len(given) > 1 else [dict(options or {})] * len(refs)
    made: list[Task] = []
    task_options: list[dict[str, Any]] = []
    opts_iter = iter(per_task)
    for t in given:
        if isinstance(t, Task):
            made.append(t)
            task_options.append({})
            continue
        ref, opts = next(spec_refs), dict(next(opts_iter))
        if sandbox is not None and "sandbox" in {o.name for o in ref.cls.describe_options()}:
            opts["sandbox"] = sandbox
        made.append(ref.make(opts))
        task_options.append(opts)
    names = [ref_label for ref_label in _labels(given, refs, made)]
    slugs = [run_dir_name(name) for name in names]
    if len(set(slugs)) < len(slugs):
        raise ValueError(f"tasks {names} name the same run folder twice; give each task once")
    specs = {role: m for role, m in (("model", model), ("judge", judge), ("user", user)) if m is not None}
    by_spec: dict[str, Backend] = {}
    backends: dict[str, Backend] = {}
    for role, m in specs.items():
        if isinstance(m, str):
            backends[role] = by_spec[m] = by_spec.get(m) or from_spec(m, batch=batch)
        else:
            backends[role] = m
    model_name = model if isinstance(model, str) else getattr(model, "spec", "model")
    out_dir = Path(out) if out is not None else Path("runs") / f"{run_dir_name('+'.join(names))}__{run_dir_name(model_name)}"
    run_options = RunOptions(data_dir=resolve_data_dir(data_dir), limit=limit, subset=sample, concurrency=concurrency,
                             seed=seed, budget=PromptBudget(max_prompt_tokens, truncate),
                             versions=dict(versions or {}),
                             generation=GenerationOverrides(temperature, max_tokens, system, seed, thinking_budget),
                             draws=draws, spending=spending, batch=batch)
    return Prepared(names, made, backends, run_options, out_dir, Path(store) if store else out_dir / "store.sqlite",
                    spending, refs, task_options, executor, address, shards,
                    {role: m for role, m in specs.items() if isinstance(m, str)})


def _check_executor(executor: str, address: str | None, shards: int | None, given: Sequence[TaskLike],
                    model: ModelLike) -> None:
    """ValueError for an executor the run cannot use (the Ray executor: one task given by spec, models by spec)."""
    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be local or ray, not {executor!r}")
    if executor == "local":
        if address is not None or shards is not None:
            raise ValueError("a Ray address and shards need the Ray executor (--executor ray)")
        return
    from importlib.util import find_spec

    from .core.ray_executor import INSTALL_HINT

    if len(given) > 1:
        raise ValueError("the Ray executor runs one task at a time; run each task on its own (they can share a store)")
    if not isinstance(given[0], str) or not isinstance(model, str):
        raise ValueError("the Ray executor makes the task and the models on its workers: give them as specs")
    if find_spec("ray") is None:
        raise ValueError(INSTALL_HINT)


def check_data_before_work(prepared: Prepared) -> Any:
    """The data every task of the run reads, checked on tasks of their own before the first call (a
    suite.data_check.DataCheck, less what the tasks pull themselves on first use). A lone task whose questions do
    not load is left to stop at its own load, with its own error, which knows its data best: what stops here is one
    list for a pool, and data a task would read only after its first calls (prompts, filings)."""
    from .suite.data_check import check_data, run_blockers

    # a task given as an object has no spec to make a fresh one from: its own load is its check
    by_spec = len(prepared.refs) == len(prepared.names)
    fresh = ([(name, ref.make(opts)) for name, ref, opts in zip(prepared.names, prepared.refs, prepared.task_options)]
             if by_spec else [])
    check = run_blockers(check_data(fresh, prepared.options.data_dir))
    if len(prepared.names) == 1 and prepared.names[0] not in check.loaded:
        check.needs.clear()
        check.errors.clear()
    return check


def _labels(given: Sequence[TaskLike], refs: Sequence[Any], made: Sequence[Task]) -> list[str]:
    spec_refs = iter(refs)
    return [next(spec_refs).label if isinstance(t, str) else task.name for t, task in zip(given, made)]


ProgressFor = Callable[[str], Callable[[RunCounters], None] | None]
"""(task name) -> its progress callback, or None."""


def execute(prepared: Prepared, *, progress_for: ProgressFor | None = None, started: float | None = None,
            executor: Any = None) -> Evaluation:
    """Run a prepared run: one task alone into OUT, several as a pool into OUT/TASK/; manifests written. A run
    prepared for the Ray executor solves its samples on the cluster (`executor`: a sample executor of one's own)."""
    from .core.pool import run_pool, write_manifest
    from .core.store import RunStore

    started = time.time() if started is None else started
    prepared.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, TaskRun] = {}
    errors: dict[str, BaseException] = {}
    if len(prepared.tasks) > 1:
        pool = run_pool(prepared.names, prepared.tasks, prepared.backends, out=prepared.out,
                        store_path=prepared.store_path, options=prepared.options, started=started,
                        progress_for=progress_for)
        for outcome in pool.tasks:
            if outcome.result is None:
                errors[outcome.name] = outcome.error  # type: ignore[assignment]
            else:
                runs[outcome.name] = _task_run(outcome.name, outcome.result, outcome.out_dir)
        return Evaluation(runs, errors, prepared.store_path, prepared.spending, pool)
    name, task = prepared.names[0], prepared.tasks[0]
    progress = progress_for(name) if progress_for else None
    cluster: Any = contextlib.nullcontext()
    if executor is None and prepared.executor == "ray":
        from .backends import from_spec
        from .core.ray_executor import RayExecutor, ShardJob, ray_session

        job = ShardJob(task_factory=prepared.refs[0].factory(prepared.task_options[0]), backend_specs=prepared.specs,
                       backend_factory=from_spec, options=prepared.options)
        executor, cluster = RayExecutor(job, shards=prepared.shards), ray_session(prepared.address)
    with cluster, RunStore(prepared.store_path) as run_store:
        result = asyncio.run(run_task(task, prepared.backends, run_store, prepared.options, out_dir=prepared.out,
                                      progress=progress, executor=executor))
    write_manifest(prepared.out, result.results, store_path=prepared.store_path, data_dir=prepared.options.data_dir,
                   run_versions=prepared.options.versions, started=started)
    runs[name] = _task_run(name, result, prepared.out)
    return Evaluation(runs, errors, prepared.store_path, prepared.spending)


def _task_run(name: str, result: RunResult, out_dir: Path) -> TaskRun:
    return TaskRun(name, result.results, tuple(result.records), out_dir)


def evaluate(tasks: TaskLike | Sequence[TaskLike], model: ModelLike = "embedded", *, judge: ModelLike | None = None,
             user: ModelLike | None = None, options: Mapping[str, Any] | None = None, limit: int | None = None,
             sample: int | None = None, seed: int = 0, data_dir: str | Path | None = None,
             out: str | Path | None = None, store: str | Path | None = None, concurrency: int | None = None,
             budget_tokens: int | None = None, max_cost: float | None = None,
             prices: Mapping[str, Any] | Sequence[str] | None = None, temperature: float | None = None,
             max_tokens: int | None = None, system: str | None = None, thinking_budget: int | None = None,
             draws: int = 1, truncate: str = "error", max_prompt_tokens: int | None = None,
             sandbox: str | None = None, check_servers: bool = True,
             progress: Callable[[str, RunCounters], None] | None = None, executor: str = "local",
             address: str | None = None, shards: int | None = None) -> Evaluation:
    """Run `tasks` on `model` (with a `judge` and a simulated `user` where the tasks need them) and return what each
    run gave; rerunning resumes from the run store. The parameters are `finharness run`'s options (docs/cli.md):
    `options` the tasks' `-o` options, `sample` a seeded subset of N items (`--sample`), `prices` MODEL=IN/OUT texts
    or Price values. `check_servers`: ask each remote model's server once before the first call (a ValueError when
    one does not answer). `progress(task, counters)` is called as samples finish. `executor='ray'` solves the samples
    of one task given by spec on a Ray cluster (`address`, `shards`), as `finharness run --executor ray`."""
    spending = make_spending(prices, max_cost, budget_tokens)
    prepared = prepare(tasks, model, judge=judge, user=user, options=options, limit=limit, sample=sample, seed=seed,
                       data_dir=data_dir, out=out, store=store, concurrency=concurrency, spending=spending,
                       temperature=temperature, max_tokens=max_tokens, system=system, thinking_budget=thinking_budget,
                       draws=draws, truncate=truncate, max_prompt_tokens=max_prompt_tokens, sandbox=sandbox,
                       versions=run_versions(), executor=executor, address=address, shards=shards)
    if check_servers:
        problems = [f"{backend.spec}: {problem}" for backend in {id(b): b for b in prepared.backends.values()}.values()
                    if (problem := getattr(backend, "preflight", lambda: None)())]
        if problems:
            raise ValueError("; ".join(problems) + " (is the server running, and is the URL in the spec right?)")
    progress_for = (lambda name: (lambda counters: progress(name, counters))) if progress else None
    return execute(prepared, progress_for=progress_for)
