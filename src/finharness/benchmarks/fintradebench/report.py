"""FinTradeBench's section of the HTML report (its BENCHMARK declaration): accuracy without and
with retrieval, paired, and the golden-indicator F1.

Metric names it reads from results.json: FINTRADE_METRICS. The run's mode is
results.config.task_config.mode: 'norag' or 'rag' (others, e.g. 'ideal', get their own column).
For the paired RAG Δ, each sample carries score.values['accuracy.<TYPE>'] for its type (or, failing
that, metadata.question_type = TYPE and score.value); runs of the same model spec in the two modes are
paired on sample ids.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from markupsafe import Markup

from ...report.markup import figure, fmt_ci, fmt_metric, fmt_p, note, stars, subsection, table
from ...report.runs import RunData
from ...report.sections import ReportSection, metric_bar, value_cell
from ...report.svg import Bar, BarGroup, bar_chart
from ...stats import paired_test

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
"""Metric names this section reads from results.json."""

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


SECTION = ReportSection("FinTradeBench", applies=lambda task: task.startswith("fintradebench"),
                        render=fintradebench_section)
