"""A benchmark declares itself once: `BENCHMARK = Benchmark(...)` in its package's `__init__.py` names its tasks,
its display name, its commands, its report section, its datasets and the hooks the suite and the scorecard call.

The built-in benchmarks are the packages of BUILT_IN; an installed distribution adds one under the entry-point group
`finharness.benchmarks` (value `module:BENCHMARK`), and its tasks, commands and report section then come through
the same doors as the built-ins' (benchmarks/registry.py, cli_plugins.py, report/sections.py). Nothing but the
declarations is imported to list them: a declaration names `module:attr` targets, imported only when used.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

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

    suite_rows: str | None = None
    """`package:file` of a TOML file whose `[[quick]]`, `[[standard]]`, `[[full]]` tables are the rows it adds to
    that bundled suite (a suite file's [[task]] keys; `benchmark` defaults to `display`); None: it adds none."""

    hooks: str | None = None
    """`module:attr` of its SuiteHooks (what the suite does for it beyond running its rows: a step after them, the
    data that step reads, item weights for planning); None: the defaults, which add nothing."""

    def suite_rows_path(self) -> Path:
        """The file `suite_rows` names (a ValueError when it names none or its package cannot be found)."""
        package, sep, file = (self.suite_rows or "").partition(":")
        if not sep or not file:
            raise ValueError(f"suite_rows must be 'package:file', not {self.suite_rows!r}")
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"no package {package!r}")
        return Path(next(iter(spec.submodule_search_locations))) / file

    def load_hooks(self) -> "SuiteHooks":
        """The hooks object (the defaults when the benchmark declares none)."""
        if self.hooks is None:
            return SuiteHooks()
        found = load_target(self.hooks)
        if not isinstance(found, SuiteHooks):
            raise PluginError(f"benchmark {self.name}: hooks {self.hooks} is a {type(found).__name__}, not SuiteHooks")
        return found


@dataclass(frozen=True)
class MeanOfTasks:
    """A composite scorecard row after the benchmark's rows: per model, the unweighted mean of its task rows'
    headlines, with an interval over the tasks as independent parts and paired differences between models."""

    note: str
    """What the scorecard says the row is (and whose choice it is: the paper's or ours)."""

    min_rows: int = 2
    """Task rows the suite must have for the mean to be shown."""


@dataclass(frozen=True)
class PairedDelta:
    """A composite scorecard row: per model, the headline of the row whose task option `option` is `treated` minus
    the row's where it is `base`, paired on the items both scored (informational: not ranked)."""

    option: str
    """The task option that tells the two rows apart (`mode`)."""

    base: str
    """Its value in the row subtracted (`norag`)."""

    treated: str
    """Its value in the row subtracted from (`rag`)."""

    slug: str
    """The composite row's id after the benchmark's name (`rag_delta`)."""

    label: str
    """What the scorecard calls it after the benchmark's display name (`RAG Δ (RAG − No-RAG)`)."""

    note: str
    """What the scorecard says the row is."""


@dataclass(frozen=True)
class HealthRate:
    """One measure of a judge's health, as events counted over a total (the scorecard adds the interval)."""

    name: str
    hits: int
    n: int
    meaning: str
    """What it measures and what a healthy judge gives."""


@dataclass(frozen=True)
class Health:
    """How a benchmark's judge behaved on a suite's rows (SuiteHooks.judge_health, step_health)."""

    rates: tuple[HealthRate, ...]
    notes: tuple[str, ...] = ()
    """Warnings a reader must see."""

    judge: str | None = None
    """The judge's spec where the evidence names it (a judge summary), else None."""


class SuiteHooks:
    """What a benchmark adds to a suite beyond running its rows, called by suite/ (run, plan, data check, scorecard)
    for its rows; every default adds nothing. A benchmark subclasses it and names an instance in Benchmark.hooks."""

    judged_by_suite: bool = False
    """Its rows are judged by the suite's judge after they run (UCFE's pairwise judging), whatever their task's own
    roles: suite.json marks them judged."""

    composites: tuple[MeanOfTasks | PairedDelta, ...] = ()
    """Composite rows the scorecard adds after the benchmark's last row."""

    rating_note: str = ""
    """Non-empty: the step after the rows writes pairwise matches (its suite.json entry's `matches`, naming the
    row it judged as `row`), and the scorecard shows that row as a Bradley–Terry rating of each model, with this
    note; the entry's `reference` names a player rated beside the models."""

    def headline_note(self, metric: str | None) -> str:
        """What the scorecard says about a row's headline `metric`, where it is more than the task's headline."""
        return ""

    def judge_health(self, results: Sequence[Mapping[str, Any]]) -> Health | None:
        """The health of a judged row's judge from its runs' results.json (every model's); None: only who judged."""
        return None

    def step_health(self, suite_dir: Path, entry: Mapping[str, Any], matches: Sequence[Any]) -> Health | None:
        """The health of the judge of the step after the rows, from its suite.json `entry` and the `matches` read
        (rating.matches.Match); None: nothing to say."""
        return None

    def extra_datasets(self, *, judged: bool) -> tuple[str, ...]:
        """Datasets the step after the rows reads (checked with the rows' own before the first call); `judged`: a
        judge will run it."""
        return ()

    def item_weights(self, samples: Sequence[Any]) -> Sequence[float] | None:
        """Each planned sample's weight in the headline (for the plan's effective n); None: equal weights."""
        return None

    def comparison(self, items: int) -> Any:
        """How the plan states the smallest detectable difference of two models over `items` (a stats.power
        PowerPlan); None: the headline's paired test on the items."""
        return None

    def steps_after_rows(self, models: Sequence[str]) -> int:
        """How many units of work the step after the rows has for these models (the suite's progress counts them)."""
        return 0

    def after_rows(self, row: Any, run_dirs: Mapping[str, Path], **context: Any) -> dict[str, Any] | None:
        """The step after the rows (a judge given, every model's run of `row` finished): its suite.json entry (under
        the benchmark's name; a `cumulative` in it is credited to the judge), or None. `context`: judge_backend,
        judge, out, store_path, data_root, concurrency, spending, progress."""
        return None

    async def plan_after_rows(self, row: Any, predictions: Mapping[str, Mapping[str, Any]], **context: Any) -> Any:
        """The dry run of after_rows on the planned predictions of every model (a core.plan TaskPlan), or None.
        `context`: judge (a Backend), store, dry, data_root."""
        return None


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
    """The benchmark a task name belongs to (its own name, or the part before '/'), None when no declaration has it.
    The built-ins are looked at first: the installed distributions' entry points are read only for another name."""
    def owns(b: Benchmark) -> bool:
        return task in b.tasks or task.split("/", 1)[0] == b.name

    found = next((b for b in built_in() if owns(b)), None)
    return found if found is not None else next((b for b in every_benchmark() if owns(b)), None)


def hooks_of(task: str) -> SuiteHooks:
    """The suite hooks of the benchmark a task belongs to (the defaults when none is declared)."""
    found = benchmark_of(task)
    return found.load_hooks() if found is not None else SuiteHooks()


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
