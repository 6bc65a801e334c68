"""Leaderboards whose ranks only separate what the data separates.

The rule (also printed in the report):

- Runs of one task are ordered by their headline metric (results.json `headline`) in the direction
  the task declares (results.json `directions`, Task.metric_directions): higher is better unless the
  metric is lower-is-better (an error rate: ranked the other way) or informational (rounds, tokens:
  the runs are listed, not ranked).
- Two runs are *separable* when a test says so at level ALPHA = 0.05 (no multiplicity correction):
  - paired, when both runs have per-sample scores (samples.jsonl) and share at least
    PAIRING_MIN_OVERLAP (90%) of the larger run's scored items: `finharness.stats.paired_test` on
    the per-sample headline scores of the shared items (exact McNemar for 0/1 scores, paired t
    otherwise). A significant difference whose sign disagrees with the headline order (possible
    when the headline is a weighted macro average, as an exam's by question type) does not separate them;
  - otherwise, when their 95% confidence intervals do not overlap (a conservative rule).
- rank = 1 + the number of runs separable from and above it (Chatbot Arena's rule). Runs with the
  same rank form a rank group, shown as '=k'.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from markupsafe import Markup

from ..stats import paired_test
from .markup import details, fmt_ci, fmt_metric, fmt_num, fmt_p, is_percent_metric, note, section, small_n_mark, table
from .runs import RunData, by_task, config_differences, display_names
from .svg import ci_strip

ALPHA = 0.05
"""Significance level of every comparison."""

PAIRING_MIN_OVERLAP = 0.9
"""Share of the larger run's scored items that both runs must have for a paired test."""

CI_OVERLAP = "ci-overlap"


@dataclass(frozen=True)
class Entry:
    """Something to rank: a run's headline, or a model's rating."""

    label: str
    """Unique name in the ranking."""

    value: float | None
    """Ranked in the leaderboard's direction (higher first unless lower is better); None is listed last
    without a rank."""

    ci95: tuple[float, float] | None
    """95% interval of `value`."""

    n: int | None = None
    """Items (or matches) behind the value."""

    per_sample: Mapping[str, float] | None = None
    """Per-sample scores by sample id, enabling paired tests."""


@dataclass(frozen=True)
class Comparison:
    """The entry ranked ahead (the better value) against the one behind it."""

    ahead: str
    behind: str
    basis: str
    """'mcnemar-score' or 'paired-t' (paired), or 'ci-overlap'."""

    separable: bool
    """Whether the data separate the two (see the module docstring)."""

    diff: float | None
    """Paired: mean(ahead) − mean(behind) over shared items; otherwise the difference of the values."""

    diff_ci95: tuple[float, float] | None
    """95% interval of the paired difference (None for ci-overlap)."""

    p_value: float | None
    """Of the paired test (None for ci-overlap)."""

    n_shared: int | None
    """Items in both runs (paired only)."""


@dataclass(frozen=True)
class Standing:
    """One line of a leaderboard."""

    entry: Entry
    rank: int | None
    """1 + entries separable from and above this one; None without a value."""

    not_separable_from: tuple[str, ...]
    """Labels of the other entries the data cannot tell apart from this one."""


def compare(ahead: Entry, behind: Entry, lower_is_better: bool = False) -> Comparison:
    """Decide whether `ahead` (the better value: the larger, or with `lower_is_better` the smaller) is separable
    from `behind`."""
    better = -1.0 if lower_is_better else 1.0  # the sign of a difference in ahead's favour
    a, b = ahead.per_sample, behind.per_sample
    if a and b:
        shared = len(set(a) & set(b))
        if shared >= 2 and shared >= PAIRING_MIN_OVERLAP * max(len(a), len(b)):
            result = paired_test(b, a)  # diff = ahead − behind
            significant = math.isfinite(result.p_value) and result.p_value < ALPHA
            return Comparison(ahead.label, behind.label, result.test, significant and better * result.diff > 0,
                              result.diff, result.ci95, result.p_value, result.n)
    diff = None if ahead.value is None or behind.value is None else ahead.value - behind.value
    low, high = (ahead, behind) if lower_is_better else (behind, ahead)
    disjoint = bool(low.ci95 and high.ci95 and low.ci95[1] < high.ci95[0])
    return Comparison(ahead.label, behind.label, CI_OVERLAP, disjoint, diff, None, None, None)


def rank_entries(entries: Sequence[Entry], lower_is_better: bool = False) -> tuple[list[Standing], list[Comparison]]:
    """Standings (best first) and every pairwise comparison between entries that have values."""
    valued = sorted((e for e in entries if e.value is not None and math.isfinite(e.value)),
                    key=lambda e: e.value if lower_is_better else -e.value)  # type: ignore[operator]
    comparisons = [compare(valued[i], valued[j], lower_is_better)
                   for i in range(len(valued)) for j in range(i + 1, len(valued))]
    beaten_by = Counter(c.behind for c in comparisons if c.separable)
    tied: dict[str, list[str]] = {e.label: [] for e in valued}
    for c in comparisons:
        if not c.separable:
            tied[c.ahead].append(c.behind)
            tied[c.behind].append(c.ahead)
    standings = [Standing(e, 1 + beaten_by[e.label], tuple(tied[e.label])) for e in valued]
    standings += [Standing(e, None, ()) for e in entries if e not in valued]
    return standings, comparisons


def rank_labels(standings: Sequence[Standing]) -> list[str]:
    """'1', '=2', '=2', '4'…: '=' marks a rank shared with another entry."""
    counts = Counter(s.rank for s in standings if s.rank is not None)
    return ["—" if s.rank is None else (f"={s.rank}" if counts[s.rank] > 1 else str(s.rank)) for s in standings]


def run_entries(runs: Sequence[RunData], metric: str, names: Mapping) -> list[Entry]:
    entries = []
    for r in runs:
        m = r.metric(metric) or {}
        ci = tuple(m["ci95"]) if m.get("ci95") and None not in m["ci95"] else None
        entries.append(Entry(names[r.path], m.get("value"), ci, m.get("n"), r.per_sample(metric) or None))
    return entries


RULE_TEXT = ("Ranks separate only what the data separate. Two runs of a task that share at least 90% of their "
             "scored items are compared with a paired test on per-sample scores (exact McNemar for 0/1 scores, "
             "paired t otherwise); other pairs are separable only when their 95% CIs do not overlap. Level 0.05, "
             "no multiplicity correction. Rank = 1 + the number of runs separable from and above it; '=k' marks a "
             "rank group. Higher is better, unless the task declares the metric lower-is-better (↓, ranked the other "
             "way) or informational (listed, not ranked).")


def leaderboard_section(runs: Sequence[RunData]) -> Markup:
    blocks = [note(RULE_TEXT)]
    for task, task_runs in by_task(runs).items():
        metric = task_runs[0].headline
        if metric is None:
            continue
        blocks.append(task_leaderboard(task, metric, task_runs, display_names(task_runs)))
    return section("leaderboard", "Leaderboard", *blocks)


def task_leaderboard(task: str, metric: str, runs: Sequence[RunData], names: Mapping) -> Markup:
    direction = runs[0].direction(metric)
    entries = run_entries(runs, metric, names)
    if direction == "info":  # describes the runs: listed in run order, no rank, no comparison
        standings, comparisons = [Standing(e, None, ()) for e in entries], []
    else:
        standings, comparisons = rank_entries(entries, lower_is_better=direction == "lower")
    run_of = {names[r.path]: r for r in runs}
    configs = config_differences(runs)
    percent = all(is_percent_metric(metric, r.metric(metric)) for r in runs)
    values = [v for e in entries for v in ([e.value] + list(e.ci95 or ())) if v is not None]
    domain = (0.0, 1.0) if percent else ((min(values), max(values)) if values else (0.0, 1.0))
    rows = []
    for label, standing in zip(rank_labels(standings), standings):
        e = standing.entry
        run = run_of[e.label]
        rows.append([label, e.label, Markup('<span class="run">{}</span>').format(run.name),
                     config_cell(configs[run.path]), fmt_metric(e.value, percent),
                     fmt_ci(e.ci95, percent), ci_strip(e.value, e.ci95, domain, percent=percent, label=e.label),
                     Markup("{}{}").format(fmt_num(e.n), small_n_mark(run.metric(metric))),
                     run.results.get("status", "?"),
                     Markup("<br>").join(standing.not_separable_from) or "—"])  # a line each: never one wide line
    heading = {"higher": metric, "lower": f"{metric} ↓", "info": metric}[direction]
    caption = {"higher": Markup("<b>{}</b> — headline <code>{}</code>"),
               "lower": Markup("<b>{}</b> — headline <code>{}</code>, lower is better (↓)"),
               "info": Markup("<b>{}</b> — headline <code>{}</code> describes the runs and ranks nothing (the task "
                              "declares it informational): runs listed, not ranked")}[direction].format(task, metric)
    board = table(["rank", "model", "run", "config", heading, "95% CI", "", "n", "status", "not separable from"],
                  rows, cls="leaderboard", numeric_from=4, caption=caption)
    pairs = [[c.ahead, c.behind, fmt_metric(c.diff, percent), fmt_ci(c.diff_ci95, percent), fmt_p(c.p_value),
              f"{c.basis}" + (f" (n={c.n_shared})" if c.n_shared else ""), "yes" if c.separable else "no"]
             for c in comparisons]
    extra = details(f"Pairwise comparisons ({len(pairs)})",
                    table(["ranked ahead", "behind", "Δ", "95% CI of Δ", "p", "test", "separable"], pairs,
                          numeric_from=2)) if pairs else Markup("")
    return Markup('<div class="board">{}{}</div>').format(board, extra)


CONFIG_INLINE = 2
"""A run's differing options are listed in its config cell up to this many; more fold into a <details>."""


def config_cell(options: Sequence[tuple[str, str]]) -> Markup:
    """The options of a run that differ from the other runs' (`key`, value), one a line; folded when many."""
    items = Markup("").join(Markup('<li><code>{}</code> {}</li>').format(k, v) for k, v in options)
    listing = Markup('<ul class="config">{}</ul>').format(items)
    if len(options) <= CONFIG_INLINE:
        return listing if options else Markup("")
    return Markup('<details class="config"><summary>{n} options differ</summary>{listing}</details>').format(
        n=len(options), listing=listing)
