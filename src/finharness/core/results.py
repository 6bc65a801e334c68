"""What a run writes and how it is scored: the run's identity (RunConfig and its fingerprints), the scoring of
solved samples, results.json and samples.jsonl.

`score_run` is the one scoring path: a run (runner.run_task) and `finharness score` (predictions made
elsewhere) both turn raw predictions into SampleRecords and an Aggregate through it, so the two can
never score the same predictions differently.
"""

from __future__ import annotations

import functools
import hashlib
import json
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..data.io import atomic_write_text
from ..redact import redact
from ..stats import mean_ci
from .hashing import content_key
from .metrics import Metric, metrics_json
from .model import PromptBudget, RunCounters
from .reasoning import adaptation_notes, adaptations_of, sample_thinking
from .spending import BUDGET_KIND
from .task import Aggregate, SampleRecord, Task
from .types import OMITTED_AT_DEFAULT, Sample, Score, to_jsonable


@dataclass(frozen=True)
class RunConfig:
    """What identifies a run; hashed into the run key so a changed config never reuses samples."""

    task: str
    task_config: Mapping[str, Any]
    models: Mapping[str, Mapping[str, Any]]
    budget: PromptBudget = PromptBudget()
    limit: int | None = None
    subset: int | None = None
    seed: int = 0
    samples_sha256: str | None = None
    """Fingerprint of the samples run (ids and inputs): edited data (another exam in the same layout,
    a changed question) never reuses a finished sample of the old data."""
    code_sha256: str | None = None
    """Fingerprint of the harness's source: prompts written in code that changed (an upgrade, a fix)
    never reuse finished samples; unchanged requests still come from the call cache."""
    generation: Mapping[str, Any] | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    """The generation settings the run imposed on the model under test (--temperature, --max-tokens, --system);
    left out of the key when none was, so run keys made before it existed stay the same."""
    draws: int = field(default=1, metadata=OMITTED_AT_DEFAULT)
    """Answers per item (--draws K; 1: left out of the key, as before draws existed)."""

    def to_json(self) -> dict[str, Any]:
        return to_jsonable(self)


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the package's Python sources (path and bytes), computed once per process."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def samples_fingerprint(samples: Sequence[Sample]) -> str:
    """sha256 over each sample's id and input (what solve() builds requests from)."""
    return content_key([[s.id, to_jsonable(s.input)] for s in samples])


@dataclass
class RunResult:
    # not in the repr: asyncio.run formats the main task's repr, result included, when it restores
    # the SIGINT handler (CPython 3.11), which took ~0.5 s for 10,000 records
    results: dict[str, Any] = field(repr=False)
    records: list[SampleRecord] = field(repr=False)
    out_dir: Path | None
    counters: RunCounters | None = None


class TaskError(Exception):
    """A task broke its contract for one sample (returned a prediction that cannot be stored...)."""


def format_exc(err: BaseException) -> str:
    """The traceback of `err`, as a sample's record keeps it."""
    return "".join(traceback.format_exception(err))


def task_error(task: str, step: str, err: BaseException) -> str:
    """The failure message of a sample whose task raised in `step` (solve or score)."""
    return f"task_error: {task}.{step} raised {type(err).__name__}: {err} (a bug in the task; its traceback is " \
           "in this sample's trace)"


def failed_record(trace: list[dict[str, Any]], message: str, *, transient: bool,
                  traceback: str | None = None) -> dict[str, Any]:
    """The raw result of a sample that could not be solved or scored (a solve failure is not stored as finished, so a
    rerun tries it again); `transient` says whether that may help (core.backend.TRANSIENT_KINDS); `traceback`, a
    task's own error, goes into the sample's trace."""
    if traceback is not None:
        trace = [*trace, {"event": "task_error", "detail": message, "traceback": traceback}]
    return {"prediction": None, "trace": trace, "failed": message, "transient": transient}


def score_records(task: Task, samples: Sequence[Sample], raw: Mapping[str, Mapping[str, Any]]) -> list[SampleRecord]:
    """A SampleRecord per sample that has a raw result ({"prediction", "trace"}, "failed" when it could not be
    solved), scored by the task; samples without one are left out. A task raising in `score` fails that sample
    (its traceback in the record's trace), not the run."""
    records = []
    for s in samples:
        rec = raw.get(s.id)
        if rec is None:
            continue
        score = None
        if not rec.get("failed"):
            try:
                score = task.score(s, rec["prediction"])
            except Exception as err:
                rec = failed_record(list(rec.get("trace", ())), task_error(task.name, "score", err), transient=False,
                                    traceback=format_exc(err)) | {"prediction": rec.get("prediction")}
        records.append(SampleRecord(id=s.id, prediction=rec.get("prediction"), score=score,
                                    trace=rec.get("trace", ()), failed=rec.get("failed"), metadata=s.metadata,
                                    target=s.target, transient=rec.get("transient", True)))
    return records


def draw_id(sample_id: str, draw: int) -> str:
    """The store's id of one draw of a sample: the sample's own id for draw 0 (as before draws existed)."""
    return sample_id if draw == 0 else f"{sample_id}#draw{draw}"


class _FailedDraw:
    """A draw that could not be solved: unscored in every statistic, and the run is incomplete."""

    def __repr__(self) -> str:
        return "FAILED_DRAW"


FAILED_DRAW: Any = _FailedDraw()
"""What score_draws gives for a draw that failed (not one that merely has no score)."""


def score_draws(task: Task, samples: Sequence[Sample], raw: Mapping[str, Mapping[str, Any]], draws: int
                ) -> dict[str, list[Score | None]]:
    """Every draw of every sample scored, by sample id: None where a draw has no score, FAILED_DRAW where it failed
    (a solve that failed, or a missing record)."""
    scored: dict[str, list[Score | None]] = {}
    for s in samples:
        row: list[Score | None] = []
        for k in range(draws):
            rec = raw.get(draw_id(s.id, k))
            score = FAILED_DRAW if rec is None or rec.get("failed") else None
            if score is None:
                try:
                    score = task.score(s, rec["prediction"])
                except Exception:  # draw 0's record says why; a broken draw counts as unscored
                    score = None
            row.append(score)
        scored[s.id] = row
    return scored


def draws_summary(draws: Mapping[str, Sequence[Score | None]], headline: str | None,
                  metrics: Mapping[str, Any]) -> dict[str, Any]:
    """results.json `draws`: per score column the item-clustered mean and interval over K draws per item with the
    variance split (stats/draws.py), majority vote and pass@K where every score is 0 or 1. The column of
    Score.value is named by the task's headline when the headline is its plain mean, else `score`."""
    from ..stats.draws import clustered_mean_ci, majority_vote, pass_at_k_ci, variance_components

    draws = {sid: [None if s is FAILED_DRAW else s for s in row] for sid, row in draws.items()}
    k = max((len(row) for row in draws.values()), default=1)
    columns: dict[str, list[list[float | None]]] = {"score": []}
    for row in draws.values():
        columns["score"].append([None if s is None else s.value for s in row])
        for key in {key for s in row if s is not None for key in s.values}:
            columns.setdefault(key, [[] for _ in range(len(columns["score"]) - 1)])
        for key in columns:
            if key != "score":
                columns[key].append([None if s is None else s.values.get(key) for s in row])
    first = [v[0] for v in columns["score"] if v and v[0] is not None]
    named = dict(columns)
    shown = metrics.get(headline or "") or {}
    if first and shown.get("value") is not None and abs(sum(first) / len(first) - shown["value"]) < 1e-9:
        named = {headline: columns["score"], **{k2: v for k2, v in columns.items() if k2 != "score"}}
    out: dict[str, Any] = {"k": k, "metrics": {}}
    for name, per_item in named.items():
        if not any(v is not None for row in per_item for v in row):
            continue
        est = clustered_mean_ci(per_item)
        out["metrics"][name] = {"value": est.value, "ci95": list(est.ci95), "n": est.n, "method": est.method,
                                **({"warning": est.warning} if est.warning else {}),
                                "variance": variance_components(per_item).to_json()}
    binary = columns["score"] and all(v in (0.0, 1.0) for row in columns["score"] for v in row if v is not None)
    if binary and any(v is not None for row in columns["score"] for v in row):
        votes = []
        for row in draws.values():
            answers = [None if s is None else _hashable(s.extracted) for s in row]
            chosen = majority_vote(answers)
            votes.append(None if chosen is None else next(s.value for s, a in zip(row, answers) if a == chosen))
        kept = [v for v in votes if v is not None]
        vote = Metric.of(mean_ci(kept)) if kept else None
        out["majority"] = None if vote is None else {**vote.to_json(), "meaning": "the most frequent answer of "
                                                                                   "each item's draws, scored"}
        passed = pass_at_k_ci([[None if s is None else s.value == 1.0 for s in row] for row in draws.values()], k)
        out["pass_at_k"] = {"k": k, **Metric.of(passed).to_json()}
    return out


def _hashable(value: Any) -> Any:
    """An extracted answer as a vote: lists and mappings by their canonical JSON."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    from .hashing import canonical_json

    return canonical_json(to_jsonable(value))


def score_run(task: Task, samples: Sequence[Sample], raw: Mapping[str, Mapping[str, Any]]
              ) -> tuple[list[SampleRecord], Aggregate]:
    """Score every solved sample and aggregate them: the records (failed ones included, flagged by
    SampleRecord.failed) and the task's Aggregate over all of them."""
    records = score_records(task, samples, raw)
    return records, task.aggregate(samples, records)


def sample_line(rec: SampleRecord) -> dict[str, Any]:
    """One line of samples.jsonl."""
    gen = [t for t in rec.trace if t.get("kind") in ("generate", "loglikelihood")]
    thinking, thinking_tokens = sample_thinking(gen)
    first = gen[0] if gen else {}
    last = gen[-1] if gen else {}
    score = rec.score
    return {
        "id": rec.id,
        "prompt": first.get("prompt"),
        "response": last.get("response", last.get("logprobs")),
        **thinking,
        "prediction": rec.prediction,
        "target": to_jsonable(rec.target),
        "extraction": None if score is None else {"value": to_jsonable(score.extracted), "rule": score.rule,
                                                  "parsed": score.parsed},
        "score": None if score is None else {"value": score.value, "values": dict(score.values)},
        "truncated": rec.prompt_truncated or rec.length_stopped,
        "prompt_truncated": rec.prompt_truncated,
        "tokens": {"prompt": sum(t.get("prompt_tokens", 0) for t in gen),
                   "completion": sum(t.get("completion_tokens", 0) for t in gen), **thinking_tokens},
        "latency_s": round(sum(t.get("latency_s", 0.0) for t in gen), 4),
        "cache_hit": bool(gen) and all(t.get("cache_hit") for t in gen),
        "failed": rec.failed,
        "metadata": to_jsonable(rec.metadata),
        "trace": list(rec.trace),
    }


_SAMPLE_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""What json.dumps(..., ensure_ascii=False) builds per call, made once (same bytes)."""


def write_run(out_dir: Path, records: Sequence[SampleRecord], results: Mapping[str, Any]) -> None:
    """samples.jsonl, then results.json, each atomically (and redacted: no key a reply echoed): a results.json
    on disk means the run ended."""
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "samples.jsonl",
                      redact("".join(_SAMPLE_LINE_ENCODER.encode(sample_line(r)) + "\n" for r in records)))
    atomic_write_text(out_dir / "results.json", redact(json.dumps(results, ensure_ascii=False, indent=2) + "\n"))


def failure_kind(message: str | None) -> str:
    """The kind a failed sample's message starts with (`prompt-too-long: ...`, `task_error: ...`)."""
    head, sep, _ = (message or "").partition(": ")
    return head if sep and " " not in head else "error"


def failure_notes(failed: Sequence[SampleRecord]) -> list[str]:
    """What the reader must know about failed samples: whether a rerun can help (transient kinds) or not."""
    notes = []
    stopped = [r for r in failed if failure_kind(r.failed) == BUDGET_KIND]
    if stopped:
        notes.append(f"the budget stopped the run: {len(stopped)} sample(s) were not run; raise the budget "
                     "(--max-cost / --budget-tokens) and rerun the same command to resume")
    failed = [r for r in failed if failure_kind(r.failed) != BUDGET_KIND]
    retry = [r for r in failed if r.transient]
    fixed = [r for r in failed if not r.transient]
    if retry:
        kinds = ", ".join(f"{k} ×{n}" for k, n in Counter(failure_kind(r.failed) for r in retry).most_common())
        notes.append(f"{len(retry)} sample(s) failed on errors a later try may not meet ({kinds}) and are not scored; "
                     "rerun the same command to retry them (finished samples are not asked again)")
    if fixed:
        kinds = ", ".join(f"{k} ×{n}" for k, n in Counter(failure_kind(r.failed) for r in fixed).most_common())
        notes.append(f"{len(fixed)} sample(s) failed the same way every time they are tried ({kinds}) and are not "
                     "scored: a rerun will not change them; see each sample's `failed` in samples.jsonl (a prompt too "
                     "long: --truncate left|right or a larger context; a task_error: its traceback is in the trace)")
    return notes


def build_results(task: Task, config: RunConfig, agg: Aggregate, records: Sequence[SampleRecord],
                  counters: RunCounters, *, model: str, wall_s: float, versions: Mapping[str, Any],
                  run_key: str, cumulative: Mapping[str, Any] | None = None,
                  draws: Mapping[str, Sequence[Score | None]] | None = None) -> dict[str, Any]:
    """results.json. `cumulative`: the store's sum over every invocation of this run (RunStore.cumulative), so a
    resumed run still reports what the whole run spent; `counts` and `timing` are this invocation's."""
    scored = [r for r in records if r.score is not None]
    failed = [r for r in records if r.failed]
    counts = counters.to_json()
    counts.update(samples=len(records), scored=sum(1 for r in scored if r.score.value is not None),
                  failed_samples=len(failed), unparseable=sum(1 for r in scored if not r.score.parsed),
                  truncated_samples=sum(1 for r in records if r.prompt_truncated or r.length_stopped))
    kinds = Counter(failure_kind(r.failed) for r in failed)
    if kinds:
        counts["failure_kinds"] = dict(kinds.most_common())
    notes = list(agg.notes) + failure_notes(failed)
    adaptations = adaptations_of(r.trace for r in records)
    notes += adaptation_notes(adaptations, thinking_replies=counters.thinking_replies,
                              reasoning_tokens=counters.reasoning_tokens, thinking_truncations=counters.thinking_truncations)
    out = {
        "task": task.name,
        "model": model,
        "status": "complete" if not failed and counters.samples_done == counters.samples_total and not any(
            k and s is FAILED_DRAW for row in (draws or {}).values() for k, s in enumerate(row)) else "incomplete",
        "config": config.to_json(),
        "run_key": run_key,
        "headline": task.headline if task.headline in agg.metrics else next(iter(agg.metrics), None),
        "metrics": metrics_json(agg.metrics),
        "directions": {name: task.direction(name) for name in agg.metrics if task.direction(name) != "higher"},
        "groups": {g: {k: metrics_json(ms) for k, ms in vals.items()} for g, vals in agg.groups.items()},
        "counts": counts,
        "notes": notes,
        **({"flags": list(agg.flags)} if agg.flags else {}),
        **({"adaptations": adaptations} if adaptations else {}),
        "extra": to_jsonable(agg.extra),
        "timing": {"wall_s": round(wall_s, 3),
                   "completion_tokens_per_s": round(counters.completion_tokens / wall_s, 2) if wall_s > 0 else None,
                   "tokens_per_s": (round((counters.prompt_tokens + counters.completion_tokens
                                           + counters.tokens_evaluated) / wall_s, 2) if wall_s > 0 else None)},
        "versions": dict(versions),
        **({"cumulative": dict(cumulative)} if cumulative is not None else {}),
    }
    if draws is not None:
        summary = draws_summary(draws, out["headline"], out["metrics"])
        out["draws"] = summary
        for name, clustered in summary["metrics"].items():
            if name in out["metrics"]:
                out["metrics"][name]["clustered"] = {k: clustered[k] for k in ("value", "ci95", "n", "method",
                                                                                "warning") if k in clustered} | {
                    "sampling_share": clustered["variance"]["sampling_share"], "draws": summary["k"]}
    return out
