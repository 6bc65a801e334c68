"""A benchmark declares itself once: `BENCHMARK = Benchmark(...)` in its package's `__init__.py` names its tasks,
its display name, its commands, its report section, its datasets and the hooks the suite and the scorecard call.

The built-in benchmarks are the packages of BUILT_IN; an installed distribution adds one under the entry-point group
`finharness.benchmarks` (value `module:BENCHMARK`), and its tasks, commands and report section then come through
the same doors as the built-ins' (benchmarks/registry.py, cli_plugins.py, report/sections.py). Nothing but the
declarations is imported to list them: a declaration names `module:attr` targets, imported only when used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from ..plugins import Plugin, PluginError, Source, load_target

BENCHMARK_GROUP = "finharness.benchmarks"
"""The entry-point group of installed benchmarks (value: `module:BENCHMARK`)."""

BUILT_IN: tuple[str, ...] = (
    "finharness.benchmarks.demo", "finharness.benchmarks.cfinbench", "finharness.benchmarks.bizbench",
    "finharness.benchmarks.ucfe", "finharness.benchmarks.fintradebench", "finharness.benchmarks.financebench")
"""The packages of the built-in benchmarks, in the order the report and the scorecard show them."""


@dataclass(frozen=True)
class Benchmark:
    """What a benchmark brings to finharness."""

    name: str
    """Its name: the prefix of its tasks' names (`bizbench` for `bizbench/finknow`)."""

    display: str
    """What the scorecard and the report call it ('BizBench')."""

    tasks: Mapping[str, str]
    """Task name -> `module:Class`."""

    commands: Mapping[str, str] = field(default_factory=dict)
    """Command path with dots (`ucfe`, `data.build.secnum`) -> `module:attr` (a typer.Typer or a command function)."""

    report_section: str | None = None
    """`module:attr` of its report.sections.ReportSection (None: the generic section)."""

    datasets: tuple[str, ...] = ()
    """The registry's datasets its tasks read (`finharness data list` names them)."""

    hooks: str | None = None
    """`module:attr` of its suite.hooks.BenchmarkHooks (composites, judge health, steps after a suite's rows, item
    weights for planning); None: none."""

    def load_hooks(self) -> Any:
        """The hooks object (None when the benchmark declares none)."""
        return None if self.hooks is None else load_target(self.hooks)


def _declared(module: str, where: str) -> Benchmark:
    try:
        found = getattr(importlib.import_module(module), "BENCHMARK")
    except (ImportError, AttributeError) as err:
        raise PluginError(f"{where}: {module} declares no BENCHMARK ({type(err).__name__}: {err})") from err
    if not isinstance(found, Benchmark):
        raise PluginError(f"{where}: {module}.BENCHMARK is a {type(found).__name__}, not a Benchmark")
    return found


@lru_cache(maxsize=1)
def built_in() -> tuple[Benchmark, ...]:
    """The built-in benchmarks' declarations."""
    return tuple(_declared(module, "built-in benchmark") for module in BUILT_IN)


def installed() -> tuple[tuple[Benchmark | None, str], ...]:
    """(declaration, where) of every benchmark installed under BENCHMARK_GROUP; a declaration that cannot be loaded
    is (None, why), so one broken distribution does not hide the others."""
    from importlib.metadata import entry_points

    out: list[tuple[Benchmark | None, str]] = []
    for point in entry_points(group=BENCHMARK_GROUP):
        where = f"entry point {point.name!r} ({point.dist.name if point.dist else '?'})"
        try:
            found = point.load()
        except Exception as err:  # a third party's import error is theirs: said, not raised
            out.append((None, f"{where}: cannot be loaded ({type(err).__name__}: {err})"))
            continue
        if not isinstance(found, Benchmark):
            out.append((None, f"{where}: {point.value} is a {type(found).__name__}, not a Benchmark"))
            continue
        out.append((found, where))
    return tuple(out)


def every_benchmark() -> list[Benchmark]:
    """Built-in and installed benchmarks (a built-in name wins over an installed one of the same name)."""
    found = list(built_in())
    names = {b.name for b in found}
    for benchmark, _ in installed():
        if benchmark is not None and benchmark.name not in names:
            found.append(benchmark)
            names.add(benchmark.name)
    return found


def built_in_tasks() -> dict[str, str]:
    """Task name -> `module:Class` of every built-in benchmark."""
    return {name: target for b in built_in() for name, target in b.tasks.items()}


def built_in_commands() -> dict[str, str]:
    """Command path -> `module:attr` of every built-in benchmark's commands."""
    return {path: target for b in built_in() for path, target in b.commands.items()}


def built_in_report_sections() -> dict[str, str]:
    """Benchmark name -> `module:attr` of its report section, in BUILT_IN's order."""
    return {b.name: b.report_section for b in built_in() if b.report_section}


def benchmark_of(task: str) -> Benchmark | None:
    """The benchmark a task name belongs to (its own name, or the part before '/'), None when no declaration has it."""
    for b in every_benchmark():
        if task in b.tasks or task.split("/", 1)[0] == b.name:
            return b
    return None


def display_name(task: str) -> str:
    """The benchmark's display name for a task ('BizBench' for 'bizbench/finknow'); the task itself when unknown."""
    found = benchmark_of(task)
    return found.display if found is not None else task


def installed_plugins(kind: str) -> list[Plugin]:
    """The tasks ('tasks'), commands ('commands') or report sections ('report_section') of the installed benchmarks, as
    plug-ins of their distribution (the built-ins' are in built_in_tasks and the extension tables)."""
    from importlib.metadata import entry_points

    found: list[Plugin] = []
    builtin_names = {b.name for b in built_in()}
    for point in entry_points(group=BENCHMARK_GROUP):
        try:
            declared = point.load()
        except Exception:  # said by installed(), where `finharness list` shows it
            continue
        if not isinstance(declared, Benchmark) or declared.name in builtin_names:
            continue
        dist = point.dist
        source = Source("entry point", f"{dist.metadata['Name']} {dist.version} (benchmark {declared.name})"
                        if dist is not None else f"benchmark {declared.name}")
        distribution = dist.metadata["Name"] if dist is not None else None
        if kind == "report_section":
            entries = {declared.name: declared.report_section} if declared.report_section else {}
        else:
            entries = dict(getattr(declared, kind))
        found += [Plugin(name, target, source, distribution) for name, target in entries.items()]
    return found
