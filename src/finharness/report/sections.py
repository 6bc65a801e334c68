"""Benchmark sections of the report, chosen by task name (SECTION_HOOKS), and a generic one for the rest.

The report reads only results.json and samples.jsonl (it never imports a benchmark), so each
section documents the names it expects:

CFinBench (task 'cfinbench'; see benchmarks/cfinbench/scoring.py) — metrics `M.score`,
  `M.single`, `M.multiple`, `M.judgment` for M in strict, paper, opencompass, plus `micro` and
  `unparseable_rate`, for the headline extraction mode; the same with the other mode's name as
  prefix (`robust.strict.score`...). The headline mode is results.extra.options.extract.
  groups: `category`, `type`, `group`; extra.categories gives names; extra.robust_rules the rule
  counts; per sample score.values `official.strict`, `robust.strict`, ... and
  extraction.value {official, robust, robust_rule}.

BizBench (task names starting 'bizbench/') — any headline; the failure class of a sample that
  did not earn full marks is, in order: every `failure.<class>` key of score.values whose value is
  ≥ 0.5 (a task that classifies its failures, e.g. `failure.timeout`, `failure.exception`,
  `failure.no_code`); 'call failed' for a failed sample; 'unparseable (<rule>)' when
  extraction.parsed is false; else 'wrong answer'.

FinTradeBench (task 'fintradebench', or names starting 'fintradebench') — see FINTRADE_METRICS.

Multiple-choice methods (any task run with `--method all`; benchmarks/mc_methods.py) — metrics
  `agreement.M1~M2` (share of items where methods M1 and M2 chose the same option, with CI and n) and
  `kappa.M1~M2` (Cohen's κ, n) for M in ll, letters, gen, and the per-method scores `M.HEADLINE`
  (e.g. `ll.strict.score`, `gen.accuracy`); shown by `method_agreement` in the task's section.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from markupsafe import Markup

from ..benchmarks.mc_methods import METHODS
from ..stats import paired_test
from ..util import natural_key
from .markup import (
    details,
    figure,
    fmt_ci,
    fmt_metric,
    fmt_num,
    fmt_p,
    is_percent_metric,
    note,
    section,
    stars,
    subsection,
    table,
)
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
    return Markup('{v}<span class="ci">{ci} n={n}</span>').format(v=fmt_metric(m["value"], percent),
                                                                  ci=fmt_ci(m.get("ci95"), percent), n=m.get("n"))


# --- CFinBench ------------------------------------------------------------------------------------

CFIN_SCORING = ("strict", "paper", "opencompass")
CFIN_TYPES = (("single", "single choice"), ("multiple", "multiple choice"), ("judgment", "judgment"))
CFIN_EXTRACTIONS = ("official", "robust")


def cfin_headline_mode(run: RunData) -> str:
    options = (run.results.get("extra") or {}).get("options") or {}
    return str(options.get("extract") or run.task_config.get("extract") or "official")


def cfin_key(run: RunData, extraction: str, name: str) -> str:
    """Metric key of `name` (e.g. 'strict.score') under an extraction mode, for this run."""
    return name if extraction == cfin_headline_mode(run) else f"{extraction}.{name}"


def cfinbench_section(runs: Sequence[RunData]) -> Markup:
    names = display_names(runs)
    modes = bar_chart("CFinBench score under the three scoring modes (headline extraction)",
                      [BarGroup(names[r.path], tuple(metric_bar(r, f"{s}.score") for s in CFIN_SCORING)) for r in runs],
                      CFIN_SCORING,
                      desc="Final score 0.4·single + 0.4·multiple + 0.2·judgment per model, strict, paper and "
                           "opencompass scoring, with 95% CIs")
    mode_rows = []
    for r in runs:
        for suffix, label in (("score", "final score"),) + CFIN_TYPES:
            mode_rows.append([names[r.path], label] + [value_cell(r.metric(f"{s}.{suffix}")) for s in CFIN_SCORING])
    types = bar_chart("CFinBench strict accuracy per question type",
                      [BarGroup(names[r.path], tuple(metric_bar(r, f"strict.{t}") for t, _ in CFIN_TYPES))
                       for r in runs], [label for _, label in CFIN_TYPES])
    return Markup("").join([
        subsection("Scoring modes side by side",
                   note("strict: a multiple-choice answer counts only when the whole set is right (headline); "
                        "paper: partial credit |pred|/|gold| unless a wrong letter is picked; opencompass: the "
                        "official evaluator (2 points exact, 1 point for a subset)."),
                   figure(modes), table(["model", "part", *CFIN_SCORING], mode_rows, numeric_from=2),
                   anchor="cfinbench-modes"),
        subsection("Per question type", figure(types), anchor="cfinbench-types"),
        cfin_heatmaps(runs, names),
        cfin_extraction(runs, names),
    ])


def cfin_heatmaps(runs: Sequence[RunData], names: Mapping) -> Markup:
    columns = [names[r.path] for r in runs]
    info: dict[str, Mapping[str, Any]] = {}
    for r in runs:
        info.update((r.results.get("extra") or {}).get("categories") or {})
    out = []
    for grouping, title in (("group", "first-level group"), ("category", "category")):
        keys = sorted({k for r in runs for k in ((r.results.get("groups") or {}).get(grouping) or {})},
                      key=natural_key)
        if not keys:
            continue
        labels = []
        for k in keys:
            if grouping == "category" and k in info:
                labels.append(f"{k} {info[k].get('zh', '')} · {info[k].get('en', '')}".strip())
            elif grouping == "group":
                group_name = next((c.get("group_name") for c in info.values() if c.get("group") == k), "")
                labels.append(f"{k} {group_name}".strip())
            else:
                labels.append(k)
        cells = []
        for k in keys:
            row = []
            for r in runs:
                m = (((r.results.get("groups") or {}).get(grouping) or {}).get(k) or {}).get("strict.score")
                if not m:
                    row.append(None)
                    continue
                row.append(Cell(m.get("value"), tooltip=f"95% CI {fmt_ci(m.get('ci95'))}, n={m.get('n')}"))
            cells.append(row)
        out.append(figure(heatmap(f"CFinBench strict score per {title}", labels, columns, cells,
                                  legend_label="strict score", row_header=title, column_header="model"),
                          f"Strict score per {title} (the 0.4/0.4/0.2 weighting inside each {title}); "
                          "hover a cell for its CI and n."))
    return subsection("Per category", *out, anchor="cfinbench-categories") if out else Markup("")


def cfin_extraction(runs: Sequence[RunData], names: Mapping) -> Markup:
    chart = bar_chart("CFinBench strict score: official vs robust extraction",
                      [BarGroup(names[r.path], tuple(metric_bar(r, cfin_key(r, e, "strict.score"))
                                                     for e in CFIN_EXTRACTIONS)) for r in runs], CFIN_EXTRACTIONS)
    rows = []
    for r in runs:
        official, robust = r.per_sample("official.strict"), r.per_sample("robust.strict")
        test = paired_test(official, robust) if official and robust else None
        readings = [((s.get("extraction") or {}).get("value") or {}) for s in r.samples]
        differ = sum(1 for v in readings if isinstance(v, Mapping) and v.get("official") != v.get("robust"))
        for e in CFIN_EXTRACTIONS:
            rows.append([names[r.path], e + (" (headline)" if e == cfin_headline_mode(r) else ""),
                         value_cell(r.metric(cfin_key(r, e, "strict.score"))),
                         value_cell(r.metric(cfin_key(r, e, "micro"))),
                         value_cell(r.metric(cfin_key(r, e, "unparseable_rate"))),
                         fmt_num(differ) if e == "robust" else "",
                         (f"{fmt_metric(test.diff)} (p {fmt_p(test.p_value)}) {stars(test.p_value)}"
                          if test and e == "robust" else "")])
    rule_names = sorted({k for r in runs for k in ((r.results.get("extra") or {}).get("robust_rules") or {})})
    rule_rows = [[names[r.path]] + [fmt_num(((r.results.get("extra") or {}).get("robust_rules") or {}).get(k, 0))
                                    for k in rule_names] for r in runs]
    return subsection(
        "Extraction modes compared",
        note("official: the paper's answer post-processing; robust: ours, which records the rule that fired. "
             "Δ is robust − official on per-item strict scores (exact McNemar test)."),
        figure(chart),
        table(["model", "extraction", "strict score", "micro accuracy", "unparseable", "items read differently",
               "Δ micro"], rows, numeric_from=2),
        table(["model", *rule_names], rule_rows, caption="Which robust rule fired (items)") if rule_names else "",
        anchor="cfinbench-extraction")


# --- BizBench -------------------------------------------------------------------------------------

def failure_classes(run: RunData) -> Counter[str]:
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


def bizbench_section(runs: Sequence[RunData]) -> Markup:
    names = display_names(runs)
    labels = {r.path: f"{r.task.removeprefix('bizbench/')} · {names[r.path]}" for r in runs}
    chart = bar_chart("BizBench headline per task",
                      [BarGroup(labels[r.path], (metric_bar(r, r.headline) if r.headline else None,)) for r in runs],
                      percent=all(is_percent_metric(r.headline or "", r.metric(r.headline or "")) for r in runs))
    rows = [[r.task, names[r.path], r.headline or "—", value_cell(r.metric(r.headline or ""))] for r in runs]
    counts = {r.path: failure_classes(r) for r in runs}
    classes = sorted({c for cs in counts.values() for c in cs}, key=lambda c: -sum(cs[c] for cs in counts.values()))
    parts = [subsection("Per task", figure(chart), table(["task", "model", "headline", "value"], rows, numeric_from=3))]
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
                           column_header="failure class"))))
    return Markup("").join(parts)


# --- FinTradeBench ----------------------------------------------------------------------------------

FINTRADE_TYPES: tuple[str, ...] = ("F", "T", "FT")
"""Question types: fundamentals (F), trading signals (T), both (FT)."""

FINTRADE_METRICS: Mapping[str, str] = {
    "accuracy": "judged accuracy over all questions (headline)",
    "accuracy.F": "accuracy on fundamentals questions",
    "accuracy.T": "accuracy on trading-signal questions",
    "accuracy.FT": "accuracy on questions that need both",
    "f1.official": "golden-indicator F1 as the paper computes it",
    "f1.proper": "golden-indicator F1, corrected",
}
"""Metric names the FinTradeBench section reads from results.json. The run's mode is
results.config.task_config.mode: 'norag' or 'rag' (others, e.g. 'ideal', get their own column).
For the paired RAG Δ, each sample carries score.values['accuracy.<TYPE>'] for its type (or,
failing that, metadata.question_type = TYPE and score.value); runs of the same model spec in the
two modes are paired on sample ids."""

FINTRADE_MODES: Mapping[str, str] = {"norag": "No-RAG", "rag": "RAG"}


def fintrade_mode(run: RunData) -> str:
    return str(run.task_config.get("mode") or "norag")


def fintrade_per_sample(run: RunData, question_type: str) -> dict[str, float]:
    key = f"accuracy.{question_type}"
    values = run.per_sample(key)
    if values:
        return values
    out = {}
    for s in run.samples:
        score = s.get("score") or {}
        if (s.get("metadata") or {}).get("question_type") == question_type and score.get("value") is not None:
            out[str(s["id"])] = float(score["value"])
    return out


def fintradebench_section(runs: Sequence[RunData]) -> Markup:
    by_model: dict[str, dict[str, RunData]] = {}
    for r in runs:
        by_model.setdefault(r.model, {})[fintrade_mode(r)] = r
    modes = [m for m in FINTRADE_MODES if any(m in v for v in by_model.values())]
    modes += sorted({m for v in by_model.values() for m in v} - set(modes))
    groups, rows = [], []
    for model, per_mode in by_model.items():
        for t in FINTRADE_TYPES:
            key = f"accuracy.{t}"
            test = None
            if "norag" in per_mode and "rag" in per_mode:
                a, b = fintrade_per_sample(per_mode["norag"], t), fintrade_per_sample(per_mode["rag"], t)
                test = paired_test(a, b) if a and b and set(a) & set(b) else None
            bars = []
            for m in modes:
                bar = metric_bar(per_mode[m], key) if m in per_mode else None
                if bar is not None and m == "rag" and test is not None:
                    bar = Bar(bar.value, bar.ci95, bar.n, note=stars(test.p_value))
                bars.append(bar)
            groups.append(BarGroup(f"{model} · {t}", tuple(bars)))
            cells = [value_cell(per_mode[m].metric(key)) if m in per_mode else "—" for m in modes]
            rows.append([model, t, *cells,
                         (f"{fmt_metric(test.diff)} {stars(test.p_value)}".strip() if test else "—"),
                         fmt_ci(test.ci95) if test else "—", fmt_p(test.p_value) if test else "—",
                         f"{test.test} (n={test.n})" if test else "—"])
    chart = bar_chart("FinTradeBench accuracy by question type, without and with retrieval", groups,
                      [FINTRADE_MODES.get(m, m) for m in modes],
                      desc="Judged accuracy on fundamentals (F), trading-signal (T) and combined (FT) questions")
    f1_groups = [BarGroup(f"{r.model} · {FINTRADE_MODES.get(fintrade_mode(r), fintrade_mode(r))}",
                          (metric_bar(r, "f1.official"), metric_bar(r, "f1.proper"))) for r in runs]
    return Markup("").join([
        subsection("Accuracy: No-RAG vs RAG",
                   note("RAG Δ = RAG − No-RAG on the same questions (paired test: exact McNemar for 0/1 "
                        "scores, else paired t); * p<0.05, ** p<0.01, *** p<0.001."),
                   figure(chart),
                   table(["model", "type", *[FINTRADE_MODES.get(m, m) for m in modes], "RAG Δ", "95% CI of Δ",
                          "p", "test"], rows, numeric_from=2)),
        subsection("Golden-indicator F1",
                   figure(bar_chart("FinTradeBench golden-indicator F1", f1_groups, ("f1.official", "f1.proper")))),
    ])


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


# --- registry -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SectionHook:
    """A benchmark section, chosen by task name."""

    anchor: str
    """HTML id of the section."""

    title: str
    """Heading."""

    applies: Callable[[str], bool]
    """Whether a run of this task name belongs to the section."""

    render: Callable[[Sequence[RunData]], Markup]
    """The section body from the runs it applies to."""


SECTION_HOOKS: tuple[SectionHook, ...] = (
    SectionHook("cfinbench", "CFinBench", lambda task: task == "cfinbench", cfinbench_section),
    SectionHook("bizbench", "BizBench", lambda task: task.startswith("bizbench/"), bizbench_section),
    SectionHook("fintradebench", "FinTradeBench", lambda task: task.startswith("fintradebench"),
                fintradebench_section),
)


def benchmark_sections(runs: Sequence[RunData]) -> list[tuple[str, str, Markup]]:
    """(anchor, title, html) per benchmark section that has runs, then one per other task."""
    out = []
    claimed: set[str] = set()
    for hook in SECTION_HOOKS:
        mine = [r for r in runs if hook.applies(r.task)]
        if not mine:
            continue
        claimed.update(str(r.path) for r in mine)
        tables = Markup("").join(Markup("<h3>{}</h3>{}").format(task, all_metrics_table(rs))
                                 for task, rs in by_task(mine).items())
        body = hook.render(mine) + method_agreement(mine)
        out.append((hook.anchor, hook.title, section(hook.anchor, hook.title, body, tables)))
    for task, task_runs in by_task([r for r in runs if str(r.path) not in claimed]).items():
        anchor = "task-" + re.sub(r"[^A-Za-z0-9_-]+", "-", task)
        out.append((anchor, task, section(anchor, f"Task {task}",
                                          generic_section(task_runs) + method_agreement(task_runs),
                                          all_metrics_table(task_runs))))
    return out
