"""The llama.cpp backends (llamacpp:PATH and embedded) on the real 0.5B model.

Log-likelihoods are checked against a naive recomputation (cleared cache, context +
continuation evaluated in one go, per continuation), never against llama-cpp-python's
`echo=True` prompt logprobs, which are wrong for models without BOS such as Qwen.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from finharness.backends import embedded, llamacpp
from finharness.backends.llamacpp import LlamaCppOptions, parse_spec
from finharness.backends.llamacpp_engine import _evaluate
from finharness.backends.model_files import embedded_model
from finharness.core.backend import BackendError, SpecError
from finharness.core.types import GenerateParams, GenerateRequest, LoglikelihoodRequest, messages

# KV reuse vs a from-scratch evaluation: llama.cpp's CPU kernels round differently for
# different batch shapes. The scoring context removes most of it (unrepacked weights, no
# lone-token batches: see finharness.backends.llamacpp_engine.Scorer), leaving rows after the first of
# batches of 2-7 tokens, i.e. the evaluated part of short multi-token continuations.
# Measured: 0 on this test's choices, up to 0.095 nats per continuation on 3-choice CFA items
# (bench/ll_reuse.py); a wrong row or token shifts a sum by whole nats.
REUSE_TOLERANCE_NATS = 0.15

CONTEXT = (
    "The nominal risk-free rate is the sum of the real risk-free rate and a premium for expected "
    "inflation. A corporate bond also pays premiums for default risk and liquidity. Question: "
    "which premium explains most of the yield gap between a 30-year Treasury bond and a 30-year "
    "bond of a small private issuer? Answer:")
CHOICES = (" liquidity and default risk", " maturity", " expected inflation")


# --- no model needed ---------------------------------------------------------------------------


def test_spec_options_are_parsed(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    path, options = parse_spec(f"llamacpp:{model}?n_ctx=1024&threads=3&parallel=4")
    assert path == model and options == LlamaCppOptions(n_ctx=1024, threads=3, parallel=4)
    assert parse_spec(f"llamacpp:{model}")[1] == LlamaCppOptions()


@pytest.mark.parametrize("suffix, message", [
    ("?n_cxt=1024", "unknown option 'n_cxt'"),
    ("?n_ctx=big", "must be an integer"),
    ("?n_ctx", "malformed options"),
])
def test_bad_spec_options_are_named(tmp_path, suffix, message):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(SpecError, match=message):
        parse_spec(f"llamacpp:{model}{suffix}")


def test_deterministic_decodes_one_cold_sequence_at_a_time(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    path, options = parse_spec(f"llamacpp:{model}?deterministic=1")
    backend = llamacpp.LlamaCppBackend(path, options=options)
    backend.plan_concurrency(8)  # the run's --concurrency does not widen it
    config = backend.engine_config()
    assert (config.slots, config.reuse_prefix, backend.capabilities.max_concurrency) == (1, False, 1)
    plain = llamacpp.LlamaCppBackend(path, options=parse_spec(f"llamacpp:{model}")[1])
    plain.plan_concurrency(8)
    assert (plain.engine_config().slots, plain.engine_config().reuse_prefix) == (8, True)
    for clash in ("parallel=4", "prompt_cache_mb=100"):
        with pytest.raises(SpecError, match="deterministic=1 decodes one sequence"):
            parse_spec(f"llamacpp:{model}?deterministic=1&{clash}")
    with pytest.raises(SpecError, match="deterministic"):
        parse_spec(f"llamacpp:{model}?deterministic=2")


def test_missing_model_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="model file not found"):
        llamacpp.from_spec(f"llamacpp:{tmp_path / 'absent.gguf'}")


class _RecordingLlama:
    """Stands in for llama_cpp.Llama: records the batches passed to eval."""

    def __init__(self, n_batch: int):
        self.n_batch, self.n_tokens, self.batches = n_batch, 0, []

    def eval(self, tokens):
        self.batches.append((self.n_tokens, list(tokens)))
        self.n_tokens += len(tokens)


@pytest.mark.parametrize("start, end, n_batch, expected", [
    (5, 9, 512, [(5, [5, 6, 7, 8])]),
    (5, 6, 512, [(4, [4, 5])]),  # a lone token steps back to take its predecessor along
    (0, 1, 512, [(0, [0])]),  # nothing to step back to
    (0, 7, 3, [(0, [0, 1, 2]), (3, [3, 4]), (5, [5, 6])]),  # no lone token left by the split
    (4, 4, 512, []),
])
def test_evaluate_never_decodes_a_lone_token(start, end, n_batch, expected):
    llm = _RecordingLlama(n_batch)
    evaluated = _evaluate(llm, list(range(10)), start, end)
    assert llm.batches == expected
    assert evaluated == sum(len(batch) for _, batch in expected)
    assert llm.n_tokens == end


# --- the 0.5B model ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def backend():
    # Small n_ctx keeps the scoring context's logits buffer small; 2 threads: a shared machine.
    model = embedded.from_spec("embedded?n_ctx=2048&threads=2")
    yield model
    asyncio.run(model.aclose())


def _generate(backend, max_tokens: int, **params) -> object:
    request = GenerateRequest(messages(("user", "Name three kinds of bond risk.")),
                              GenerateParams(max_tokens=max_tokens, **params))
    return asyncio.run(backend.generate(request))


def _fresh(backend, request: LoglikelihoodRequest) -> dict:
    """The engine's from-scratch reference: per continuation, an emptied cache and context + continuation
    evaluated at once (and the most likely token after the context)."""
    context, continuations = backend.encode_request(request.context, request.continuations)
    return asyncio.run(backend._engine_call("score_fresh", context, continuations))


def _naive_logprobs(backend, request: LoglikelihoodRequest) -> tuple[list[float], list[bool]]:
    fresh = _fresh(backend, request)
    return fresh["logprobs"], fresh["greedy"]


@pytest.mark.model
def test_embedded_identity_names_engine_weights_and_template(backend):
    identity = backend.identity()
    assert identity["model_sha256"] == embedded_model("embedded").sha256
    assert identity["engine"].startswith("llama.cpp")
    assert "<|im_start|>" in identity["chat_template"]
    assert identity["n_ctx"] == 2048 == backend.capabilities.context_length
    assert backend.spec == "embedded?n_ctx=2048&threads=2"


@pytest.mark.model
def test_generation_is_deterministic_and_honours_max_tokens(backend):
    first, second = _generate(backend, 6), _generate(backend, 6)
    assert first.text == second.text and first.text.strip()
    assert first.finish_reason == "length" and first.truncated
    assert first.completion_tokens == 6
    assert first.prompt_tokens == backend.count_tokens(first.prompt_text)


@pytest.mark.model
def test_prompt_is_rendered_with_the_gguf_chat_template(backend):
    response = _generate(backend, 2)
    assert "<|im_start|>user\nName three kinds of bond risk.<|im_end|>" in response.prompt_text
    assert response.prompt_text.endswith("<|im_start|>assistant\n")


@pytest.mark.model
def test_stop_string_ends_generation(backend):
    response = asyncio.run(backend.generate(GenerateRequest(
        messages(("user", "Count from 1 to 10, separated by commas.")),
        GenerateParams(max_tokens=40, stop=("5",)))))
    assert response.finish_reason == "stop" and "5" not in response.text and "4" in response.text


@pytest.mark.model
def test_top_logprobs_are_returned_when_asked(backend):
    response = _generate(backend, 3, top_logprobs=3)
    assert response.logprobs is not None and len(response.logprobs) == 3
    for token in response.logprobs:
        assert len(token.top) == 3 and token.logprob <= 0
        assert token.top[0][1] >= token.top[1][1] >= token.top[2][1]
        assert token.top[0][0] == token.token  # greedy: the chosen token is the most likely one
    assert "".join(t.token for t in response.logprobs) == response.text


@pytest.mark.model
def test_continuations_are_split_as_lm_eval_splits_them(backend):
    context, continuations = backend.encode_request("Answer: ", (" A", "B"))
    # The context's trailing space moves onto the continuation: "Answer:" + " B".
    assert context == backend._tokenize("Answer:", add_bos=False)
    whole = backend._tokenize("Answer: B", add_bos=False)
    assert continuations[1] == whole[len(context):]
    assert len(continuations[0]) >= 1
    empty_context, _ = backend.encode_request("", (" A",))
    assert len(empty_context) == 1  # a BOS/EOS prefix so the first token has something to follow


@pytest.mark.model
def test_loglikelihood_with_kv_reuse_equals_naive_recomputation(backend):
    request = LoglikelihoodRequest(CONTEXT, CHOICES)
    response = asyncio.run(backend.loglikelihood(request))
    naive, naive_greedy = _naive_logprobs(backend, request)
    assert all(lp < 0 for lp in response.logprobs)
    np.testing.assert_allclose(response.logprobs, naive, atol=REUSE_TOLERANCE_NATS)
    assert int(np.argmax(response.logprobs)) == int(np.argmax(naive))
    assert response.is_greedy == tuple(naive_greedy)
    assert response.continuation_tokens == tuple(len(t) for t in backend.encode_request(CONTEXT, CHOICES)[1])
    needed = response.context_tokens + sum(response.continuation_tokens)
    assert 0 < response.tokens_evaluated <= 1.1 * needed


@pytest.mark.model
def test_kv_cache_is_reused_across_requests_sharing_the_context(backend):
    first = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, CHOICES)))
    again = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, (" A", " B"))))
    # Same context: nothing of it is evaluated again; one-token continuations need no evaluation.
    assert first.tokens_evaluated >= first.context_tokens
    assert again.tokens_evaluated == 0
    longer = CONTEXT + " The premium"
    extended = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(longer, (" is",))))
    assert extended.tokens_evaluated <= extended.context_tokens - first.context_tokens + 2
    # And the reused state gives the same numbers as a fresh one.
    # One-token continuations read the context's last row, which is exact under any split.
    np.testing.assert_allclose(again.logprobs, _naive_logprobs(
        backend, LoglikelihoodRequest(CONTEXT, (" A", " B")))[0], atol=1e-9)


@pytest.mark.model
def test_greedy_continuation_is_flagged(backend):
    best = _fresh(backend, LoglikelihoodRequest(CONTEXT, ()))["next_token"]
    best_text = backend._tokenizer_model().detokenize([best]).decode()
    response = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, (best_text, " zebra"))))
    assert response.is_greedy == (True, False)
    assert response.logprobs[0] > response.logprobs[1] and math.isfinite(response.logprobs[1])


@pytest.mark.model
def test_context_overflow_is_a_clear_error(backend):
    with pytest.raises(BackendError, match="n_ctx=2048"):
        asyncio.run(backend.loglikelihood(LoglikelihoodRequest("risk " * 3000, (" A",))))
    # The backend still works afterwards.
    assert asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, (" A",)))).logprobs[0] < 0


@pytest.mark.model15
def test_embedded_1_5b_generates_and_scores():
    model = embedded.from_spec("embedded:1.5b?n_ctx=1024&threads=2")
    try:
        assert model.identity()["model_sha256"] == embedded_model("embedded:1.5b").sha256
        assert _generate(model, 4).completion_tokens == 4
        response = asyncio.run(model.loglikelihood(LoglikelihoodRequest(CONTEXT, CHOICES)))
        np.testing.assert_allclose(response.logprobs, _naive_logprobs(
            model, LoglikelihoodRequest(CONTEXT, CHOICES))[0], atol=REUSE_TOLERANCE_NATS)
    finally:
        asyncio.run(model.aclose())


@pytest.mark.model
def test_deterministic_replies_do_not_depend_on_what_ran_before_or_beside():
    def ask(model, *texts):
        async def all_at_once():
            return await asyncio.gather(*(model.generate(GenerateRequest(messages(("user", text)),
                                                                         GenerateParams(max_tokens=12)))
                                          for text in texts))
        return asyncio.run(all_at_once())

    questions = ("Name one risk of holding a 30-year bond.", "Name one risk of holding a 30-year bond, briefly.",
                 "What is a stock split?")
    model = embedded.from_spec("embedded?n_ctx=2048&threads=2&deterministic=1")
    try:
        alone = [ask(model, question)[0] for question in questions]
        before = model.prompt_tokens_evaluated
        together = ask(model, *questions)  # the second shares the first's prefix and queues behind it
        assert model.prompt_tokens_evaluated - before == sum(reply.prompt_tokens for reply in together)
        assert [reply.text for reply in together] == [reply.text for reply in alone]
    finally:
        asyncio.run(model.aclose())


@pytest.mark.model
def test_prompt_cache_resumes_a_dialogue_after_another_prompt_ran_in_between():
    def turn(model, history):
        request = GenerateRequest(messages(*history), GenerateParams(max_tokens=8))
        return asyncio.run(model.generate(request))

    first = ("user", "A bond pays a 5% coupon. Name one risk of holding it.")
    other = ("user", "What is a stock split? Answer in one sentence, please, for a new investor.")
    cached = embedded.from_spec("embedded?n_ctx=2048&threads=2&prompt_cache_mb=1024")
    plain = embedded.from_spec("embedded?n_ctx=2048&threads=2")
    try:
        assert cached.identity() == plain.identity()  # same call-cache entries
        results = {}
        for model in (cached, plain):
            opening = turn(model, (first,))
            turn(model, (other,))  # another role or dialogue takes the one slot in between
            before = model.prompt_tokens_evaluated
            history = (first, ("assistant", opening.text), ("user", "And a second one?"))
            reply = turn(model, history)
            results[model.spec] = (reply, model.prompt_tokens_evaluated - before)
        reply, cached_eval = results[cached.spec]
        plain_reply, plain_eval = results[plain.spec]
        new_tokens = plain.count_tokens("And a second one?")
        # Without the cache the slot only shares the chat template's opening with `other`.
        assert plain_eval > reply.prompt_tokens // 2
        # With it, the saved state of the first turn holds all but the new user turn (and the
        # reply's last token, which was sampled but never evaluated).
        assert cached_eval <= new_tokens + 12
        assert reply.text == plain_reply.text and reply.prompt_tokens == plain_reply.prompt_tokens
    finally:
        asyncio.run(cached.aclose())
        asyncio.run(plain.aclose())
