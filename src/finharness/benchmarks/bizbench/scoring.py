"""BizBench scoring: read an answer (a [[number]] or a program, run in the sandbox), compare it with
the gold under every named mode, and count how programs failed.

Reading, per extraction mode (extract/numbers.py and extract/code.py do the reading itself):
  official  the pipeline's `parse_output` (prompt.py): a reply containing ``` is code -- exactly one
            fenced block, run, its value is the last statement's value -- any other reply is read by
            `brace_extract` (exactly one [[…]], ',' '$' '%' stripped, float()). The pipeline applies
            this to every task, extraction tasks included.
  robust    a reply with ``` is code (robust fences; value from the last expression or `answer`);
            otherwise [[…]] / \\boxed{} if present, else a bare program, else the finance-aware number
            cascade (answer cue, bare number).
A program never runs in-process: `ProgramRunner` sends it to `finharness.sandbox` (created lazily,
once per task instance, closed by `close()`); a table question also gets its table as `df` when the
program names `df` (our gold CodeTAT-QA programs read `df.loc[row, column]`; the model never sees
`df` mentioned, so for it this changes nothing).

Matching, per sample (every key is in Score.values, averaged into a metric of the same name):
  official            official reading, |pred - gold| <= 1% |gold| (the BizBench paper)
  round5              official reading, round(pred, 5) == round(gold, 5) (FinQA's rule)
  scale_aware         official reading, 1%, and a scale slip is forgiven (an answer in units for a gold
                      in millions, a ratio for a percentage; extract/numbers.match_number)
  robust              robust reading, 1%, scale-aware (so a TAT-QA answer in millions given in units is
                      wrong under `official` and right under `robust`)
  robust_unscaled     robust reading, 1%, no scale normalisation
  robust_round5       robust reading, FinQA's round-5 rule
The headline `accuracy` is `official` or `robust` (the task's `extract` option).

Program outcomes (`Outcome.kind`), counted per mode in Aggregate.extra['failure_classes']:
  ok, wrong (ran; value not the gold, or not a number), timeout, memory, error:<ExceptionClass>,
  and for replies that were not programs: number (read as a number), unparseable.
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ...extract.code import CodeExtraction, extract_code_official, extract_code_robust, official_dispatch
from ...extract.numbers import UNPARSEABLE, NumberReading, match_number, read_official, read_robust

EXTRACTION_MODES = ("official", "robust")

VALUE_KEYS: dict[str, tuple[str, str, str]] = {
    "official": ("official", "within_1pct", "official"),
    "round5": ("official", "exact_round5", "official"),
    "scale_aware": ("official", "within_1pct", "robust"),
    "robust": ("robust", "within_1pct", "robust"),
    "robust_unscaled": ("robust", "within_1pct", "official"),
    "robust_round5": ("robust", "exact_round5", "official"),
}
"""Score.values key -> (reading mode, closeness rule, match mode of extract/numbers.match_number:
'official' = no normalisation, 'robust' = scale-aware)."""

OUTCOME_KINDS = ("ok", "wrong", "timeout", "memory", "error", "number", "unparseable")


# --- gold scale ---------------------------------------------------------------------------------------

_SECNUM_SCALES = {3: "thousand", 6: "million", 9: "billion", 12: "trillion", -2: "percent"}
_QUESTION_SCALE = re.compile(r"\((?:in\s+)?(thousand|million|billion|trillion|percent)s?\)\s*$", re.IGNORECASE)


def gold_scale(question: str, metadata: Mapping[str, Any]) -> str:
    """The gold's unit for scale-aware matching: TAT-QA's `scale`, SEC-Num's XBRL scale, else the
    question's trailing note ('(million)', '(in millions)'); '' when none."""
    scale = metadata.get("scale")
    if isinstance(scale, str) and scale:
        return scale.lower()
    if isinstance(scale, int) and not isinstance(scale, bool):
        return _SECNUM_SCALES.get(scale, "")
    found = _QUESTION_SCALE.search(question or "")
    return found.group(1).lower() if found else ""


# --- outcomes and readings ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """What happened to one reply under one reading mode."""

    kind: str
    """ok / wrong / timeout / memory / error / number / unparseable (see the module docstring)."""

    error_class: str | None = None
    """For 'error' (and 'timeout'/'memory'): the exception or sandbox reason (ZeroDivisionError, WallTimeout)."""

    message: str | None = None
    """Detail for the reader (the error message with its line, or why nothing was read)."""

    @property
    def label(self) -> str:
        """'error:ZeroDivisionError', 'timeout', 'ok'..."""
        return f"error:{self.error_class}" if self.kind == "error" and self.error_class else self.kind


@dataclass(frozen=True)
class Answer:
    """One reply read in one mode: the number (or None), the rule, and the program's outcome."""

    reading: NumberReading
    """The number read (a program's value becomes a reading with rule 'program')."""

    outcome: Outcome
    """'number' / 'unparseable' for non-programs; the program's execution outcome otherwise."""

    code: CodeExtraction | None = None
    """The program, when the reply was read as one."""


@dataclass(frozen=True)
class ProgramJob:
    """A program to run for one sample."""

    code: str
    value_mode: str = "last_expression"
    inputs: Mapping[str, Any] | None = None
    """Variables set before the program runs (e.g. {'df': DataFrame})."""
    cache_key: str = ""
    """Identifies the inputs (e.g. the sample id): equal code and key share one execution."""


def float_value(value: Any) -> float | None:
    """The pipeline accepts a program value when float(value) works (`is_float`); lists etc. do not."""
    if isinstance(value, (list, dict, tuple)) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number


def _program_answer(code: CodeExtraction, run: Callable[[ProgramJob], Any], job_for: Callable[[CodeExtraction], ProgramJob]
                    ) -> Answer:
    result = run(job_for(code))
    if result.status == "ok":
        number = float_value(result.value)
        if number is None:
            return Answer(NumberReading(None, "program:" + code.rule, detail="program value is not a number"),
                          Outcome("wrong", "NotANumber", f"the program's value is {str(result.value)[:80]!r}"), code)
        return Answer(NumberReading(number, "program:" + code.rule, mantissa=number),
                      Outcome("ok"), code)
    kind = result.status if result.status in ("timeout", "memory") else "error"
    return Answer(NumberReading(None, "program:" + code.rule, detail=f"program {result.status}"),
                  Outcome(kind, result.error_class, result.message), code)


def read_answer(reply: str, mode: str, run: Callable[[ProgramJob], Any],
                job_for: Callable[[CodeExtraction], ProgramJob]) -> Answer:
    """Read a reply in one mode (see the module docstring); programs go through `run`."""
    reply = reply or ""
    if mode == "official":
        if official_dispatch(reply) == "code":
            code = extract_code_official(reply)
            if not code.parsed:
                return Answer(NumberReading(None, UNPARSEABLE, detail=code.detail), Outcome("unparseable", None, code.detail),
                              code)
            return _program_answer(code, run, job_for)
        reading = read_official(reply)
        return Answer(reading, Outcome("number" if reading.parsed else "unparseable", None, reading.detail))
    if mode != "robust":
        raise ValueError(f"unknown extraction mode {mode!r}; use one of {list(EXTRACTION_MODES)}")
    text = reply.rsplit("</think>", 1)[-1]
    if "```" in text:
        code = extract_code_robust(reply)
        if code.parsed:
            return _program_answer(code, run, job_for)
    reading = read_robust(reply)
    if reading.parsed and reading.rule.startswith(("brackets", "boxed")):
        return Answer(reading, Outcome("number"))
    if "```" not in text:
        code = extract_code_robust(reply)
        if code.parsed:  # a bare program
            return _program_answer(code, run, job_for)
    return Answer(reading, Outcome("number" if reading.parsed else "unparseable", None, reading.detail))


def match_values(answers: Mapping[str, Answer], gold: float, scale: str) -> dict[str, float]:
    """Every VALUE_KEYS entry for one sample (1.0 correct, 0.0 not)."""
    values = {}
    for key, (reading_mode, rule, match_mode) in VALUE_KEYS.items():
        result = match_number(answers[reading_mode].reading, gold, mode=match_mode, gold_scale=scale,  # type: ignore[arg-type]
                              rule=rule)  # type: ignore[arg-type]
        values[key] = float(result.correct)
    return values


def final_outcome(answer: Answer, correct: bool) -> Outcome:
    """A program that ran ok but whose value is not the gold becomes 'wrong'."""
    if answer.outcome.kind == "ok" and not correct:
        return Outcome("wrong", None, f"value {answer.reading.value!r}")
    return answer.outcome


def _counts_by_mode(extracted: Iterable[Mapping[str, Any] | None], suffix: str) -> dict[str, dict[str, int]]:
    """mode -> value of the Score.extracted key '<mode>_<suffix>' -> count, most common first."""
    table: dict[str, Counter] = {mode: Counter() for mode in EXTRACTION_MODES}
    for entry in extracted:
        for mode in EXTRACTION_MODES:
            value = (entry or {}).get(f"{mode}_{suffix}")
            if value:
                table[mode][value] += 1
    return {mode: dict(counter.most_common()) for mode, counter in table.items()}


def failure_classes(extracted: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, int]]:
    """mode -> outcome label -> count, from Score.extracted dicts (keys '<mode>_outcome')."""
    return _counts_by_mode(extracted, "outcome")


def rule_counts(extracted: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, int]]:
    """mode -> extraction rule -> count (keys '<mode>_rule')."""
    return _counts_by_mode(extracted, "rule")


# --- the sandbox, once per task instance -------------------------------------------------------------------

SANDBOX_CHOICES = ("auto", "bwrap", "kernel", "unsafe")
"""The `sandbox` task option: auto (bubblewrap + seccomp + Landlock, else seccomp + Landlock without
namespaces, else refuse), bwrap or kernel (that, or refuse), unsafe (the strongest available, and when
that is nothing the kernel enforces, rlimits + the audit guard with a warning). See docs/sandbox.md."""


@dataclass
class ProgramRunner:
    """Runs programs in one lazily started `finharness.sandbox.Sandbox`, remembering results so that a
    program executed while solving (or under both modes) runs once. Call `close()` at the end."""

    pool_size: int = 2
    """Workers of each kind in the sandbox pool."""

    limits: Any = None
    """finharness.sandbox.Limits for every run (None: the sandbox defaults, 2 s CPU, 5 s wall)."""

    sandbox: str = "auto"
    """The isolation choice (SANDBOX_CHOICES), passed to Sandbox(isolation=...)."""

    _sandbox: Any = None
    _planned: str | None = None
    _refusal: str | None = None
    _memo: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    executions: int = 0
    """Programs actually executed (not served from memory)."""

    @property
    def isolation(self) -> str | None:
        """The sandbox's isolation layers: once it is started, or as `check()` planned them."""
        return self._planned if self._sandbox is None else self._sandbox.isolation

    def record(self) -> dict[str, Any]:
        """What results.json keeps of the sandbox (extra.sandbox)."""
        return {"choice": self.sandbox, "isolation": self.isolation, "executions": self.executions}

    def check(self, task: str) -> None:
        """Before a task that runs model code starts: raise ValueError (an `error:` line) when the chosen
        isolation cannot be had here, naming what is missing; print the warning of an unsafe fallback."""
        from ...sandbox import SandboxUnavailable, resolve_kind
        from ...sandbox.launch import UNSAFE_WARNING, isolation_label, missing_layers

        try:
            kind = resolve_kind(self.sandbox)
            self._planned = isolation_label(self.sandbox, True)
        except SandboxUnavailable as exc:
            raise ValueError(f"{task}: {exc}") from None
        if kind == "bare":
            print(UNSAFE_WARNING.format(missing=missing_layers()), file=sys.stderr)

    def _ensure(self) -> Any:
        with self._lock:
            if self._sandbox is None:
                from ...sandbox import Sandbox

                self._sandbox = Sandbox(pool_size=self.pool_size, limits=self.limits, isolation=self.sandbox)
            return self._sandbox

    @staticmethod
    def key(job: ProgramJob, call: Any = None) -> str:
        text = f"{job.cache_key}\x00{job.value_mode}\x00{job.code}\x00{call!r}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def run(self, job: ProgramJob, call: tuple[str, Sequence[Any]] | None = None) -> Any:
        """The ExecResult of a job (from memory when the same job ran before)."""
        key = self.key(job, call)
        if key in self._memo:
            return self._memo[key]
        from ...sandbox import ExecResult, SandboxUnavailable

        try:
            sandbox = self._ensure()
        except SandboxUnavailable as exc:  # a task that only sometimes meets a program: that answer fails
            return ExecResult(status="error", error_class="SandboxUnavailable", message=str(exc))
        options: dict[str, Any] = {"inputs": dict(job.inputs or {})}
        if call is not None:
            options["call"] = call
        else:
            options["mode"] = job.value_mode
        result = sandbox.run(job.code, **options)
        self._memo[key] = result
        self.executions += 1
        return result

    def close(self) -> None:
        """Stop the sandbox workers (a later run starts a new sandbox)."""
        with self._lock:
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()
