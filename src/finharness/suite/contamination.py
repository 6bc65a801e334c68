"""Membership evidence in a suite and on its scorecard (docs/contamination.md).

`probe_rows` runs after a model's rows when the suite file says `contamination = true`: each row's items (the
same selection the row ran) are probed through the model (and its reference model, contamination.run.REFERENCES)
on the suite's store and ROW/contamination.json is written beside results.json. `contamination_cells` reads those
files back for the scorecard, one ContaminationCell per row and model; `CONTAMINATION_HEADERS` and
`contamination_text` are the section every view prints.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..contamination.run import probe_run_folder, read_record, reference_for
from ..report.runs import RunData, load_run


@contextmanager
def reference_backends(open_ones: Mapping[str, Any]) -> Iterator[Callable[[str], Any]]:
    """`reference_of(spec)`: the backend of a probed model's reference model (contamination.run.REFERENCES; None
    where it has none): the suite's own where the suite runs that model too (`open_ones`, by spec), else made once
    here and closed when the block ends, so no second engine of one model is loaded."""
    from ..backends import from_spec

    made: dict[str, Any] = {}

    def reference_of(spec: str) -> Any:
        wanted = reference_for(spec)
        if wanted is None:
            return None
        if wanted in open_ones:
            return open_ones[wanted]
        if wanted not in made:
            made[wanted] = from_spec(wanted)
        return made[wanted]

    try:
        yield reference_of
    finally:
        for backend in made.values():
            close = getattr(backend, "close", None)
            if close is not None:
                close()


def probe_rows(rows: Sequence[Any], outcomes: Sequence[Any], model: str, backends: Mapping[str, Any],
               store_path: Path, options: Any, seed: int) -> None:
    """Probe every finished row of `model` (rows and their pool outcomes in the same order; `backends`: the
    suite's, by spec). Each row's probes get handles of their own, on the suite's spending: their calls count
    against its budget (a refused call leaves its probes unscored, said in the item's errors) and what they spent
    lands in the row's contamination.json, which the suite's usage adds to the model's (build_manifest)."""
    from .. import open_model
    from ..core.runner import select_samples

    backend = backends[model]
    with reference_backends(backends) as reference_of:
        reference_backend = reference_of(backend.spec)
        for row, outcome in zip(rows, outcomes):
            if outcome.result is None:
                continue
            handle = open_model(backend, store_path, role="probe", concurrency=options.concurrency,
                                spending=options.spending)
            reference = None if reference_backend is None else open_model(
                reference_backend, store_path, role="reference", spending=options.spending)
            task = row.make()
            try:
                samples = select_samples(task, replace(options, limit=row.spec.limit, subset=row.spec.sample,
                                                       seed=seed))
                per_sample = load_run(outcome.out_dir).per_sample()
                probe_run_folder(task, samples, handle, outcome.out_dir, reference=reference, per_sample=per_sample)
            finally:
                task.close()


def plan_probes(rows: Sequence[Any], cells: Sequence[Any], backends: Mapping[str, Any], store: Any,
                dry: Any) -> None:
    """A dry run's share of the probes (`contamination = true`): each planned row's samples probed through planned
    handles (core/plan.PlannedModel: nothing is called), so their calls and tokens are tallied in the row's plan
    under the roles 'probe' and 'reference' and priced with the rest."""
    import asyncio

    from ..contamination.run import probe_samples
    from ..core.model import RunCounters
    from ..core.plan import PlannedModel

    by_id = {row.spec.id: row for row in rows}
    with reference_backends(backends) as reference_of:
        for cell in cells:
            if cell.plan is None or cell.row not in by_id:
                continue
            backend = backends[cell.model]
            handle = PlannedModel(backend, store, RunCounters(), plan=cell.plan, dry=dry, role="probe")
            reference_backend = reference_of(backend.spec)
            reference = None if reference_backend is None else PlannedModel(
                reference_backend, store, RunCounters(), plan=cell.plan, dry=dry, role="reference")
            task = by_id[cell.row].make()
            try:
                asyncio.run(probe_samples(task, cell.plan.samples, handle, reference=reference))
            finally:
                task.close()


@dataclass(frozen=True)
class ContaminationCell:
    """One row and model of the scorecard's contamination section (from ROW/contamination.json)."""

    row: str
    model: str
    probe: str | None
    """The validated probe used (None: none separates on this model)."""

    status: str
    """'separates', 'no evidence either way' or 'not validated'."""

    n_items: int
    above: int = 0
    share: tuple[float, float, float] | None = None
    """(share of items above the threshold, its 95% interval)."""

    fpr: float | None = None
    """Share of unseen text above the threshold, as validated."""

    auc: tuple[float, float, float] | None = None
    """(validated AUC, its 95% interval)."""

    seen: tuple[float, int] | None = None
    """(score on the likely-seen items, their number)."""

    unseen: tuple[float, int] | None = None
    diff: tuple[float, float, float] | None = None
    """(seen − unseen, its 95% interval)."""

    probes_s: float | None = None
    """Wall time of the probes (seconds)."""

    fresh: str | None = None
    """Items dated after the model's release against the older ones, as text (impact.date_split), or None."""


def _triple(value: Any, ci: Any) -> tuple[float, float, float] | None:
    if value is None or not ci or ci[0] is None or ci[1] is None:
        return None
    return (float(value), float(ci[0]), float(ci[1]))


def cell_of(row: str, model: str, record: Mapping[str, Any]) -> ContaminationCell:
    impact = record.get("impact") or {}
    share = impact.get("share") or {}
    diff = impact.get("difference") or {}
    seen, unseen = impact.get("seen") or {}, impact.get("unseen") or {}
    return ContaminationCell(
        row, model, impact.get("probe"), str(impact.get("status") or "?"), int(impact.get("n_items") or 0),
        int(impact.get("above") or 0), _triple(share.get("value"), share.get("ci95")), impact.get("fpr"),
        _triple(impact.get("auc"), impact.get("auc_ci95")),
        (float(seen["value"]), int(seen["n"])) if seen.get("value") is not None else None,
        (float(unseen["value"]), int(unseen["n"])) if unseen.get("value") is not None else None,
        _triple(diff.get("diff"), diff.get("ci95")), (record.get("cost") or {}).get("wall_s"),
        fresh_text(impact.get("fresh")))


def fresh_text(fresh: Mapping[str, Any] | None) -> str | None:
    """'fresh (from DAY) X% (n a) vs older Y% (n b): Δ D [lo, hi]', or how many items each side has."""
    if not fresh:
        return None
    if not fresh.get("difference"):
        return f"dated items: {fresh.get('fresh_n', 0)} from {fresh['cutoff']}, {fresh.get('older_n', 0)} before"
    d = fresh["difference"]
    return (f"fresh (from {fresh['cutoff']}) {_pct(fresh['fresh']['value'])} (n {fresh['fresh_n']}) vs older "
            f"{_pct(fresh['older']['value'])} (n {fresh['older_n']}): Δ {_pct(d['diff'])} [{_pct(d['ci95'][0])}, "
            f"{_pct(d['ci95'][1])}]")


def contamination_cells(rows: Sequence[Any], models: Sequence[str], runs: Mapping[tuple[str, str], RunData]
                        ) -> tuple[ContaminationCell, ...]:
    """A cell per row and model whose run folder holds contamination.json, in row order."""
    out = []
    for row in rows:
        for model in models:
            run = runs.get((row.id, model))
            record = read_record(run.path) if run is not None else None
            if record is not None:
                out.append(cell_of(row.id, model, record))
    return tuple(out)


CONTAMINATION_HEADERS = ("row", "model", "probe (validated AUC)", "likely seen", "score seen", "score unseen",
                         "seen − unseen [95% CI]")


def _pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{100 * value:.{digits}f}%"


def contamination_text(card: Any) -> list[list[str]]:
    """The section's rows as text: probe, share above its threshold (beside the unseen text's), the scores."""
    out = []
    for c in card.contamination:
        row = card.row(c.row)
        label = row.label + (f" · {row.run_label}" if row.run_label else "")
        if c.probe is None:
            out.append([label, c.model, c.status, f"— ({c.n_items} items probed)", "—", "—", c.fresh or "—"])
            continue
        probe = c.probe + (f" ({c.auc[0]:.2f} [{c.auc[1]:.2f}, {c.auc[2]:.2f}])" if c.auc else "")
        share = (f"{c.above}/{c.n_items} = {_pct(c.share[0])} [{_pct(c.share[1])}, {_pct(c.share[2])}]; unseen text "
                 f"{_pct(c.fpr, 0)}" if c.share else "—")
        seen = f"{_pct(c.seen[0])} (n {c.seen[1]})" if c.seen else "—"
        unseen = f"{_pct(c.unseen[0])} (n {c.unseen[1]})" if c.unseen else "—"
        diff = (f"{'+' if c.diff[0] > 0 else ''}{_pct(c.diff[0])} [{_pct(c.diff[1])}, {_pct(c.diff[2])}]"
                if c.diff else "—")
        out.append([label, c.model, probe, share, seen, unseen, diff + (f"\n{c.fresh}" if c.fresh else "")])
    return out


CONTAMINATION_NOTE = ("Membership evidence per item (docs/contamination.md): 'likely seen' counts the items above the "
                      "threshold of the probe validated on this model (AUC on pre- vs post-release filings); text the "
                      "model never saw lands above it too, at the 'unseen text' rate shown, so only a share well "
                      "above that rate is evidence. 'no evidence either way' means no probe separates on this model: "
                      "it is not evidence that the items are unseen. Seen and unseen items are different items: "
                      "their difference is not the effect of having seen them.")
