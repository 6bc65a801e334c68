"""CFinBench's section of the HTML report (its BENCHMARK declaration).

It reads results.json and samples.jsonl only, by the names benchmarks/cfinbench/scoring.py writes:
metrics `M.score`, `M.single`, `M.multiple`, `M.judgment` for M in the scoring modes, plus `micro` and
`unparseable_rate`, for the headline extraction mode; the same with the other mode's name as prefix
(`robust.strict.score`...). The headline mode is results.extra.options.extract. groups: `category`,
`type`, `group`; extra.categories gives names; extra.robust_rules the rule counts; per sample score.values
`official.strict`, `robust.strict`, ... and extraction.value {official, robust, robust_rule}.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from markupsafe import Markup

from ...report.markup import figure, fmt_ci, fmt_metric, fmt_num, fmt_p, note, stars, subsection, table
from ...report.runs import RunData, display_names
from ...report.sections import ReportSection, metric_bar, value_cell
from ...report.svg import BarGroup, Cell, bar_chart, heatmap
from ...stats import paired_test
from ...util import natural_key
from .extraction import EXTRACTION_MODES
from .scoring import SCORING_MODES

CFIN_TYPES = (("single", "single choice"), ("multiple", "multiple choice"), ("judgment", "judgment"))

def cfin_headline_mode(run: RunData) -> str:
    options = (run.results.get("extra") or {}).get("options") or {}
    return str(options.get("extract") or run.task_config.get("extract") or "official")


def cfin_key(run: RunData, extraction: str, name: str) -> str:
    """Metric key of `name` (e.g. 'strict.score') under an extraction mode, for this run."""
    return name if extraction == cfin_headline_mode(run) else f"{extraction}.{name}"


def cfinbench_section(runs: Sequence[RunData]) -> Markup:
    names = display_names(runs)
    modes = bar_chart("CFinBench score under the three scoring modes (headline extraction)",
                      [BarGroup(names[r.path], tuple(metric_bar(r, f"{s}.score") for s in SCORING_MODES)) for r in runs],
                      SCORING_MODES,
                      desc="Final score 0.4·single + 0.4·multiple + 0.2·judgment per model, strict, paper and "
                           "opencompass scoring, with 95% CIs")
    mode_rows = []
    for r in runs:
        for suffix, label in (("score", "final score"),) + CFIN_TYPES:
            mode_rows.append([names[r.path], label] + [value_cell(r.metric(f"{s}.{suffix}")) for s in SCORING_MODES])
    types = bar_chart("CFinBench strict accuracy per question type",
                      [BarGroup(names[r.path], tuple(metric_bar(r, f"strict.{t}") for t, _ in CFIN_TYPES))
                       for r in runs], [label for _, label in CFIN_TYPES])
    return Markup("").join([
        subsection("Scoring modes side by side",
                   note("strict: a multiple-choice answer counts only when the whole set is right (headline); "
                        "paper: partial credit |pred|/|gold| unless a wrong letter is picked; opencompass: the "
                        "official evaluator (2 points exact, 1 point for a subset)."),
                   figure(modes), table(["model", "part", *SCORING_MODES], mode_rows, numeric_from=2),
                   anchor="cfinbench-modes"),
        subsection("Per question type", figure(types), anchor="cfinbench-types"),
        cfin_heatmaps(runs, names),
        cfin_extraction(runs, names),
    ])


def row_label(key: str, *names: str) -> str:
    """`key name · other name`, each part once: a part another part holds is left out (group `CPA` named
    `CPA (IDEAFinBench)` reads `CPA (IDEAFinBench)`; a converted exam's category named after itself, once)."""
    parts = list(dict.fromkeys(p.strip() for p in (key, *names) if p and p.strip()))
    kept = [p for p in parts if not any(p != q and p in q for q in parts)]
    head, rest = (kept[0], kept[1:]) if kept and kept[0] == key else ("", kept)
    return " ".join(filter(None, [head, " · ".join(rest)]))


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
                labels.append(row_label(k, info[k].get("zh", ""), info[k].get("en", "")))
            elif grouping == "group":
                labels.append(row_label(k, next((c.get("group_name") for c in info.values()
                                                 if c.get("group") == k), "")))
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
                                                     for e in EXTRACTION_MODES)) for r in runs], EXTRACTION_MODES)
    rows = []
    for r in runs:
        official, robust = r.per_sample("official.strict"), r.per_sample("robust.strict")
        test = paired_test(official, robust) if official and robust else None
        readings = [((s.get("extraction") or {}).get("value") or {}) for s in r.samples]
        differ = sum(1 for v in readings if isinstance(v, Mapping) and v.get("official") != v.get("robust"))
        for e in EXTRACTION_MODES:
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


SECTION = ReportSection("CFinBench", applies=lambda task: task == "cfinbench", render=cfinbench_section)
