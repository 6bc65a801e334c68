"""The build pipeline: questions -> candidates and self-selection -> numerical audit -> judging.

Each phase reads its inputs from the build directory OUT, makes every model call through a CachedModel on
one run store (OUT/store.sqlite by default), and writes its files atomically when it ends. A rerun of a
phase after a crash, or of the whole build, serves every completed call from the store: it makes no call
twice, and rewrites the same files. OUT/build.json records each phase's counts (calls made, served from
the store, retries, failures) and wall time.

A (question, model) unit whose call fails for good is left out of that phase's files and counted; rerun
the command to retry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Mapping, Sequence

from ....backends import open_model
from ....core.backend import Backend, CallFailed
from ....core.model import CachedModel, RunCounters
from ....core.store import RunStore
from ....core.types import GenerateParams
from ....data.errors import DataError
from ....data.io import atomic_write_text, iter_jsonl, read_json, require_key, write_jsonl
from ....util import natural_key
from ..ideal import MarketData
from ..judge import fitted_judge_messages, judge_answer, reads_expected
from ..questions import CATEGORIES, GROUPS, Question
from .audit import AnswerAudit, AuditScope, Knowledge, audit_answer
from .calibration import JUDGE_SCORE_KEYS, SCORINGS, rubric_example
from .candidates import CandidateAnswer, SelectedAnswer, generate_candidates, self_select

QUESTIONS_FILE, CANDIDATES_FILE, SELECTED_FILE = "questions.jsonl", "candidates.jsonl", "selected.jsonl"
AUDIT_FILE, JUDGED_FILE, SUMMARY_FILE, STORE_FILE = "audit.jsonl", "judged.jsonl", "build.json", "store.sqlite"


Progress = Callable[[RunCounters], None]
ProgressFactory = Callable[[str], ContextManager[Progress]]


@contextlib.contextmanager
def no_progress(label: str):  # type: ignore[no-untyped-def]
    yield lambda counters: None


# --- questions ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BuildQuestion:
    """One line of questions.jsonl."""

    question_id: str
    category: str
    ticker: str
    """The company the question is about ('' for universe questions; several joined by ',')."""
    as_of: dt.date
    question: str
    golden_indicators: tuple[str, ...]
    source_id: str
    """The seed question it comes from (itself for a seed)."""
    scaled: bool
    context_tickers: tuple[str, ...]
    """Tickers whose data the ideal context shows (the named ones, else the group's or the release's
    fallback leaders with data at as-of)."""
    window_start: dt.date
    gold_answer: str = ""
    """The seed's reference answer (the judge's gold); '' for scaled variants."""

    def to_json(self) -> dict[str, Any]:
        return {"question_id": self.question_id, "category": self.category, "ticker": self.ticker,
                "as_of": self.as_of.isoformat(), "question": self.question,
                "golden_indicators": list(self.golden_indicators), "source_id": self.source_id, "scaled": self.scaled,
                "context_tickers": list(self.context_tickers), "window_start": self.window_start.isoformat(),
                "gold_answer": self.gold_answer}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], path: Path, line: int) -> "BuildQuestion":
        def date(key: str) -> dt.date:
            value = require_key(dict(obj), key, path, line)
            try:
                return dt.date.fromisoformat(str(value))
            except ValueError:
                raise DataError(f"{key} {value!r} is not an ISO date (YYYY-MM-DD)", path=path, line=line) from None

        category = require_key(dict(obj), "category", path, line)
        if category not in CATEGORIES:
            raise DataError(f"category {category!r} is not one of {', '.join(CATEGORIES)}", path=path, line=line)
        as_of = date("as_of")
        return cls(str(require_key(dict(obj), "question_id", path, line)), category, str(obj.get("ticker") or ""),
                   as_of, str(require_key(dict(obj), "question", path, line)),
                   tuple(require_key(dict(obj), "golden_indicators", path, line)),
                   str(obj.get("source_id") or obj["question_id"]), bool(obj.get("scaled", False)),
                   tuple(obj.get("context_tickers") or [t for t in str(obj.get("ticker") or "").split(",") if t]),
                   date("window_start") if obj.get("window_start") else as_of, str(obj.get("gold_answer") or ""))

    @property
    def scope(self) -> AuditScope:
        return AuditScope(self.context_tickers, self.as_of, self.window_start)


def select_questions(questions: Sequence[Question], per_category: int | None = None,
                     total: int | None = None) -> list[Question]:
    """In natural id order per category (F1, F2, ... as `finharness run -o per_category=N`): the first
    `per_category` of each category, then at most `total` (without `per_category`, total/3 per category,
    rounded up)."""
    ordered = sorted(questions, key=lambda q: (CATEGORIES.index(q.category), natural_key(q.id)))
    if per_category is None and total is not None:
        per_category = -(-total // len(CATEGORIES))
    if per_category is not None:
        taken = {c: 0 for c in CATEGORIES}
        kept = []
        for q in ordered:
            if taken[q.category] < per_category:
                kept.append(q)
                taken[q.category] += 1
        ordered = kept
    return ordered[:total] if total is not None else ordered


def build_questions(questions: Iterable[Question], market: MarketData, *, scaled: bool = False) -> list[BuildQuestion]:
    out = []
    for q in questions:
        group = GROUPS.get(q.tickers.group) if q.tickers.group else None
        shown, _ = market.context_tickers(q.tickers.tickers, group, q.date.as_of)
        out.append(BuildQuestion(q.id, q.category, ",".join(q.tickers.tickers), q.date.as_of, q.text, q.golden,
                                 q.source_id or q.id, scaled or q.source_id is not None, shown, q.date.window_start,
                                 q.gold_answer))
    return out


# --- files ----------------------------------------------------------------------------------------------

def read_questions_file(out: Path) -> list[BuildQuestion]:
    path = out / QUESTIONS_FILE
    if not path.is_file():
        raise DataError("no questions in the build directory", path=path,
                        hint="run `finharness fintradebench build candidates` (or `build run`) first")
    questions = [BuildQuestion.from_json(obj, path, line) for line, obj in iter_jsonl(path)]
    ids = [q.question_id for q in questions]
    if len(set(ids)) != len(ids):
        raise DataError("duplicate question_id", path=path)
    return questions


_CANDIDATE_KEYS = ("question_id", "model", "level", "candidate_index", "text")


def read_answers(out: Path, name: str, known: set[str]) -> list[dict[str, Any]]:
    """candidates.jsonl or selected.jsonl, each line checked (file and line named on bad input)."""
    path = out / name
    if not path.is_file():
        raise DataError("file not found", path=path, hint="run `finharness fintradebench build candidates` first")
    rows = []
    for line, obj in iter_jsonl(path, allow_empty=True):
        for key in _CANDIDATE_KEYS:
            require_key(obj, key, path, line)
        if obj["question_id"] not in known:
            raise DataError(f"question_id {obj['question_id']!r} is not in {QUESTIONS_FILE}", path=path, line=line)
        if not isinstance(obj["candidate_index"], int) or not isinstance(obj["text"], str):
            raise DataError("candidate_index must be an integer and text a string", path=path, line=line)
        rows.append(obj)
    return rows


def update_summary(out: Path, phase: str, data: Mapping[str, Any]) -> None:
    path = out / SUMMARY_FILE
    summary = read_json(path) if path.is_file() else {"phases": {}}
    summary.setdefault("phases", {})[phase] = dict(data)
    atomic_write_text(path, json.dumps(summary, ensure_ascii=False, indent=2) + "\n")


# --- the session: store, handles, counters -----------------------------------------------------------------

@dataclass
class BuildSession:
    """What every phase shares: the build directory, the run store, the market data, progress."""

    out: Path
    store: RunStore
    market: MarketData
    concurrency: int | None = None
    """Calls in flight per model (None: each backend's own maximum)."""
    seed: int = 0
    progress: ProgressFactory = no_progress
    _knowledge: Knowledge | None = field(default=None, repr=False)
    _contexts: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)

    @property
    def knowledge(self) -> Knowledge:
        if self._knowledge is None:
            self._knowledge = Knowledge(self.market)
        return self._knowledge

    def handles(self, backends: Mapping[str, Backend], counters: RunCounters, role: str) -> dict[str, CachedModel]:
        """A CachedModel per model spec (as run_task makes them): cached, retried, counted in `counters`."""
        return {spec: open_model(backend, self.store, role=role, counters=counters, concurrency=self.concurrency)
                for spec, backend in backends.items()}

    async def context(self, question: BuildQuestion) -> tuple[str, str]:
        """The ideal contexts (trading, fundamental) of a question, computed once."""
        if question.question_id not in self._contexts:
            made = await asyncio.to_thread(self.market.context, question.context_tickers, question.window_start,
                                           question.as_of)
            self._contexts[question.question_id] = (made.trading, made.fundamental)
        return self._contexts[question.question_id]

    async def run_units(self, label: str, units: Sequence[Any], work: Callable[[Any], Any],
                        counters: RunCounters) -> tuple[dict[int, Any], list[str]]:
        """Run `work` on each unit concurrently; (results by unit index, failure messages)."""
        counters.samples_total = len(units)
        results: dict[int, Any] = {}
        failures: list[str] = []
        in_flight = asyncio.Semaphore(max(4, 2 * (self.concurrency or 4)))
        with self.progress(label) as tick:
            tick(counters)

            async def one(index: int, unit: Any) -> None:
                async with in_flight:
                    try:
                        results[index] = await work(unit)
                    except CallFailed as err:
                        failures.append(f"{unit!r}: {err}")
                    counters.samples_done += 1
                    tick(counters)

            await asyncio.gather(*(one(i, u) for i, u in enumerate(units)))
        return results, failures


def phase_summary(counters: RunCounters, started: float, failures: Sequence[str], **extra: Any) -> dict[str, Any]:
    return {"units": counters.samples_total, "calls": counters.calls, "cache_hits": counters.cache_hits,
            "retries": counters.retries, "failures": counters.failures, "failed_units": len(failures),
            "failure_examples": list(failures[:10]), "prompt_tokens": counters.prompt_tokens,
            "completion_tokens": counters.completion_tokens, "length_stops": counters.length_stops,
            "wall_s": round(time.perf_counter() - started, 3), **extra}


# --- phase 1: candidates and self-selection --------------------------------------------------------------

async def candidates_phase(session: BuildSession, questions: Sequence[BuildQuestion], models: Mapping[str, Backend],
                           levels: Sequence[str], max_tokens: int = 1024, selection: str = "official"
                           ) -> dict[str, Any]:
    """questions.jsonl, candidates.jsonl and selected.jsonl for every question and model."""
    started = time.perf_counter()
    write_jsonl(session.out / QUESTIONS_FILE, (q.to_json() for q in questions))
    counters = RunCounters()
    handles = session.handles(models, counters, "model")
    params = GenerateParams(max_tokens=max_tokens, temperature=0.0)  # greedy, as the release
    units = [(q, spec) for q in questions for spec in handles]

    async def work(unit: tuple[BuildQuestion, str]) -> tuple[list[CandidateAnswer], SelectedAnswer]:
        question, spec = unit
        trading, fundamental = await session.context(question)
        made = await generate_candidates(handles[spec], question.question_id, question.question, trading, fundamental,
                                         levels, params)
        return made, await self_select(handles[spec], question.question, made, seed=session.seed, style=selection)

    results, failures = await session.run_units("candidates", units, work, counters)
    done = [results[i] for i in sorted(results)]
    write_jsonl(session.out / CANDIDATES_FILE, (c.to_json() for made, _ in done for c in made))
    write_jsonl(session.out / SELECTED_FILE, (chosen.to_json() for _, chosen in done))
    summary = phase_summary(counters, started, failures, questions=len(questions), models=list(handles),
                            levels=list(levels), selection=selection, candidates=sum(len(m) for m, _ in done))
    update_summary(session.out, "candidates", summary)
    return summary


# --- the numerical audit -----------------------------------------------------------------------------------

def answer_key(row: Mapping[str, Any]) -> tuple[str, str, int]:
    """(question_id, model, candidate_index): one answer text (a selected answer is one of the candidates)."""
    return row["question_id"], row["model"], row["candidate_index"]


def audit_row(answer: Mapping[str, Any], stage: str, audit: AnswerAudit) -> dict[str, Any]:
    return {"question_id": answer["question_id"], "model": answer["model"],
            "candidate_index": answer["candidate_index"], "level": answer["level"], "stage": stage, **audit.to_json()}


async def audit_phase(session: BuildSession, auditor: Mapping[str, Backend] | None = None) -> dict[str, Any]:
    """audit.jsonl: every candidate (stage 'before') and every self-selected answer (stage 'after')."""
    started = time.perf_counter()
    questions = {q.question_id: q for q in read_questions_file(session.out)}
    candidates = read_answers(session.out, CANDIDATES_FILE, set(questions))
    selected = read_answers(session.out, SELECTED_FILE, set(questions))
    counters = RunCounters()
    handle = next(iter(session.handles(auditor, counters, "auditor").values())) if auditor else None

    # the selected answer is one of the candidates: each text is audited once and reported in both stages
    unique = list({answer_key(row): row for row in [*candidates, *selected]}.values())

    async def work(row: Mapping[str, Any]) -> AnswerAudit:
        return await audit_answer(row["text"], questions[row["question_id"]].scope, session.knowledge, handle)

    await asyncio.to_thread(lambda: [session.knowledge.signals(t) for q in questions.values()
                                     for t in q.context_tickers])  # load prices off the event loop
    results, failures = await session.run_units("audit", unique, work, counters)
    audits = {answer_key(unique[i]): audit for i, audit in results.items()}
    rows = [audit_row(row, stage, audits[answer_key(row)])
            for stage, staged in (("before", candidates), ("after", selected))
            for row in staged if answer_key(row) in audits]
    write_jsonl(session.out / AUDIT_FILE, rows)
    totals = {stage: {k: sum(r[k] for r in rows if r["stage"] == stage) for k in ("supported", "contradicted",
                                                                                 "not_found")}
              for stage in ("before", "after")}
    for stage in totals:
        staged = [r for r in rows if r["stage"] == stage]
        totals[stage]["answers"] = len(staged)
        totals[stage]["accurate"] = sum(r["accurate"] for r in staged)
        totals[stage]["llm_claims"] = sum(c["method"] == "llm" for r in staged for c in r["claims"])
    summary = phase_summary(counters, started, failures, auditor=next(iter(auditor)) if auditor else None,
                            totals=totals)
    update_summary(session.out, "audit", summary)
    return summary


# --- judging -----------------------------------------------------------------------------------------------

async def judge_phase(session: BuildSession, judge: Mapping[str, Backend], all_candidates: bool = False,
                      judge_scores: str = "official") -> dict[str, Any]:
    """judged.jsonl: the rubric judge (judge.py) on every self-selected answer (stage 'after') and, with
    `all_candidates`, on every candidate (stage 'before'); the judge sees the ideal contexts.
    `judge_scores` (calibration.SCORINGS) 'expected': rows also carry `expected_scores` (judge.py expected_scores;
    null when the judge returns no logprobs); the judge is then asked for top logprobs, so its calls are new ones."""
    if judge_scores not in SCORINGS:
        raise ValueError(f"judge scores {judge_scores!r}: expected one of {list(SCORINGS)}")
    started = time.perf_counter()
    questions = {q.question_id: q for q in read_questions_file(session.out)}
    selected = read_answers(session.out, SELECTED_FILE, set(questions))
    candidates = read_answers(session.out, CANDIDATES_FILE, set(questions)) if all_candidates else []
    counters = RunCounters()
    spec, handle = next(iter(session.handles(judge, counters, "judge").items()))
    expected = judge_scores == "expected"
    notes = ([f"{spec} returns no next-token logprobs: expected scores not read (null)"]
             if expected and not reads_expected(handle) else [])
    unique = list({answer_key(row): row for row in [*candidates, *selected]}.values())  # each text judged once

    async def work(row: Mapping[str, Any]) -> dict[str, Any]:
        question = questions[row["question_id"]]
        trading, fundamental = await session.context(question)
        messages, cuts = fitted_judge_messages(handle, question=question.question, golden=question.golden_indicators,
                                               gold_answer=question.gold_answer, answer=row["text"], model=row["model"],
                                               mode="ideal", trading_context=trading, fundamental_context=fundamental)
        judgment = await judge_answer(handle, messages, expected=expected)
        verdict = judgment.verdict
        scores = ({key: verdict.scores.get(source) for key, source in JUDGE_SCORE_KEYS.items()}
                  if verdict.parsed else None)
        judged = {"judge": spec, "scores": scores, "golden_found": verdict.found_count,
                  "total_golden": verdict.total_golden, "found_indicators": list(verdict.found_indicators),
                  "attempts": judgment.attempts, "error": verdict.error,
                  **({"prompt_cut": cuts} if cuts else {})}  # the prompt did not fit the judge's window (fitting.py)
        if expected:  # official builds write what they always wrote
            read = judgment.expected
            judged["expected_scores"] = (None if read is None or scores is None else
                                         {key: read[source] for key, source in JUDGE_SCORE_KEYS.items()
                                          if source in read})
        return judged

    results, failures = await session.run_units("judge", unique, work, counters)
    verdicts = {answer_key(unique[i]): verdict for i, verdict in results.items()}
    rows = [{"question_id": row["question_id"], "model": row["model"], "candidate_index": row["candidate_index"],
             "level": row["level"], "stage": stage, **verdicts[answer_key(row)]}
            for stage, staged in (("before", candidates), ("after", selected)) for row in staged
            if answer_key(row) in verdicts]
    write_jsonl(session.out / JUDGED_FILE, rows)
    example = rubric_example()
    extra: dict[str, Any] = {}
    if expected:
        scored = sum(sum(v is not None for v in r["scores"].values()) for r in rows if r["scores"])
        read = sum(len(r["expected_scores"] or {}) for r in rows)
        extra = {"expected_coverage": [read, scored], "notes": notes}
    summary = phase_summary(counters, started, failures, judge=spec, judged=len(rows),
                            unparseable=sum(r["scores"] is None for r in rows),
                            rubric_example_verdicts=sum(r["scores"] == example for r in rows),
                            judge_scores=judge_scores, **extra)
    update_summary(session.out, "judge", summary)
    return summary
