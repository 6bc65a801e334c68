"""What a benchmark implements: load samples, solve one with models, score it, aggregate.

A task never talks to a backend directly: `solve` receives `Models`, whose
handles go through the run store (cache, retries, budgets, counters).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, ClassVar, Mapping, Protocol, Sequence

from .metrics import Metric, mean_metrics
from .types import (
    GenerateParams,
    GenerateRequest,
    GenerateResponse,
    LoglikelihoodRequest,
    LoglikelihoodResponse,
    Message,
    Sample,
    Score,
    ToolSpec,
)


class ModelHandle(Protocol):
    """A backend seen through the run store, as a task's `solve` uses it."""

    role: str
    spec: str
    capabilities: Any

    async def generate(self, request: GenerateRequest) -> GenerateResponse: ...

    async def chat(self, messages: Sequence[Message], params: GenerateParams | None = None,
                   sample_index: int = 0) -> GenerateResponse: ...

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse: ...

    def count_tokens(self, text: str) -> int | None: ...

    def fits(self, messages: Sequence[Message], max_tokens: int, tools: Sequence[ToolSpec] = ()) -> bool | None:
        """Whether the rendered prompt (with the schemas of `tools`) plus max_tokens fits the budget (None: cannot
        tell)."""
        ...

    def note_truncation(self, policy: str, detail: str = "") -> None:
        """Record that the task cut a prompt by a named policy (counted, flagged on the sample)."""
        ...

    def note(self, event: str, detail: str = "") -> None:
        """Record something the task noticed while solving in this sample's trace (not counted): it is
        stored with the sample, so aggregate() sees it on a resumed run too (SampleRecord.events)."""
        ...


@dataclass
class Models:
    """The handles a sample may use, by role ('model' always; 'judge', 'user' when asked)."""

    handles: Mapping[str, ModelHandle]

    @property
    def model(self) -> ModelHandle:
        return self.handles["model"]

    def __getitem__(self, role: str) -> ModelHandle:
        try:
            return self.handles[role]
        except KeyError:
            raise KeyError(f"this task needs a model for role {role!r} (e.g. --{role} SPEC)") from None


@dataclass(frozen=True)
class Aggregate:
    """A task's results: named metrics plus breakdowns by group."""

    metrics: Mapping[str, Metric]
    """Headline and secondary metrics, each with value, 95% CI and n."""

    groups: Mapping[str, Mapping[str, Mapping[str, Metric]]] = field(default_factory=dict)
    """groups[GROUPING][GROUP_VALUE][METRIC] -- e.g. groups['category']['1-1']['accuracy']."""

    notes: Sequence[str] = ()
    """Things the reader must know (weights renormalised, split unscored...)."""

    extra: Mapping[str, Any] = field(default_factory=dict)
    """Task-specific JSON-able details."""

    flags: Sequence[str] = ()
    """Why the headline may mislead at face value, one short sentence each ('kind: what and how many'); every view
    of the run (its summary, the scorecard, `compare`) shows them beside the number (report.runs.run_flags)."""


@dataclass(frozen=True)
class SampleRecord:
    """One sample's outcome as it is written to samples.jsonl."""

    id: str
    prediction: Any
    score: Score | None
    trace: Sequence[Mapping[str, Any]] = ()
    """Every model call: role, prompt as sent, response, cache hit, latency, tokens."""
    failed: str | None = None
    """Why the sample could not be completed (a call failed for good); never scored."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    target: Any = None
    """The sample's gold answer (shown beside the prediction in samples.jsonl and the report)."""
    transient: bool = True
    """A failed sample only: whether a rerun may succeed (a timeout, a server error) or not (a prompt too long, a
    task's bug); the run's notes say which to expect."""

    @property
    def prompt_truncated(self) -> bool:
        """A prompt of this sample was cut to fit a budget (ModelHandle.note_truncation)."""
        return any(t.get("event") == "truncation" for t in self.trace)

    def events(self, name: str) -> list[Mapping[str, Any]]:
        """The trace entries a task recorded with ModelHandle.note(name, ...)."""
        return [t for t in self.trace if t.get("event") == name]

    @property
    def length_stopped(self) -> bool:
        """A generation of this sample stopped at max_tokens."""
        return any(t.get("finish_reason") == "length" for t in self.trace)


DIRECTIONS: tuple[str, ...] = ("higher", "lower", "info")
"""How a metric ranks runs: higher is better, lower is better, or not at all (it describes the run)."""


def metric_direction(metric: str, declared: Mapping[str, str]) -> str:
    """The direction `declared` (name or glob pattern -> direction, first match wins) gives `metric`; 'higher'
    when none matches. A direction outside DIRECTIONS is a ValueError naming it."""
    for pattern, direction in declared.items():
        if fnmatchcase(metric, pattern):
            if direction not in DIRECTIONS:
                raise ValueError(f"metric direction {direction!r} for {pattern!r} is not one of {', '.join(DIRECTIONS)}")
            return direction
    return "higher"


SOURCE_KEY = "task_source"
"""The key of a run's task config holding the code fingerprint of a task the harness does not ship (a task
file's sha256, an entry point's distribution and module sha256)."""


@dataclass(frozen=True)
class DataNeeds:
    """The registry datasets (docs/data.md's names) a task with its options reads: what a suite or a run checks
    before its first call (suite/data_check.py)."""

    at_load: tuple[str, ...] = ()
    """Read by load(): a task whose questions load has them, wherever its data root put them."""
    later: tuple[str, ...] = ()
    """Read only after the first calls (prompt files, filings and prices for a context): checked even when the
    questions load."""
    pulled: tuple[str, ...] = ()
    """Of these, what the task pulls itself on first use (`finharness run` does not stop for them)."""


class Task(ABC):
    """A benchmark task. Subclasses live in finharness.benchmarks.<name>/."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    roles: ClassVar[tuple[str, ...]] = ("model",)
    """Model roles solve() needs; 'model' is the model under test."""
    headline: ClassVar[str | None] = None
    """The metric leaderboards rank by (None: the first metric of Aggregate.metrics)."""
    metric_directions: ClassVar[Mapping[str, str]] = {}
    """Metrics that are not 'higher is better', by name or glob pattern (`*.unparseable_rate`), the first match
    winning: 'lower' (lower is better: an error rate) or 'info' (describes the run and ranks nothing: rounds,
    tokens). results.json `directions` holds every metric's that is not 'higher'; leaderboards follow it."""

    def direction(self, metric: str) -> str:
        """'higher', 'lower' or 'info': how `metric` ranks runs (metric_directions)."""
        return metric_direction(metric, self.metric_directions)

    metric_docs: ClassVar[Mapping[str, str]] = {}
    """The task's metrics, by name or glob pattern, one line each: what `finharness list TASK` prints beside
    their direction (metric_directions)."""

    Options: ClassVar[type | None] = None
    """The task's options, declared once: a frozen dataclass with a docstring under each field (its allowed
    values in `CHOICES`, see core/options.py). The registry parses `-o KEY=VALUE` into it (parse_options), `finharness
    list TASK` shows it, and `config()` (the run key) is made from it. None (a task of the user's own): the
    options are the keywords of `__init__`."""

    source_fingerprint: Mapping[str, Any] | None = None
    """Set by the registry for a task whose code the harness does not ship (a file, an entry point): the
    code's fingerprint, added to the run key (run_config) so that editing the task starts a new run."""

    def __init__(self, settings: Any = None, /, **options: Any) -> None:
        """`settings`: this task's Options, already parsed; else `options` (CLI-style values) are parsed into
        Options. A task without Options keeps its keywords as they are."""
        if type(self).Options is None:
            self.options = options
            return
        if settings is None:
            settings = type(self).parse_options(options)
        elif options:
            raise TypeError(f"{self.name}: give parsed settings or option keywords, not both")
        self.settings = settings
        self.options = self.key_options(settings)

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> Any:
        """`-o` values (strings, JSON values, None = not given) -> this task's Options: the declaration's own
        `parse` classmethod where it has checks across options, else core.options.parse_task_options."""
        from .options import parse_task_options

        assert cls.Options is not None, f"{cls.__name__} declares no Options"
        own = getattr(cls.Options, "parse", None)
        return own(options) if own is not None else parse_task_options(cls.Options, options, cls.name)

    @classmethod
    def describe_options(cls) -> list[Any]:
        """The options this task takes (core.options.OptionInfo: name, type, default, choices, help), from the
        same declaration parse_options reads: what `finharness list TASK` and the docs tables show."""
        from .options import describe_options

        return describe_options(cls.Options) if cls.Options is not None else []

    @classmethod
    def data_needs(cls, settings: Any) -> DataNeeds:
        """The datasets a task with these settings (its parsed Options; None without) reads: none by default, as for
        a task of one's own, whose load is its check."""
        return DataNeeds()

    def key_options(self, settings: Any) -> dict[str, Any]:
        """The options that change requests or scores (what config() returns): every field by default; a task
        leaves out those that cannot change a result (a pool size)."""
        from dataclasses import asdict

        return asdict(settings)

    def config(self) -> Mapping[str, Any]:
        """Everything that changes this task's requests or scores; part of the run key."""
        return dict(self.options)

    def run_config(self) -> Mapping[str, Any]:
        """config() as the run key holds it: with the code's fingerprint for a task the harness does not ship."""
        if self.source_fingerprint is None:
            return self.config()
        return {**self.config(), SOURCE_KEY: dict(self.source_fingerprint)}

    @abstractmethod
    def load(self, data_dir: Path | None) -> list[Sample]:
        """Samples in a stable order. Raise DataError naming file and line on bad input."""

    @abstractmethod
    async def solve(self, sample: Sample, models: Models) -> Any:
        """Make the model calls for one sample and return its prediction (JSON-able)."""

    @abstractmethod
    def score(self, sample: Sample, prediction: Any) -> Score:
        """Score a prediction; also used by `finharness score` on predictions made elsewhere."""

    predictions_option: ClassVar[str | None] = None
    """The option through which the task takes answers made elsewhere and grades them with its grading roles
    (a judge): `finharness score TASK --predictions FILE --judge SPEC` sets it to FILE and runs the task with the
    judge only. None: the task scores predictions without models (`score` calls score() alone)."""

    def read_prediction(self, obj: Mapping[str, Any]) -> tuple[str, Any] | None:
        """A line of a predictions file in a layout of the task's own -> (sample id, prediction); None: the line
        is not in such a layout (`score` then reads the harness's `{"id", "prediction"}`)."""
        return None

    def prediction_row(self, record: SampleRecord) -> dict[str, Any]:
        """One row of `finharness score --json`'s `rows`: the sample's id and what its score says."""
        score = record.score
        return {"id": record.id, "value": None if score is None else score.value,
                "extracted": None if score is None else score.extracted, "rule": None if score is None else score.rule}

    def plan_notes(self) -> list[str]:
        """What a dry run must say about this task's plan (e.g. that an agent's calls are a bound); default none."""
        return []

    def close(self) -> None:
        """Release what the task started (a sandbox pool...); the engine calls it when a run ends."""

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        """The task's metrics over every record of the run: failed samples included (`record.failed` set,
        `record.score` None), so a task can count them. Default: the mean of every per-sample value with its
        CI over the scored records."""
        return Aggregate(metrics=mean_metrics([r.score for r in records if r.score is not None]))
