"""Task registry: the built-in tasks by name, and the one way any task spec is resolved.

A task spec is a built-in name below (`demo`, `bizbench/finknow`), the name of an entry point in group
`finharness.tasks` of an installed distribution (value `module:Class`), or `path/to/file.py:Class`
(plugins.py: built-ins and the user's own tasks come through the same door). Classes are imported
only when used (fast start-up).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..core.task import Task
from ..plugins import TASK_GROUP, Plugin, PluginError, Source, catalogue, is_file_spec, resolve

TASKS: dict[str, str] = {
    "demo": "finharness.benchmarks.demo.task:DemoTask",
    "cfinbench": "finharness.benchmarks.cfinbench.task:CFinBenchTask",
    "ucfe": "finharness.benchmarks.ucfe.task:UCFETask",
    "fintradebench": "finharness.benchmarks.fintradebench.task:FinTradeBenchTask",
    "bizbench/codetatqa": "finharness.benchmarks.bizbench.task:CodeTatqaTask",
    "bizbench/tatqa-e": "finharness.benchmarks.bizbench.task:TatqaETask",
    "bizbench/secnum": "finharness.benchmarks.bizbench.task:SecNumTask",
    "bizbench/fincode": "finharness.benchmarks.bizbench.task:FinCodeTask",
    "bizbench/codefinqa": "finharness.benchmarks.bizbench.task:CodeFinQATask",
    "bizbench/convfinqa-e": "finharness.benchmarks.bizbench.task:ConvFinQAETask",
    "bizbench/finknow": "finharness.benchmarks.bizbench.finknow:FinKnowTask",
    "bizbench/formulaeval": "finharness.benchmarks.bizbench.formulaeval.task:FormulaEvalTask",
}

SOURCE_KEY = "task_source"
"""The key of Task.config() (so of the run key) holding a task's code fingerprint when the harness does
not ship that code: a task file's sha256, an entry point's distribution and module sha256."""


@dataclass(frozen=True)
class TaskRef:
    """A task spec resolved: its class, where it came from, and what identifies code not shipped here."""

    spec: str
    cls: type[Task]
    source: Source
    fingerprint: Mapping[str, Any] | None
    locator: str
    """A spec that resolves to the same class from any working directory (a file's absolute path)."""

    @property
    def name(self) -> str:
        """The task's name (`results.json` task, run folders): its class's `name`."""
        return self.cls.name

    @property
    def label(self) -> str:
        """What runs and messages call it: the spec as given, or for a file the task's name."""
        return self.name if self.source.kind == "file" else self.spec

    def make(self, options: Mapping[str, Any]) -> Task:
        """The task with `options`; a task from outside the package carries its fingerprint in config()."""
        return build_task(self, options)

    def factory(self, options: Mapping[str, Any]) -> Callable[[], Task]:
        """A picklable zero-argument task factory (a Ray worker resolves the spec again)."""
        return functools.partial(make_task_from_spec, self.locator, dict(options))


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


def unknown_task(spec: str) -> KeyError:
    known = ", ".join(sorted(TASKS))
    return KeyError(f"unknown task {spec!r}; known tasks: {known} (see `finharness list`), an installed "
                    f"entry point of group {TASK_GROUP!r}, or a file as path/to/task.py:ClassName")


def resolve_task(spec: str) -> TaskRef:
    """A built-in name, an entry-point name, or FILE.py[:Class]. Unknown name: KeyError; a file or entry point
    that cannot be loaded or is not a Task: PluginError (a ValueError) naming it."""
    found = resolve(spec, TASKS, TASK_GROUP, base=Task, files=True)
    if found is None:
        raise unknown_task(spec)
    cls = found.obj
    if not isinstance(getattr(cls, "name", None), str):  # a task of the user's own may leave the name out
        cls.name = found.plugin.name
    locator = f"{Path(found.plugin.source.detail).resolve()}:{found.plugin.name}" if is_file_spec(spec) else spec
    return TaskRef(spec=spec, cls=cls, source=found.plugin.source, fingerprint=found.fingerprint, locator=locator)


def task_class(name: str) -> type[Task]:
    """The class a task spec names (`resolve_task(name).cls`); for tests and bench/pool_bench.py."""
    return resolve_task(name).cls


def build_task(ref: TaskRef, options: Mapping[str, Any]) -> Task:
    """Instantiate (core.runner.make_task: an option the task does not take is a ValueError); a task whose code
    the harness does not ship gets `task_source` in its config(), so editing its file starts a new run key."""
    task = make_task(ref.cls, options)
    if ref.fingerprint is not None:
        own_config = task.config
        fingerprint = dict(ref.fingerprint)

        def config() -> Mapping[str, Any]:
            return {**own_config(), SOURCE_KEY: fingerprint}

        task.config = config  # type: ignore[method-assign]
    return task


def make_task_from_spec(spec: str, options: Mapping[str, Any]) -> Task:
    return build_task(resolve_task(spec), options)


def available_tasks() -> list[tuple[Plugin, str | None]]:
    """Every built-in task and every task entry point installed, each with why it is not used (None: used).
    A task file is not listed: only the spec naming it finds it."""
    return catalogue(TASKS, TASK_GROUP)


__all__ = ["TASKS", "PluginError", "TaskRef", "available_tasks", "build_task", "make_task_from_spec", "resolve_task",
           "task_class"]
