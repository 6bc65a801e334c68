"""Data before work: what every row of a suite (or every task of a run) reads, checked before the first call.

Each built-in task's datasets (the registry's names, docs/data.md's table) are known here from its options
(`needed_datasets`); each is looked up in the data root by the registry (`verify`, sizes only: fast), and each
row's questions are loaded with pulling off, which catches what the table does not say (a file the task reads and
the registry knows, named by its error's `finharness data pull NAME`). The result is one list:

- missing and pullable: `finharness data pull --suite NAME` (or `data pull A B ...`) fetches all of it, or the
  suite's `--pull` does before it runs;
- missing and never to be had from here: no public copy (an exam whose questions are not published) or files derived here from upstream
  data that only a mirror holds (`data pull NAME --from DIR`); `--skip-missing` runs the suite without those rows,
  and the scorecard says why each is missing;
- present but partial: said, not stopping (a sample that names files its repository lacks).

Nothing here writes: a dry run and a failed check leave the data root as they found it.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..core.task import DataNeeds
from ..data.errors import DataError

_PULL = re.compile(r"finharness data pull ([a-z0-9][a-z0-9-]*)")


def needs_of(task: Any) -> DataNeeds:
    """What a task with its options reads (its class's data_needs; none for an object that is no Task)."""
    declared = getattr(type(task), "data_needs", None)
    return declared(getattr(task, "settings", None)) if declared is not None else DataNeeds()


@contextlib.contextmanager
def no_pulls() -> Iterator[None]:
    """Pulling on first use off for the block (FINHARNESS_NO_PULL), as it was after: a check loads, never fetches."""
    from ..data.pull import NO_PULL_ENV

    before = os.environ.get(NO_PULL_ENV)
    os.environ[NO_PULL_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(NO_PULL_ENV, None)
        else:
            os.environ[NO_PULL_ENV] = before


@dataclass
class Need:
    """One dataset the rows read, and its state in the data root."""

    dataset: str
    rows: list[str] = field(default_factory=list)
    """The rows (or tasks) that read it."""
    pulled_by: list[str] = field(default_factory=list)
    """Of those, the rows whose tasks pull it themselves on first use (DataNeeds.pulled)."""
    status: str = "present"
    """'present', 'partial' (some files missing: said, not stopping), 'missing' (pullable), 'never' (no public copy,
    or files only a mirror holds), 'unknown' (a name the registry does not know)."""
    detail: str = ""


@dataclass
class DataCheck:
    """What the rows read and what the data root holds of it."""

    root: Path
    needs: dict[str, Need] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """Row -> a load error that names no dataset (a broken file): the row cannot run, and pulling will not help."""
    loaded: set[str] = field(default_factory=set)
    """Rows whose questions loaded (their missing data, if any, is read later: prompts, filings)."""

    def of(self, status: str) -> list[Need]:
        return [n for n in self.needs.values() if n.status == status]

    @property
    def ready(self) -> bool:
        return not self.of("missing") and not self.of("never") and not self.of("unknown") and not self.errors

    def blocked_rows(self) -> dict[str, str]:
        """Row -> why it cannot run (missing data, never to be had, a load error)."""
        out = dict(self.errors)
        for need in self.needs.values():
            if need.status in ("missing", "never", "unknown"):
                for row in need.rows:
                    out.setdefault(row, f"needs dataset {need.dataset}: {need.detail}")
        return out


def _state(name: str, root: Path) -> tuple[str, str]:
    from ..data.registry import get, verify

    try:
        dataset = get(name)
    except DataError as err:
        return "unknown", str(err)
    if not dataset.available_here:
        return "never", "no public copy is known (" + " ".join(dataset.notes)[:160] + ")"
    report = verify(name, root, checksums=False)
    if report.status in ("present", "unverified"):
        return "present", f"{report.n_ok} file(s)"
    if report.status == "partial" or report.status == "modified":
        return "partial", f"{report.n_ok} of {report.n_files} files here"
    if not dataset.pullable:
        return "never", ("its files are derived from upstream data and only a copy of a data root holds them: "
                         f"`finharness data pull {name} --from DIR`")
    source = ("hf:" if dataset.host == "huggingface" else "") + (dataset.repository or name)
    return "missing", f"{len(dataset.files)} file(s) from {source}"


def check_data(jobs: Sequence[tuple[str, Any]], root: Path, *, extra: Mapping[str, Sequence[str]] = ()
               ) -> DataCheck:
    """The data every job reads: (row or task label, its Task object) each, the datasets from the task's data_needs;
    `extra`: datasets by row that the suite itself reads for it after the row (a pairwise-judging step). Each row's questions
    are loaded (pulling off): a row that loads is checked for what it reads later, one that does not for every dataset
    it reads and those its error names. Writes nothing, pulls nothing."""
    check = DataCheck(Path(root))
    declared: dict[str, DataNeeds] = {}
    named: dict[str, list[str]] = {}
    said: dict[str, str] = {}
    with no_pulls():
        for label, task in jobs:
            own = needs_of(task)
            declared[label] = DataNeeds(own.at_load, (*own.later, *dict(extra).get(label, ())), own.pulled)
            try:
                task.load(check.root)
                check.loaded.add(label)
            except DataError as err:
                named[label] = list(dict.fromkeys(_PULL.findall(str(err))))
                said[label] = str(err)
                if not named[label]:
                    check.errors[label] = str(err)
            except Exception:  # not a data problem but a bug of the task: its run meets it and reports it as a crash
                check.loaded.add(label)
            finally:
                close = getattr(task, "close", None)
                if close is not None:
                    close()
    for label, _ in jobs:
        needs = declared[label]
        wanted = needs.later if label in check.loaded else (*needs.at_load, *needs.later, *named.get(label, ()))
        for dataset in dict.fromkeys(wanted):
            need = check.needs.setdefault(dataset, Need(dataset))
            need.rows.append(label)
            if dataset in needs.pulled:
                need.pulled_by.append(label)
    for need in check.needs.values():
        need.status, need.detail = _state(need.dataset, check.root)
    for label, datasets in named.items():  # the error names data that is here: the task cannot read it, say why
        if datasets and all(check.needs[d].status in ("present", "partial") for d in datasets):
            check.errors[label] = said[label]
    return check


def declared_needs(suite: Any, root: Path) -> dict[str, list[str]]:
    """Dataset -> the rows of `suite` that read it, from the rows' declared options alone (no task is made, nothing is
    loaded: what `finharness doctor` asks of a data root); a row whose data is absent and that names a fallback
    counts the fallback's; with what the suite's own steps read for a row (SuiteHooks.extra_datasets, judged)."""
    from ..benchmarks.declaration import hooks_of
    from ..benchmarks.registry import resolve_task

    def datasets(ref: Any, options: Mapping[str, Any]) -> tuple[str, ...]:
        settings = ref.cls.parse_options(dict(options)) if ref.cls.Options is not None else None
        needs = ref.cls.data_needs(settings)
        return (*needs.at_load, *needs.later)

    out: dict[str, list[str]] = {}
    for row in suite.tasks:
        ref = resolve_task(row.task)
        names = datasets(ref, row.options)
        if row.fallback and any(_state(n, Path(root))[0] != "present" for n in names):
            names = datasets(ref, {**row.options, **row.fallback})
        names = (*names, *hooks_of(ref.name).extra_datasets(judged=True))
        for name in names:
            out.setdefault(name, []).append(row.id)
    return out


def dataset_states(names: Sequence[str], root: Path) -> dict[str, tuple[str, str]]:
    """Dataset -> (status, detail) in the data root, as the suite's check reads them (sizes, not checksums)."""
    return {name: _state(name, Path(root)) for name in names}


def run_blockers(check: DataCheck) -> DataCheck:
    """The check without what `finharness run`'s tasks pull themselves on first use (DataNeeds.pulled of every row
    that reads it; none when pulling is off): what is left stops a run before its first call."""
    from ..data.pull import NO_PULL_ENV

    if os.environ.get(NO_PULL_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return check
    kept = {name: need for name, need in check.needs.items()
            if not (need.status == "missing" and set(need.rows) <= set(need.pulled_by))}
    return DataCheck(check.root, kept, dict(check.errors), set(check.loaded))


def pull_command(check: DataCheck, suite: str | None = None, data_dir: Path | None = None) -> str:
    """The one command that fetches every missing pullable dataset."""
    where = f" --data-dir {data_dir}" if data_dir is not None else ""
    if suite is not None:
        return f"finharness data pull --suite {suite}{where}"
    return "finharness data pull " + " ".join(n.dataset for n in check.of("missing")) + where


def report_lines(check: DataCheck, *, pull: str, skip_hint: bool = True,
                 or_else: str = "   (or run the suite with --pull)") -> list[str]:
    """The one list: what is missing, the command that fetches it, what can never be had here."""
    lines = []
    missing, never = check.of("missing"), check.of("never") + check.of("unknown")
    if missing:
        lines.append(f"missing from the data root {check.root} ({len(missing)} dataset(s)):")
        lines += [f"  {n.dataset}: {n.detail}; read by {', '.join(n.rows)}" for n in missing]
        lines.append(f"fetch all of it with: {pull}{or_else}")
    if never:
        lines.append(f"not to be had here ({len(never)} dataset(s)):")
        lines += [f"  {n.dataset}: {n.detail}; read by {', '.join(n.rows)}" for n in never]
    if (missing or never) and skip_hint:
        lines.append("or run without those rows with --skip-missing (the scorecard says why each is missing)")
    for row, why in check.errors.items():
        lines.append(f"  {row} cannot read its data: {why}")
    for n in check.of("partial"):
        lines.append(f"note: {n.dataset} is partial ({n.detail}); read by {', '.join(n.rows)}")
    return lines


def pull_all(names: Sequence[str], root: Path | None, *, progress: Callable[[str], None],
             source: str | None = None) -> list[str]:
    """Pull each dataset into `root`, one progress line per dataset; every host is asked once first whether it can be
    reached, so offline the pull fails at once with one line per dataset (no host's retries waited out). Returns
    the failures (one line each); those that worked are in place."""
    from ..data.pull import pull, unreachable
    from ..data.registry import get, human_size

    failures = []
    hosts: dict[str, str | None] = {}
    for name in names:
        dataset = get(name)
        if source is None:
            host = "huggingface" if dataset.host == "huggingface" else "github"
            if host not in hosts:
                hosts[host] = unreachable(host)
            if hosts[host] is not None:
                failures.append(f"{name}: not pulled: {hosts[host]}")
                continue
        try:
            report = pull(name, root, source, progress=lambda message: None)
        except DataError as err:
            failures.append(f"{name}: {err}")
            continue
        progress(f"{name}: {len(report.fetched)} file(s) fetched ({human_size(report.bytes_fetched)}), "
                 f"{len(report.skipped)} already there -> {report.dest}")
    return failures


__all__ = ["DataCheck", "Need", "check_data", "dataset_states", "declared_needs", "needs_of", "no_pulls", "pull_all",
           "pull_command", "report_lines", "run_blockers"]
