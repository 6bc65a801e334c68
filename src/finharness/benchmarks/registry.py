"""Task registry: the built-in tasks by name, and the one way any task spec is resolved.

A task spec is a built-in name below (`demo`, `bizbench/finknow`), the name of an entry point in group
`finharness.tasks` of an installed distribution (value `module:Class`), or `path/to/file.py:Class`
(plugins.py: built-ins and the user's own tasks come through the same door). Classes are imported
only when used (fast start-up).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..core.task import SOURCE_KEY, Task
from ..plugins import TASK_GROUP, Plugin, PluginError, Source, catalogue, entry_point_plugins, is_file_spec, resolve
from .declaration import built_in_tasks, installed_plugins

TASKS: dict[str, str] = built_in_tasks()
"""Every built-in benchmark's tasks, from their declarations (benchmarks/*/__init__.py BENCHMARK); an installed
benchmark's come from its declaration too (declaration.installed_plugins)."""


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
    """The one way a task is made from `-o` options (None = not given): parsed once into the Options the task
    declares (core/options.py; an unknown option or a bad value is a ValueError naming the allowed ones) and
    given to it as `cls(settings)`; a task that declares no Options takes none."""
    given = {k: v for k, v in options.items() if v is not None}
    if cls.Options is not None:
        return cls(cls.parse_options(given))
    if given:
        raise ValueError(f"{cls.name}: takes no options (given: {', '.join(sorted(given))}); a task declares the "
                         "options it takes as `Options`, a frozen dataclass with a docstring under each field "
                         "(docs/write-a-task.md)")
    return cls()


def unknown_task(spec: str) -> KeyError:
    """The error of a task spec that names nothing: the benchmark's tasks when it names a benchmark
    (`bizbench`), else the closest task names."""
    import difflib

    members = sorted(name for name in TASKS if name.startswith(spec.rstrip("/") + "/"))
    if members:
        return KeyError(f"{spec!r} is a benchmark of {len(members)} tasks: {', '.join(members)}; name the tasks to "
                        f"run (e.g. `finharness run {members[0]}`, several pool in one run) or run the whole suite "
                        "(`finharness suite quick`)")
    close = difflib.get_close_matches(spec, sorted(TASKS), n=3)
    known = ", ".join(sorted(TASKS))
    return KeyError(f"unknown task {spec!r}" + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close
                                                 else "")
                    + f"; known tasks: {known} (see `finharness list`), an installed entry point of group "
                    f"{TASK_GROUP!r}, or a file as path/to/task.py:ClassName")


def is_task_file(spec: str) -> bool:
    """A task declared in a TOML file (benchmarks/from_data): `path/to/my-exam.toml`."""
    return spec.endswith(".toml")


def task_file_ref(spec: str) -> TaskRef:
    """The TaskRef of a TOML task file: its own DataTask class, the file's sha256 in every run key."""
    from ..data.registry import sha256_file
    from .from_data.spec import FileError, read_task_file
    from .from_data.task import data_task_class

    try:
        declared = read_task_file(spec)
    except FileError as err:
        raise PluginError(str(err)) from None
    path = declared.path.resolve()
    return TaskRef(spec=spec, cls=data_task_class(declared), source=Source("file", str(path)),
                   fingerprint={"task_file": str(path), "sha256": sha256_file(path)}, locator=str(path))


def resolve_task(spec: str) -> TaskRef:
    """A built-in name, an entry-point name, FILE.py[:Class] or FILE.toml (a task declared in data). Unknown name:
    KeyError; a file or entry point that cannot be loaded or is not a Task: PluginError (a ValueError) naming it."""
    if is_task_file(spec):
        return task_file_ref(spec)
    found = resolve(spec, TASKS, TASK_GROUP, base=Task, files=True, entry_points=None if spec in TASKS else
                    [*entry_point_plugins(TASK_GROUP), *installed_plugins("tasks")])
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
    """make_task; a task whose code the harness does not ship carries its fingerprint (Task.source_fingerprint),
    so editing its file starts a new run key."""
    task = make_task(ref.cls, options)
    if ref.fingerprint is not None:
        task.source_fingerprint = dict(ref.fingerprint)
    return task


def make_task_from_spec(spec: str, options: Mapping[str, Any]) -> Task:
    return build_task(resolve_task(spec), options)


def available_tasks() -> list[tuple[Plugin, str | None]]:
    """Every built-in task and every task entry point installed, each with why it is not used (None: used).
    A task file is not listed: only the spec naming it finds it."""
    return catalogue(TASKS, TASK_GROUP, installed_plugins("tasks"))


__all__ = ["SOURCE_KEY", "TASKS", "PluginError", "TaskRef", "available_tasks", "build_task", "make_task",
           "make_task_from_spec", "resolve_task", "task_class"]
