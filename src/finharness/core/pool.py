"""A run of several tasks as one pool of requests, and the files every run leaves beside its results.

`finharness run TASK TASK...` parses its arguments and hands the tasks here: backends_by_role gives
each distinct model spec one backend (the roles and tasks naming it share its slots); run_pool opens
the run store, gives each task its folder OUT/<task>/, runs them all through run_tasks (runner.py:
one limiter per backend shared by every task; dispatch_lanes decides which tasks run one after
another), writes each finished task's manifest.json and says which task could not run and why.
The command line only shows the progress and prints the outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..data.errors import DataError
from ..data.io import atomic_write_text
from ..redact import redact
from .backend import Backend, SpecError
from .model import RunCounters
from .results import RunResult
from .runner import PooledTask, RunOptions, run_tasks
from .store import RunStore

INPUT_ERRORS = (DataError, SpecError, ValueError)
"""What a task fails with on bad input (data, a model spec, an option): reported, not a bug."""


def run_dir_name(text: str) -> str:
    """A task name or model spec as one folder name (at most 80 characters): `bizbench/finknow` -> `bizbench_finknow`."""
    keep = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in text)
    return keep.strip("_")[:80] or "run"


def backends_by_role(specs: Mapping[str, str], make: Callable[[str], Backend]) -> dict[str, Backend]:
    """The backend of each role (model, judge, user) from its spec: one backend per distinct spec, so roles
    (and the tasks of a pool) naming it share one loaded model and its slots. `make` builds a backend from a
    spec (backends.from_spec); a SpecError of a bad spec is raised as is."""
    by_spec = {spec: make(spec) for spec in dict.fromkeys(specs.values())}
    return {role: by_spec[spec] for role, spec in specs.items()}


def write_manifest(out: Path, results: Mapping[str, Any], *, store_path: Path, data_dir: Path | None,
                   run_versions: Mapping[str, Any], started: float,
                   command: Sequence[str] | None = None) -> None:
    """OUT/manifest.json (redacted: the command line may hold a key): the command (default sys.argv), when it
    ran, its run key, store, data root, versions and configuration."""
    manifest = {"command": list(sys.argv) if command is None else list(command), "started": started,
                "finished": time.time(), "run_key": results["run_key"], "store": str(store_path),
                "data_dir": str(data_dir), "versions": run_versions, "config": results["config"]}
    atomic_write_text(out / "manifest.json", redact(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"))


@dataclass
class PoolTaskOutcome:
    """One task of a pooled run: its result, or the exception it failed with."""

    name: str
    out_dir: Path
    result: RunResult | None = None
    error: Exception | None = None

    @property
    def complete(self) -> bool:
        return self.result is not None and self.result.results["status"] == "complete"

    @property
    def bug(self) -> bool:
        """Failed with something other than bad input: its traceback says more than a message."""
        return self.error is not None and not isinstance(self.error, INPUT_ERRORS)


@dataclass
class PoolOutcome:
    """What run_pool did: each task's outcome (in the order given) and the pool's wall time."""

    tasks: list[PoolTaskOutcome]
    wall_s: float

    @property
    def complete(self) -> bool:
        """Every task ran and is complete."""
        return all(t.complete for t in self.tasks)

    @property
    def bugs(self) -> list[Exception]:
        return [t.error for t in self.tasks if t.bug]  # type: ignore[misc]


def run_pool(tasks: Sequence[str], task_objs: Sequence[Any], backends: Mapping[str, Any], *, out: Path,
             store_path: Path, options: RunOptions, started: float,
             progress_for: Callable[[str], Callable[[RunCounters], None] | None] | None = None) -> PoolOutcome:
    """Run `tasks` (names, with their Task objects) as one pool of requests on `backends` (by role) and
    one run store; each writes OUT/<run_dir_name(task)>/ as a run of it alone would, plus its manifest.json.

    options: as for run_tasks, the same for every task (its versions go into each manifest). progress_for:
    the progress callback of a task, given its name. A task that fails is in the outcome with its
    exception; the others run on."""
    out_dirs = [out / run_dir_name(name) for name in tasks]
    pool_started = time.perf_counter()
    with RunStore(store_path) as run_store:
        jobs = [PooledTask(obj, backends, out_dir, progress=progress_for(name) if progress_for else None)
                for name, obj, out_dir in zip(tasks, task_objs, out_dirs)]
        results = asyncio.run(run_tasks(jobs, run_store, options, return_exceptions=True))
    wall_s = time.perf_counter() - pool_started
    outcomes = []
    for name, out_dir, result in zip(tasks, out_dirs, results):
        if isinstance(result, Exception):
            outcomes.append(PoolTaskOutcome(name, out_dir, error=result))
            continue
        write_manifest(out_dir, result.results, store_path=store_path, data_dir=options.data_dir,
                       run_versions=options.versions, started=started)
        outcomes.append(PoolTaskOutcome(name, out_dir, result=result))
    return PoolOutcome(outcomes, wall_s)
