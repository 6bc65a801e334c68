"""MyExam: a multiple-choice exam read from your own JSONL file (docs/write-a-task.md).

Each line of DATA_DIR/my_exam.jsonl is one question:
  {"id": "q1", "question": "...", "options": ["...", "...", "..."], "answer": "B", "topic": "bonds"}
("id" and "topic" are optional). Run it with
  finharness run my_exam.py:MyExam --model embedded --data-dir DATA_DIR
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finharness.core.metrics import grouped, mean_metrics
from finharness.core.task import Aggregate, Models, Task
from finharness.core.types import GenerateParams, Message, Sample, Score
from finharness.data.errors import DataError
from finharness.data.io import iter_jsonl, require_key
from finharness.extract.choices import extract_choice

LETTERS = "ABCDEFGH"


@dataclass(frozen=True)
class MyExamOptions:
    file: str = "my_exam.jsonl"
    """The questions, relative to --data-dir."""

    max_tokens: int = 32
    """Tokens the model may reply with."""


class MyExam(Task):
    name = "my_exam"
    description = "multiple-choice questions from my_exam.jsonl in the data dir"
    Options = MyExamOptions  # `-o file=... -o max_tokens=...`, parsed into self.settings; part of the run key

    def load(self, data_dir: Path | None) -> list[Sample]:
        path = Path(data_dir or ".") / self.settings.file
        samples = []
        for line, obj in iter_jsonl(path):
            options = require_key(obj, "options", path, line)
            answer = require_key(obj, "answer", path, line)
            if answer not in LETTERS[:len(options)]:
                raise DataError(f"answer {answer!r} is not the letter of one of the {len(options)} options",
                                path=path, line=line)
            samples.append(Sample(id=str(obj.get("id", line)),
                                  input={"question": require_key(obj, "question", path, line), "options": options},
                                  target=answer,
                                  metadata={"topic": obj.get("topic", "all"), "path": str(path), "line": line}))
        return samples

    def messages(self, sample: Sample) -> list[Message]:
        options = "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(sample.input["options"]))
        return [Message("user", "Answer the question with the letter of one option, as 'Answer: X'.\n\n"
                                f"{sample.input['question']}\n{options}")]

    async def solve(self, sample: Sample, models: Models) -> str:
        reply = await models.model.chat(self.messages(sample), GenerateParams(max_tokens=self.settings.max_tokens))
        return reply.text

    def score(self, sample: Sample, prediction: str) -> Score:
        options = {LETTERS[i]: text for i, text in enumerate(sample.input["options"])}
        found = extract_choice(prediction or "", options)
        return Score(value=float(found.answer == sample.target), extracted=found.answer, rule=found.rule,
                     parsed=found.parsed)

    def aggregate(self, samples, records) -> Aggregate:
        scores = [r.score for r in records]
        return Aggregate(metrics=mean_metrics(scores),
                         groups={"topic": grouped((r.metadata.get("topic", "all"), r.score) for r in records)})
