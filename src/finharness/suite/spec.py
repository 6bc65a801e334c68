"""A suite file: a small TOML naming each task of a suite with its options and its size.

    name = "my-suite"
    description = "my exam and the demo, small"

    batch = ["gpt-4o"]                         # these models through their provider's batch interface (or true)

    [prices]                                   # USD per million tokens, input and output (optional)
    "gpt-4o" = [2.5, 10.0]                     # or every rate: { in = 2.5, cached = 1.25, out = 10, batch = 0.5 }

    [[task]]
    id = "exam"                               # unique; the run folder's name (default: the task's)
    benchmark = "My exams"                    # the scorecard's column group
    task = "my_exam.toml"                     # a task spec, as `finharness run` takes it
    options = { method = "gen" }              # the task's options (`finharness list TASK`)
    sample = 40                                # a seeded random subset of N items (or `limit`: the first N)
    fallback = { exam = "standin:cpa" }        # options used where the official data is absent (a stand-in)
    paper = "0-shot, generation, official extraction"   # which configuration of the paper this is

A top-level `contamination = true` also probes every row's items for membership evidence (docs/contamination.md).

Three suites ship with the package (`quick`, `standard`, `full`, in suite/suites/: each file its name, description
and seed, its rows from the benchmarks' declarations, `declared_rows`); any other path is a suite of the user's own. A suite that cannot be read is an error naming the file and what is wrong (unknown keys with the
closest known one, a task that does not exist, options the task does not take).
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.spending import Price, price_from

SUITES_DIR = Path(__file__).with_name("suites")
"""The suites that ship with the package."""

SUITE_KEYS = ("name", "description", "seed", "prices", "contamination", "batch", "task")
TASK_KEYS = ("id", "benchmark", "task", "label", "options", "limit", "sample", "fallback", "fallback_label",
             "paper", "min_context")


class SuiteError(ValueError):
    """A suite file that cannot be used: the message names the file and what to change."""


@dataclass(frozen=True)
class SuiteTask:
    """One row of a suite: a task with its options and size."""

    id: str
    """Unique within the suite: the run folder's name and the scorecard row's key."""

    benchmark: str
    """The benchmark the row belongs to (the scorecard groups rows by it)."""

    task: str
    """The task spec (a built-in name, an entry point, FILE.py:Class)."""

    label: str
    """What the scorecard calls the row."""

    options: Mapping[str, Any] = field(default_factory=dict)
    """The task's options."""

    limit: int | None = None
    """The first N items."""

    sample: int | None = None
    """A random subset of N items, seeded by the suite's seed."""

    fallback: Mapping[str, Any] | None = None
    """Options that replace or add to `options` where the official data is absent: the row runs a stand-in."""

    fallback_label: str | None = None
    """The row's label when the fallback runs (default: `label (stand-in)`)."""

    paper: str | None = None
    """Which configuration of the paper the row reproduces (said in the docs and the scorecard)."""

    min_context: int | None = None
    """The context window (tokens) the row's prompts need: a model whose window is known and smaller skips the row
    (the scorecard says `does not fit`); a model whose window is unknown (an API) runs it."""


@dataclass(frozen=True)
class Suite:
    """A suite file, read and checked."""

    name: str
    """The suite's name."""

    path: Path
    """Where it was read from."""

    tasks: tuple[SuiteTask, ...]
    """Its rows, in file order."""

    description: str = ""
    """One line for people."""

    seed: int = 0
    """Seeds every row's `sample`."""

    prices: Mapping[str, Price] = field(default_factory=dict)
    """USD per million tokens by model spec or name (`--price` adds to and overrides them)."""

    batch: bool | tuple[str, ...] = False
    """`batch = true`: every openai: or anthropic: model's calls go through its provider's batch interface;
    `batch = ["gpt-4o", ...]`: those models' (by spec or name) only (backends/batch.py; `--batch` batches all)."""

    contamination: bool = False
    """`contamination = true`: after each model's rows, probe every row's items for membership evidence
    (contamination/run.py) and write ROW/contamination.json beside its results; the scorecard shows it."""


def bundled() -> list[str]:
    """The names of the suites that ship with the package."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def is_explicit_path(text: str) -> bool:
    """Whether `text` can only mean a file: it ends in .toml or is written as a path (`./quick`, `dir/x`, `~/x`)."""
    return text.endswith(".toml") or "/" in text or text.startswith(("~", "."))


def suite_path(name_or_path: str) -> Path:
    """A bundled suite's file, or a path to a suite file; an unknown name is a SuiteError naming the known ones.

    A bundled name wins over a file or folder of that name in the working directory (a run folder `quick/` must not
    hide the `quick` suite); `./quick` or `quick.toml` names the file."""
    known = bundled()
    if name_or_path in known and not is_explicit_path(name_or_path):
        return SUITES_DIR / f"{name_or_path}.toml"
    path = Path(name_or_path).expanduser()
    if is_explicit_path(name_or_path) or path.exists():
        if not path.is_file():
            raise SuiteError(f"{path}: no such suite file" + (" (a folder)" if path.is_dir() else ""))
        return path
    close = difflib.get_close_matches(name_or_path, known, n=1)
    raise SuiteError(f"unknown suite {name_or_path!r}; the suites that ship: {', '.join(known)}"
                     + (f" (did you mean {close[0]!r}?)" if close else "") + ", or a path to a suite file (.toml)")


def _unknown(where: str, given: Mapping[str, Any], known: Sequence[str]) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        close = {k: difflib.get_close_matches(k, list(known), n=1) for k in unknown}
        hints = "; ".join(f"did you mean {c[0]!r} for {k!r}?" for k, c in close.items() if c)
        raise SuiteError(f"{where}: unknown key(s) {unknown}; known: {', '.join(known)}"
                         + (f" ({hints})" if hints else ""))


def _expect(where: str, key: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and kind is not bool):
        raise SuiteError(f"{where}: {key} must be {what}, not {value!r}")
    return value


def _prices(path: Path, raw: Any) -> dict[str, Price]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: [prices] must be a table of MODEL = [INPUT, OUTPUT] (USD per million tokens) or "
                         "MODEL = { in = ..., out = ..., cached = ..., write = ..., batch = ... }")
    out = {}
    for model, pair in raw.items():
        if isinstance(pair, dict):  # every rate by name: { in = 2.5, cached = 1.25, out = 10, batch = 0.5 }
            try:
                out[str(model)] = price_from(f"{path}: [prices] {model!r}", pair)
            except ValueError as err:
                raise SuiteError(str(err)) from None
            continue
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in pair)):
            raise SuiteError(f"{path}: [prices] {model!r} must be [INPUT, OUTPUT], two non-negative USD amounts per "
                             f"million tokens, not {pair!r}")
        out[str(model)] = Price(float(pair[0]), float(pair[1]))
    return out


def _batch(path: Path, raw: Any) -> bool | tuple[str, ...]:
    """`batch = true | false | ["MODEL", ...]`."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, list) and all(isinstance(m, str) and m for m in raw):
        return tuple(raw)
    raise SuiteError(f"{path}: batch must be true, false or a list of model specs or names, not {raw!r}")


def _task(path: Path, index: int, raw: Any, seen: set[str], table: str = "task",
          benchmark: str | None = None) -> SuiteTask:
    where = f"{path}: [[{table}]] number {index + 1}"
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: must be a table")
    _unknown(where, raw, TASK_KEYS)
    if not isinstance(raw.get("task"), str) or not raw["task"]:
        raise SuiteError(f"{where}: needs task = \"NAME\" (a task spec, see `finharness list`)")
    where = f"{path}: [[{table}]] {raw.get('id', raw['task'])!r}"
    for key in ("id", "benchmark", "label", "fallback_label", "paper"):
        _expect(where, key, raw.get(key), str, "text")
    for key in ("options", "fallback"):
        _expect(where, key, raw.get(key), dict, "a table of task options")
    for key in ("limit", "sample", "min_context"):
        if _expect(where, key, raw.get(key), int, "a whole number") is not None and raw[key] < 1:
            raise SuiteError(f"{where}: {key} must be at least 1")
    if raw.get("limit") is not None and raw.get("sample") is not None:
        raise SuiteError(f"{where}: give limit or sample, not both")
    row_id = raw.get("id") or raw["task"].replace("/", "_")
    if row_id in seen:
        raise SuiteError(f"{where}: id {row_id!r} is used twice; give each row an id of its own")
    seen.add(row_id)
    label = raw.get("label") or row_id
    return SuiteTask(id=row_id, benchmark=raw.get("benchmark") or benchmark or label, task=raw["task"], label=label,
                     options=dict(raw.get("options") or {}), limit=raw.get("limit"), sample=raw.get("sample"),
                     fallback=raw.get("fallback"), fallback_label=raw.get("fallback_label"), paper=raw.get("paper"),
                     min_context=raw.get("min_context"))


def declared_rows(suite: str, seen: set[str]) -> tuple[SuiteTask, ...]:
    """The rows every benchmark's declaration adds to the bundled suite `suite` (its suite_rows file's `[[suite]]`
    tables), benchmark by benchmark: built-in ones in their order, then installed ones."""
    from ..benchmarks.declaration import every_benchmark

    out: list[SuiteTask] = []
    for benchmark in every_benchmark():
        if benchmark.suite_rows is None:
            continue
        try:
            path = benchmark.suite_rows_path()
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as err:
            raise SuiteError(f"{path}: not valid TOML: {err}") from None
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise SuiteError(f"benchmark {benchmark.name}: its suite_rows {benchmark.suite_rows} cannot be read: "
                             f"{err}") from None
        rows = raw.get(suite, [])
        if not isinstance(rows, list):
            raise SuiteError(f"{path}: [[{suite}]] must be tables")
        out += [_task(path, i, row, seen, table=suite, benchmark=benchmark.display) for i, row in enumerate(rows)]
    return tuple(out)


def _toml_value(value: Any) -> str:
    """A TOML literal of a suite row's value (text, numbers, booleans, lists and inline tables of them)."""
    import json
    import re

    if isinstance(value, Mapping):
        keys = (k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in value)
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in zip(keys, value.values())) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML basic string


def bundled_suite_toml(name: str) -> str:
    """Bundled suite `name` as one suite file of the user's own (its rows from the declarations written out as
    [[task]] tables with their benchmark): a copy to edit (`finharness suite NAME --toml > mine.toml`)."""
    suite = load_suite(name)
    if suite.path.parent != SUITES_DIR:
        raise SuiteError(f"{name}: not a bundled suite; the suites that ship: {', '.join(bundled())}")
    head = [f"name = {_toml_value(suite.name)}", f"description = {_toml_value(suite.description)}",
            f"seed = {suite.seed}"]
    if suite.contamination:
        head.append("contamination = true")
    if suite.batch:
        head.append(f"batch = {_toml_value(suite.batch)}")
    rows = []
    for row in suite.tasks:
        fields = {"id": row.id, "benchmark": row.benchmark, "task": row.task, "label": row.label,
                  "options": dict(row.options) or None, "limit": row.limit, "sample": row.sample,
                  "fallback": row.fallback, "fallback_label": row.fallback_label, "paper": row.paper,
                  "min_context": row.min_context}
        rows.append("[[task]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in fields.items() if v is not None))
    return "\n".join(head) + "\n\n" + "\n".join(rows)


def load_suite(name_or_path: str) -> Suite:
    """Read and check a suite (a bundled name or a file); a problem is a SuiteError naming the file."""
    path = suite_path(name_or_path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise SuiteError(f"{path}: not valid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SuiteError(f"{path}: cannot be read: {err}") from None
    _unknown(str(path), raw, SUITE_KEYS)
    rows = raw.get("task", [])
    if not isinstance(rows, list):
        raise SuiteError(f"{path}: [[task]] must be tables")
    seen: set[str] = set()
    tasks = tuple(_task(path, i, row, seen) for i, row in enumerate(rows))
    if path.parent == SUITES_DIR:
        tasks += declared_rows(path.stem, seen)
    if not tasks:
        raise SuiteError(f"{path}: a suite needs at least one [[task]]")
    seed = _expect(str(path), "seed", raw.get("seed", 0), int, "a whole number")
    contamination = _expect(str(path), "contamination", raw.get("contamination", False), bool, "true or false")
    return Suite(name=str(raw.get("name") or path.stem), path=path, tasks=tasks,
                 description=str(raw.get("description") or ""), seed=seed, prices=_prices(path, raw.get("prices")),
                 contamination=contamination, batch=_batch(path, raw.get("batch", False)))
