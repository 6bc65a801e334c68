"""Log-likelihoods over HTTP (`openai-completions:`) against the embedded engine on the same GGUF.

The server answers /tokenize and /v1/completions from the embedded model (tests/servers/completions_stub.py:
logits evaluated as the local scorer evaluates them, never llama.cpp's echo), so every difference left is
the protocol's: tokenization boundaries, BOS, which positions are summed, greedy flags. FinKnow and the CPA
exams (IDEAFinBench in CFinBench's layout) are run as tasks, both ways, and must choose the same options
with log-likelihoods equal to 1e-4. bench/ll_over_http.py runs more items and times both.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from finharness.backends import from_spec
from finharness.benchmarks.bizbench.finknow import FinKnowTask
from finharness.benchmarks.cfinbench.task import STANDIN_CPA, CFinBenchTask
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import LoglikelihoodRequest
from tests.servers.completions_stub import EngineModel, completions_server

pytestmark = pytest.mark.model

ITEMS = 3
N_CTX = 2048
"""Both sides alike: a smaller context keeps each side's logits buffer at 1.2 GB (2048 x 152k floats)."""
TOLERANCE = 1e-4


def scored(task, backend, data: Path, store_path: Path) -> dict[str, tuple[list[float], object]]:
    """sample id -> (the log-likelihoods of its options, its prediction), run as a task on `backend`."""
    store = RunStore(store_path)
    try:
        result = asyncio.run(run_task(task, {"model": backend}, store, RunOptions(data_dir=data, limit=ITEMS)))
    finally:
        store.close()
    assert result.results["status"] == "complete"
    return {r.id: ([lp for t in r.trace if t.get("kind") == "loglikelihood" for lp in t["logprobs"]], r.prediction)
            for r in result.records}


@pytest.fixture(scope="module")
def embedded():
    backend = from_spec(f"embedded?n_ctx={N_CTX}&threads=2")
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def server(embedded):
    with completions_server(EngineModel(embedded.model_path, n_ctx=N_CTX, threads=2)) as stub:
        yield stub


@pytest.mark.parametrize("make_task", [lambda: FinKnowTask(method="ll"),
                                       lambda: CFinBenchTask(exam=STANDIN_CPA, method="ll", shots=0)],
                         ids=["finknow", "cpa"])
def test_the_same_choices_and_log_likelihoods_over_http(make_task, embedded, server, shared_data, tmp_path):
    local = scored(make_task(), embedded, shared_data, tmp_path / "local.sqlite")
    remote = scored(make_task(), from_spec(f"openai-completions:stub@{server.base_url}"), shared_data,
                    tmp_path / "remote.sqlite")
    assert local.keys() == remote.keys() and len(local) == ITEMS
    for sample_id, (logprobs, prediction) in local.items():
        assert remote[sample_id][1] == prediction, sample_id
        assert remote[sample_id][0] == pytest.approx(logprobs, abs=TOLERANCE), sample_id


SHARED_LEADING_TOKENS = 0.25
"""Where continuations share their first tokens (here the newline moved off the context), the server
evaluates the shared part once, as vLLM's prefix cache would, and the local engine once per continuation:
llama.cpp's CPU kernels round the two batch shapes differently (docs/backends.md, log-likelihood). The
tokens are still the same, and that is what this case checks exactly."""


@pytest.mark.parametrize("request_, tolerance", [
    (LoglikelihoodRequest("问题：资产负债率是什么？\n答案：", ("A", "资产除以负债", " 负债除以资产")), TOLERANCE),
    (LoglikelihoodRequest("The ratio is 2.5 and the margin ", ("is thin.", " rose", "12%")), TOLERANCE),
    (LoglikelihoodRequest("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n", ("Answer: B", " B")),
     SHARED_LEADING_TOKENS),
], ids=["zh", "en-trailing-space", "control-tokens-shared-newline"])
def test_token_boundaries_and_sums_match_the_local_engine(request_, tolerance, embedded, server):
    # both ways of asking: vLLM's prompt_logprobs for the first case, echo for the others
    mode = "prompt" if request_.context.startswith("问题") else "echo"
    remote = from_spec(f"openai-completions:stub@{server.base_url}?logprobs={mode}")
    tokens = embedded.encode_request(request_.context, request_.continuations)
    assert asyncio.run(remote.encode_request(request_.context, request_.continuations)) == tokens
    local, over_http = asyncio.run(embedded.loglikelihood(request_)), asyncio.run(remote.loglikelihood(request_))
    assert over_http.continuation_tokens == local.continuation_tokens and over_http.is_greedy == local.is_greedy
    assert over_http.logprobs == pytest.approx(local.logprobs, abs=tolerance)
