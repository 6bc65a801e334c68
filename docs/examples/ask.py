"""Ask a model through the harness's model handle: cached, retried, counted (docs/write-a-task.md)."""

import asyncio
import sys

from finharness import open_model
from finharness.core.types import GenerateParams, Message

model = open_model(sys.argv[1] if len(sys.argv) > 1 else "embedded", "runs/ask.sqlite", role="model")
question = [Message("user", "A bond pays 5% a year on 1,000. What is the coupon? Answer in one number.")]
reply = asyncio.run(model.chat(question, GenerateParams(max_tokens=32)))
print(reply.text, "|", model.counters.calls, "call(s) made,", model.counters.cache_hits, "from the store")
