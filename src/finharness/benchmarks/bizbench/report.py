"""BizBench's section of the HTML report (its BENCHMARK declaration): the headline per task and
the failure classes.

Any headline; the failure class of a sample that did not earn full marks is, in order: every
`failure.<class>` key of score.values whose value is ≥ 0.5 (a task that classifies its failures, e.g.
`failure.timeout`, `failure.exception`, `failure.no_code`); 'call failed' for a failed sample;
'unparseable (<rule>)' when extraction.parsed is false; else 'wrong answer'.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from markupsafe import Markup

from ...report.markup import figure, is_percent_metric, note, subsection, table
from ...report.runs import RunData, display_names
from ...report.sections import ReportSection, metric_bar, value_cell
from ...report.svg import BarGroup, Cell, bar_chart, heatmap


def failure_class_counts(run: RunData) -> Counter[str]:
    """Failure class counts over the samples that did not earn full marks (see the module docstring)."""
    classes: Counter[str] = Counter()
    for s in run.samples:
        score = s.get("score") or {}
        if s.get("failed"):
            classes["call failed"] += 1
            continue
        value = score.get("value")
        if value is None or value >= 1:
            continue
        declared = [k.split(".", 1)[1] for k, v in (score.get("values") or {}).items()
                    if k.startswith("failure.") and isinstance(v, (int, float)) and v >= 0.5]
        if declared:
            classes.update(declared)
        elif not (s.get("extraction") or {}).get("parsed", True):
            classes[f"unparseable ({(s.get('extraction') or {}).get('rule')})"] += 1
        else:
            classes["wrong answer"] += 1
    return classes


def sandbox_isolation(run: RunData) -> str:
    """The layers the run's programs ran under (extra.sandbox.isolation), '—' for a task that runs none."""
    sandbox = (run.results.get("extra") or {}).get("sandbox") or {}
    return sandbox.get("isolation") or "—"


def bizbench_section(runs: Sequence[RunData]) -> Markup:
    names = display_names(runs)
    labels = {r.path: f"{r.task.removeprefix('bizbench/')} · {names[r.path]}" for r in runs}
    chart = bar_chart("BizBench headline per task",
                      [BarGroup(labels[r.path], (metric_bar(r, r.headline) if r.headline else None,)) for r in runs],
                      percent=all(is_percent_metric(r.headline or "", r.metric(r.headline or "")) for r in runs))
    rows = [[r.task, names[r.path], sandbox_isolation(r), r.headline or "—", value_cell(r.metric(r.headline or ""))]
            for r in runs]
    counts = {r.path: failure_class_counts(r) for r in runs}
    classes = sorted({c for cs in counts.values() for c in cs}, key=lambda c: -sum(cs[c] for cs in counts.values()))
    parts = [subsection("Per task", figure(chart), table(["task", "model", "isolation", "headline", "value"], rows,
                                                         numeric_from=4))]
    if classes:
        top = max(max(cs.values(), default=0) for cs in counts.values()) or 1
        cells = [[Cell(counts[r.path].get(c, 0), text=str(counts[r.path].get(c, 0)),
                       tooltip=f"{counts[r.path].get(c, 0)} of {len(r.samples)} samples") for c in classes]
                 for r in runs]
        parts.append(subsection(
            "Failure classes",
            note("Samples without full marks, by class: a task's own failure.<class> scores (e.g. timeout, "
                 "exception, no_code for executed programs), else call failed / unparseable (rule) / wrong answer."),
            figure(heatmap("BizBench failure classes per run (samples)", [labels[r.path] for r in runs], classes,
                           cells, domain=(0, top), percent=False, legend_label="samples", row_header="run",
                           column_header="failure class", integer=True))))
    return Markup("").join(parts)


SECTION = ReportSection("BizBench", applies=lambda task: task.startswith("bizbench/"), render=bizbench_section)
