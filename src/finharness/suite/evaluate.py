"""The Python API of a suite: `finharness.evaluate_suite(...)`, what `finharness suite` does, from a notebook or a CI
job, returning the scorecard as data.

    import finharness
    card = finharness.evaluate_suite("quick", models=["embedded"], judge="embedded", user="embedded",
                                     skip_missing=True, out="runs/quick")
    card.status                                  # 'complete' | 'incomplete' | 'budget' | ...
    card.value("demo", "embedded")               # Value(value=0.33, ci95=(0.10, 0.65), n=12)
    card.scorecard["rows"], card.files           # every row; scorecard.{json,md,csv,html}

`prepare_suite` is the part `finharness suite` shares with it: the suite file read, its rows resolved (fallbacks
decided on the data root), the spending and the run options; the command then checks the data with its own output
and runs `suite.run.run_suite` with its progress display, as `evaluate_suite` does without one. Problems are raised,
never printed: a bad suite or option is a ValueError naming it, data that is not there a DataError listing what is
missing and the one command that fetches it (or pass `pull=True`, or `skip_missing=True`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..api import Value, make_spending, run_versions
from ..core.model import PromptBudget
from ..core.runner import RunOptions
from ..core.spending import Spending
from ..data.errors import DataError
from .data_check import DataCheck, pull_all, pull_command, report_lines
from .run import PreparedRow, check_suite_data, prepare_rows, run_suite
from .spec import SUITES_DIR, Suite, load_suite


@dataclass(frozen=True)
class PreparedSuite:
    """A suite ready to run."""

    spec: Suite
    """The suite file as read (the bundled ones' rows from every benchmark's declaration)."""

    rows: list[PreparedRow]
    """Its rows, tasks resolved and options checked; a row whose official data is absent runs its fallback."""

    root: Path
    """The data root."""

    options: RunOptions
    """What every row runs with (the data root, concurrency, spending, batch, the software's versions)."""

    spending: Spending | None
    """The suite's tokens, cost and budget (None: nothing priced or limited)."""

    sandbox: str | None = None
    """The isolation given for the rows that run model-written code (None: each task's own default)."""

    @property
    def label(self) -> str:
        """How a command names the suite: a bundled one by name, a file of one's own by its path."""
        return self.spec.name if self.spec.path.parent == SUITES_DIR else str(self.spec.path)


def prepare_suite(suite: str | Path, *, data_dir: str | Path | None = None, sandbox: str | None = None,
                  contamination: bool | None = None, prices: Mapping[str, Any] | Sequence[str] | None = None,
                  max_cost: float | None = None, budget_tokens: int | None = None, concurrency: int | None = None,
                  batch: bool | None = None) -> PreparedSuite:
    """Read `suite` (quick | standard | full, or a suite file) and resolve its rows on the data root; `prices` (over
    the suite's [prices]) as MODEL=IN/OUT texts or Price values; `contamination` and `batch` override the file's."""
    from ..data.registry import resolve_data_dir

    spec = load_suite(str(suite))
    if contamination is not None:
        spec = replace(spec, contamination=contamination)
    root = resolve_data_dir(Path(data_dir) if data_dir is not None else None)
    rows = prepare_rows(spec, root, sandbox)
    spending = make_spending(prices, max_cost, budget_tokens, base=spec.prices)
    options = RunOptions(data_dir=root, concurrency=concurrency, budget=PromptBudget(), versions=run_versions(),
                         spending=spending, batch=spec.batch if batch is None else batch)
    return PreparedSuite(spec, rows, root, options, spending, sandbox)


@dataclass(frozen=True)
class DataReadiness:
    """What the suite's data check found, after pulling what was missing where asked to."""

    rows: list[PreparedRow]
    """The rows, their fallbacks decided again after a pull."""

    check: DataCheck
    """Every row's datasets and their state (suite/data_check.py)."""

    pull_failures: list[str]
    """The datasets that could not be pulled, one line each (nothing should run then)."""

    pull_command: str
    """The one command that fetches every dataset still missing."""


def check_suite_data_before_work(prepared: PreparedSuite, *, judged: bool, pull: bool = False,
                                 data_dir: str | Path | None = None,
                                 progress: Callable[[str], None] = lambda line: None) -> DataReadiness:
    """Every row's data checked before the first call; with `pull` what is missing is pulled first (one `progress`
    line per dataset) and the rows prepared again, since a pulled dataset may replace a row's fallback. What the
    caller does with what is still missing (stop, or go on without those rows) is its own."""
    rows = prepared.rows
    check = check_suite_data(rows, prepared.root, judged=judged)
    failures: list[str] = []
    if pull and check.of("missing"):
        failures = pull_all([n.dataset for n in check.of("missing")], prepared.root, progress=progress)
        if not failures:
            rows = prepare_rows(prepared.spec, prepared.root, prepared.sandbox)
            check = check_suite_data(rows, prepared.root, judged=judged)
    where = Path(data_dir) if data_dir is not None else None
    return DataReadiness(rows, check, failures, pull_command(check, prepared.label, where))


@dataclass(frozen=True)
class SuiteEvaluation:
    """What a suite gave: suite.json and the scorecard, as data."""

    name: str
    """The suite's name."""

    out_dir: Path
    """The suite folder: the store, a folder per model and row, suite.json and the scorecard files."""

    manifest: Mapping[str, Any]
    """suite.json as written (rows, errors, usage by model, status)."""

    scorecard: Mapping[str, Any]
    """scorecard.json as written: models, rows, cells (value, interval, n, rank per row and model), differences,
    ratings, usage, notes."""

    files: tuple[Path, ...]
    """The scorecard's files (json, md, csv, html)."""

    left_out: Mapping[str, str] = field(default_factory=dict)
    """Rows not run because their data is not here (skip_missing), with why."""

    spending: Spending | None = None
    """Tokens and cost spent, and why a budget stopped the suite."""

    @property
    def status(self) -> str:
        """'complete', 'incomplete' (a row failed for a model), 'budget', 'interrupted' or 'terminated'."""
        return str(self.manifest.get("status"))

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def value(self, row: str, model: str) -> Value:
        """The scorecard's cell of `row` (its id, as in the suite file) for `model` (its spec); KeyError naming what
        there is."""
        for cell in self.scorecard.get("cells") or ():
            if cell["row"] == row and cell["model"] == model:
                ci = cell.get("ci95")
                return Value(cell.get("value"), tuple(ci) if ci else None, int(cell.get("n") or 0), cell.get("warning"))
        rows = sorted({c["row"] for c in self.scorecard.get("cells") or ()})
        raise KeyError(f"no cell for row {row!r} and model {model!r}; rows: {', '.join(rows)}; models: "
                       f"{', '.join(self.scorecard.get('models') or ())}")


def evaluate_suite(suite: str | Path = "quick", models: str | Sequence[str] = "embedded", *, judge: str | None = None,
                   user: str | None = None, out: str | Path | None = None, data_dir: str | Path | None = None,
                   pull: bool = False, skip_missing: bool = False, sandbox: str | None = None,
                   contamination: bool | None = None, prices: Mapping[str, Any] | Sequence[str] | None = None,
                   max_cost: float | None = None, budget_tokens: int | None = None,
                   concurrency: int | None = None, batch: bool | None = None) -> SuiteEvaluation:
    """Run every row of `suite` for every model in `models` (specs), with the `judge` and simulated `user` the rows
    need, then write the scorecard; rerunning resumes from the suite's store (`out`, default runs/suite-NAME). The
    parameters are `finharness suite`'s options (docs/suite.md). Data is checked before the first call: what is
    missing is a DataError, unless `pull` fetches it first or `skip_missing` runs without those rows."""
    from .scorecard import build_scorecard
    from .scorecard_views import write_scorecard

    prepared = prepare_suite(suite, data_dir=data_dir, sandbox=sandbox, contamination=contamination, prices=prices,
                             max_cost=max_cost, budget_tokens=budget_tokens, concurrency=concurrency, batch=batch)
    models = [models] if isinstance(models, str) else list(dict.fromkeys(models))
    ready = check_suite_data_before_work(prepared, judged=judge is not None, pull=pull, data_dir=data_dir)
    if ready.pull_failures:
        raise DataError(f"{len(ready.pull_failures)} dataset(s) could not be pulled: " + "; ".join(ready.pull_failures))
    blocked = ready.check.blocked_rows()
    if blocked and not skip_missing:
        lines = report_lines(ready.check, pull=ready.pull_command, or_else="   (or pass pull=True)", skip_hint=False)
        raise DataError(f"the data of {len(blocked)} row(s) is not here; nothing was run:\n" + "\n".join(lines))
    left_out = {row: f"skipped (skip_missing): {why}" for row, why in blocked.items()}
    out_dir = Path(out) if out is not None else Path("runs") / f"suite-{prepared.spec.name}"
    outcome = run_suite(prepared.spec, ready.rows, models=models, judge=judge, user=user, out=out_dir,
                        options=prepared.options, skipped={m: left_out for m in models})
    if outcome.bugs:
        raise outcome.bugs[0]
    built = build_scorecard(out_dir)
    files = tuple(write_scorecard(built, out_dir))
    return SuiteEvaluation(prepared.spec.name, out_dir, outcome.manifest, built.to_json(), files, left_out,
                           prepared.spending)
