"""What a benchmark implements: load samples, solve one with models, score it, aggregate.

A task never talks to a backend directly: `solve` receives `Models`, whose
handles go through the run store (cache, retries, budgets, counters).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
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

    def fits(self, messages: Sequence[Message], max_tokens: int) -> bool | None:
        """Whether the rendered prompt plus max_tokens fits the budget (None: cannot tell)."""
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


class Task(ABC):
    """A benchmark task. Subclasses live in finharness.benchmarks.<name>/."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    roles: ClassVar[tuple[str, ...]] = ("model",)
    """Model roles solve() needs; 'model' is the model under test."""
    headline: ClassVar[str | None] = None
    """The metric leaderboards rank by (None: the first metric of Aggregate.metrics)."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    def config(self) -> Mapping[str, Any]:
        """Everything that changes this task's requests or scores; part of the run key."""
        return dict(self.options)

    @abstractmethod
    def load(self, data_dir: Path | None) -> list[Sample]:
        """Samples in a stable order. Raise DataError naming file and line on bad input."""

    @abstractmethod
    async def solve(self, sample: Sample, models: Models) -> Any:
        """Make the model calls for one sample and return its prediction (JSON-able)."""

    @abstractmethod
    def score(self, sample: Sample, prediction: Any) -> Score:
        """Score a prediction; also used by `finharness score` on predictions made elsewhere."""

    def close(self) -> None:
        """Release what the task started (a sandbox pool...); the engine calls it when a run ends."""

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        """Default: the mean of every per-sample value with its CI."""
        return Aggregate(metrics=mean_metrics([r.score for r in records if r.score is not None]))
