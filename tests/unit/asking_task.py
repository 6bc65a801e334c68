"""A minimal task for engine tests: n samples ('q0', 'q1', ...) that each ask the model `asks` times."""

from __future__ import annotations

from finharness.core.task import Models, Task
from finharness.core.types import GenerateParams, Message, Sample, Score


class AskingTask(Task):
    """Sample i asks 'qi' (then 'qi again', ...); right when an answer holds its target 'A'."""

    name = "asking"

    def __init__(self, n: int = 6, asks: int = 1):
        super().__init__(n=n, asks=asks)
        self.n, self.asks = n, asks

    def load(self, data_dir):
        return [Sample(id=f"s{i}", input=f"q{i}", target="A") for i in range(self.n)]

    async def solve(self, sample, models: Models):
        replies = [await models.model.chat([Message("user", sample.input + " again" * k)], GenerateParams(max_tokens=8))
                   for k in range(self.asks)]
        return "".join(r.text for r in replies)

    def score(self, sample, prediction):
        return Score(value=float(sample.target in prediction))
