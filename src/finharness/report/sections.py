"""The report's sections of benchmarks: each benchmark declares its own (ReportSection, found like a task
through plugins.py: a benchmark's declaration (benchmarks/*/__init__.py BENCHMARK), or the entry-point group
`finharness.report_sections` for an installed benchmark); a task no section claims gets the generic one.

The report reads only results.json and samples.jsonl, so each section documents the names it expects
(see the built-in ones in benchmarks/*/report.py). Shared here:

Generic (any task) — per grouping in results.groups, the headline per group value, one bar per run.

Multiple-choice methods (any task run with `--method all`; benchmarks/mc_methods.py) — metrics
  `agreement.M1~M2` (share of items where methods M1 and M2 chose the same option, with CI and n) and
  `kappa.M1~M2` (Cohen's κ, n) for M in ll, letters, gen, and the per-method scores `M.HEADLINE`
  (e.g. `ll.strict.score`, `gen.accuracy`); shown by `method_agreement` in the task's section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from markupsafe import Markup

from ..benchmarks.mc_methods import METHODS
from ..plugins import REPORT_SECTION_GROUP, PluginError, catalogue
from ..util import natural_key
from .markup import (
    details,
    figure,
    fmt_ci,
    fmt_metric,
    fmt_num,
    is_percent_metric,
    note,
    section,
    small_n_mark,
    subsection,
    table,
)
from .pairwise import pairwise_body
from .runs import RunData, by_task, display_names
from .svg import Bar, BarGroup, Cell, bar_chart, heatmap

MAX_GROUP_BARS = 40
"""Generic section: groupings with more values than this are shown as a table only."""


def metric_bar(run: RunData, name: str) -> Bar | None:
    m = run.metric(name)
    if m is None:
        return None
    ci = tuple(m["ci95"]) if m.get("ci95") and None not in m["ci95"] else None
    return Bar(m.get("value"), ci, m.get("n"))


def value_cell(m: Mapping[str, Any] | None, percent: bool = True) -> Markup:
    """A table cell: the value, and its CI small underneath."""
    if not m or m.get("value") is None:
        return Markup("—")
    return Markup('{v}<span class="ci">{ci} n={n}{mark}</span>').format(
        v=fmt_metric(m["value"], percent), ci=fmt_ci(m.get("ci95"), percent), n=m.get("n"), mark=small_n_mark(m))


# --- multiple-choice methods (any task run with --method all) -------------------------------------

_PAIR = re.compile(r"^agreement\.([a-z]+)~([a-z]+)$")


def mc_methods_of(run: RunData) -> list[str]:
    """The methods compared in a run (from its `agreement.M1~M2` metrics), in headline order."""
    found = {m for name in run.metrics for match in [_PAIR.match(name)] if match for m in match.groups()}
    return [m for m in METHODS if m in found]


def _pair_metric(run: RunData, kind: str, a: str, b: str) -> Mapping[str, Any] | None:
    return run.metric(f"{kind}.{a}~{b}") or run.metric(f"{kind}.{b}~{a}")


def method_agreement(runs: Sequence[RunData]) -> Markup:
    """Per run that compared methods: the agreement matrix (cells = share of items choosing the same option,
    κ and n in the tooltip), a table of agreement and κ per pair, and each method's headline score."""
    names = display_names(runs)
    compared = [r for r in runs if len(mc_methods_of(r)) >= 2]
    if not compared:
        return Markup("")
    parts = [note("Each method answers the same items; agreement = share of the items where both chose an "
                  "option and chose the same one (Wilson 95% CI), κ = Cohen's κ over those items "
                  "(categories = option letters). The headline is the first of ll, letters, gen.")]
    score_rows = []
    for r in compared:
        methods = mc_methods_of(r)
        headline = r.headline or ""
        cells = []
        for a in methods:
            row = []
            for b in methods:
                if a == b:
                    row.append(Cell(1.0, text="—", tooltip="the same method"))
                    continue
                agree, kappa = _pair_metric(r, "agreement", a, b) or {}, _pair_metric(r, "kappa", a, b) or {}
                row.append(Cell(agree.get("value"), tooltip=f"κ = {fmt_num(kappa.get('value'), 3)}, "
                                                            f"n = {agree.get('n', 0)}"))
            cells.append(row)
        parts.append(figure(heatmap(f"{r.task} · {names[r.path]}: agreement between methods", methods, methods,
                                    cells, legend_label="agreement", row_header="method", column_header="method")))
        pair_rows = []
        for i, a in enumerate(methods):
            for b in methods[i + 1:]:
                pair_rows.append([f"{a} ~ {b}", value_cell(_pair_metric(r, "agreement", a, b)),
                                  value_cell(_pair_metric(r, "kappa", a, b), percent=False)])
        parts.append(table(["pair", "agreement", "Cohen's κ"], pair_rows, numeric_from=1,
                           caption=f"{names[r.path]}: agreement and κ per pair of methods"))
        base = next((headline[len(m) + 1:] for m in methods if headline.startswith(m + ".")), headline)
        score_rows.append([names[r.path], base, *[value_cell(r.metric(f"{m}.{base}")) for m in METHODS]])
    parts.append(table(["run", "metric", *METHODS], score_rows, numeric_from=2,
                       caption="Per-method scores (— : the method did not run)"))
    anchor = "mc-methods-" + re.sub(r"[^A-Za-z0-9_-]+", "-", compared[0].task)
    return subsection("Methods compared (ll / letters / gen)", *parts, anchor=anchor)


# --- generic (any other task) -------------------------------------------------------------------------

def generic_section(runs: Sequence[RunData]) -> Markup:
    """Per grouping in results.groups: the headline per group value, one bar per run."""
    names = display_names(runs)
    metric = runs[0].headline
    parts = []
    if metric is None:
        return Markup("")
    percent = all(is_percent_metric(metric, r.metric(metric)) for r in runs)
    groupings = sorted({g for r in runs for g in (r.results.get("groups") or {})})
    for grouping in groupings:
        keys = sorted({k for r in runs for k in ((r.results.get("groups") or {}).get(grouping) or {})},
                      key=natural_key)
        lookup = {(r.path, k): (((r.results.get("groups") or {}).get(grouping) or {}).get(k) or {}).get(metric)
                  for r in runs for k in keys}
        if len(keys) <= MAX_GROUP_BARS:
            groups = []
            for k in keys:
                bars = []
                for r in runs:
                    m = lookup[(r.path, k)]
                    ci = tuple(m["ci95"]) if m and m.get("ci95") and None not in m["ci95"] else None
                    bars.append(Bar(m.get("value"), ci, m.get("n")) if m else None)
                groups.append(BarGroup(k, tuple(bars)))
            parts.append(figure(bar_chart(f"{runs[0].task}: {metric} by {grouping}", groups,
                                          [names[r.path] for r in runs], percent=percent)))
        parts.append(details(f"{metric} by {grouping}: table",
                             table([grouping, *[names[r.path] for r in runs]],
                                   [[k, *[value_cell(lookup[(r.path, k)], percent) for r in runs]] for k in keys])))
    return Markup("").join(parts)


def all_metrics_table(runs: Sequence[RunData]) -> Markup:
    names = display_names(runs)
    metric_names = list(dict.fromkeys(k for r in runs for k in r.metrics))
    rows = [[k, *[value_cell(r.metric(k), is_percent_metric(k, r.metric(k))) for r in runs]] for k in metric_names]
    return details(f"All {len(metric_names)} metrics", table(["metric", *[names[r.path] for r in runs]], rows))


# --- sections as plug-ins -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ReportSection:
    """A benchmark's section of the report: its runs, and (`pairwise`) the matches and ratings given to the
    report. A benchmark declares one as `SECTION = ReportSection(...)` and names it in REPORT_SECTIONS or
    under entry-point group `finharness.report_sections`."""

    title: str
    """Heading and navigation entry: the benchmark's name, one entry however much it shows."""

    applies: Callable[[str], bool]
    """Whether runs of this task name belong to the section."""

    render: Callable[[Sequence[RunData]], Markup] = generic_section
    """The section body from the runs it applies to (default: the generic charts per grouping)."""

    pairwise: bool = False
    """The benchmark ranks models by pairwise matches: `report --matches/--ratings` are shown in this
    section (the first such section, when several are installed) instead of one of their own."""

    @property
    def anchor(self) -> str:
        """The HTML id of the section."""
        return slug(self.title)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-").lower() or "section"


def report_sections() -> tuple[list[ReportSection], list[str]]:
    """Every usable section (built-ins first, in their order) and a note per one that cannot be used."""
    from ..benchmarks.declaration import built_in_report_sections, installed_plugins

    found, problems = [], []
    for plugin, unused in catalogue(built_in_report_sections(), REPORT_SECTION_GROUP,
                                    installed_plugins("report_section")):
        if unused is not None:
            problems.append(f"report section {plugin.name!r} ({plugin.source}) is not used: {unused}")
            continue
        try:
            obj = plugin.load()
        except PluginError as err:
            problems.append(f"report section {err}; its tasks' runs are shown in the generic section")
            continue
        if not isinstance(obj, ReportSection):
            problems.append(f"report section {plugin.name!r} ({plugin.source}, {plugin.target}) is a "
                            f"{type(obj).__name__}, not a finharness.report.sections.ReportSection; its tasks' runs "
                            "are shown in the generic section")
            continue
        found.append(obj)
    return found, problems


def benchmark_sections(runs: Sequence[RunData], *, matches: Sequence[Any] | None = None,
                       ratings: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> list[tuple[str, str, Markup]]:
    """(anchor, title, html) per benchmark section that has runs (or the pairwise input), then one per other
    task, then the pairwise input in a section of its own when no benchmark section took it."""
    hooks, problems = report_sections()
    pairwise_given = bool(matches or ratings)
    takes_pairwise = next((h for h in hooks if h.pairwise), None) if pairwise_given else None
    out = []
    claimed: set[str] = set()
    for hook in hooks:
        mine = [r for r in runs if str(r.path) not in claimed and hook.applies(r.task)]
        if not mine and hook is not takes_pairwise:
            continue
        claimed.update(str(r.path) for r in mine)
        parts = [hook.render(mine) + method_agreement(mine)] if mine else []
        if hook is takes_pairwise:  # first: the ratings are what ranks this benchmark's models
            parts.insert(0, Markup('<div id="{}-ratings">{}</div>').format(
                hook.anchor, pairwise_body(matches, ratings, hook.title)))
        tables = Markup("").join(Markup("<h3>{}</h3>{}").format(task, all_metrics_table(rs))
                                 for task, rs in by_task(mine).items())
        out.append((hook.anchor, hook.title, section(hook.anchor, hook.title, *parts, tables)))
    for task, task_runs in by_task([r for r in runs if str(r.path) not in claimed]).items():
        anchor = "task-" + re.sub(r"[^A-Za-z0-9_-]+", "-", task)
        out.append((anchor, task, section(anchor, f"Task {task}",
                                          generic_section(task_runs) + method_agreement(task_runs),
                                          all_metrics_table(task_runs))))
    if pairwise_given and takes_pairwise is None:
        out.append(("pairwise", "Pairwise ratings", section("pairwise", "Pairwise ratings",
                                                           pairwise_body(matches, ratings))))
    if problems:
        out.append(("plugin-problems", "Section plug-ins", section(
            "plugin-problems", "Section plug-ins that could not be used", *[note(p) for p in problems])))
    return out
