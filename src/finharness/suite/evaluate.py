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

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..api import Value, make_spending, run_versions
from ..core.model import PromptBudget
from ..core.runner import RunOptions
from ..core.spending import Price, Spending, parse_price
from ..data.errors import DataError
from .run import PreparedRow, check_suite_data, prepare_rows, run_suite
from .spec import Suite, load_suite


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
    priced: dict[str, Price] = dict(spec.prices)
    if isinstance(prices, Mapping):
        priced.update({k: v if isinstance(v, Price) else parse_price(f"{k}={v}")[1] for k, v in prices.items()})
    else:
        priced.update(parse_price(text) for text in prices or ())
    spending = make_spending(priced, max_cost, budget_tokens)
    options = RunOptions(data_dir=root, concurrency=concurrency, budget=PromptBudget(), versions=run_versions(),
                         spending=spending, batch=spec.batch if batch is None else batch)
    return PreparedSuite(spec, rows, root, options, spending)


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
    from .data_check import pull_all, pull_command, report_lines
    from .scorecard import build_scorecard
    from .scorecard_views import write_scorecard
    from .spec import SUITES_DIR

    prepared = prepare_suite(suite, data_dir=data_dir, sandbox=sandbox, contamination=contamination, prices=prices,
                             max_cost=max_cost, budget_tokens=budget_tokens, concurrency=concurrency, batch=batch)
    spec, rows = prepared.spec, prepared.rows
    models = [models] if isinstance(models, str) else list(dict.fromkeys(models))
    check = check_suite_data(rows, prepared.root, judged=judge is not None)
    if pull and check.of("missing"):
        failures = pull_all([n.dataset for n in check.of("missing")], prepared.root, progress=lambda line: None)
        if failures:
            raise DataError(f"{len(failures)} dataset(s) could not be pulled: " + "; ".join(failures))
        rows = prepare_rows(spec, prepared.root, sandbox)
        check = check_suite_data(rows, prepared.root, judged=judge is not None)
    blocked = check.blocked_rows()
    if blocked and not skip_missing:
        name = spec.name if spec.path.parent == SUITES_DIR else str(spec.path)
        lines = report_lines(check, pull=pull_command(check, name, Path(data_dir) if data_dir else None),
                             or_else="   (or pass pull=True)", skip_hint=False)
        raise DataError(f"the data of {len(blocked)} row(s) is not here; nothing was run:\n" + "\n".join(lines))
    left_out = {row: f"skipped (skip_missing): {why}" for row, why in blocked.items()}
    out_dir = Path(out) if out is not None else Path("runs") / f"suite-{spec.name}"
    outcome = run_suite(spec, rows, models=models, judge=judge, user=user, out=out_dir, options=prepared.options,
                        skipped={m: left_out for m in models})
    if outcome.bugs:
        raise outcome.bugs[0]
    built = build_scorecard(out_dir)
    files = tuple(write_scorecard(built, out_dir))
    card = json.loads((out_dir / "scorecard.json").read_text(encoding="utf-8"))
    return SuiteEvaluation(spec.name, out_dir, outcome.manifest, card, files, left_out, prepared.spending)
