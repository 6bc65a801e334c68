"""`replay:FILE`: answer from recorded calls, for dry runs and offline re-scoring.

FILE is a run store (`.sqlite`) or a JSONL of `{"kind", "request", "response"}`
lines (the `calls` table exported). A request that was never recorded fails
for good with a message, never with an invented answer.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.backend import BaseBackend, CallFailed, Capabilities, SpecError
from ..core.hashing import content_key
from ..core.model import response_from_json
from ..core.store import RunStore
from ..core.types import GenerateRequest, LoglikelihoodRequest, to_jsonable


class ReplayBackend(BaseBackend):
    def __init__(self, spec: str, path: Path):
        self.spec = spec
        self.path = path
        self.recorded: dict[str, tuple[str, dict]] = {}
        if path.suffix in (".sqlite", ".db"):
            store = RunStore(path)
            calls = list(store.iter_calls())
            store.close()
        else:
            calls = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for call in calls:
            self.recorded[content_key(call["kind"], call["request"])] = (call["kind"], call["response"])
        self.capabilities = Capabilities(generate=True, loglikelihood=True, max_concurrency=16)

    def identity(self):
        return {"backend": "replay", "file": str(self.path.resolve())}

    def _lookup(self, kind: str, request):
        found = self.recorded.get(content_key(kind, to_jsonable(request)))
        if found is None:
            raise CallFailed(f"replay:{self.path}: no recorded {kind} response for this request", attempts=1,
                             kind="replay-miss")
        return response_from_json(kind, found[1])

    async def generate(self, request: GenerateRequest):
        return self._lookup("generate", request)

    async def loglikelihood(self, request: LoglikelihoodRequest):
        return self._lookup("loglikelihood", request)


def from_spec(spec: str) -> ReplayBackend:
    path = Path(spec.split(":", 1)[1]) if ":" in spec else None
    if path is None or not path.exists():
        raise SpecError(f"model spec {spec!r}: replay needs an existing file (replay:PATH.sqlite or .jsonl)")
    return ReplayBackend(spec, path)
