"""Running a suite: every row for every model, pooled per model on one run store, then the benchmarks' steps after their rows, then
OUT/suite.json (the manifest the scorecard reads; its fields are described in docs/suite.md).

Layout of OUT: `store.sqlite` (every call of every model, judge and user), `MODEL/ROW/` (each row's run folder, as
`finharness run` writes it: the same run key, so a row run alone resumes from the suite and the other way round),
a folder per judged benchmark (matches and judge summaries), `suite.json`, and the scorecard files. A model added in a later invocation
reuses everything already stored for the others; a crash or Ctrl-C loses only the calls in flight.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..backends import from_spec
from ..backends.batch import batch_wanted
from ..benchmarks.declaration import hooks_of
from ..benchmarks.registry import TaskRef, resolve_task
from ..contamination.run import read_record
from ..core.backend import Backend
from ..core.model import RunCounters
from ..core.pool import PoolOutcome, run_dir_name, run_pool
from ..core.runner import RunOptions
from ..core.store import sum_counts
from ..core.task import Task
from ..data.errors import DataError
from ..data.io import atomic_write_text
from ..redact import redact
from .spec import Suite, SuiteTask

MANIFEST = "suite.json"


@dataclass(frozen=True)
class PreparedRow:
    """A suite row as it will run: its task, the options it runs with and its label (after any fallback)."""

    spec: SuiteTask
    """The row as the suite file gives it."""

    ref: TaskRef
    """The resolved task."""

    options: Mapping[str, Any]
    """The task options it runs with (the fallback's added where the official data is absent)."""

    label: str
    """What the scorecard calls it (names the stand-in when the fallback runs)."""

    standin: str | None = None
    """What stands in for the official data (None: the official data runs)."""

    roles: tuple[str, ...] = ("model",)
    """The model roles the task needs."""

    def make(self) -> Task:
        return self.ref.make(dict(self.options))


def _standin_name(options: Mapping[str, Any]) -> str:
    """A stand-in's short name: `standin:cpa` -> `cpa`; otherwise the fallback's options."""
    for value in options.values():
        if isinstance(value, str) and value.startswith("standin:"):
            return value.split(":", 1)[1]
    return ", ".join(f"{k}={v}" for k, v in options.items())


def prepare_rows(suite: Suite, data_root: Path, sandbox: str | None = None) -> list[PreparedRow]:
    """Resolve every row's task and check its options now (a bad suite fails before any model loads); a row with a
    fallback whose official data is absent runs the fallback, named as a stand-in. `sandbox` (--sandbox) goes to
    the rows whose task runs model-written code."""
    rows = []
    for row in suite.tasks:
        try:
            ref = resolve_task(row.task)
            options: dict[str, Any] = dict(row.options)
            if sandbox is not None and "sandbox" in {o.name for o in ref.cls.describe_options()}:
                options["sandbox"] = sandbox
            task = ref.make(options)
        except (KeyError, ValueError) as err:
            message = err.args[0] if isinstance(err, KeyError) else str(err)
            raise ValueError(f"{suite.path}: [[task]] {row.id!r}: {message}") from None
        label, standin = row.label, None
        if row.fallback:
            try:
                task.load(data_root)
            except DataError:
                options.update(row.fallback)
                standin = _standin_name(row.fallback)
                label = row.fallback_label or f"{row.label} ({standin} stand-in)"
                try:
                    ref.make(options)
                except ValueError as err:
                    raise ValueError(f"{suite.path}: [[task]] {row.id!r}: fallback: {err}") from None
            finally:
                task.close()
        rows.append(PreparedRow(row, ref, options, label, standin, tuple(task.roles)))
    return rows


def check_suite_data(rows: Sequence[PreparedRow], root: Path, *, judged: bool) -> Any:
    """Every row's data (suite/data_check.py), with what the benchmarks' steps after the rows read for them
    (SuiteHooks.extra_datasets: a judging step's reference when a judge will judge, `judged`)."""
    from .data_check import check_data

    jobs = [(r.spec.id, r.make()) for r in rows]
    extra = {r.spec.id: hooks_of(r.ref.name).extra_datasets(judged=judged) for r in rows}
    return check_data(jobs, root, extra=extra)


@dataclass
class SuiteOutcome:
    """What run_suite did."""

    manifest: dict[str, Any]
    """suite.json as written."""

    pools: dict[str, PoolOutcome] = field(default_factory=dict)
    """Each model's pooled run."""

    bugs: list[Exception] = field(default_factory=list)
    """Rows that crashed (a bug, not bad input): in suite.json's errors too; the caller shows the first traceback."""

    @property
    def complete(self) -> bool:
        return self.manifest["status"] == "complete"


STOPS: Mapping[str, str] = {"interrupted": "interrupted (Ctrl-C)", "terminated": "terminated (SIGTERM)",
                            "budget": "the budget stopped it", "crashed": "a row crashed"}
"""suite.json statuses of a suite that stopped before its end -> how `partial` says it."""


ProgressFor = Callable[[str, str], Callable[[RunCounters], None] | None]
"""(model spec, row id) -> that run's progress callback."""


def does_not_fit(row: PreparedRow, backend: Backend) -> str | None:
    """Why a model does not run a row: its window is known and smaller than the row's `min_context` (None: it runs)."""
    window = backend.capabilities.context_length
    if row.spec.min_context and window and window < row.spec.min_context:
        return (f"does not fit: the row's prompts need a window of {row.spec.min_context:,} tokens, the model's holds "
                f"{window:,}")
    return None


def _needed(rows: Sequence[PreparedRow], role: str) -> list[str]:
    return [r.spec.id for r in rows if role in r.roles]


def check_roles(rows: Sequence[PreparedRow], judge: str | None, user: str | None) -> None:
    """A ValueError naming the rows that need a judge or a simulated user when none is given."""
    for role, spec in (("judge", judge), ("user", user)):
        if spec is None and _needed(rows, role):
            raise ValueError(f"rows {_needed(rows, role)} need a model for role {role!r}: give --{role.replace('user', 'user-model')} SPEC")


def run_suite(suite: Suite, rows: Sequence[PreparedRow], *, models: Sequence[str], judge: str | None,
              user: str | None, out: Path, options: RunOptions, progress_for: ProgressFor | None = None,
              judge_progress: Callable[[str], Callable[[RunCounters], None] | None] | None = None,
              resume: str | None = None, stop_reason: Callable[[], str] | None = None,
              skipped: Mapping[str, Mapping[str, str]] | None = None) -> SuiteOutcome:
    """Run every row for every model (one pool per model, rows sharing its slots), run the steps after the rows, write suite.json.

    A row that cannot run for a model (bad data, a missing role) is in `errors`, a row that crashes (a bug) too, with
    the exception in the outcome's `bugs`; the others run on. suite.json is written however the suite ends: a
    Ctrl-C, a SIGTERM or any other exception leaves one that lists the rows finished so far (`partial`, `resume`:
    the command that goes on) before the exception goes on up. options: as for run_task, the same for every row
    except its own size (`limit`/`sample`) and the suite's seed. stop_reason: what stopped the suite when a
    KeyboardInterrupt does ('interrupted' or 'terminated', from the caller's signal handling). skipped: rows a model
    does not run, by model, with why (their data cannot be had here: --skip-missing)."""
    check_roles(rows, judge, user)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    invoked = time.time()
    specs = list(dict.fromkeys([*models, *(s for s in (judge, user) if s)]))
    backends: dict[str, Backend] = {spec: from_spec(spec, batch=batch_wanted(options.batch, spec)) for spec in specs}
    problems = [f"{spec}: {problem}" for spec, backend in backends.items() if (problem := backend.preflight())]
    if problems:
        raise ValueError("; ".join(problems) + " (is the server running, and is the URL in the spec right? nothing "
                         "was run)")
    store_path = out / "store.sqlite"
    outcome = SuiteOutcome(manifest={})
    errors: dict[str, dict[str, str]] = {}
    skipped = {m: dict(why) for m, why in (skipped or {}).items()}
    runs: dict[str, dict[str, str]] = {r.spec.id: {} for r in rows}
    after: dict[str, dict[str, Any]] = {}  # benchmark -> its step after the rows (suite.json under its name)
    stopped: str | None = None
    earlier = _earlier_runs(out, rows)
    last: dict[tuple[str, str], RunCounters] = {}  # each row's latest counters: how far an unfinished one got

    def watched(model: str, row: str) -> Callable[[RunCounters], None]:
        shown = progress_for(model, row) if progress_for else None

        def update(counters: RunCounters) -> None:
            last[(model, row)] = counters
            if shown is not None:
                shown(counters)

        return update
    try:
        for model in models:
            roles = {"model": backends[model], **({"judge": backends[judge]} if judge else {}),
                     **({"user": backends[user]} if user else {})}
            for r in rows:
                if (why := does_not_fit(r, backends[model])) is not None:
                    skipped.setdefault(model, {})[r.spec.id] = why
            fitting = [r for r in rows if r.spec.id not in skipped.get(model, {})]
            pool = _run_model(fitting, model, roles, out, store_path, options, suite.seed, watched)
            outcome.pools[model] = pool
            for row, task_outcome in zip(fitting, pool.tasks):
                if task_outcome.result is not None:
                    runs[row.spec.id][model] = str(task_outcome.out_dir.relative_to(out))
                else:
                    crashed = "crashed (a bug; its traceback is printed): " if task_outcome.bug else ""
                    errors.setdefault(model, {})[row.spec.id] = (f"{crashed}{type(task_outcome.error).__name__}: "
                                                                 f"{task_outcome.error}")
            outcome.bugs += pool.bugs
            if suite.contamination:  # membership evidence per row (suite/contamination.py)
                from .contamination import probe_rows

                probe_rows(fitting, pool.tasks, model, backends, store_path, options, suite.seed)
        if judge:  # the benchmarks' steps after their rows (pairwise judging), once every model ran the row
            for r in rows:
                hooks = hooks_of(r.ref.name)
                if not hooks.judged_by_suite or r.ref.name in after or not all(m in runs[r.spec.id] for m in models):
                    continue
                entry = hooks.after_rows(r, {m: out / runs[r.spec.id][m] for m in models},
                                         judge_backend=backends[judge], judge=judge, out=out, store_path=store_path,
                                         data_root=options.data_dir, concurrency=options.concurrency,
                                         spending=options.spending, progress=judge_progress)
                if entry is not None:
                    after[r.ref.name] = entry
    except KeyboardInterrupt:
        stopped = (stop_reason() if stop_reason else None) or "interrupted"
        raise
    except BaseException:
        stopped = "crashed"
        raise
    finally:
        for backend in backends.values():
            close = getattr(backend, "close", None)
            if close is not None:
                close()
        if stopped is not None:  # the rows that finished before the stop, found on disk (their pool did not return)
            _finished_on_disk(out, rows, models, runs, since=invoked, earlier=earlier)
        if stopped is None and outcome.bugs:
            stopped = "crashed"
        try:
            manifest = build_manifest(suite, rows, models=models, judge=judge, user=user, out=out, options=options,
                                      runs=runs, errors=errors, after=after, wall_s=time.perf_counter() - started,
                                      store_path=store_path, skipped=skipped, stopped=stopped, resume=resume,
                                      reached={key: (c.samples_done, c.samples_total) for key, c in last.items()})
            atomic_write_text(out / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
            outcome.manifest = manifest
        except Exception as err:
            if stopped is None or stopped == "crashed" and outcome.bugs:
                raise
            # already on the way out with the stop's own exception, which must not be hidden by this one
            print(f"warning: {out / MANIFEST} could not be written after the stop: {type(err).__name__}: {err}",
                  file=sys.stderr)
    return outcome


def _row_spec(row: PreparedRow) -> dict[str, Any]:
    """What decides a row's run besides the models: compared with an earlier suite.json's row."""
    return {"task": row.ref.label, "options": json.loads(json.dumps(dict(row.options), default=str)),
            "limit": row.spec.limit, "sample": row.spec.sample}


def _earlier_runs(out: Path, rows: Sequence[PreparedRow]) -> dict[str, dict[str, str]]:
    """Row id -> {model: folder} of the suite.json an earlier invocation left, for the rows it ran as they are now
    (same task, options and size): what a stopped invocation may still show of them."""
    try:
        earlier = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    same = {r.spec.id: _row_spec(r) for r in rows}
    found: dict[str, dict[str, str]] = {}
    for row in earlier.get("rows") or ():
        if not isinstance(row, dict) or same.get(row.get("id")) != {k: row.get(k) for k in
                                                                   ("task", "options", "limit", "sample")}:
            continue
        found[row["id"]] = {str(m): str(f) for m, f in (row.get("runs") or {}).items()}
    return found


def _finished_on_disk(out: Path, rows: Sequence[PreparedRow], models: Sequence[str],
                      runs: dict[str, dict[str, str]], *, since: float, earlier: Mapping[str, Mapping[str, str]]
                      ) -> None:
    """Add to `runs` each row whose results.json this invocation wrote (after `since`), or that the earlier
    suite.json listed for the same row: a pool that was stopped returns nothing, but its finished rows are on
    disk."""
    for row in rows:
        for model in models:
            if model in runs[row.spec.id]:
                continue
            folder = out / run_dir_name(model) / run_dir_name(row.spec.id)
            results = folder / "results.json"
            try:
                fresh = results.stat().st_mtime >= since
            except OSError:
                continue
            if fresh or earlier.get(row.spec.id, {}).get(model) == str(folder.relative_to(out)):
                runs[row.spec.id][model] = str(folder.relative_to(out))


def _run_model(rows: Sequence[PreparedRow], model: str, roles: Mapping[str, Backend], out: Path, store_path: Path,
               options: RunOptions, seed: int, progress_for: ProgressFor | None) -> PoolOutcome:
    """One model's rows in OUT/MODEL/ROW/. run_pool takes one RunOptions for all its tasks but rows differ in size:
    rows of one size pool together, sizes one after another (a suite has a handful)."""
    folder = out / run_dir_name(model)
    started = time.time()
    by_size: dict[tuple[int | None, int | None], list[int]] = {}
    for i, row in enumerate(rows):
        by_size.setdefault((row.spec.limit, row.spec.sample), []).append(i)
    outcomes: list[Any] = [None] * len(rows)
    wall = 0.0
    for (limit, sample), indices in by_size.items():
        pool = run_pool([rows[i].spec.id for i in indices], [rows[i].make() for i in indices], roles, out=folder,
                        store_path=store_path, options=replace(options, limit=limit, subset=sample, seed=seed),
                        started=started,
                        progress_for=(lambda name: progress_for(model, name)) if progress_for else None)
        wall += pool.wall_s
        for i, task_outcome in zip(indices, pool.tasks):
            outcomes[i] = task_outcome
    return PoolOutcome(outcomes, wall)


def build_manifest(suite: Suite, rows: Sequence[PreparedRow], *, models: Sequence[str], judge: str | None,
                   user: str | None, out: Path, options: RunOptions, runs: Mapping[str, Mapping[str, str]],
                   errors: Mapping[str, Mapping[str, str]], after: Mapping[str, Mapping[str, Any]], wall_s: float,
                   store_path: Path, skipped: Mapping[str, Mapping[str, str]] | None = None,
                   stopped: str | None = None, resume: str | None = None,
                   reached: Mapping[tuple[str, str], tuple[int, int]] | None = None) -> dict[str, Any]:
    """suite.json: what ran, where each run is, what each model spent over every invocation (docs/suite.md).
    stopped: why the suite ended before it ran every row (a key of STOPS); the manifest then says how far it got
    (`partial`) and how to go on (`resume`); reached: (model, row) -> (samples done, of) for the rows under way, so
    `unfinished` says how far each got."""
    by_model: dict[str, dict[str, Any]] = {}
    statuses = []
    expected = finished = 0
    for model in models:
        parts = []
        for row in rows:
            folder = runs[row.spec.id].get(model)
            if row.spec.id not in (skipped or {}).get(model, {}):  # skipped: the window, or data not to be had
                expected += 1
                finished += folder is not None
            if folder is None:
                if row.spec.id not in (skipped or {}).get(model, {}):
                    statuses.append("missing")
                continue
            results = json.loads((out / folder / "results.json").read_text(encoding="utf-8"))
            statuses.append(results["status"])
            parts.append(results.get("cumulative") or {})
            probed = read_record(out / folder)  # the row's membership probes (contamination = true)
            if probed is not None and isinstance((probed.get("cost") or {}).get("cumulative"), Mapping):
                parts.append(probed["cost"]["cumulative"])
        by_model[model] = sum_counts(parts)
    if after:  # what the steps after the rows spent (their judge's calls)
        by_model["judge"] = sum_counts([entry.get("cumulative") or {} for entry in after.values()])
    spending = options.spending
    if stopped is None and spending is not None and spending.reached:
        stopped = "budget"
    status = stopped or ("complete" if all(s == "complete" for s in statuses) and not errors else "incomplete")
    partial = None
    if stopped is not None:
        partial = f"{finished} of {expected} row runs finished ({STOPS.get(stopped, stopped)})"
    prices = {} if spending is None else {k: {"input": p.input, "output": p.output}
                                          for k, p in spending.prices.items()}
    return {
        "suite": suite.name, "suite_file": str(suite.path), "description": suite.description,
        "models": list(models), "judge": judge, "user": user,
        "data_dir": None if options.data_dir is None else str(options.data_dir), "store": str(store_path),
        "seed": suite.seed, "prices": prices,
        "rows": [{"id": r.spec.id, "benchmark": r.spec.benchmark, "label": r.label, "task": r.ref.label,
                  "options": dict(r.options), "standin": r.standin, "judged": "judge" in r.roles or hooks_of(r.ref.name).judged_by_suite,
                  "paper": r.spec.paper, "limit": r.spec.limit, "sample": r.spec.sample,
                  "runs": dict(runs[r.spec.id])} for r in rows],
        "errors": {m: dict(e) for m, e in errors.items()},
        "skipped": {m: dict(e) for m, e in (skipped or {}).items()},
        **{name: dict(entry) for name, entry in after.items()},
        "cumulative": sum_counts(list(by_model.values())),
        "by_model": by_model,
        "wall_s": round(wall_s, 3),
        "status": status,
        **({"partial": partial} if partial else {}),
        **({"unfinished": unfinished} if (unfinished := _unfinished(rows, models, runs, errors, skipped, reached))
           and stopped else {}),
        **({"resume": redact(resume)} if resume and status != "complete" else {}),  # a spec may hold a key
    }


def _unfinished(rows: Sequence[PreparedRow], models: Sequence[str], runs: Mapping[str, Mapping[str, str]],
                errors: Mapping[str, Mapping[str, str]], skipped: Mapping[str, Mapping[str, str]] | None,
                reached: Mapping[tuple[str, str], tuple[int, int]] | None) -> dict[str, dict[str, str]]:
    """model -> row -> how far a row that has no finished run got ('3 of 6 samples finished and stored')."""
    out: dict[str, dict[str, str]] = {}
    for model in models:
        for row in rows:
            rid = row.spec.id
            if model in runs[rid] or rid in errors.get(model, {}) or rid in (skipped or {}).get(model, {}):
                continue
            done = (reached or {}).get((model, rid))
            out.setdefault(model, {})[rid] = ("not started" if done is None else
                                              f"stopped at {done[0]} of {done[1]} samples (finished ones are stored)")
    return out


__all__ = ["MANIFEST", "PreparedRow", "SuiteOutcome", "build_manifest", "check_roles", "check_suite_data", "does_not_fit",
           "prepare_rows", "run_suite"]
