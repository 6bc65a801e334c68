"""The scorecard: models × rows of a suite (or of any run folders), each cell a row's headline with its 95% CI
and n, the benchmarks' own composites, the judged rows with their judge's health, the pairwise differences
between models with paired intervals, and what each model spent.

`build_scorecard(SUITE_DIR)` reads what `finharness suite` wrote (SUITE_DIR/suite.json, the contract in
docs/report.md#scorecard: one row per suite entry, each naming the run folder of every model), and
`scorecard_from_runs(RUN_DIR...)` makes the same view of run folders (`finharness report`: rows = task, plus the
options that tell two runs of one task apart). Both only read files: results.json and samples.jsonl of each
run (report.runs), the matches and judge summaries of the suite's steps after the rows.

What a benchmark adds is declared in its SuiteHooks (benchmarks/declaration.py; docs/report.md says why each
built-in's is the one), read here without naming any benchmark:
- `headline_note`: what a row's headline is, where it is more than the task's (a weighted exam score).
- `composites`, rows of their own after the benchmark's last row: `MeanOfTasks` (the unweighted mean of the task
  rows' headlines, interval `stats.weighted_mean_ci` over the tasks as independent parts, shown only where a model
  has a value in every row: a benchmark of several tasks) and `PairedDelta` (one row's headline minus another's, the rows told apart by
  one task option, paired on the items both scored with `stats.paired_test`; informational: with retrieval minus without).
- `rating_note`: the row the step after the rows judged (its suite.json entry's `row`) is the Bradley–Terry rating
  of each model from the entry's matches (rating.rate_table, seeded bootstrap), the entry's reference player among
  the ratings (a pairwise-judged benchmark).
- `judge_health` / `step_health`: the judge's health figures and warnings.

Ranks: within a row, `report.leaderboard.rank_entries` (paired test on per-sample scores where the runs share
90% of their items, else non-overlapping CIs; '=k' = not separable); a rating row by the rating gaps' intervals
(rating tables), two models not neighbours in the table being separable when every gap between them is.
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..benchmarks.declaration import Health, MeanOfTasks, PairedDelta, display_name, hooks_of
from ..core.store import merge_billed
from ..core.types import to_jsonable
from ..data.errors import DataError
from ..data.io import read_json
from ..report.leaderboard import Comparison, Entry, Standing, rank_entries, rank_labels
from ..report.markup import is_percent_metric
from ..report.runs import RunData, by_task, config_differences, flat_options, load_run, run_flags
from ..stats import Estimate, mean_ci, paired_test, proportion_ci, weighted_mean_ci
from ..util import finite_json
from .contamination import contamination_cells

SUITE_FILE = "suite.json"
"""What `finharness suite` writes into its folder; a folder holding it is a suite folder."""

STATUSES: tuple[str, ...] = ("complete", "incomplete", "missing")


RATING_BOOTSTRAP = 1000
"""Bootstrap rounds of a rating row's table (seed 0), as `finharness rate`."""


@dataclass(frozen=True)
class Rate:
    """One measure of a judge's health: hits of n, with its 95% interval."""

    name: str
    """'tie', 'first-position win', 'flip', 'no verdict', 'rubric-example copy'."""

    value: float | None
    """hits / n (None when n is 0)."""

    ci95: tuple[float, float] | None
    """95% interval of `value` (stats.proportion_ci)."""

    hits: int
    """Events counted."""

    n: int
    """What they are counted over."""

    meaning: str
    """What the rate measures, and what a healthy judge gives."""


@dataclass(frozen=True)
class JudgeHealth:
    """The judge of a judged row and how it behaved, pooled over every model's run of the row."""

    judge: str | None
    """The judge's model spec (suite.json `judge`, or the runs' judge identity); None when no one says."""

    rates: tuple[Rate, ...]
    """Its health figures."""

    notes: tuple[str, ...] = ()
    """Warnings a reader must see (a judge that copies the rubric's example, answers one label to all...)."""


@dataclass(frozen=True)
class Row:
    """One line of the scorecard: a task run with one set of options, or a benchmark's composite."""

    id: str
    """Unique within the scorecard (suite.json row id; for run folders the task plus what tells runs apart)."""

    benchmark: str
    """The benchmark the row belongs to (rows of one benchmark are adjacent)."""

    label: str
    """What the scorecard prints; names a stand-in as such."""

    kind: str
    """'task' (a task's headline), 'rating' (Bradley–Terry ratings from the suite's matches) or 'composite'."""

    metric: str | None
    """The number in the cells: the task's headline metric, 'bt_rating', 'mean_of_tasks' or a PairedDelta's slug."""

    direction: str
    """'higher', 'lower' (an error rate) or 'info' (not ranked)."""

    percent: bool
    """Cells are fractions shown as percentages."""

    task: str | None = None
    """The task the row ran (None for a composite)."""

    run_label: str = ""
    """What tells this row's runs from another row's of the same task: the differing options (`mode=rag`) or the
    run folder; '' when nothing needs telling apart."""

    options: Mapping[str, Any] = field(default_factory=dict)
    """The task options the row ran with (suite.json), {} for run folders."""

    standin: str | None = None
    """The stand-in that ran instead of the official data ('cpa'), or None."""

    judged: bool = False
    """A judge decides the headline."""

    judge: JudgeHealth | None = None
    """The judge and its health (judged rows)."""

    paper: str | None = None
    """Which paper configuration the row follows (suite.json `paper`)."""

    about: str = ""
    """How the row's number is made, where that is not just the task's headline (the benchmark's hooks say)."""

    ranking: str = ""
    """The models by rank group, best first ('a > b', 'a = b' when not separable); '' when the row ranks nothing."""


@dataclass(frozen=True)
class Cell:
    """One model's number in one row."""

    row: str
    """Row id."""

    model: str
    """Model spec."""

    value: float | None
    """The row's number for the model (None: no value)."""

    ci95: tuple[float, float] | None
    """Its 95% interval."""

    n: int | None
    """Items behind it (matches for a rating, shared questions for RAG Δ, items summed over tasks for a mean)."""

    status: str
    """'complete', 'incomplete' (a value, but not every item or task counted) or 'missing' (no value)."""

    why: str | None = None
    """Why incomplete or missing (None when complete)."""

    run: str | None = None
    """The run folder behind the cell (relative to the suite folder), None for composites and missing runs."""

    method: str | None = None
    """How the interval was made, where results.json (or the composite) says ('wilson', 'clopper-pearson', ...)."""

    warning: str | None = None
    """A small-n or method warning that results.json carries for the metric (or the composite's own)."""

    rank: str | None = None
    """'1', '=1', '2'...: 1 + the models separable from and above it ('=' shared); None: not ranked."""

    flags: tuple[str, ...] = ()
    """Why the number may mislead at face value (report.runs.run_flags: mostly unparseable replies, a fallen-back
    method, decoding that was not greedy); for a composite, its flagged parts."""


@dataclass(frozen=True)
class Difference:
    """Two models compared on one row: the one with the better value first."""

    row: str
    """Row id."""

    ahead: str
    """The model with the better value."""

    behind: str
    """The other."""

    diff: float | None
    """ahead − behind in the row's units (paired: over the items both scored)."""

    ci95: tuple[float, float] | None
    """95% interval of `diff` (None where the comparison has none: CI overlap, a chain of rating gaps)."""

    p_value: float | None
    """Of the paired test (None where there is none)."""

    test: str
    """'mcnemar-score', 'effective-n binomial', 'paired-t' ... (stats.paired_test), 'ci-overlap', 'weighted-paired'
    (a composite's per-task paired differences combined), or the rating gap's method."""

    n: int | None
    """Items both models scored (for a rating gap: the matches the two played against each other)."""

    separable: bool
    """Whether the data separate the two at level 0.05 (the leaderboard's rule)."""

    warning: str | None = None
    """Why to doubt the comparison (few shared items), or None."""


@dataclass(frozen=True)
class Player:
    """One line of a rating table."""

    name: str
    """The name it plays under in the matches."""

    model: str | None
    """The suite's model spec it is (None for the reference and other players)."""

    rating: float
    """Bradley–Terry rating on the Elo scale."""

    ci95: tuple[float, float] | None
    """95% bootstrap interval."""

    wins: int
    ties: int
    losses: int
    reference: bool = False
    """The reference player the step after the rows names (its suite.json entry's `reference`)."""


@dataclass(frozen=True)
class Ratings:
    """The rating table behind a rating row."""

    row: str
    """The row it fills."""

    benchmark: str
    """The row's benchmark (display name), which the views title the table with."""

    matches_file: str
    """The matches it was computed from (relative to the suite folder)."""

    n_matches: int
    bootstrap_rounds: int
    players: tuple[Player, ...]
    """Best first, the reference included."""

    gaps: tuple[Difference, ...]
    """Each player against the next one down, with the gap's own interval (rating tables)."""

    reference: str | None = None
    """The reference player's name."""


@dataclass(frozen=True)
class Usage:
    """What a model (or the whole suite) spent, summed over every invocation."""

    model: str
    """Model spec, or 'all' for the suite as a whole (every role)."""

    calls: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    tokens_evaluated: int | None = None
    """Log-likelihood tokens."""
    wall_s: float | None = None
    cost_usd: float | None = None
    """None when unpriced."""
    invocations: int | None = None
    cached_tokens: int | None = None
    """Of prompt_tokens, those read from the provider's prompt cache."""
    cache_write_tokens: int | None = None
    """Of prompt_tokens, those written to the provider's prompt cache."""
    billed: Mapping[str, Mapping[str, Any]] | None = None
    """The calls made by role and mode ('model/live', 'judge/batch': calls, tokens, cost_usd; RunCounters.billed)."""


@dataclass(frozen=True)
class Scorecard:
    """Everything the scorecard files and table show."""

    title: str
    """'quick (2 models)' or 'runs'."""

    source: str
    """The suite folder, or the run folders, it was read from."""

    models: tuple[str, ...]
    """Model specs, in the suite's order (columns)."""

    rows: tuple[Row, ...]
    cells: tuple[Cell, ...]
    """One per row and model."""

    differences: tuple[Difference, ...]
    """Per ranked row, every pair of models with values."""

    ratings: Ratings | None = None
    """The rating row's table (reference included), when the suite has matches."""

    usage: tuple[Usage, ...] = ()
    """Per model, then 'all' when the suite says."""

    suite: str | None = None
    """The suite's name (None for run folders)."""

    description: str | None = None
    roles: Mapping[str, str | None] = field(default_factory=dict)
    """judge / user specs of the suite."""

    status: str | None = None
    """The suite's status: complete, incomplete, budget, interrupted, crashed (None for run folders)."""

    partial: str | None = None
    """Why the scorecard holds only part of the suite (it stopped before every row ran for every model: how far it
    got, and the command that resumes); None when the suite ran to its end."""

    notes: tuple[str, ...] = ()
    """What a reader must know about the whole (stand-ins, errors)."""

    contamination: tuple[Any, ...] = ()
    """Membership evidence per row and model where the runs were probed (suite/contamination.py
    ContaminationCell, from each run folder's contamination.json)."""

    def cell(self, row: str, model: str) -> Cell:
        return next(c for c in self.cells if c.row == row and c.model == model)

    def row(self, row: str) -> Row:
        return next(r for r in self.rows if r.id == row)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values; a NaN or infinite number (an unbounded side of a rating gap's interval) is null."""
        return finite_json(to_jsonable(self))


# --- reading ---------------------------------------------------------------------------------------------------

def is_suite_dir(path: str | Path) -> bool:
    return (Path(path) / SUITE_FILE).is_file()


def read_suite(suite_dir: Path) -> dict[str, Any]:
    path = suite_dir / SUITE_FILE
    if not path.is_file():
        raise DataError("no suite.json here", path=suite_dir,
                        hint="pass the --out folder of `finharness suite`, or run folders for the runs' view")
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"expected a JSON object, got {type(data).__name__}", path=path)
    for key, kind in (("models", list), ("rows", list)):
        if not isinstance(data.get(key), kind):
            raise DataError(f"'{key}' must be a {kind.__name__}", path=path,
                            hint="suite.json as `finharness suite` writes it (docs/report.md#scorecard)")
    for i, row in enumerate(data["rows"]):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("task"), str):
            raise DataError(f"rows[{i}] needs an 'id' and a 'task'", path=path)
    return data


def benchmark_of(task: str) -> str:
    """The benchmark a task belongs to, by its declaration's display name (for run folders no suite.json
    describes); the task itself when no benchmark declares it."""
    return display_name(task)


def _flag(metric: Mapping[str, Any], key: str) -> str | None:
    value = metric.get(key)
    return str(value) if value else None


def _ci(values: Any) -> tuple[float, float] | None:
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return None
    return float(values[0]), float(values[1])


def incomplete_why(run: RunData) -> str | None:
    """Why a run ended incomplete: its failed samples by kind, or the samples it did not reach."""
    if run.results.get("status") == "complete":
        return None
    counts = run.counts
    failed = counts.get("failed_samples") or 0
    if failed:
        kinds = counts.get("failure_kinds") or {}
        detail = ", ".join(f"{k} ×{v}" for k, v in kinds.items())
        return f"{failed} of {counts.get('samples', '?')} samples failed" + (f" ({detail})" if detail else "")
    total = counts.get("samples_total")
    if total and counts.get("samples") is not None and counts["samples"] < total:
        return f"{counts['samples']} of {total} samples run"
    return f"run status {run.results.get('status', '?')!r}"


def run_cell(row: str, model: str, run: RunData, metric: str | None, folder: str | None) -> Cell:
    """A task row's cell: the run's value of `metric` (its headline) with CI, n and the metric's flags."""
    m = (run.metric(metric) if metric else None) or {}
    value = m.get("value")
    why = incomplete_why(run)
    if value is None:
        return Cell(row, model, None, None, m.get("n"), "missing",
                    why or f"no value of {metric!r} (nothing could be scored)", folder)
    return Cell(row, model, float(value), _ci(m.get("ci95")), m.get("n"), "incomplete" if why else "complete", why,
                folder, _flag(m, "method"), _flag(m, "warning"), flags=tuple(run_flags(run.results)))


def standin_of(runs: Sequence[RunData]) -> str | None:
    """The stand-in a run names in results.json (extra.exam.standin), or None."""
    for r in runs:
        exam = (r.results.get("extra") or {}).get("exam")
        if isinstance(exam, Mapping) and exam.get("standin"):
            return str(exam["standin"])
    return None


def identity_label(identity: Any) -> str | None:
    """A readable name of a backend identity from results.json config.models (the judge of a run)."""
    if not isinstance(identity, Mapping):
        return None
    if identity.get("spec"):
        return str(identity["spec"])
    name = next((identity[k] for k in ("model", "name", "path", "file") if identity.get(k)), None)
    backend = identity.get("backend")
    return f"{backend}:{name}" if backend and name else str(backend or name or "") or None


def _rate(name: str, hits: int, n: int, meaning: str) -> Rate:
    est = proportion_ci(hits, n)
    return Rate(name, None if n == 0 else est.value, _ci(est.ci95) if n else None, hits, n, meaning)


def health_view(health: Health | None, runs: Sequence[RunData], judge: str | None) -> JudgeHealth:
    """The scorecard's view of a benchmark's judge health (its hooks' counts, with their intervals), naming the
    judge from the suite, the evidence or the runs' judge identity."""
    rates = tuple(_rate(r.name, r.hits, r.n, r.meaning) for r in health.rates) if health else ()
    who = judge or (health.judge if health else None) or _run_judge(runs)
    return JudgeHealth(who, rates, health.notes if health else ())


def _run_judge(runs: Sequence[RunData]) -> str | None:
    return next((label for r in runs
                 if (label := identity_label(((r.results.get("config") or {}).get("models") or {}).get("judge")))),
                None)


# --- ranks and differences -------------------------------------------------------------------------------------

def rank_groups(standings: Sequence[Standing]) -> str:
    """'a > b = c': models by rank, '=' within a rank group ('tied' when every ranked model shares one)."""
    ranked = [s for s in standings if s.rank is not None]
    if len(ranked) < 2:
        return ""
    if len({s.rank for s in ranked}) == 1:
        return "tied"
    groups: dict[int, list[str]] = {}
    for s in ranked:
        groups.setdefault(s.rank, []).append(s.entry.label)  # type: ignore[arg-type]
    return " > ".join(" = ".join(names) for _, names in sorted(groups.items()))


def difference_of(row: str, c: Comparison, per_sample: Mapping[str, Mapping[str, float] | None]) -> Difference:
    """The leaderboard's comparison as a Difference, with the paired test's small-n warning where it is paired."""
    warning = None
    if c.basis != "ci-overlap" and per_sample.get(c.ahead) and per_sample.get(c.behind):
        warning = getattr(paired_test(per_sample[c.behind], per_sample[c.ahead]), "warning", None)  # type: ignore[arg-type]
    elif c.basis == "ci-overlap":
        warning = "not paired (the runs share under 90% of their items): separable only when the 95% CIs do not overlap"
    return Difference(row, c.ahead, c.behind, c.diff, c.diff_ci95, c.p_value, c.basis, c.n_shared, c.separable,
                      warning)


def rank_row(row: Row, cells: Sequence[Cell], per_sample: Mapping[str, Mapping[str, float] | None]
             ) -> tuple[list[Cell], str, list[Difference]]:
    """Cells with their ranks, the row's ranking text and its pairwise differences (leaderboard rules)."""
    if row.direction == "info":
        return list(cells), "", []
    entries = [Entry(c.model, c.value, c.ci95, c.n, per_sample.get(c.model) or None) for c in cells
               if c.value is not None]
    standings, comparisons = rank_entries(entries, lower_is_better=row.direction == "lower")
    labels = dict(zip((s.entry.label for s in standings), rank_labels(standings))) if len(entries) > 1 else {}
    ranked = [replace(c, rank=labels.get(c.model)) for c in cells]
    return ranked, rank_groups(standings), [difference_of(row.id, c, per_sample) for c in comparisons]


# --- composites ------------------------------------------------------------------------------------------------

def headline_estimate(run: RunData, cell: Cell) -> Estimate:
    """The cell's value as an Estimate with a sampling variance, so that means over tasks can be combined:
    stats.mean_ci of the per-sample scores where their mean is the headline (most tasks); otherwise the
    variance a normal interval of the cell's CI implies."""
    values = list(run.per_sample(run.headline).values())
    if values and cell.value is not None and abs(sum(values) / len(values) - cell.value) < 1e-9:
        return mean_ci(values)
    low, high = cell.ci95 or (cell.value, cell.value)
    return Estimate(cell.value, (low, high), cell.n or 0, ((high - low) / (2 * 1.959963984540054)) ** 2)  # type: ignore[arg-type]


def _slug(benchmark: str) -> str:
    """'Acme Bench' -> 'acme_bench': the start of a composite row's id."""
    return re.sub(r"\W+", "_", benchmark.lower()).strip("_")


def mean_composite(benchmark: str, rule: MeanOfTasks, rows: Sequence[Row], cells: Mapping[tuple[str, str], Cell],
                   runs: Mapping[tuple[str, str], RunData], models: Sequence[str]
                   ) -> tuple[Row, list[Cell], list[Difference]]:
    """The mean of a benchmark's task headlines per model (a MeanOfTasks rule), with its interval and pairwise
    differences (per task, the paired differences of the items both models scored; combined over tasks like the
    values)."""
    row = Row(f"{_slug(benchmark)}_mean", benchmark, f"{benchmark} mean of {len(rows)} tasks", "composite",
              "mean_of_tasks", "higher", True, about=rule.note)
    out: list[Cell] = []
    weight = 1.0 / len(rows)
    for model in models:
        parts = [cells[(r.id, model)] for r in rows]
        have = [p for p in parts if p.value is not None and (p.row, model) in runs]
        if len(have) < len(rows):
            missing = ", ".join(r.label for r, p in zip(rows, parts) if p not in have)
            out.append(Cell(row.id, model, None, None, None, "missing",
                            f"{len(have)} of {len(rows)} tasks have a value (missing: {missing})"))
            continue
        est = weighted_mean_ci([(weight, headline_estimate(runs[(p.row, model)], p)) for p in parts])
        incomplete = [p for p in parts if p.status != "complete"]
        flagged = tuple(f"{r.label} is flagged ({'; '.join(p.flags)})" for r, p in zip(rows, parts) if p.flags)
        out.append(Cell(row.id, model, est.value, _ci(est.ci95), est.n, "incomplete" if incomplete else "complete",
                        f"incomplete tasks: {', '.join(p.row for p in incomplete)}" if incomplete else None,
                        None, getattr(est, "method", None) or None, getattr(est, "warning", None), flags=flagged))
    valued = [c for c in out if c.value is not None]
    ranked = {c.model: c for c in valued}
    differences = []
    order = sorted(valued, key=lambda c: -c.value)  # type: ignore[operator]
    for i, ahead in enumerate(order):
        for behind in order[i + 1:]:
            differences.append(_paired_mean_difference(row.id, rows, runs, ahead.model, behind.model, weight))
    standings = _standings(models, ranked, differences)
    labels = dict(zip((s.entry.label for s in standings), rank_labels(standings))) if len(valued) > 1 else {}
    out = [replace(c, rank=labels.get(c.model)) for c in out]
    return replace(row, ranking=rank_groups(standings)), out, differences


def _paired_mean_difference(row: str, rows: Sequence[Row], runs: Mapping[tuple[str, str], RunData], ahead: str,
                            behind: str, weight: float) -> Difference:
    parts, shared, bounded = [], 0, True
    for r in rows:
        a, b = runs[(r.id, ahead)].per_sample(), runs[(r.id, behind)].per_sample()
        ids = sorted(set(a) & set(b))
        shared += len(ids)
        if len(ids) >= 2:
            # a difference of two [0, 1] scores lies in [-1, 1]: without these bounds, differences that are all 0 or
            # 1 read as a proportion, whose interval is [0, x] beside a difference of 0
            unit = all(0.0 <= v <= 1.0 for i in ids for v in (a[i], b[i]))
            bounded &= unit
            differences = [a[i] - b[i] for i in ids]
            parts.append((weight, mean_ci(differences, bounds=(-1.0, 1.0)) if unit else mean_ci(differences)))
    if len(parts) < len(rows):
        return Difference(row, ahead, behind, None, None, None, "weighted-paired", shared, False,
                          "a task has fewer than 2 items both models scored: no paired difference")
    # the difference's own interval: each task's paired difference and its variance, combined with the values'
    # weights (weighted_mean_ci reads parts inside [0, 1] as proportions, which a difference is not)
    value = sum(w * e.value for w, e in parts)
    variance = sum(w * w * e.variance for w, e in parts)
    half = 1.959963984540054 * math.sqrt(variance) if math.isfinite(variance) else math.nan
    low, high = value - half, value + half
    ci = _ci((max(-1.0, low), min(1.0, high)) if bounded else (low, high))
    separable = ci is not None and ci[0] > 0
    warning = next((e.warning for _, e in parts if getattr(e, "warning", None)), None)
    return Difference(row, ahead, behind, value, ci, _normal_p(value, variance), "weighted-paired", shared, separable,
                      warning and f"some tasks have few items both scored ({warning})")


def _normal_p(value: float, variance: float) -> float | None:
    """Two-sided p of a difference against 0 under the normal approximation its interval uses (None: no variance)."""
    if not (math.isfinite(value) and math.isfinite(variance)) or variance <= 0:
        return None
    return math.erfc(abs(value) / math.sqrt(2.0 * variance))


def _standings(models: Sequence[str], valued: Mapping[str, Cell], differences: Sequence[Difference]
               ) -> list[Standing]:
    """Standings from pairwise verdicts (rank = 1 + models separable from and above it), best first."""
    beaten = {m: sum(1 for d in differences if d.behind == m and d.separable) for m in valued}
    tied = {m: tuple(d.ahead if d.behind == m else d.behind for d in differences
                     if not d.separable and m in (d.ahead, d.behind)) for m in valued}
    order = sorted(valued, key=lambda m: (beaten[m], models.index(m)))
    return [Standing(Entry(m, valued[m].value, valued[m].ci95, valued[m].n), 1 + beaten[m], tied[m]) for m in order]


def paired_delta_composite(benchmark: str, rule: PairedDelta, base: Row, treated: Row,
                           runs: Mapping[tuple[str, str], RunData], models: Sequence[str]) -> tuple[Row, list[Cell]]:
    """Per model, the treated row's per-item scores minus the base row's on the items both rows scored
    (stats.paired_test; a PairedDelta rule)."""
    row = Row(f"{_slug(benchmark)}_{rule.slug}", benchmark, f"{benchmark} {rule.label}",
              "composite", rule.slug, "info", True, about=rule.note)
    cells = []
    for model in models:
        a, b = runs.get((base.id, model)), runs.get((treated.id, model))
        if a is None or b is None:
            cells.append(Cell(row.id, model, None, None, None, "missing",
                              f"needs both the {rule.option}={rule.base} and the {rule.option}={rule.treated} run"))
            continue
        result = paired_test(a.per_sample(), b.per_sample())
        if result.n < 2:
            cells.append(Cell(row.id, model, None, None, result.n, "missing",
                              f"{result.n} question(s) scored in both runs: a paired difference needs 2"))
            continue
        complete = a.results.get("status") == b.results.get("status") == "complete"
        cells.append(Cell(row.id, model, result.diff, _ci(result.ci95), result.n,
                          "complete" if complete else "incomplete", None if complete else "a run is incomplete",
                          None, result.test, getattr(result, "warning", None)))
    return row, cells


# --- rating rows -----------------------------------------------------------------------------------------------

def match_ratings(suite_dir: Path, row: Row, spec: Mapping[str, Any], models: Sequence[str],
                  runs: Mapping[tuple[str, str], RunData]) -> tuple[Ratings, list[Cell], list[Difference], list[Any]]:
    """The Bradley–Terry table of the matches a step after the rows wrote (its suite.json entry `spec`), the row's
    cells (one per model: its rating), the differences between the suite's models and the matches themselves."""
    from ..rating import RatingOptions, rate_table, read_matches

    name = str(spec.get("matches") or "")
    path = suite_dir / name
    absent = (None if name and path.is_file()
              else f"no {row.benchmark} matches ({name or 'none named'} absent: the judging did not run)")
    matches = read_matches(path) if absent is None else []
    table = rate_table(matches, RatingOptions(method="bt", bootstrap=RATING_BOOTSTRAP, seed=0)) if matches else None
    reference = spec.get("reference")
    player_of = {}  # model spec -> its player name in the matches
    played = set(table.ratings) if table else set()
    for model in models:
        run = runs.get((row.id, model))
        names = [model] + ([run.model] if run is not None else [])
        player_of[model] = next((n for n in names if n in played), None)
    model_of = {p: m for m, p in player_of.items() if p is not None}
    players = tuple(Player(p, model_of.get(p), r.rating, r.ci95, r.wins, r.ties, r.losses, p == reference)
                    for p, r in (table.ratings.items() if table else ()))
    def direct(a: str, b: str) -> int:
        return sum(1 for m in matches if {m.model_a, m.model_b} == {a, b})

    gaps = tuple(Difference(row.id, g.higher, g.lower, g.gap, g.ci95, None, getattr(g, "method", "bootstrap"),
                            direct(g.higher, g.lower), g.ci95 is not None and not (g.ci95[0] <= 0.0 <= g.ci95[1]),
                            getattr(g, "warning", None))
                 for g in (table.gaps if table else ()))
    ratings = Ratings(row.id, row.benchmark, name, table.n_matches if table else 0,
                      table.bootstrap_rounds if table else 0, players, gaps, reference)
    cells = []
    for model in models:
        player = player_of[model]
        run = runs.get((row.id, model))
        if player is None:
            cells.append(Cell(row.id, model, None, None, None, "missing",
                              absent or f"no {row.benchmark} matches for this model",
                              None if run is None else str(run.path.relative_to(suite_dir))))
            continue
        r = table.ratings[player]  # type: ignore[union-attr]
        why = incomplete_why(run) if run is not None else None
        cells.append(Cell(row.id, model, r.rating, r.ci95, r.matches, "incomplete" if why else "complete", why,
                          None if run is None else str(run.path.relative_to(suite_dir)), "bt-bootstrap"))
    return ratings, cells, model_gaps(row.id, players, gaps), matches


def model_gaps(row: str, players: Sequence[Player], gaps: Sequence[Difference]) -> list[Difference]:
    """Every pair of the suite's models in the rating table: the table's own gap where they are neighbours; else
    the difference of their ratings, separable when every neighbour gap between them is (an intersection-union
    test, level 0.05), without an interval of its own."""
    order = [p.name for p in players]
    out = []
    for i, high in enumerate(players):
        for j in range(i + 1, len(players)):
            low = players[j]
            if high.model is None or low.model is None:
                continue
            chain = gaps[i:j]
            if j == i + 1:
                g = chain[0]
                out.append(Difference(row, high.model, low.model, g.diff, g.ci95, None, g.test, g.n, g.separable,
                                      g.warning))
                continue
            between = ", ".join(order[i + 1:j])
            out.append(Difference(row, high.model, low.model, high.rating - low.rating, None, None, "gap-chain", None,
                                  all(g.separable for g in chain),
                                  f"not neighbours in the rating table ({between} between): separable only when "
                                  "every gap between them is"))
    return out


# --- building --------------------------------------------------------------------------------------------------

def _load(folder: Path) -> RunData | None:
    return load_run(folder) if (folder / "results.json").is_file() else None


def task_row(row_id: str, benchmark: str, label: str, task: str, runs: Sequence[RunData], **extra: Any) -> Row:
    """A task row: its metric (the runs' headline), direction and percent from the first run with one."""
    first = next((r for r in runs if r.headline), None)
    metric = first.headline if first else None
    direction = first.direction(metric) if first and metric else "info"
    percent = all(is_percent_metric(metric or "", r.metric(metric or "")) for r in runs) if metric else True
    standin = extra.pop("standin", None) or standin_of(runs)
    if standin and "stand-in" not in label:
        label = f"{label} (stand-in: {standin})"
    about = hooks_of(task).headline_note(metric)
    return Row(row_id, benchmark, label, "task", metric, direction, percent, task, standin=standin, about=about,
               **extra)


def build_scorecard(suite_dir: str | Path) -> Scorecard:
    """The scorecard of a suite folder (module docstring). Bad or missing files raise DataError naming them."""
    suite_dir = Path(suite_dir)
    suite = read_suite(suite_dir)
    models = tuple(str(m) for m in suite["models"])
    errors = suite.get("errors") or {}
    skipped = suite.get("skipped") or {}
    unfinished = suite.get("unfinished") or {}
    rows: list[Row] = []
    rated: dict[str, Mapping[str, Any]] = {}  # row id -> the suite.json entry of the step that judged it
    cells: dict[tuple[str, str], Cell] = {}
    runs: dict[tuple[str, str], RunData] = {}
    per_row_runs: dict[str, list[RunData]] = {}
    for spec in suite["rows"]:
        row_id = spec["id"]
        found = []
        for model in models:
            folder = (spec.get("runs") or {}).get(model)
            run = _load(suite_dir / folder) if folder else None
            if run is not None:
                runs[(row_id, model)] = run
                found.append(run)
        per_row_runs[row_id] = found
    run_labels = suite_run_labels(suite["rows"], per_row_runs)
    for spec in suite["rows"]:
        row_id, task = spec["id"], spec["task"]
        found = per_row_runs[row_id]
        row = task_row(row_id, str(spec.get("benchmark") or benchmark_of(task)), str(spec.get("label") or row_id),
                       task, found, run_label=run_labels[row_id], options=spec.get("options") or {},
                       standin=spec.get("standin"), judged=bool(spec.get("judged")), paper=spec.get("paper"))
        hooks = hooks_of(task)
        step = suite.get(task)  # a step after the rows writes its entry under its task's name
        if hooks.rating_note and isinstance(step, dict) and step.get("row") == row_id:
            row = replace(row, kind="rating", metric="bt_rating", direction="higher", percent=False, judged=True,
                          about=hooks.rating_note)
            rated[row_id] = step
        for model in models:
            run = runs.get((row_id, model))
            folder = (spec.get("runs") or {}).get(model)
            if run is None:
                why = (errors.get(model) or {}).get(row_id) or (skipped.get(model) or {}).get(row_id) or (
                    (unfinished.get(model) or {}).get(row_id)) or (
                    f"{folder} has no results.json: the run did not finish (suite status "
                    f"{suite.get('status', '?')})" if folder else "the suite has no run of this row for this model")
                cells[(row_id, model)] = Cell(row_id, model, None, None, None, "missing", str(why), folder)
            else:
                cells[(row_id, model)] = run_cell(row_id, model, run, row.metric if row.kind == "task" else None,
                                                  folder)
        rows.append(row)
    return _assemble(f"{suite.get('suite', suite_dir.name)} ({len(models)} model{'s' * (len(models) != 1)})",
                     str(suite_dir), models, rows, cells, runs, suite_dir=suite_dir, rated=rated,
                     judge=suite.get("judge"), suite=suite)


def option_default(task: str, key: str) -> str | None:
    """The default of a built-in task's option (its Options declaration), as text; None when unknown."""
    from ..benchmarks.registry import TASKS, task_class

    options = task_class(task).Options if task in TASKS else None
    field_ = next((f for f in fields(options) if f.name == key), None) if options is not None else None
    if field_ is None or field_.default is MISSING:
        return None
    return str(field_.default)


def differing_options(runs: Sequence[RunData]) -> dict[Path, str]:
    """Per run of one task, 'k=v, ...' of the options that differ between `runs` (report.runs.config_differences),
    an option a run's key leaves out at its default shown with the default the task declares."""
    def text(run: RunData, key: str) -> str:
        value = flat_options(run.task_config).get(key)
        if value is None:
            return option_default(run.task, key) or "—"
        return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)

    by_path = {r.path: r for r in runs}
    return {path: ", ".join(f"{k}={text(by_path[path], k)}" for k, _ in options)
            for path, options in config_differences(runs).items()}


def suite_run_labels(rows: Sequence[Mapping[str, Any]], runs: Mapping[str, Sequence[RunData]]) -> dict[str, str]:
    """Per suite row, what tells it from the other rows of the same task: the task options that differ between
    them, as the runs recorded them (defaults included: `method=gen` beside `method=ll`), or as suite.json states
    them where a row has no run; the row id when nothing differs; '' for a task with one row."""
    out: dict[str, str] = {}
    for task in dict.fromkeys(str(r["task"]) for r in rows):
        same = [r for r in rows if r["task"] == task]
        if len(same) < 2:
            out.update({str(r["id"]): "" for r in same})
            continue
        if all(runs.get(r["id"]) for r in same):
            firsts = [runs[r["id"]][0] for r in same]
            differing = differing_options(firsts)
            labels = [differing[run.path] for run in firsts]
        else:
            keys = sorted({k for r in same for k in (r.get("options") or {})})
            varying = [k for k in keys if len({repr((r.get("options") or {}).get(k)) for r in same}) > 1]
            labels = [", ".join(f"{k}={(r.get('options') or {}).get(k, '—')}" for k in varying) for r in same]
        out.update({str(r["id"]): label or str(r["id"]) for r, label in zip(same, labels)})
    return out


def scorecard_from_runs(run_dirs: Sequence[str | Path]) -> Scorecard:
    """The models × tasks view of run folders: a row per task and set of differing options (or per folder where a
    model has two runs of the same row), a column per model spec."""
    loaded = [load_run(d) for d in run_dirs]
    models = tuple(dict.fromkeys(r.model for r in loaded))
    rows: list[Row] = []
    cells: dict[tuple[str, str], Cell] = {}
    runs: dict[tuple[str, str], RunData] = {}
    for task, task_runs in by_task(loaded).items():
        differing = differing_options(task_runs)
        groups: dict[str, list[RunData]] = {}
        for r in task_runs:
            groups.setdefault(differing[r.path], []).append(r)
        for label, group in groups.items():
            repeated = len({r.model for r in group}) < len(group)
            for sub in ([[r] for r in group] if repeated else [group]):
                run_label = ", ".join(x for x in (label, sub[0].name if repeated else "") if x)
                row_id = task + (f" · {run_label}" if run_label else "")
                row = task_row(row_id, benchmark_of(task), task, task, sub, run_label=run_label,
                               judged="judge" in ((sub[0].results.get("config") or {}).get("models") or {}))
                rows.append(row)
                for r in sub:
                    runs[(row_id, r.model)] = r
                    cells[(row_id, r.model)] = run_cell(row_id, r.model, r, row.metric, str(r.path))
                for model in models:
                    cells.setdefault((row_id, model), Cell(row_id, model, None, None, None, "missing",
                                                           "no run of this row among the folders given"))
    return _assemble("runs", ", ".join(str(d) for d in run_dirs), models, rows, cells, runs)


def _assemble(title: str, source: str, models: Sequence[str], rows: list[Row], cells: dict[tuple[str, str], Cell],
              runs: dict[tuple[str, str], RunData], *, suite_dir: Path | None = None,
              rated: Mapping[str, Mapping[str, Any]] | None = None, judge: str | None = None,
              suite: Mapping[str, Any] | None = None) -> Scorecard:
    """Judge health, composites, ranks and differences, usage: what both entry points share."""
    out_rows: list[Row] = []
    out_cells: list[Cell] = []
    differences: list[Difference] = []
    ratings = None
    by_benchmark: dict[str, list[Row]] = {}
    for row in rows:
        by_benchmark.setdefault(row.benchmark, []).append(row)
    last_of = {rs[-1].id: b for b, rs in by_benchmark.items()}
    for row in rows:
        row_cells = [cells[(row.id, m)] for m in models]
        row_runs = [runs[(row.id, m)] for m in models if (row.id, m) in runs]
        step = (rated or {}).get(row.id)
        if step is not None and suite_dir is not None:  # only a rating row has a step's entry
            ratings, row_cells, diffs, matches = match_ratings(suite_dir, row, step, models, runs)
            health = health_view(hooks_of(row.task or "").step_health(suite_dir, step, matches), row_runs,
                                 step.get("judge") or judge)
            standings = _standings(models, {c.model: c for c in row_cells if c.value is not None}, diffs)
            labels = dict(zip((s.entry.label for s in standings), rank_labels(standings))) if len(standings) > 1 else {}
            row_cells = [replace(c, rank=labels.get(c.model)) for c in row_cells]
            row = replace(row, judge=health, ranking=rank_groups(standings))
        else:
            health = hooks_of(row.task or "").judge_health([r.results for r in row_runs])
            if row.judged or (health is not None and row_runs):
                row = replace(row, judged=True, judge=health_view(health, row_runs, judge))
            per_sample = {m: runs[(row.id, m)].per_sample(row.metric) for m in models if (row.id, m) in runs}
            row_cells, ranking, diffs = rank_row(row, row_cells, per_sample)
            row = replace(row, ranking=ranking)
        out_rows.append(row)
        out_cells += row_cells
        differences += diffs
        if row.id in last_of:
            extra_rows, extra_cells, extra_diffs = composites(last_of[row.id], by_benchmark[last_of[row.id]],
                                                              cells, runs, models)
            out_rows += extra_rows
            out_cells += extra_cells
            differences += extra_diffs
    notes = [f"{r.label}: a stand-in ran instead of the official data" for r in out_rows if r.standin]
    for model, errs in ((suite or {}).get("errors") or {}).items():
        rows_by_why: dict[str, list[str]] = {}
        for row_id, why in (errs or {}).items():
            rows_by_why.setdefault(str(why), []).append(row_id)
        for why, row_ids in rows_by_why.items():  # one note per distinct reason: a data error stops several rows
            notes.append(f"{model} · {', '.join(row_ids)}: did not run ({why})")
    return Scorecard(title, source, tuple(models), tuple(out_rows), tuple(out_cells), tuple(differences), ratings,
                     usage_of(models, runs, suite), (suite or {}).get("suite"), (suite or {}).get("description"),
                     {k: (suite or {}).get(k) for k in ("judge", "user") if suite}, (suite or {}).get("status"),
                     notes=tuple(notes), partial=partial_text(suite) if suite else None,
                     contamination=contamination_cells(out_rows, models, runs))


def partial_text(suite: Mapping[str, Any]) -> str | None:
    """What a suite that stopped early holds, and how to resume it (suite.json `partial` and `resume`)."""
    partial = suite.get("partial")
    if not partial:
        return None
    resume = suite.get("resume")
    return str(partial) + (f"; resume with: {resume}" if resume else "")


def composites(benchmark: str, rows: Sequence[Row], cells: Mapping[tuple[str, str], Cell],
               runs: Mapping[tuple[str, str], RunData], models: Sequence[str]
               ) -> tuple[list[Row], list[Cell], list[Difference]]:
    """The composite rows the benchmark's hooks declare (module docstring), placed after its last row."""
    tasks = [r for r in rows if r.kind == "task"]
    out_rows: list[Row] = []
    out_cells: list[Cell] = []
    out_diffs: list[Difference] = []
    if not tasks:
        return out_rows, out_cells, out_diffs

    def option(r: Row, name: str) -> str | None:
        run = next((runs[(r.id, m)] for m in models if (r.id, m) in runs), None)
        value = run.task_config.get(name) if run is not None else (r.options or {}).get(name)
        return None if value is None else str(value)

    for rule in hooks_of(tasks[0].task or "").composites:
        if isinstance(rule, MeanOfTasks) and len(tasks) >= rule.min_rows:
            row, row_cells, diffs = mean_composite(benchmark, rule, tasks, cells, runs, models)
            out_rows.append(row)
            out_cells += row_cells
            out_diffs += diffs
        elif isinstance(rule, PairedDelta):
            base = next((r for r in tasks if option(r, rule.option) == rule.base), None)
            treated = next((r for r in tasks if option(r, rule.option) == rule.treated), None)
            if base is not None and treated is not None:
                row, row_cells = paired_delta_composite(benchmark, rule, base, treated, runs, models)
                out_rows.append(row)
                out_cells += row_cells
    return out_rows, out_cells, out_diffs


USAGE_KEYS: tuple[str, ...] = ("calls", "prompt_tokens", "completion_tokens", "reasoning_tokens", "tokens_evaluated",
                               "wall_s", "cost_usd", "invocations", "cached_tokens", "cache_write_tokens")


def _usage(model: str, figures: Mapping[str, Any]) -> Usage:
    return Usage(model, **{k: figures.get(k) for k in USAGE_KEYS}, billed=figures.get("billed") or None)


def usage_of(models: Sequence[str], runs: Mapping[tuple[str, str], RunData],
             suite: Mapping[str, Any] | None) -> tuple[Usage, ...]:
    """suite.json's cumulative figures per model and for the whole suite; for run folders, each model's runs
    summed (results.json `cumulative` where written: every invocation; else this invocation's counts)."""
    if suite is not None:
        by_model = suite.get("by_model") or {}
        out = [_usage(m, by_model[m]) for m in models if isinstance(by_model.get(m), Mapping)]
        if isinstance(suite.get("cumulative"), Mapping):
            out.append(_usage("all", suite["cumulative"]))
        return tuple(out)
    out = []
    for model in models:
        total: dict[str, Any] = {}
        for (_, m), run in runs.items():
            if m != model:
                continue
            figures = dict(run.results.get("cumulative") or {})
            if not figures:
                figures = {**run.counts, "wall_s": (run.results.get("timing") or {}).get("wall_s"), "invocations": 1}
            for key in USAGE_KEYS:
                if isinstance(figures.get(key), (int, float)):
                    total[key] = total.get(key, 0) + figures[key]
            merge_billed(total.setdefault("billed", {}), figures.get("billed") or {})
        out.append(_usage(model, total))
    return tuple(out)
