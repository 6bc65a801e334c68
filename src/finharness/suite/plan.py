"""The plan before the money: what a run or a suite would call, spend and be able to tell apart, without a call.

Each task (a suite: each row for each model, then the benchmarks' steps after their rows (pairwise judging of the planned dialogues)) is planned by
core/plan.py on one DryRun and the run store the real command would use (read only; a store that does not exist
yet is not made). For each task and role: the items (and those already stored), the calls to make (and those
stored), prompt tokens (the model's tokenizer, or the estimate rule), completion tokens (expected and ceiling),
and with prices their cost. For each task: the smallest difference between two models a paired test on its items
detects at 80% power (stats/power.py), from the spread of the stored scores of the same task and model where
there are enough, else a stated default.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..benchmarks.declaration import hooks_of
from ..core.backend import Backend
from ..core.model import ESTIMATE_RULE
from ..core.plan import DryRun, RoleTally, TaskPlan, plan_tasks
from ..core.runner import RunOptions
from ..core.spending import Price, model_name, price_for
from ..core.store import RunStore
from ..core.task import Task
from ..stats.power import (
    ALPHA,
    DEFAULT_CORRELATION,
    POWER,
    PowerPlan,
    binary_difference_sd,
    difference_sd_from_one,
    effective_n,
    plan_comparison,
)
from ..util import output_console

ROLE_ORDER = {"model": 0, "user": 1, "judge": 2}

MIN_STORED_SCORES = 10
"""Stored scores needed before their spread replaces the default (fewer say little about it)."""

UPPER_BOUND = ("stand-in replies of max_tokens tokens that read as no answer: every simulated dialogue runs to "
               "its round limit, a judge takes all its attempts (1 where its first verdict reads) and a "
               "self-selection falls back to the first candidate, and later turns carry max_tokens-long replies: "
               "calls and prompt tokens are upper bounds")
"""What the planned path is where a backend has no free reply of its own."""


@dataclass
class PlannedCell:
    """One task of the plan (a suite: one row for one model)."""

    row: str
    """The task's name or the suite row's id."""
    model: str
    """The spec of the model under test."""
    task: str
    """The task's registry name (its benchmark's hooks decide how its differences are read)."""
    plan: TaskPlan | None = None
    """What it would do (None: it cannot run; see `error`)."""
    error: str | None = None
    """Why it cannot run (missing data, a role not given)."""
    power: PowerPlan | None = None
    """The smallest difference its items detect (None: fewer than 2 items)."""


@dataclass
class Plan:
    """A dry run's figures (print_plan / plan_json)."""

    title: str
    """What was planned ('suite standard', 'demo')."""
    cells: list[PlannedCell]
    """Each task (suite: row x model), in run order."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """USD per million tokens by spec or model name (core/spending.py)."""
    judging: TaskPlan | None = None
    """A suite's pairwise judging of the planned dialogues (every model against the reference and each other)."""
    store: str | None = None
    """The run store read (None: none exists yet: nothing is stored)."""
    notes: list[str] = field(default_factory=list)

    def tallies(self) -> list[tuple[str, str, RoleTally]]:
        """(row, model, tally) of every role of every task, then the judging's."""
        out = [(c.row, c.model, t) for c in self.cells if c.plan is not None for t in c.plan.roles.values()]
        if self.judging is not None:
            out += [(self.judging.name, "", t) for t in self.judging.roles.values()]
        return out

    def cost(self, tally: RoleTally) -> tuple[float, float] | None:
        """(expected, ceiling) USD of a tally in the run's mode (a batched role at the batch share), nothing cached
        (None: its model has no price)."""
        price = price_for(self.prices, tally.spec)
        if price is None:
            return None
        return (price.cost(tally.prompt_tokens, tally.completion_expected, batch=tally.batched),
                price.cost(tally.prompt_tokens, tally.completion_ceiling, batch=tally.batched))

    def mode_costs(self, tally: RoleTally) -> dict[str, float] | None:
        """Expected USD of a tally three ways (None: unpriced): `live` (list price, nothing cached), `live_cached`
        (live, with the caching estimate) and `batch_cached` (every call in a batch, with the caching estimate);
        the last two are estimates."""
        price = price_for(self.prices, tally.spec)
        if price is None:
            return None
        prompt, completion = tally.prompt_tokens, tally.completion_expected
        cache = {"cached_tokens": tally.cached_estimate, "cache_write_tokens": tally.written_estimate}
        return {"live": price.cost(prompt, completion), "live_cached": price.cost(prompt, completion, **cache),
                "batch_cached": price.cost(prompt, completion, **cache, batch=True)}


def _weight_ratio(task: str, samples: Sequence[Any]) -> float:
    """effective n / n of the items under their weights in the headline (SuiteHooks.item_weights; 1 when equal)."""
    weights = hooks_of(task).item_weights(samples) if samples else None
    return 1.0 if not weights else effective_n(list(weights)) / len(weights)


def detectable(plan: TaskPlan, task: str) -> PowerPlan | None:
    """The smallest difference between two models that a paired test on the plan's items detects (80% power,
    two-sided 5%): the benchmark's own comparison where it has one (a pairwise-judged one's win share against ½, SuiteHooks), every
    other task's on its headline."""
    if plan.items < 2:
        return None
    own = hooks_of(task).comparison(plan.items)
    if own is not None:
        return own
    ratio = _weight_ratio(task, plan.samples)
    scores = plan.stored_scores
    if len(scores) >= MIN_STORED_SCORES and max(scores) > min(scores):
        sd = difference_sd_from_one(scores, DEFAULT_CORRELATION)
        source = f"stored: {len(scores)} scores of this task and model, correlation {DEFAULT_CORRELATION:g} assumed"
    else:
        sd = binary_difference_sd(0.5, DEFAULT_CORRELATION)
        source = (f"default: 0/1 scores at p = 0.5, correlation {DEFAULT_CORRELATION:g}"
                  + (f" (only {len(scores)} stored)" if scores else ""))
    return plan_comparison(sd, n=plan.items, weight_ratio=ratio, source=source)


def _cells_of(names: Sequence[tuple[str, str, str]], results: Sequence[TaskPlan | Exception]) -> list[PlannedCell]:
    cells = []
    for (row, model, task), result in zip(names, results):
        if isinstance(result, Exception):
            cells.append(PlannedCell(row, model, task, error=f"{type(result).__name__}: {result}"))
        else:
            cells.append(PlannedCell(row, model, task, result, power=detectable(result, task)))
    return cells


def open_existing_store(path: Path) -> RunStore | None:
    """The run store a run would use, when it exists (a dry run makes none)."""
    return RunStore(path) if path.exists() else None


def plan_run(names: Sequence[str], refs: Sequence[Any], tasks: Sequence[Task], backends: Mapping[str, Backend],
             store_path: Path, options: RunOptions, prices: Mapping[str, Price]) -> Plan:
    """`finharness run TASK... --dry-run`: the tasks as one pool on `backends` (by role) and the run's store."""
    store = open_existing_store(store_path)
    try:
        jobs = [(name, task, backends, options) for name, task in zip(names, tasks)]
        results = plan_tasks(jobs, store)
    finally:
        if store is not None:
            store.close()
    model = backends["model"].spec
    plan = Plan(" + ".join(names), _cells_of([(n, model, r.name) for n, r in zip(names, refs)], results), prices,
                store=str(store_path) if store is not None else None)
    return _with_notes(plan, backends.values())


def plan_suite(suite: Any, rows: Sequence[Any], *, models: Sequence[str], judge: str | None, user: str | None,
               out: Path, options: RunOptions, prices: Mapping[str, Price]) -> Plan:
    """`finharness suite ... --dry-run`: every row for every model as run_suite would run it, then the steps after the rows."""
    from ..backends import from_spec
    from ..backends.batch import batch_wanted
    from .run import check_roles, does_not_fit

    check_roles(rows, judge, user)
    specs = list(dict.fromkeys([*models, *(s for s in (judge, user) if s)]))
    backends = {spec: from_spec(spec, batch=batch_wanted(options.batch, spec)) for spec in specs}
    store_path = out / "store.sqlite"
    store = open_existing_store(store_path)
    dry = DryRun()
    names, results = [], []
    try:
        for model in models:
            roles = {"model": backends[model], **({"judge": backends[judge]} if judge else {}),
                     **({"user": backends[user]} if user else {})}
            fitting = [row for row in rows if does_not_fit(row, backends[model]) is None]
            jobs = [(row.spec.id, row.make(), roles, replace(options, limit=row.spec.limit, subset=row.spec.sample,
                                                             seed=suite.seed)) for row in fitting]
            planned = iter(plan_tasks(jobs, store, dry))
            for row in rows:  # a row the model's window cannot hold is a cell that says so, priced at nothing
                why = does_not_fit(row, backends[model])
                results.append(ValueError(why) if why else next(planned))
                names.append((row.spec.id, model, row.ref.name))
        plan = Plan(f"suite {suite.name}", _cells_of(names, results), prices,
                    store=str(store_path) if store is not None else None)
        if judge:  # the benchmarks' steps after their rows (pairwise judging), on every model's planned predictions
            plan.judging = _plan_after_rows(rows, plan, models, backends[judge], store, dry, options.data_dir)
        if suite.contamination:  # the membership probes after each model's rows (suite/contamination.py)
            from .contamination import plan_probes

            plan_probes(rows, plan.cells, backends, store, dry)
    finally:
        if store is not None:
            store.close()
        for backend in backends.values():
            close = getattr(backend, "close", None)
            if close is not None:
                close()
    return _with_notes(plan, backends.values())


def _plan_after_rows(rows: Sequence[Any], plan: Plan, models: Sequence[str], judge: Backend, store: RunStore | None,
                     dry: DryRun, data_root: Path | None) -> TaskPlan | None:
    """The plan of the first step after the rows that has one (SuiteHooks.plan_after_rows), once every model's
    predictions of its row are planned."""
    for row in rows:
        hooks = hooks_of(row.ref.name)
        if not hooks.judged_by_suite:
            continue
        predictions = {c.model: c.plan.predictions for c in plan.cells if c.row == row.spec.id and c.plan is not None}
        if len(predictions) == len(models):
            planned = asyncio.run(hooks.plan_after_rows(row, predictions, judge=judge, store=store, dry=dry,
                                                        data_root=data_root))
            if planned is not None:
                return planned
    return None


def _with_notes(plan: Plan, backends: Any) -> Plan:
    tallies = plan.tallies()
    estimated = sorted({t.spec for _, _, t in tallies if t.estimated_calls})
    if estimated:
        plan.notes.append(f"prompt tokens of {', '.join(estimated)} are estimated (no tokenizer): {ESTIMATE_RULE}")
    counted = sorted({t.spec for _, _, t in tallies if t.calls and not t.estimated_calls and t.exact_calls < t.calls})
    if counted:
        plan.notes.append(f"prompt tokens of {', '.join(counted)} are counted with the model's own tokenizer")
    for spec in sorted({t.spec for _, _, t in tallies if t.unknown_thinking_calls}):
        calls = [t for _, _, t in tallies if t.spec == spec and t.unknown_thinking_calls]
        largest = max(t.largest_if_thinking for t in calls)
        total = sum(t.ceiling_if_thinking for t in calls)
        plan.notes.append(
            f"{spec}: its spec does not say whether the model thinks, and a dry run cannot ask: the ceilings assume it "
            f"does not. A hosted reasoning model refuses max_tokens at the first call and is then sent max_tokens plus "
            f"a thinking budget, up to {largest:,} completion tokens a call ({total:,} in all: the ceilings 'if it "
            "thinks'); state it in the spec (max_completion_tokens=1, thinking_budget=N) to plan it as it will run")
    inexact = sorted({t.spec for _, _, t in tallies if t.exact_calls < t.calls})
    exact = sorted({t.spec for _, _, t in tallies if t.calls and t.exact_calls == t.calls})
    if exact:
        plan.notes.append(f"{', '.join(exact)}: planned on the backend's own replies: calls and tokens are exactly a "
                          "run's")
    if inexact:
        plan.notes.append(f"{', '.join(inexact)}: {UPPER_BOUND}")
    for cell in plan.cells:
        for note in dict.fromkeys(cell.plan.notes if cell.plan is not None else ()):
            plan.notes.append(f"{cell.row} on {cell.model}: {note}")
        if cell.plan is not None and cell.plan.failed:
            first = next(iter(cell.plan.failed.values()))
            plan.notes.append(f"{cell.row} on {cell.model}: {len(cell.plan.failed)} item(s) would fail, e.g. {first}")
    return plan


# --- views ----------------------------------------------------------------------------------------------------

def _totals(plan: Plan) -> dict[tuple[str, str], dict[str, Any]]:
    """(role, spec) -> summed figures, and ('total', '') for everything."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for _, _, tally in sorted(plan.tallies(), key=lambda t: (ROLE_ORDER.get(t[2].role, len(ROLE_ORDER)), t[2].spec)):
        cost = plan.cost(tally)
        for key in ((tally.role, tally.spec), ("total", "")):
            sums = out.setdefault(key, {"calls": 0, "stored_calls": 0, "repeats": 0, "prompt_tokens": 0,
                                        "completion_expected": 0, "completion_ceiling": 0,
                                        "completion_ceiling_if_thinking": None, "cost_expected": None,
                                        "cost_ceiling": None, "prompt_estimated": False,
                                        "cached_tokens_estimate": 0, "cache_write_tokens_estimate": 0,
                                        "cost_live": None, "cost_live_cached": None, "cost_batch_cached": None})
            sums["prompt_estimated"] |= tally.estimated_calls > 0
            for name in ("calls", "stored_calls", "repeats", "prompt_tokens", "completion_expected",
                         "completion_ceiling"):
                sums[name] += getattr(tally, name)
            sums["cached_tokens_estimate"] += tally.cached_estimate
            sums["cache_write_tokens_estimate"] += tally.written_estimate
            for mode, usd in (plan.mode_costs(tally) or {}).items():
                sums[f"cost_{mode}"] = (sums[f"cost_{mode}"] or 0.0) + usd
            if tally.unknown_thinking_calls:
                sums["completion_ceiling_if_thinking"] = ((sums["completion_ceiling_if_thinking"] or 0)
                                                          + tally.ceiling_if_thinking - tally.completion_ceiling)
            if cost is not None:
                sums["cost_expected"] = (sums["cost_expected"] or 0.0) + cost[0]
                sums["cost_ceiling"] = (sums["cost_ceiling"] or 0.0) + cost[1]
    for sums in out.values():  # the extra a thinking model would add, on top of the ceiling
        if sums.get("completion_ceiling_if_thinking") is not None:
            sums["completion_ceiling_if_thinking"] += sums["completion_ceiling"]
    out[("total", "")] = out.pop(("total", ""), {})  # last
    return out


def plan_json(plan: Plan) -> dict[str, Any]:
    def tally_json(tally: RoleTally) -> dict[str, Any]:
        cost = plan.cost(tally)
        price = price_for(plan.prices, tally.spec)
        thinking = (price.cost(tally.prompt_tokens, tally.ceiling_if_thinking)
                    if price is not None and tally.unknown_thinking_calls else None)
        modes = plan.mode_costs(tally) or {}
        return {**tally.to_json(), "cost_expected": None if cost is None else cost[0],
                "cost_ceiling": None if cost is None else cost[1], "cost_ceiling_if_thinking": thinking,
                **{f"cost_{mode}": usd for mode, usd in modes.items()}}

    cells = []
    for c in plan.cells:
        entry: dict[str, Any] = {"row": c.row, "model": c.model, "task": c.task, "error": c.error}
        if c.plan is not None:
            entry.update(c.plan.to_json(), roles=[tally_json(t) for t in c.plan.roles.values()])
            entry.pop("name")
        entry["detectable"] = None if c.power is None else c.power.to_json()
        cells.append(entry)
    judging = None
    if plan.judging is not None:
        judging = {"items": plan.judging.items, "roles": [tally_json(t) for t in plan.judging.roles.values()]}
    totals = [{"role": role, "spec": spec, **sums} for (role, spec), sums in _totals(plan).items()]
    return {"dry_run": plan.title, "store": plan.store, "prices": {k: p.to_json() for k, p in plan.prices.items()},
            "tasks": cells, "judging": judging, "totals": totals, "notes": plan.notes,
            "power": {"alpha": ALPHA, "power": POWER}}


def _tokens(n: int) -> str:
    return f"{n:,}"


def _dollars(x: float) -> str:
    return f"${x:,.2f}" if x >= 1 or x == 0 else f"${x:.4f}"


def _usd(cost: tuple[float, float] | None) -> str:
    return "—" if cost is None else f"{_dollars(cost[0])} / {_dollars(cost[1])}"


def _calls(calls: int, stored: int, repeats: int) -> str:
    """`calls (stored)`, and the requests asked again (made once by the run, then found stored) apart from them."""
    return f"{calls:,} ({stored:,})" + (f" +{repeats:,} asked again" if repeats else "")


def _completion(expected: int, ceiling: int, if_thinking: int | None) -> str:
    """`expected / ceiling`, with the ceiling a model that turns out to think would take (`if it thinks`)."""
    text = f"{_tokens(expected)} / {_tokens(ceiling)}"
    return text if if_thinking is None else f"{text} ({_tokens(if_thinking)} if it thinks)"


def _prompt(tally: RoleTally) -> str:
    """Prompt tokens, marked `~` where estimated (no tokenizer)."""
    return ("" if tally.prompt_counted == "tokenizer" else "~") + _tokens(tally.prompt_tokens)


def _detectable(p: PowerPlan) -> str:
    """The detectable difference; one no score in [0, 1] can show (a win share past 1) says too few items."""
    if p.rating_points is None:
        return f"{p.detectable:.3f}" if p.detectable < 1 else f"none: too few items ({p.detectable:.2f} > 1)"
    if math.isinf(p.rating_points):
        return f"none: too few items (win share ½ + {p.detectable:.2f} > 1)"
    return f"{p.detectable:.3f} win share ({p.rating_points:.0f} Elo points)"


def print_plan(plan: Plan, file: Any = None) -> None:
    """The plan as tables: per task and role, totals per role, and the detectable differences."""
    from rich import box
    from rich.table import Table

    console = output_console(file=file, highlight=False)
    several = len({c.model for c in plan.cells}) > 1
    specs = sorted({t.spec for _, _, t in plan.tallies()} | {c.model for c in plan.cells})
    short = {spec: model_name(spec) for spec in specs}
    if len(set(short.values())) < len(specs):  # two specs of one model name (two servers): the specs themselves
        short = {spec: spec for spec in specs}
    if any(short[spec] != spec for spec in specs):
        console.print("models: " + "; ".join(f"{short[spec]} = {spec}" for spec in specs if short[spec] != spec),
                      soft_wrap=True)
    table = Table(title=f"dry run: {plan.title} — no model was called", box=box.SIMPLE_HEAD)
    for col in ("task", *(("model",) if several else ()), "role", "spec"):
        table.add_column(col, overflow="fold")
    for col in ("items (stored)", "calls (stored)", "prompt tokens", "completion: expected / ceiling",
                "cost: expected / ceiling"):
        table.add_column(col, justify="right")

    def add(head: tuple[str, ...], items: str, tally: RoleTally) -> None:
        table.add_row(*head, tally.role, short[tally.spec], items, _calls(tally.calls, tally.stored_calls, tally.repeats),
                      _prompt(tally), _completion(tally.completion_expected, tally.completion_ceiling,
                                                  tally.ceiling_if_thinking if tally.unknown_thinking_calls else None),
                      _usd(plan.cost(tally)))

    for cell in plan.cells:
        head = (cell.row, *((short[cell.model],) if several else ()))
        if cell.plan is None:
            table.add_row(*head, "—", "—", "error", "", "", "", "")
            continue
        items = (f"{cell.plan.items}" + (f" × {cell.plan.draws}" if cell.plan.draws > 1 else "")
                 + f" ({cell.plan.stored_items})")
        for tally in cell.plan.roles.values():
            add(head, items, tally)
        if not cell.plan.roles:
            table.add_row(*head, "—", "—", items, "0", "0", "0", "—")
    if plan.judging is not None:
        for tally in plan.judging.roles.values():
            add((plan.judging.name, *(("",) if several else ())), f"{plan.judging.items} matches", tally)
    console.print(table)
    totals = Table(title="totals", box=box.SIMPLE_HEAD)
    figures = _totals(plan)
    priced = any(sums["cost_live"] is not None for sums in figures.values())
    for col in ("role", "spec", "calls (stored)", "prompt tokens", "completion: expected / ceiling",
                "cost: expected / ceiling", *(("expected: live / + caching (est.) / batch + caching (est.)",)
                                              if priced else ())):
        totals.add_column(col, overflow="fold")
    for (role, spec), sums in figures.items():
        cost = None if sums["cost_expected"] is None else (sums["cost_expected"], sums["cost_ceiling"])
        modes = ("—" if sums["cost_live"] is None else " / ".join(
            _dollars(sums[f"cost_{m}"]) for m in ("live", "live_cached", "batch_cached")),) if priced else ()
        totals.add_row(role, short.get(spec, spec), _calls(sums["calls"], sums["stored_calls"], sums["repeats"]),
                       ("~" if sums["prompt_estimated"] else "") + _tokens(sums["prompt_tokens"]),
                       _completion(sums["completion_expected"], sums["completion_ceiling"],
                                   sums["completion_ceiling_if_thinking"]), _usd(cost), *modes)
    console.print(totals)
    whole = figures.get(("total", ""), {})
    if whole.get("cost_live"):
        console.print(f"caching (estimate): {_tokens(whole['cached_tokens_estimate'])} of "
                      f"{_tokens(whole['prompt_tokens'])} prompt tokens read from the provider's cache, "
                      f"{_tokens(whole['cache_write_tokens_estimate'])} written; batch + caching "
                      f"{whole['cost_batch_cached'] / whole['cost_live']:.0%} of the live list price (the plan's calls "
                      "replayed in order through each provider's cache rules; a real cache forgets after minutes "
                      "and a batch's requests may miss each other's entries)", soft_wrap=True)
        if any(t.batched for _, _, t in plan.tallies()):
            console.print("the cost column is the run's mode: its batched roles at the batch price", soft_wrap=True)
    power = Table(title=f"smallest difference between two models a paired test detects ({POWER:.0%} power, "
                        f"two-sided alpha {ALPHA:g})", box=box.SIMPLE_HEAD)
    for col in ("task", *(("model",) if several else ()), "n", "sd of the difference", "detectable", "from"):
        power.add_column(col, overflow="fold")
    for cell in plan.cells:
        if cell.power is None:
            continue
        p = cell.power
        n = f"{p.n}" + (f" (effective {p.effective_n:.0f})" if abs(p.effective_n - p.n) > 0.5 else "")
        power.add_row(cell.row, *((short[cell.model],) if several else ()), n, f"{p.sd:.3f}", _detectable(p), p.source)
    console.print(power)
    if plan.store is None:
        console.print("nothing is stored yet (no run store at the run's path)")
    if any(t.repeats for _, _, t in plan.tallies()):
        console.print("asked again: a request the plan asks a second time (two rows or roles sending the same call); "
                      "the run makes it once and finds it stored after, so it is neither a call to make nor stored now")
    for cell in plan.cells:
        if cell.error:
            console.print(f"error: {cell.row} on {cell.model}: {cell.error}", soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}", soft_wrap=True)


__all__ = ["Plan", "PlannedCell", "detectable", "plan_json", "plan_run", "plan_suite", "print_plan"]
