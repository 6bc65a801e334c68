"""`demo`: a dozen single-choice finance questions (English and Chinese) written for this project.

It gives the engine something real to run on the embedded model before any
benchmark data is present. Sample ids: `demo/LINE` (line index from 0).
"""

from __future__ import annotations

from pathlib import Path

from ...core.task import Models, Task
from ...core.types import GenerateParams, Message, Sample, Score
from ...data.io import iter_jsonl, require_key
from ...extract.choices import extract_choice

DATA = Path(__file__).with_name("demo_exam.jsonl")

INSTRUCTION = {
    "en": ("Answer the following single-choice question. Reply only with 'Answer: X', where X is one letter, "
           "and no explanation."),
    "zh": "请回答下面的单项选择题，并以“答案：X”的格式作答，X为一个字母。",
}


def render_question(question: str, options: list[str]) -> str:
    return question + "\n" + "\n".join(f"{chr(65 + i)}. {opt}" for i, opt in enumerate(options))


class DemoTask(Task):
    name = "demo"
    description = "12 single-choice finance questions (en + zh) shipped with finharness"

    def __init__(self, max_tokens: int = 64):
        super().__init__(max_tokens=max_tokens)
        self.max_tokens = max_tokens

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

    async def solve(self, sample: Sample, models: Models) -> str:
        reply = await models.model.chat(self.messages(sample), GenerateParams(max_tokens=self.max_tokens))
        return reply.text

    def score(self, sample: Sample, prediction: str) -> Score:
        options = {chr(65 + i): text for i, text in enumerate(sample.input["options"])}
        found = extract_choice(prediction or "", options)
        value = None if sample.target is None else float(found.answer == sample.target)
        return Score(value=value, extracted=found.answer, rule=found.rule, parsed=found.parsed)

    def aggregate(self, samples, records):
        from ...core.metrics import grouped, mean_metrics
        from ...core.task import Aggregate
        scores = [r.score for r in records]
        return Aggregate(metrics=mean_metrics(scores),
                         groups={"lang": grouped((r.metadata.get("lang", "?"), r.score) for r in records)})
