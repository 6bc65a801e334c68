"""What a run folder holds when the run stopped before it wrote results.json (Ctrl-C, SIGTERM, kill -9, a crash).

`finharness run` writes OUT/partial.json when it is interrupted (how it stopped, how far each task got, the command
that resumes); a kill -9 leaves only the run store. Either way the store holds every finished sample under its run
key, and that is what `finharness report OUT` shows instead of failing: per run in the store, its task and model,
the samples finished and stored, the calls made, and how to go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..data.errors import DataError
from ..data.io import read_json

PARTIAL_FILE = "partial.json"
"""What an interrupted `finharness run` leaves in OUT (cli.write_partial)."""


@dataclass(frozen=True)
class StoredRun:
    """One run key the store holds."""

    task: str
    model: str
    finished: int
    """Samples finished and stored (draws counted one by one)."""
    total: int | None = None
    """Samples the run selects, where partial.json says (None: unknown from the store alone)."""
    calls: int = 0
    """Calls made over every invocation of the run."""
    invocations: int = 0


@dataclass(frozen=True)
class StoppedRun:
    """A run folder without results.json."""

    folder: Path
    status: str
    """'interrupted', 'terminated' (partial.json), or 'stopped' (only a store: a kill -9 or a crash)."""
    runs: tuple[StoredRun, ...] = ()
    resume: str | None = None
    store: Path | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _model_label(identity: Any) -> str:
    if isinstance(identity, Mapping):
        for key in ("spec", "model", "name", "path", "file"):
            if identity.get(key):
                return str(identity[key])
        return str(identity.get("backend") or "?")
    return str(identity or "?")


def stopped_run(folder: str | Path) -> StoppedRun | None:
    """The stopped run in `folder` (partial.json and/or its store), or None when the folder has neither."""
    folder = Path(folder)
    partial_path = folder / PARTIAL_FILE
    partial: Mapping[str, Any] = {}
    if partial_path.is_file():
        data = read_json(partial_path)
        if not isinstance(data, dict):
            raise DataError("expected a JSON object (what `finharness run` writes when it is stopped)",
                            path=partial_path)
        partial = data
    store = folder / "store.sqlite"
    if partial.get("store") and not store.is_file():  # a run given --store elsewhere
        store = Path(partial["store"])
    if not partial and not store.is_file():
        return None
    totals = {str(name): task.get("samples_total") for name, task in (partial.get("tasks") or {}).items()
              if isinstance(task, Mapping)}
    runs: list[StoredRun] = []
    notes: list[str] = []
    if store.is_file():
        from ..core.store import RunStore

        with RunStore(store) as run_store:
            for key, config in run_store.run_configs().items():
                task = str(config.get("task") or "?")
                model = _model_label((config.get("models") or {}).get("model"))
                cumulative = run_store.cumulative(key)
                runs.append(StoredRun(task, model, len(run_store.get_samples(key)), totals.get(task),
                                      int(cumulative.get("calls") or 0), int(cumulative.get("invocations") or 0)))
    else:
        notes.append(f"the run store {store} is not there: nothing of the run can be read")
    return StoppedRun(folder, str(partial.get("status") or "stopped"), tuple(runs), partial.get("resume"),
                      store if store.is_file() else None, tuple(notes))


def stopped_lines(run: StoppedRun) -> list[str]:
    """The stopped run for the terminal: what it holds and how to go on."""
    how = {"interrupted": "interrupted (Ctrl-C)", "terminated": "terminated (SIGTERM)"}.get(
        run.status, "stopped before its end (a kill, or a crash)")
    lines = [f"{run.folder}: no results.json: the run was {how}; what it finished is in its store"]
    for r in run.runs:
        of = f" of {r.total}" if r.total is not None else ""
        lines.append(f"  {r.task} on {r.model}: {r.finished}{of} samples finished and stored; {r.calls} calls made "
                     f"over {r.invocations} invocation(s)")
    if run.store is not None and not run.runs:
        lines.append(f"  the store {run.store} holds no run yet")
    lines += [f"  note: {n}" for n in run.notes]
    lines.append(f"  resume with: {run.resume}" if run.resume else
                 "  resume: run the same command again (every stored call and sample is reused)")
    return lines


def stopped_json(run: StoppedRun) -> dict[str, Any]:
    return {"folder": str(run.folder), "status": run.status, "store": None if run.store is None else str(run.store),
            "resume": run.resume, "notes": list(run.notes),
            "runs": [{"task": r.task, "model": r.model, "samples_finished": r.finished, "samples_total": r.total,
                      "calls": r.calls, "invocations": r.invocations} for r in run.runs]}


__all__ = ["PARTIAL_FILE", "StoppedRun", "StoredRun", "stopped_json", "stopped_lines", "stopped_run"]
