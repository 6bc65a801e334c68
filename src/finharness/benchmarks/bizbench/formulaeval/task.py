"""`bizbench/formulaeval`: complete a finance function or statement method from its stub; a completion is
correct iff it matches the reference on every one of `cases` (100) seeded inputs, run in the sandbox.

Reading (extract/code.py): official = exactly one fenced block (the pipeline's `python_extract`);
robust = the robust fences, an unclosed fence, or a bare program. Both are run and reported; the
headline `accuracy` follows `extract`. `inputs_passed` / `robust_inputs_passed` give the fraction of
inputs matched (partial credit, for diagnosis only).

Options: seed (0; changes the inputs), cases (100), extract, max_tokens (1024), pool_size (2), sandbox
(auto | bwrap | kernel | unsafe: the isolation of the programs; see docs/sandbox.md).
Sample ids: 'formulaeval/NAME' ('formulaeval/net_present_value', 'formulaeval/IncomeStatement.ebitda').
Program outcomes (ok / wrong / timeout / memory / error:Class / unparseable) are counted per mode in
Aggregate.extra['failure_classes'].
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ....core.metrics import grouped, mean_metrics
from ....core.task import Aggregate, Models, SampleRecord, Task
from ....core.types import GenerateParams, Sample, Score
from ....extract.code import UNPARSEABLE, extract_code
from ..prompts import FORMULAEVAL_SYSTEM, formulaeval_messages
from ..scoring import (
    EXTRACTION_MODES,
    SANDBOX_CHOICES,
    Outcome,
    ProgramJob,
    ProgramRunner,
    failure_classes,
    rule_counts,
)
from .formulas import FORMULAS, Formula, formula


@dataclass(frozen=True)
class FormulaEvalOptions:
    """Everything that changes FormulaEval's requests or scores."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {"extract": EXTRACTION_MODES, "sandbox": SANDBOX_CHOICES}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("cases", "max_tokens", "pool_size")

    seed: int = 0
    """Seed of the inputs (each formula draws from sha256('formulaeval:NAME:SEED'))."""

    cases: int = 100
    """Inputs per formula."""

    extract: str = "official"
    """Reading of the headline."""

    max_tokens: int = 1024
    """Generation budget."""

    pool_size: int = 2
    """Sandbox workers of each kind."""

    sandbox: str = "auto"
    """Isolation of the programs (scoring.SANDBOX_CHOICES); not in the run key."""



@dataclass(frozen=True)
class Check:
    """A completion run on every input."""

    outcome: Outcome
    """ok (all inputs match), wrong, timeout, memory, error:Class, unparseable."""

    passed: int
    """Inputs whose value matched the reference."""

    total: int
    """Inputs tried."""


class FormulaEvalTask(Task):
    """FormulaEval: finance formulas as Python functions, checked against references on random inputs."""

    name: ClassVar[str] = "bizbench/formulaeval"
    metric_docs: ClassVar[Mapping[str, str]] = {
        "accuracy": "share of functions equal to the reference on every seeded input",
        "inputs_passed / robust_inputs_passed": "the fraction of inputs matched (diagnosis only)"}
    description: ClassVar[str] = ("BizBench FormulaEval: complete 51 finance functions and statement methods; "
                                  "correct iff equal to the reference on 100 seeded inputs (sandboxed)")

    Options = FormulaEvalOptions

    def __init__(self, settings: FormulaEvalOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        from ....sandbox import Limits

        # 100 calls in one job: more room than a single program gets
        self.runner = ProgramRunner(pool_size=self.settings.pool_size, limits=Limits(cpu_s=5.0, wall_s=10.0),
                                    sandbox=self.settings.sandbox)
        self.runner.check(self.name)  # refuse before any model call when programs cannot be isolated
        self._expected: dict[str, tuple[list[Any], list[Any]]] = {}

    def key_options(self, settings: FormulaEvalOptions) -> dict[str, Any]:
        # workers and their isolation change no result
        return {k: v for k, v in asdict(settings).items() if k not in ("pool_size", "sandbox")}

    def load(self, data_dir: Path | None) -> list[Sample]:
        return [Sample(id=f"formulaeval/{item.name}", input={"name": item.name, "stub": item.stub()},
                       target=item.reference_source, metadata={"kind": item.kind, "group": item.group})
                for item in FORMULAS]

    async def solve(self, sample: Sample, models: Models) -> str:
        params = GenerateParams(max_tokens=self.settings.max_tokens, temperature=0.0, top_p=1.0)
        reply = (await models.model.chat(formulaeval_messages(sample.input["stub"]), params)).text
        await asyncio.to_thread(self.checks, sample, reply)  # run now; score() reads the runner's memory
        return reply

    def _cases(self, item: Formula) -> tuple[list[Any], list[Any]]:
        if item.name not in self._expected:
            cases = item.cases(self.settings.seed, self.settings.cases)
            self._expected[item.name] = (cases, item.expected(cases))
        return self._expected[item.name]

    def check(self, item: Formula, completion: str) -> Check:
        """Run a completion (code, not a reply) on every input and compare with the reference."""
        cases, expected = self._cases(item)
        result = self.runner.run(ProgramJob(code=item.program(completion), cache_key=item.name), call=item.call(cases))
        if result.status != "ok":
            kind = result.status if result.status in ("timeout", "memory") else "error"
            return Check(Outcome(kind, result.error_class, result.message), 0, len(cases))
        values = result.value or []
        passed = sum(item.matches(got, want) for got, want in zip(values, expected))
        errors = [e for e in (result.call_errors or ()) if e]
        if passed == len(cases):
            return Check(Outcome("ok"), passed, len(cases))
        if errors:
            return Check(Outcome("error", errors[0].split(":", 1)[0], f"{len(errors)} of {len(cases)} calls raised; "
                                 f"first: {errors[0]}"), passed, len(cases))
        return Check(Outcome("wrong", None, f"{passed} of {len(cases)} inputs match"), passed, len(cases))

    def checks(self, sample: Sample, reply: str) -> dict[str, tuple[Any, Check]]:
        item = formula(sample.input["name"])
        out = {}
        for mode in EXTRACTION_MODES:
            code = extract_code(reply or "", mode)  # type: ignore[arg-type]
            if not code.parsed:
                out[mode] = (code, Check(Outcome("unparseable", None, code.detail), 0, self.settings.cases))
            else:
                out[mode] = (code, self.check(item, code.code or ""))
        return out

    def score(self, sample: Sample, prediction: Any) -> Score:
        checks = self.checks(sample, "" if prediction is None else str(prediction))
        values: dict[str, float] = {}
        extracted: dict[str, Any] = {}
        notes = []
        for mode, (code, check) in checks.items():
            values[mode] = float(check.outcome.kind == "ok")
            values["inputs_passed" if mode == "official" else f"{mode}_inputs_passed"] = check.passed / check.total
            extracted[f"{mode}_rule"] = code.rule
            extracted[f"{mode}_outcome"] = check.outcome.label
            extracted[f"{mode}_passed"] = check.passed
            if check.outcome.message and check.outcome.kind != "ok":
                notes.append(f"{mode}: {check.outcome.label}: {check.outcome.message}")
        headline_code, _ = checks[self.settings.extract]
        return Score(values[self.settings.extract], values, extracted, headline_code.rule, headline_code.parsed,
                     "; ".join(notes) or None)

    def gold_prediction(self, sample: Sample) -> str:
        """The reference source as a reply (for the gold-through-the-same-path check)."""
        return f"```python\n{sample.target.rstrip()}\n```"

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        scored = [r for r in records if r.score is not None and r.score.value is not None]
        extracted = [r.score.extracted for r in scored]
        groups = {key: grouped((str(r.metadata.get(key)), r.score) for r in scored) for key in ("group", "kind")}
        extra = {"failure_classes": failure_classes(extracted), "rules": rule_counts(extracted),
                 "unparseable": {m: sum((e or {}).get(f"{m}_rule") == UNPARSEABLE for e in extracted)
                                 for m in EXTRACTION_MODES},
                 "formulas": len(FORMULAS), "system_message": FORMULAEVAL_SYSTEM,
                 "sandbox": self.runner.record(),
                 "options": asdict(self.settings)}
        notes = [f"a completion is correct iff it matches the reference on all {self.settings.cases} inputs "
                 f"(seed {self.settings.seed}); '*inputs_passed' is the fraction matched"]
        return Aggregate(metrics=mean_metrics([r.score for r in scored]), groups=groups, notes=notes, extra=extra)

    def close(self) -> None:
        self.runner.close()
