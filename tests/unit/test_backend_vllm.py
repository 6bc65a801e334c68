"""The vLLM backend (backends/vllm.py).

Its pure parts (spec options, the context/continuation token split, summing vLLM-shaped prompt
logprobs, batching) always run. The backend's own pipeline runs against a stand-in `vllm` module
whose engine is a small deterministic language model, so that log-likelihoods can be checked against
a brute-force sum. A test of the real engine needs vLLM, a GPU and FINHARNESS_VLLM_MODEL (a local
model directory); it skips cleanly otherwise.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import sys
import types
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from scipy.special import log_softmax

from finharness.backends import SCHEMES
from finharness.backends import from_spec as registry_from_spec
from finharness.backends import vllm as vllm_backend
from finharness.backends.vllm import (
    MicroBatcher,
    VllmBackend,
    VllmOptions,
    continuation_logprob,
    parse_spec,
    sampling_kwargs,
    split_continuation_tokens,
    token_logprobs,
    weights_fingerprint,
)
from finharness.core.backend import BackendError, SpecError
from finharness.core.types import (
    DEFAULT_THINKING_TOKENS,
    GenerateParams,
    GenerateRequest,
    LoglikelihoodRequest,
    Message,
)


@dataclass
class Logprob:
    """Shaped like vllm.logprobs.Logprob."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# --- spec ---------------------------------------------------------------------------------------

def test_spec_options_are_parsed_and_typed():
    model, options = parse_spec("vllm:Qwen/Qwen2.5-7B-Instruct?tensor_parallel_size=2"
                                "&gpu_memory_utilization=0.8&max_model_len=8192&dtype=bfloat16")
    assert model == "Qwen/Qwen2.5-7B-Instruct"
    assert options == VllmOptions(tensor_parallel_size=2, gpu_memory_utilization=0.8, max_model_len=8192,
                                  dtype="bfloat16")
    assert parse_spec("vllm:/models/m") == ("/models/m", VllmOptions())


@pytest.mark.parametrize("spec, message", [
    ("vllm:m?n_ctx=4", "unknown option"),
    ("vllm:m?max_model_len=big", "not an integer"),
    ("vllm:m?tensor_parallel_size=0", "at least 1"),
    ("vllm:m?gpu_memory_utilization=1.5", "gpu_memory_utilization must be in"),
    ("vllm:", "expected 'vllm:PATH_OR_HF_ID"),
])
def test_bad_specs_say_what_to_write(spec, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(spec)


def test_without_vllm_the_spec_says_how_to_install_it(monkeypatch):
    real_find_spec = vllm_backend.importlib.util.find_spec
    monkeypatch.setattr(vllm_backend.importlib.util, "find_spec",
                        lambda name, *a: None if name == "vllm" else real_find_spec(name, *a))
    with pytest.raises(SpecError, match="pip install vllm") as raised:
        registry_from_spec("vllm:x")
    assert "GPU" in str(raised.value)


@pytest.mark.skipif(__import__("importlib").util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_the_registry_knows_vllm_and_it_is_absent_here():
    assert "vllm" in SCHEMES
    with pytest.raises(SpecError, match="pip install vllm"):
        registry_from_spec("vllm:Qwen/Qwen2.5-0.5B-Instruct")


# --- the context / continuation split ------------------------------------------------------------

class WordTokenizer:
    """A toy tokenizer: a token is a run of non-spaces with at most one leading space; BOS = 1, EOS = 2.
    Like a BPE, 'Answer:A' is one token while 'Answer:' + ' A' are two."""

    bos_token_id = 1
    eos_token_id = 2
    chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"

    def __init__(self, adds_bos: bool = True):
        self.adds_bos = adds_bos
        self.vocab: dict[str, int] = {}

    def piece_ids(self, text: str) -> list[int]:
        return [self.vocab.setdefault(piece, 3 + len(self.vocab)) for piece in re.findall(r"\s?\S+|\s+", text)]

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([self.bos_token_id] if add_special_tokens and self.adds_bos else []) + self.piece_ids(text)

    def apply_chat_template(self, turns, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{t['role']}>{t['content']}" for t in turns) + ("<assistant>" if add_generation_prompt else "")


def toy_encode(tokenizer: WordTokenizer):
    return lambda text, with_bos: tokenizer.encode(text, add_special_tokens=with_bos)


def test_the_continuation_is_the_tail_after_the_context_tokens():
    tok = WordTokenizer()
    context, continuation = split_continuation_tokens("Question: 2+2?\nAnswer:", [" 4", " five"], toy_encode(tok), 1)
    assert context == tok.encode("Question: 2+2?\nAnswer:")
    assert context[0] == 1, "the context starts with the model's BOS"
    assert continuation == [tok.piece_ids(" 4"), tok.piece_ids(" five")]


def test_trailing_whitespace_of_the_context_moves_onto_the_continuation():
    tok = WordTokenizer()
    context, continuation = split_continuation_tokens("Answer: ", ["A"], toy_encode(tok), 1)
    assert context == tok.encode("Answer:")
    assert continuation == [tok.piece_ids(" A")]


def test_a_continuation_that_merges_with_the_context_is_tokenized_alone():
    tok = WordTokenizer()
    context, continuation = split_continuation_tokens("Answer:", ["A"], toy_encode(tok), 1)
    # 'Answer:A' is one token, so the joint tokenization does not start with the context's tokens
    assert context == tok.encode("Answer:")
    assert continuation == [tok.piece_ids("A")]


def test_an_empty_context_becomes_the_prefix_token():
    tok = WordTokenizer(adds_bos=False)
    context, continuation = split_continuation_tokens("", [" yes"], toy_encode(tok), 2)
    assert context == [2] and continuation == [tok.piece_ids(" yes")]


# --- summing vLLM's prompt logprobs --------------------------------------------------------------

def prompt_logprobs_from(logprobs: np.ndarray, prompt: list[int], top_only: bool = False, ranks: bool = True):
    """vLLM's prompt_logprobs for `prompt` under a model whose next-token logprobs after position j-1
    are logprobs[j - 1]: None first, then the actual token and the most likely one."""
    out: list = [None]
    for j in range(1, len(prompt)):
        row = logprobs[j - 1]
        order = np.argsort(-row)
        rank_of = {int(t): r + 1 for r, t in enumerate(order)}
        wanted = [prompt[j], int(order[0])]
        out.append({t: (Logprob(float(row[t]), rank_of[t]) if ranks else float(row[t])) for t in wanted})
    return out


def test_the_continuation_logprob_is_the_sum_over_its_own_tokens_only():
    rng = np.random.default_rng(3)
    logprobs = log_softmax(rng.normal(size=(7, 11)), axis=-1)
    prompt = [1, 4, 9, 2, 5, 7, 3, 8]
    n_context = 5
    total, greedy = continuation_logprob(prompt_logprobs_from(logprobs, prompt), prompt, n_context)
    expected = sum(logprobs[j - 1, prompt[j]] for j in range(n_context, len(prompt)))
    assert total == pytest.approx(expected, abs=1e-12)
    assert greedy == all(prompt[j] == int(np.argmax(logprobs[j - 1])) for j in range(n_context, len(prompt)))


def test_greedy_is_read_from_ranks_or_else_from_the_logprobs_at_each_position():
    logprobs = np.log(np.array([[0.1, 0.7, 0.2], [0.2, 0.2, 0.6], [0.5, 0.3, 0.2]]))
    greedy_prompt, other_prompt = [0, 1, 2, 0], [0, 1, 2, 1]
    for ranks in (True, False):
        assert continuation_logprob(prompt_logprobs_from(logprobs, greedy_prompt, ranks=ranks), greedy_prompt, 1)[1]
        assert not continuation_logprob(prompt_logprobs_from(logprobs, other_prompt, ranks=ranks), other_prompt, 1)[1]


def test_malformed_prompt_logprobs_are_refused():
    prompt = [1, 2, 3]
    good = [None, {2: Logprob(-0.5, 1)}, {3: Logprob(-1.0, 2), 4: Logprob(-0.2, 1)}]
    with pytest.raises(ValueError, match="no logprob for prompt token 3"):
        continuation_logprob([None, good[1], {4: Logprob(-0.2, 1)}], prompt, 1)
    with pytest.raises(ValueError, match="for 3 prompt tokens, got 2"):
        continuation_logprob(good[:2], prompt, 1)
    with pytest.raises(ValueError, match="for 3 prompt tokens, got None"):
        continuation_logprob(None, prompt, 1)
    with pytest.raises(ValueError, match="context must hold"):
        continuation_logprob(good, prompt, 0)
    assert continuation_logprob(good, prompt, 1) == (-1.5, False)


# --- generation parameters and logprobs ---------------------------------------------------------

def test_sampling_parameters_follow_the_request():
    greedy = sampling_kwargs(GenerateParams(max_tokens=32, temperature=0.0, top_p=0.5))
    assert greedy["temperature"] == 0.0 and greedy["top_p"] == 1.0 and greedy["max_tokens"] == 32
    assert greedy["stop"] is None and greedy["logprobs"] is None and greedy["seed"] is None
    sampled = sampling_kwargs(GenerateParams(temperature=0.7, top_p=0.9, stop=("\n\n",), seed=5,
                                             frequency_penalty=0.3, presence_penalty=0.1, top_logprobs=3))
    assert (sampled["top_p"], sampled["stop"], sampled["seed"], sampled["logprobs"]) == (0.9, ["\n\n"], 5, 3)
    assert (sampled["frequency_penalty"], sampled["presence_penalty"]) == (0.3, 0.1)


def test_generated_token_logprobs_keep_the_top_alternatives_in_order():
    entries = [{7: Logprob(-2.0, 3, "b"), 5: Logprob(-0.1, 1, "a"), 9: Logprob(-1.0, 2, None)}]
    (token,) = token_logprobs([7], entries, top=2)
    assert token.token == "b" and token.logprob == -2.0
    assert token.top == (("a", -0.1), ("9", -1.0)), "the chosen token outside the top 2 is left out of them"
    assert token_logprobs([7], entries, top=0) is None and token_logprobs([7], None, top=2) is None


# --- identity fingerprint -----------------------------------------------------------------------

def test_the_weights_fingerprint_follows_the_content_not_the_place(tmp_path: Path):
    def model_dir(name: str, weights: bytes) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text('{"n": 1}')
        (d / "model.safetensors").write_bytes(weights)
        (d / ".cache_marker").write_text(name)  # hidden files are left out
        return d

    weights = bytes(range(256)) * 64
    tuned = bytearray(weights)
    tuned[10] ^= 1
    a = weights_fingerprint(model_dir("a", weights), sample_bytes=1024)
    assert a == weights_fingerprint(model_dir("b", weights), sample_bytes=1024)
    assert a != weights_fingerprint(model_dir("c", bytes(tuned)), sample_bytes=1024)


# --- batching -----------------------------------------------------------------------------------

def test_concurrent_submissions_run_as_one_batch_and_get_their_own_answers():
    calls: list[list[int]] = []

    def run_batch(items: list[int]) -> list[int]:
        calls.append(items)
        return [i * 10 for i in items]

    async def scenario():
        batcher = MicroBatcher(run_batch)
        first = await asyncio.gather(*(batcher.submit(i) for i in range(5)))
        second = await batcher.submit(7)
        return first, second, batcher.batches

    first, second, batches = asyncio.run(scenario())
    assert first == [0, 10, 20, 30, 40] and second == 70
    assert calls == [[0, 1, 2, 3, 4], [7]] and batches == [5, 1]


def test_one_bad_item_fails_alone():
    def run_batch(items: list[str]) -> list[str]:
        if "bad" in items:
            raise ValueError("prompt too long")
        return [item.upper() for item in items]

    async def scenario():
        batcher = MicroBatcher(run_batch)
        return await asyncio.gather(*(batcher.submit(x) for x in ["a", "bad", "c"]), return_exceptions=True)

    a, bad, c = asyncio.run(scenario())
    assert (a, c) == ("A", "C")
    assert isinstance(bad, ValueError) and "too long" in str(bad)


# --- the backend against a stand-in engine ------------------------------------------------------

VOCAB = 64


def toy_logprobs(prefix: list[int]) -> np.ndarray:
    """A deterministic 'language model': next-token logprobs from a hash of the prefix."""
    rng = random.Random(hash(tuple(prefix)))
    return log_softmax(np.array([rng.gauss(0.0, 2.0) for _ in range(VOCAB)]))


class FakeSamplingParams:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class FakeLLM:
    """Stands in for vllm.LLM: prompt logprobs from `toy_logprobs`, a fixed generation."""

    instances: list["FakeLLM"] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.batches: list[int] = []
        self.sampling: list[FakeSamplingParams] = []
        FakeLLM.instances.append(self)

    def generate(self, prompts, params, use_tqdm=True):
        self.batches.append(len(prompts))
        self.sampling.extend(params)
        outputs = []
        for prompt, p in zip(prompts, params):
            ids = prompt["prompt_token_ids"]
            prompt_lps = None
            if getattr(p, "prompt_logprobs", None) is not None:
                prompt_lps = [None]
                for j in range(1, len(ids)):
                    row = toy_logprobs(ids[:j])
                    order = list(np.argsort(-row))
                    prompt_lps.append({t: Logprob(float(row[t]), order.index(t) + 1)
                                       for t in (ids[j], int(order[0]))})
            completion = types.SimpleNamespace(text="Answer: B", finish_reason="stop", token_ids=[5, 6, 7],
                                               logprobs=None)
            outputs.append(types.SimpleNamespace(prompt_token_ids=ids, prompt_logprobs=prompt_lps,
                                                 outputs=[completion], num_cached_tokens=0))
        return outputs


@pytest.fixture
def stand_in_vllm(monkeypatch, tmp_path):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.instances.clear()
    backend = VllmBackend(str(tmp_path), options=VllmOptions(max_model_len=512))
    backend._tokenizer = WordTokenizer()
    return backend


def test_loglikelihoods_of_all_continuations_of_a_request_come_from_one_engine_call(stand_in_vllm):
    backend = stand_in_vllm
    request = LoglikelihoodRequest("Question: which is right?\nAnswer:", (" A", " B", " C"))
    response = asyncio.run(backend.loglikelihood(request))
    tok = backend.tokenizer()
    context = tok.encode("Question: which is right?\nAnswer:")
    for option, total in zip([" A", " B", " C"], response.logprobs):
        (token,) = tok.piece_ids(option)
        assert total == pytest.approx(float(toy_logprobs(context)[token]), abs=1e-12)
    best = {int(np.argmax(toy_logprobs(context)))}
    assert response.is_greedy == tuple(tok.piece_ids(o)[0] in best for o in (" A", " B", " C"))
    assert response.continuation_tokens == (1, 1, 1) and response.context_tokens == len(context)
    assert response.tokens_evaluated == 3 * (len(context) + 1)
    (engine,) = FakeLLM.instances
    assert engine.batches == [3], "the three continuations go to vLLM in one generate call"
    assert engine.kwargs["max_model_len"] == 512 and engine.kwargs["tensor_parallel_size"] == 1


def test_a_multi_token_continuation_sums_its_tokens(stand_in_vllm):
    backend = stand_in_vllm
    response = asyncio.run(backend.loglikelihood(LoglikelihoodRequest("The price rose", (" by ten percent",))))
    tok = backend.tokenizer()
    prompt = tok.encode("The price rose") + tok.piece_ids(" by ten percent")
    n = len(tok.encode("The price rose"))
    expected = sum(float(toy_logprobs(prompt[:j])[prompt[j]]) for j in range(n, len(prompt)))
    assert response.logprobs[0] == pytest.approx(expected, abs=1e-12)
    assert response.continuation_tokens == (3,)


def test_concurrent_requests_are_batched_together(stand_in_vllm):
    backend = stand_in_vllm

    async def scenario():
        return await asyncio.gather(
            backend.loglikelihood(LoglikelihoodRequest("Q1 Answer:", (" A", " B"))),
            backend.loglikelihood(LoglikelihoodRequest("Q2 Answer:", (" A", " B", " C"))),
            backend.generate(GenerateRequest((Message("user", "hi"),), GenerateParams(max_tokens=16))))

    first, second, generated = asyncio.run(scenario())
    assert len(first.logprobs) == 2 and len(second.logprobs) == 3
    assert FakeLLM.instances[0].batches == [6]
    assert generated.text == "Answer: B" and generated.completion_tokens == 3
    assert generated.prompt_text == "<user>hi<assistant>"
    assert generated.prompt_tokens == len(backend.tokenizer().encode("<user>hi<assistant>", add_special_tokens=False))


def test_a_prompt_longer_than_max_model_len_fails_alone_and_is_not_retried(stand_in_vllm):
    backend = stand_in_vllm
    with pytest.raises(BackendError, match="max_model_len=512") as raised:
        asyncio.run(backend.loglikelihood(LoglikelihoodRequest("word " * 600, (" A",))))
    assert raised.value.kind == "prompt-too-long" and not raised.value.retryable


def test_a_model_without_a_chat_template_cannot_generate(stand_in_vllm):
    backend = stand_in_vllm
    backend._tokenizer.chat_template = None
    with pytest.raises(BackendError, match="no chat template"):
        asyncio.run(backend.generate(GenerateRequest((Message("user", "hi"),))))


def test_a_model_whose_template_thinks_gets_a_thinking_budget_on_top_of_the_answers(stand_in_vllm):
    backend = stand_in_vllm
    request = GenerateRequest((Message("user", "hi"),), GenerateParams(max_tokens=16))
    plain = asyncio.run(backend.generate(request))
    backend._tokenizer.chat_template += "{% if enable_thinking %}<think>{% endif %}"  # as Qwen3's template does
    thinking = asyncio.run(backend.generate(request))
    asked = asyncio.run(backend.generate(replace(request, params=GenerateParams(max_tokens=16, thinking_tokens=100))))
    assert [p.max_tokens for p in FakeLLM.instances[0].sampling] == [16, 16 + DEFAULT_THINKING_TOKENS, 116]
    assert plain.adaptations == () and thinking.adaptations[0].sent == f"max_tokens={16 + DEFAULT_THINKING_TOKENS}"
    assert "the task's" in asked.adaptations[0].reason


def test_the_spec_thinking_budget_is_used_and_named_in_the_identity(stand_in_vllm, tmp_path):
    backend = VllmBackend(str(tmp_path), options=VllmOptions(max_model_len=512, thinking_budget=32))
    backend._tokenizer = WordTokenizer()
    asyncio.run(backend.generate(GenerateRequest((Message("user", "hi"),), GenerateParams(max_tokens=16))))
    assert FakeLLM.instances[-1].sampling[0].max_tokens == 48
    assert parse_spec("vllm:m?thinking_budget=32")[1].thinking_budget == 32
    with pytest.raises(SpecError, match="thinking_budget must be >= 0"):
        parse_spec("vllm:m?thinking_budget=-5")


# --- the real engine (GPU machines) -------------------------------------------------------------

@pytest.mark.model
@pytest.mark.slow
def test_real_vllm_scores_and_generates():
    pytest.importorskip("vllm")
    model = os.environ.get("FINHARNESS_VLLM_MODEL")
    if not model:
        pytest.skip("set FINHARNESS_VLLM_MODEL to a local instruct model directory to run vLLM for real")
    backend = registry_from_spec(f"vllm:{model}?max_model_len=2048&gpu_memory_utilization=0.5")
    identity = backend.identity()
    assert identity["engine"].startswith("vllm ") and identity["model"] == str(Path(model).resolve())
    request = LoglikelihoodRequest("The capital of France is", (" Paris", " a banana split"))
    response = asyncio.run(backend.loglikelihood(request))
    assert all(lp < 0 for lp in response.logprobs) and response.logprobs[0] > response.logprobs[1]
    reply = asyncio.run(backend.generate(GenerateRequest((Message("user", "Say OK."),), GenerateParams(max_tokens=8))))
    assert reply.text and reply.completion_tokens <= 8
