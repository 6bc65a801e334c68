"""Run directories as the report reads them: results.json, samples.jsonl, and what can be derived.

A run directory holds `results.json` (see core.runner.build_results) and, usually,
`samples.jsonl` (core.runner.sample_line). The report needs nothing else; a run without
samples.jsonl is still shown, but cannot be paired item by item and has no transcripts.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core.task import metric_direction
from ..data.errors import DataError
from ..data.io import iter_jsonl, read_json

RESULT_KEYS: tuple[str, ...] = ("task", "metrics")
"""Keys a results.json must have for the report to use it."""

RESULT_TYPES: dict[str, tuple[type, ...]] = {
    "task": (str,), "model": (str,), "status": (str,), "headline": (str,), "metrics": (dict,),
    "directions": (dict,), "groups": (dict,), "counts": (dict,), "notes": (list,), "config": (dict,),
    "extra": (dict,), "timing": (dict,), "cumulative": (dict,), "versions": (dict,)}
"""The type of each results.json field the report reads (null allowed where a field may be missing)."""

REWRITE_HINT = ("was it edited by hand? Rerun the same command to write it again: its samples come from the run "
                "store, nothing is asked again")


def _metric_problem(where: str, metric: Any) -> str | None:
    """What in one metric entry ({"value", "ci95", "n"}) the report cannot read, None when nothing."""
    if not isinstance(metric, dict):
        return f"{where} is a {type(metric).__name__}, not an object {{value, ci95, n}}"
    missing = [k for k in ("value", "ci95", "n") if k not in metric]
    if missing:
        return f"{where} lacks {missing}"
    value, ci95, n = metric["value"], metric["ci95"], metric["n"]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return f"{where}.value is a {type(value).__name__}, not a number or null"
    if ci95 is not None and not (isinstance(ci95, list) and len(ci95) in (0, 2) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in ci95)):
        return f"{where}.ci95 is not [low, high] or null"
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        return f"{where}.n is a {type(n).__name__}, not an integer or null"
    return None


def results_problem(results: Any) -> str | None:
    """What in a results.json the report cannot read (a missing key, a field of the wrong type), None when
    nothing: checked once on reading, so a hand-edited file is an error naming it, not a traceback."""
    if not isinstance(results, dict):
        return f"expected a JSON object, got {type(results).__name__}"
    missing = [k for k in RESULT_KEYS if k not in results]
    if missing:
        return f"missing key(s) {missing}"
    for key, types in RESULT_TYPES.items():
        value = results.get(key)
        if value is not None and not isinstance(value, types):
            return f"{key!r} is a {type(value).__name__}, not a {' or '.join(t.__name__ for t in types)}"
    for name, metric in results["metrics"].items():
        if problem := _metric_problem(f"metrics[{name!r}]", metric):
            return problem
    for grouping, keys in (results.get("groups") or {}).items():
        if not isinstance(keys, dict):
            return f"groups[{grouping!r}] is a {type(keys).__name__}, not an object"
        for key, metrics in keys.items():
            if not isinstance(metrics, dict):
                return f"groups[{grouping!r}][{key!r}] is a {type(metrics).__name__}, not an object"
            for name, metric in metrics.items():
                if problem := _metric_problem(f"groups[{grouping!r}][{key!r}][{name!r}]", metric):
                    return problem
    return None


def read_results(path: str | Path) -> dict[str, Any]:
    """A results.json the report can read; DataError naming the file and what is wrong otherwise."""
    results = read_json(path)
    problem = results_problem(results)
    if problem is not None:
        raise DataError(problem, path=path, hint=REWRITE_HINT)
    return results


@dataclass(frozen=True)
class RunData:
    """One run directory, loaded."""

    path: Path
    """The run directory."""

    results: Mapping[str, Any]
    """results.json as written by the runner."""

    samples: tuple[Mapping[str, Any], ...]
    """samples.jsonl lines in file order (empty when the file is absent)."""

    @property
    def task(self) -> str:
        return str(self.results["task"])

    @property
    def model(self) -> str:
        return str(self.results.get("model") or "?")

    @property
    def name(self) -> str:
        """The directory name: short, and unique enough to tell runs of one model apart."""
        return self.path.name or str(self.path)

    @property
    def metrics(self) -> Mapping[str, Mapping[str, Any]]:
        return self.results.get("metrics") or {}

    @property
    def headline(self) -> str | None:
        """The headline metric: results.json `headline` (the task's), else the first metric listed."""
        named = self.results.get("headline")
        return named if named in self.metrics else next(iter(self.metrics), None)

    def direction(self, metric: str) -> str:
        """'higher', 'lower' or 'info' (core.task.DIRECTIONS): results.json `directions`, or for a run written
        before results carried them, what the built-in task of that name declares."""
        if "directions" in self.results:
            return str((self.results.get("directions") or {}).get(metric, "higher"))
        return metric_direction(metric, built_in_directions(self.task))

    @property
    def task_config(self) -> Mapping[str, Any]:
        return (self.results.get("config") or {}).get("task_config") or {}

    @property
    def counts(self) -> Mapping[str, Any]:
        return self.results.get("counts") or {}

    def metric(self, name: str) -> Mapping[str, Any] | None:
        """{value, ci95, n} of a metric, None when the run does not have it."""
        return self.metrics.get(name)

    def per_sample(self, metric: str | None = None) -> dict[str, float]:
        """Per-sample values of `metric` by sample id, for paired tests.

        The headline (or None) reads score.value; any other name reads score.values[name].
        Samples that failed or have no value for the metric are left out."""
        out: dict[str, float] = {}
        use_value = metric is None or metric == self.headline
        for s in self.samples:
            score = s.get("score")
            if not score:
                continue
            value = score.get("value") if use_value else (score.get("values") or {}).get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[str(s["id"])] = float(value)
        return out

    def extraction_rules(self) -> Counter[str]:
        """How often each extraction rule fired (failed samples count as 'call failed')."""
        rules: Counter[str] = Counter()
        for s in self.samples:
            if s.get("failed"):
                rules["call failed"] += 1
            elif s.get("extraction"):
                rules[str(s["extraction"].get("rule"))] += 1
        return rules


UNPARSEABLE_SHARE = 0.5
"""Above this share of scored replies unreadable, a run's number says more about its extraction than its model."""


def run_flags(results: Mapping[str, Any]) -> list[str]:
    """What makes a run's number mislead at face value, one short sentence each (empty: nothing): most replies could
    not be read, the multiple-choice method fell back from log-likelihoods, decoding was not greedy (a parameter
    the server refused, or a temperature asked for), and what the task itself flagged (Aggregate.flags). Read from
    results.json alone, so every view (the run summary, the scorecard, `compare`) says the same."""
    flags = [str(f) for f in results.get("flags") or ()]  # the task's own (Aggregate.flags)
    counts = results.get("counts") or {}
    scored = int(counts.get("samples") or 0) - int(counts.get("failed_samples") or 0)
    unparseable = int(counts.get("unparseable") or 0)
    if scored > 0 and unparseable / scored > UNPARSEABLE_SHARE:
        flags.append(f"unparseable: {unparseable} of {scored} replies could not be read (scored as wrong)")
    methods = (results.get("extra") or {}).get("methods")
    if isinstance(methods, Mapping) and methods.get("requested") == "auto" and methods.get("auto") not in (None, "ll"):
        flags.append(f"method fell back: auto ran {methods['auto']!r}, not log-likelihoods (the backend has none)")
    lost = sum(int(a.get("calls") or 0) for a in results.get("adaptations") or () if a.get("greedy_lost"))
    if lost:
        flags.append(f"not greedy: {lost} call(s) sampled at the model's default temperature (the server refused "
                     "temperature 0)")
    temperature = ((results.get("config") or {}).get("generation") or {}).get("temperature")
    if isinstance(temperature, (int, float)) and temperature > 0:
        flags.append(f"not greedy: sampled at --temperature {temperature:g}")
    return flags


@functools.cache
def built_in_directions(task: str) -> Mapping[str, str]:
    """Task.metric_directions of the built-in task named `task` ({} for any other)."""
    from ..benchmarks.registry import TASKS
    from ..plugins import load_target

    return load_target(TASKS[task]).metric_directions if task in TASKS else {}


def load_run(run_dir: str | Path) -> RunData:
    """Read one run directory; a missing or malformed file raises DataError naming it (and the line)."""
    path = Path(run_dir)
    results_path = path / "results.json"
    if not results_path.exists():
        raise DataError("no results.json here", path=path,
                        hint="pass the --out directory of a finished `finharness run`")
    results = read_results(results_path)
    samples_path = path / "samples.jsonl"
    samples: list[Mapping[str, Any]] = []
    if samples_path.exists():
        for line, obj in iter_jsonl(samples_path, allow_empty=True):
            if "id" not in obj:
                raise DataError("missing field 'id'", path=samples_path, line=line)
            samples.append(obj)
    return RunData(path, results, tuple(samples))


def load_runs(run_dirs: Iterable[str | Path]) -> list[RunData]:
    return [load_run(d) for d in run_dirs]


def display_names(runs: Sequence[RunData]) -> dict[Path, str]:
    """A short unique label per run: the model spec, plus the directory name where specs repeat."""
    model_counts = Counter(r.model for r in runs)
    names = {}
    for r in runs:
        names[r.path] = r.model if model_counts[r.model] == 1 else f"{r.model} · {r.name}"
    # two directories with the same name and model: fall back to the full path
    label_counts = Counter(names.values())
    return {p: (str(p) if label_counts[label] > 1 else label) for p, label in names.items()}


def flat_options(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested options as dotted leaves: {"settings": {"max_rounds": 3}} -> {"settings.max_rounds": 3}."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, Mapping) and value:
            out.update(flat_options(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_differences(runs: Sequence[RunData]) -> dict[Path, list[tuple[str, str]]]:
    """Per run, the task options (nested ones as dotted leaves) whose values are not the same across `runs`, as
    (key, value text); empty when all agree."""
    flat = {r.path: flat_options(r.task_config) for r in runs}
    keys = sorted({k for options in flat.values() for k in options})
    varying = [k for k in keys if len({repr(options.get(k)) for options in flat.values()}) > 1]
    return {path: [(k, "—" if options.get(k) is None else str(options.get(k))) for k in varying]
            for path, options in flat.items()}


def by_task(runs: Sequence[RunData]) -> dict[str, list[RunData]]:
    """Runs per task name, tasks in order of first appearance."""
    out: dict[str, list[RunData]] = {}
    for r in runs:
        out.setdefault(r.task, []).append(r)
    return out
