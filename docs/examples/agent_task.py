"""FilingFacts: an agent task of your own over FinTradeBench's EDGAR filings (docs/write-a-task.md).

Each line of filing_facts.jsonl (beside this file, or `-o file=PATH`) is one question with a numeric answer and
the date it is asked at:
  {"id": "f1", "question": "...", "as_of": "2025-01-15", "answer": 93736000000}
The model answers in an agent episode with point-in-time tools over DATA_DIR/fintradebench/SEC_Filings (list,
search and read filings, look up an inline-XBRL fact) and a calculator; the final reply is read as a number.
Run it with
  finharness run docs/examples/agent_task.py:FilingFacts --model embedded --data-dir ../shared/data
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from finharness.agents import AgentLimits, calculator, run_episode
from finharness.agents.sec import sec_tools
from finharness.core.metrics import mean_metrics
from finharness.core.task import Aggregate, Models, Task
from finharness.core.types import GenerateParams, Message, Sample, Score
from finharness.data.io import iter_jsonl, require_key
from finharness.extract.numbers import find_numbers, match_number

SYSTEM = ("Answer the question about a company's SEC filings. Use the tools to find the figure; the filings are "
          "those available on the question's date. Reply with the figure alone when you know it.")


@dataclass(frozen=True)
class FilingFactsOptions:
    file: str = str(Path(__file__).with_name("filing_facts.jsonl"))
    """The questions (JSONL: question, as_of, answer)."""

    max_steps: int = 6
    """Model turns an episode may take."""


class FilingFacts(Task):
    name = "filing_facts"
    description = "numeric questions over EDGAR filings, answered by an agent with point-in-time tools"
    Options = FilingFactsOptions  # parsed into self.settings; part of the run key

    def __init__(self, settings: FilingFactsOptions | None = None, /, **options):
        super().__init__(settings, **options)
        self.limits = AgentLimits(max_steps=self.settings.max_steps)
        self.data_dir = Path(".")

    def load(self, data_dir: Path | None) -> list[Sample]:
        self.data_dir = Path(data_dir or ".")
        path = Path(self.settings.file)
        return [Sample(id=str(obj.get("id", line)), input={"question": require_key(obj, "question", path, line),
                                                           "as_of": require_key(obj, "as_of", path, line)},
                       target=float(require_key(obj, "answer", path, line)), metadata={"path": str(path), "line": line})
                for line, obj in iter_jsonl(path)]

    async def solve(self, sample: Sample, models: Models) -> dict:
        tools = [*sec_tools(self.data_dir, dt.date.fromisoformat(sample.input["as_of"])), calculator()]
        question = f"{sample.input['question']} (asked on {sample.input['as_of']})"
        episode = await run_episode(models.model, (Message("system", SYSTEM), Message("user", question)), tools,
                                    self.limits, GenerateParams(max_tokens=256))
        return episode.to_json()

    def score(self, sample: Sample, prediction: dict) -> Score:
        numbers = find_numbers(prediction.get("answer") or "")
        if not numbers:
            return Score(value=0.0, extracted=None, rule="no_number", parsed=False)
        matched = match_number(numbers[-1], sample.target)
        return Score(value=float(matched.correct), values={"steps": float(prediction["summary"]["steps"])},
                     extracted=numbers[-1].value, rule=matched.rule)

    def aggregate(self, samples, records) -> Aggregate:
        return Aggregate(metrics=mean_metrics((r.score for r in records), counts=("steps",)))
