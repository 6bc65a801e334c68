"""`demo`: a dozen single-choice finance questions (English and Chinese) written for this project.

It gives the engine something real to run on the embedded model before any
benchmark data is present. Sample ids: `demo/LINE` (line index from 0).

Options: `max_tokens` (64), `method` 'gen' (default: generate, extract the letter) | 'll' (log-likelihood
of ' A', ' B'... after the instruction, the question and 'Answer:' / '答案：') | 'letters' | 'auto' | 'all'
(benchmarks/mc_methods.py). Headline `accuracy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.task import Models, Task
from ...core.types import GenerateParams, LoglikelihoodRequest, Message, Sample, Score
from ...data.io import iter_jsonl, require_key
from ...extract.choices import UNPARSEABLE, extract_choice
from ..mc_methods import (
    METHOD_CHOICES,
    METHOD_DIRECTIONS,
    is_multi,
    is_multi_method,
    ll_choice,
    score_methods,
    solve_choice,
    summarise_methods,
)

DATA = Path(__file__).with_name("demo_exam.jsonl")

INSTRUCTION = {
    "en": ("Answer the following single-choice question. Reply only with 'Answer: X', where X is one letter, "
           "and no explanation."),
    "zh": "请回答下面的单项选择题，并以“答案：X”的格式作答，X为一个字母。",
}

LL_CUE = {"en": "\nAnswer:", "zh": "\n答案："}
"""`ll`: the context ends with this cue; each option X is scored as the continuation ' X'."""


def render_question(question: str, options: list[str]) -> str:
    return question + "\n" + "\n".join(f"{chr(65 + i)}. {opt}" for i, opt in enumerate(options))


@dataclass(frozen=True)
class DemoOptions:
    """The demo's options."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {"method": METHOD_CHOICES}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("max_tokens",)

    max_tokens: int = 64
    """Generation budget per reply."""
    method: str = "gen"
    """'gen' (generate, extract the letter), 'll' (log-likelihood of each option letter), 'letters', 'auto' or
    'all' (docs/methods.md)."""


class DemoTask(Task):
    name = "demo"
    description = "12 single-choice finance questions (en + zh) shipped with finharness"
    metric_directions = METHOD_DIRECTIONS
    metric_docs: ClassVar[Mapping[str, str]] = {
        "accuracy": "share of the 12 questions answered with the right letter",
        "M.accuracy, agreement.*, kappa.*": "with method all: each method's accuracy, and how often methods agree"}
    Options = DemoOptions

    def __init__(self, settings: DemoOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        self.max_tokens = self.settings.max_tokens
        self.method = self.settings.method

    def key_options(self, settings: DemoOptions) -> dict[str, Any]:
        # 'gen' stays out of the options so that the default run key is what it was before methods existed
        return {"max_tokens": settings.max_tokens, **({} if settings.method == "gen" else {"method": settings.method})}

    def load(self, data_dir: Path | None) -> list[Sample]:
        samples = []
        for line, obj in iter_jsonl(DATA):
            options = require_key(obj, "options", DATA, line)
            samples.append(Sample(id=f"demo/{line - 1}", input={"question": require_key(obj, "question", DATA, line),
                                                                "options": options},
                                  target=require_key(obj, "answer", DATA, line),
                                  metadata={"lang": obj.get("lang", "en"), "path": str(DATA), "line": line}))
        return samples

    def messages(self, sample: Sample) -> list[Message]:
        lang = sample.metadata["lang"]
        return [Message("user", INSTRUCTION[lang] + "\n\n" + render_question(sample.input["question"],
                                                                          sample.input["options"]))]

    def letters(self, sample: Sample) -> list[str]:
        return [chr(65 + i) for i in range(len(sample.input["options"]))]

    def ll_request(self, sample: Sample) -> LoglikelihoodRequest:
        lang = sample.metadata["lang"]
        context = (INSTRUCTION[lang] + "\n\n" + render_question(sample.input["question"], sample.input["options"])
                   + LL_CUE[lang])
        return LoglikelihoodRequest(context, tuple(" " + x for x in self.letters(sample)))

    async def solve(self, sample: Sample, models: Models) -> Any:
        model = models.model
        params = GenerateParams(max_tokens=self.max_tokens)

        letters = self.letters(sample)

        async def loglikelihood() -> Any:
            return ll_choice(letters, (await model.loglikelihood(self.ll_request(sample))).logprobs)

        return await solve_choice(self.method, model, messages=lambda: self.messages(sample), params=params,
                                  letters=letters, loglikelihood=loglikelihood)

    def score(self, sample: Sample, prediction: Any) -> Score:
        if is_multi(prediction):
            return score_methods(prediction, lambda _m, p: self.score(sample, p), lambda _m, s: s.extracted,
                                 value_name="accuracy")
        if isinstance(prediction, Mapping):  # ll or letters
            choice = prediction.get("choice")
            value = None if sample.target is None else float(choice == sample.target)
            return Score(value=value, extracted=choice, rule=prediction.get("rule", "loglikelihood") if choice
                         else UNPARSEABLE, parsed=bool(choice))
        options = {chr(65 + i): text for i, text in enumerate(sample.input["options"])}
        found = extract_choice(prediction or "", options)
        value = None if sample.target is None else float(found.answer == sample.target)
        return Score(value=value, extracted=found.answer, rule=found.rule, parsed=found.parsed)

    def aggregate(self, samples, records):
        from ...core.metrics import grouped, mean_metrics
        from ...core.task import Aggregate
        metrics = mean_metrics(r.score for r in records)
        extra: dict[str, Any] = {}
        notes: list[str] = []
        if is_multi_method(self.method):
            agreement, extra["methods"], notes = summarise_methods(self.method, records)
            metrics.update(agreement)
        return Aggregate(metrics=metrics, notes=notes, extra=extra,
                         groups={"lang": grouped((r.metadata.get("lang", "?"), r.score) for r in records)})
