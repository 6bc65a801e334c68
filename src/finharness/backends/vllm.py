"""`vllm:PATH_OR_HF_ID`: a model run in-process by vLLM's offline engine (`vllm.LLM`), for GPU machines.

Spec: ``vllm:/models/Qwen2.5-7B-Instruct`` or ``vllm:Qwen/Qwen2.5-7B-Instruct`` with optional query
options (see `VllmOptions`), e.g. ``vllm:Qwen/Qwen2.5-7B-Instruct?tensor_parallel_size=2&max_model_len=8192``.
vLLM itself is not a dependency of finharness: ``pip install vllm`` on a machine with a GPU.

Status: untested on GPU (no GPU machine was available when it was written). The pure parts (spec
options, continuation tokens, summing prompt logprobs, batching) are tested without vLLM.

- Chat generations are rendered with the tokenizer's own chat template and sent as token ids. A request's
  tools go to the template (`tools=`) and the reply is read with the strict `<tool_call>` parser of
  `tool_format` (vLLM's tool-call parsers are part of its OpenAI server, not of `LLM.generate`).
- vLLM's offline engine is synchronous and batches best when it gets many prompts at once: the
  concurrent requests of a short window are collected (`MicroBatcher`) and sent as one
  ``llm.generate`` call in a worker thread; the next batch gathers while one runs.
- Log-likelihoods come from ``prompt_logprobs``: each continuation is sent as context +
  continuation token ids with ``SamplingParams(max_tokens=1, prompt_logprobs=1)``, and the logprobs
  of the continuation's own prompt tokens are summed (`continuation_logprob`). The split into
  context and continuation tokens is lm-eval's (`split_continuation_tokens`), as in the llamacpp
  backend. vLLM does not reuse the context between the continuations of one request here.
- A model that thinks (its chat template writes `<think>`, as Qwen3's and DeepSeek-R1's do, or the spec
  names `thinking_budget=N`) gets a thinking budget on top of the task's max_tokens (`thinking_limit`);
  the `<think>` block itself is moved out of the answer by the model handle (core/reasoning.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
from dataclasses import dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

from ..core.backend import BackendError, BaseBackend, Capabilities, SpecError
from ..core.options import parse_task_options
from ..core.reasoning import THINK_OPEN, thinking_limit
from ..core.types import (
    GenerateParams,
    GenerateRequest,
    GenerateResponse,
    LoglikelihoodRequest,
    LoglikelihoodResponse,
    Message,
    TokenLogprob,
    ToolSpec,
)
from .spec_options import split_options
from .tool_format import openai_tools, template_takes_tools, template_turns, unsupported_tools, with_tool_calls

SCHEME = "vllm"
INSTALL_HINT = "pip install vllm (on a machine with a GPU; vLLM is not a finharness dependency)"

_I = TypeVar("_I")
_O = TypeVar("_O")


@dataclass(frozen=True)
class VllmOptions:
    """How vLLM runs the model; set in the spec's query string (``?max_model_len=8192``)."""

    tensor_parallel_size: int = 1
    """GPUs the model is split over."""

    gpu_memory_utilization: float = 0.9
    """Share of each GPU's memory vLLM may take (weights + KV cache), in (0, 1]."""

    max_model_len: int | None = None
    """Context window (prompt + generation) in tokens; None: the model's own."""

    dtype: str = "auto"
    """Weights and activations dtype ('auto', 'bfloat16', 'float16', 'float32')."""

    revision: str | None = None
    """Hugging Face revision (branch, tag or commit) of a hub model; None: the default branch."""

    thinking_budget: int | None = None
    """Tokens the model may think before its answer, added to the task's max_tokens; None: the task's
    thinking budget (or the default) where the chat template thinks, nothing otherwise."""


def parse_spec(spec: str) -> tuple[str, VllmOptions]:
    """'vllm:PATH_OR_HF_ID[?opt=value&...]' -> (model, options); SpecError says what to write instead."""
    usage = ("expected 'vllm:PATH_OR_HF_ID[?tensor_parallel_size=N&gpu_memory_utilization=F"
             "&max_model_len=N&dtype=D&revision=R&thinking_budget=N]', "
             "e.g. 'vllm:Qwen/Qwen2.5-7B-Instruct?max_model_len=8192'")
    base, raw = split_options(spec, {f.name for f in fields(VllmOptions)})
    scheme, _, model = base.partition(":")
    if scheme != SCHEME or not model.strip():
        raise SpecError(f"model spec {spec!r}: {usage}")
    try:
        options = parse_task_options(VllmOptions, raw, f"model spec {spec!r}",
                                     at_least_one=("tensor_parallel_size", "max_model_len"))
    except ValueError as err:
        raise SpecError(f"{err}; {usage}") from None
    if options.thinking_budget is not None and options.thinking_budget < 0:
        raise SpecError(f"model spec {spec!r}: thinking_budget must be >= 0, got {options.thinking_budget}")
    if not 0 < options.gpu_memory_utilization <= 1:
        raise SpecError(f"model spec {spec!r}: gpu_memory_utilization must be in (0, 1], "
                        f"got {options.gpu_memory_utilization}")
    return model.strip(), options


SpecOptions = VllmOptions
"""What `finharness list --backends` shows for the scheme."""


def from_spec(spec: str) -> VllmBackend:
    model, options = parse_spec(spec)
    if importlib.util.find_spec("vllm") is None:
        raise SpecError(f"model spec {spec!r} needs vLLM, which is not installed: {INSTALL_HINT}")
    path = Path(model).expanduser()
    if path.exists():
        model = str(path.resolve())
    elif model.startswith(("/", ".", "~")):
        raise SpecError(f"model spec {spec!r}: model directory not found: {path}")
    return VllmBackend(model, spec=spec, options=options)


# --- pure parts: tested without vLLM ------------------------------------------------------------

def split_continuation_tokens(context: str, continuations: Sequence[str],
                              encode: Callable[[str, bool], list[int]],
                              prefix_token: int) -> tuple[list[int], list[list[int]]]:
    """Token ids of the shared context and of each continuation, split as lm-eval splits them.

    `encode(text, with_bos)` tokenizes (adding the model's BOS when asked and the model has one).
    Trailing whitespace of the context moves onto the continuations (so ' A' tokenizes as it would
    inside running text); a continuation's tokens are those of context + continuation after the
    context's tokens, or the continuation alone where the joint tokenization does not start with
    the context's tokens. An empty context becomes `prefix_token` (BOS, else EOS), so the first
    token has something to follow. Same rules as `LlamaCppBackend.encode_request`."""
    stripped = context.rstrip()
    moved = context[len(stripped):]
    context_tokens = encode(stripped, True) if stripped else [prefix_token]
    n_context = len(context_tokens)
    continuation_tokens = []
    for continuation in continuations:
        whole = encode(stripped + moved + continuation, True) if stripped else []
        if stripped and whole[:n_context] == context_tokens:
            continuation_tokens.append(whole[n_context:])
        else:
            continuation_tokens.append(encode(moved + continuation, False))
    return context_tokens, continuation_tokens


def logprob_value(entry: Any) -> float:
    """The float of one vLLM logprob entry (a `Logprob(logprob=..., rank=...)`, or a bare float)."""
    return float(getattr(entry, "logprob", entry))


def continuation_logprob(prompt_logprobs: Sequence[Mapping[int, Any] | None] | None,
                         prompt_ids: Sequence[int], n_context: int) -> tuple[float, bool]:
    """(sum of the logprobs of prompt_ids[n_context:], whether each of those tokens was the argmax).

    `prompt_logprobs` is vLLM's RequestOutput.prompt_logprobs: one entry per prompt token, None for
    the first (it follows nothing), else a dict token id -> Logprob holding at least the actual
    token (and, with prompt_logprobs=1, the most likely one). Greedy is read from the actual
    token's rank where vLLM gives it, else by comparing with the other logprobs at that position."""
    if not 1 <= n_context <= len(prompt_ids):
        raise ValueError(f"the context must hold 1..{len(prompt_ids)} of the prompt's tokens, got {n_context}")
    if prompt_logprobs is None or len(prompt_logprobs) != len(prompt_ids):
        got = None if prompt_logprobs is None else len(prompt_logprobs)
        raise ValueError(f"expected prompt logprobs for {len(prompt_ids)} prompt tokens, got {got}")
    total, greedy = 0.0, True
    for position in range(n_context, len(prompt_ids)):
        token, entry = prompt_ids[position], prompt_logprobs[position]
        if not entry or token not in entry:
            raise ValueError(f"no logprob for prompt token {token} at position {position}")
        chosen = logprob_value(entry[token])
        total += chosen
        rank = getattr(entry[token], "rank", None)
        greedy = greedy and (rank == 1 if rank is not None
                             else chosen >= max(logprob_value(e) for e in entry.values()))
    return total, greedy


def sampling_kwargs(params: GenerateParams, max_tokens: int | None = None, seed: int | None = None) -> dict[str, Any]:
    """SamplingParams arguments for a generation (temperature 0 is greedy; top_p only matters when sampling).
    max_tokens: the limit to use instead of the request's (a thinking model's answer plus thinking budget);
    seed: the request's backend_seed (its draw mixed in; default the params' own)."""
    return {"max_tokens": params.max_tokens if max_tokens is None else max_tokens, "temperature": params.temperature,
            "top_p": params.top_p if params.temperature > 0 else 1.0, "seed": params.seed if seed is None else seed,
            "stop": list(params.stop) or None, "frequency_penalty": params.frequency_penalty,
            "presence_penalty": params.presence_penalty, "logprobs": params.top_logprobs or None}


def token_logprobs(token_ids: Sequence[int], logprobs: Sequence[Mapping[int, Any]] | None,
                   top: int) -> tuple[TokenLogprob, ...] | None:
    """vLLM's per-generated-token logprob dicts -> TokenLogprob with the `top` most likely alternatives."""
    if not logprobs or not top:
        return None

    def text(token_id: int, entry: Any) -> str:
        decoded = getattr(entry, "decoded_token", None)
        return decoded if decoded is not None else str(token_id)

    result = []
    for token_id, entries in zip(token_ids, logprobs):
        ranked = sorted(entries.items(), key=lambda item: -logprob_value(item[1]))[:top]
        result.append(TokenLogprob(token=text(token_id, entries[token_id]),
                                   logprob=logprob_value(entries[token_id]),
                                   top=tuple((text(t, e), logprob_value(e)) for t, e in ranked)))
    return tuple(result)


def weights_fingerprint(directory: Path, sample_bytes: int = 1 << 20) -> str:
    """A cheap content fingerprint of a model directory: each file's name and size, and sha256 of
    its first and last `sample_bytes` (hashing whole multi-GB weights would cost minutes).
    A fine-tune saved over the same path changes the bytes sampled; copying the directory elsewhere
    keeps the fingerprint (so does the same hub snapshot on another machine)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith(".")):
        size = path.stat().st_size
        digest.update(f"{path.name}\0{size}\0".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(sample_bytes))
            if size > sample_bytes:
                handle.seek(max(sample_bytes, size - sample_bytes))
                digest.update(handle.read(sample_bytes))
    return digest.hexdigest()


class MicroBatcher(Generic[_I, _O]):
    """Collects the items submitted while it waits (`window_s`) or while a batch runs, and runs them
    as one call of `run_batch` (synchronous, in a worker thread), one batch at a time.

    A batch that raises is retried item by item, so one bad request fails alone."""

    def __init__(self, run_batch: Callable[[list[_I]], Sequence[_O]], *, window_s: float = 0.005,
                 max_batch: int = 1024):
        self.run_batch = run_batch
        self.window_s = window_s
        self.max_batch = max_batch
        self.batches: list[int] = []
        """Size of each batch run so far (for tests and measurements)."""
        self._pending: list[tuple[_I, asyncio.Future[_O]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, item: _I) -> _O:
        loop = asyncio.get_running_loop()
        result: asyncio.Future[_O] = loop.create_future()
        self._pending.append((item, result))
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await result

    async def _drain(self) -> None:
        await asyncio.sleep(self.window_s)
        while self._pending:
            batch, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
            batch = [(item, result) for item, result in batch if not result.done()]  # drop cancelled
            if batch:
                await self._run(batch)

    async def _run(self, batch: list[tuple[_I, asyncio.Future[_O]]]) -> None:
        self.batches.append(len(batch))
        try:
            outputs = await asyncio.to_thread(self.run_batch, [item for item, _ in batch])
            if len(outputs) != len(batch):
                raise RuntimeError(f"run_batch returned {len(outputs)} outputs for {len(batch)} items")
        except Exception as err:
            if len(batch) == 1:
                if not batch[0][1].done():
                    batch[0][1].set_exception(err)
                return
            for one in batch:  # find the item that failed: each alone
                await self._run([one])
            return
        for (_, result), output in zip(batch, outputs):
            if not result.done():
                result.set_result(output)


@dataclass(frozen=True)
class EngineJob:
    """One prompt for vLLM: token ids and the SamplingParams to use."""

    prompt_token_ids: list[int]
    sampling_params: Any


# --- the backend --------------------------------------------------------------------------------

class VllmBackend(BaseBackend):
    """A model in vLLM's offline engine; concurrent requests are batched into one engine call."""

    def __init__(self, model: str, *, spec: str | None = None, options: VllmOptions = VllmOptions(),
                 max_concurrency: int = 256):
        self.model = model
        self.spec = spec or f"{SCHEME}:{model}"
        self.options = options
        self.capabilities = Capabilities(
            generate=True, loglikelihood=True, next_token_logprobs=True,
            context_length=options.max_model_len, max_concurrency=max_concurrency,
            penalties=True, seed=True)
        self._directory: Path | None = None
        self._tokenizer: Any = None
        self._llm: Any = None
        self._identity: dict[str, Any] | None = None
        self._batcher: MicroBatcher[EngineJob, Any] = MicroBatcher(self._generate_batch,
                                                                   max_batch=max_concurrency)

    # --- files, tokenizer, engine: each loaded on first use ---------------------------------------

    def model_directory(self) -> Path:
        """The local directory of the model: the path given, or the hub snapshot (downloaded once)."""
        if self._directory is None:
            path = Path(self.model)
            if path.is_dir():
                self._directory = path
            else:
                from huggingface_hub import snapshot_download  # a vLLM dependency

                try:
                    self._directory = Path(snapshot_download(self.model, revision=self.options.revision))
                except Exception as err:  # network, unknown repo, gated model...
                    raise BackendError(f"{self.spec}: cannot fetch {self.model!r} from the Hugging Face "
                                       f"hub ({type(err).__name__}: {err}); give a local directory "
                                       "instead (vllm:/path/to/model)") from err
        return self._directory

    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (loaded without the engine: a cached rerun needs no GPU)."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer  # a vLLM dependency

            self._tokenizer = AutoTokenizer.from_pretrained(str(self.model_directory()))
        return self._tokenizer

    def _engine(self) -> Any:
        # Built on the calling (event-loop) thread: vLLM releases before 0.10.2 install signal
        # handlers and refuse to start an engine outside the main thread.
        if self._llm is None:
            import vllm

            try:
                self._llm = vllm.LLM(
                    model=str(self.model_directory()), tensor_parallel_size=self.options.tensor_parallel_size,
                    gpu_memory_utilization=self.options.gpu_memory_utilization,
                    max_model_len=self.options.max_model_len, dtype=self.options.dtype)
            except Exception as err:  # CUDA missing, out of memory, unsupported architecture...
                raise BackendError(f"{self.spec}: vLLM could not load {self.model}: "
                                   f"{type(err).__name__}: {err}") from err
        return self._llm

    def _max_model_len(self) -> int | None:
        if self.options.max_model_len is not None:
            return self.options.max_model_len
        config = getattr(getattr(self._llm, "llm_engine", None), "model_config", None)
        return getattr(config, "max_model_len", None)

    # --- identity and tokens ----------------------------------------------------------------------

    def identity(self) -> Mapping[str, Any]:
        if self._identity is None:
            self._identity = {
                "engine": f"vllm {metadata.version('vllm')}",
                "model": self.model,
                "revision": self.options.revision,
                "weights": weights_fingerprint(self.model_directory()),
                "chat_template": getattr(self.tokenizer(), "chat_template", None),
                "dtype": self.options.dtype,
                "max_model_len": self.options.max_model_len,
                "tensor_parallel_size": self.options.tensor_parallel_size,
            }
            if self.options.thinking_budget is not None:  # only when set: older identities stay as they were
                self._identity["thinking_budget"] = self.options.thinking_budget
        return self._identity

    def completion_limits(self, params: Any) -> tuple[int, int | None]:
        """(the completion limit a call is sent with: max_tokens, plus a thinking budget when the model thinks; None:
        the chat template or the spec says whether it does)."""
        if not self.thinks():
            return params.max_tokens, None
        return thinking_limit(params, self.options.thinking_budget)[0], None

    def thinks(self) -> bool:
        """The model thinks before it answers: the spec gives a thinking budget, or its chat template
        writes a `<think>` block."""
        return self.options.thinking_budget is not None or THINK_OPEN in (
            getattr(self.tokenizer(), "chat_template", None) or "")

    def _encode(self, text: str, with_bos: bool) -> list[int]:
        tokenizer = self.tokenizer()
        ids = list(tokenizer.encode(text, add_special_tokens=False))
        bos = tokenizer.bos_token_id
        # BOS only where the tokenizer adds it itself (Llama, Gemma; not Qwen); its EOS, if it
        # appends one, never lands inside a continuation.
        if with_bos and bos is not None and tokenizer.encode("x", add_special_tokens=True)[:1] == [bos]:
            ids.insert(0, bos)
        return ids

    def count_tokens(self, text: str) -> int | None:
        return len(self._encode(text, False))

    def render_prompt(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> str:
        """The chat as the model sees it: the tokenizer's chat template with the generation prompt and the tools.

        Also used by the runner to count prompt tokens; a model without a template cannot generate,
        and `generate` says so (the count then falls back to the bare turns), as it says so of tools a
        template cannot show."""
        tokenizer = self.tokenizer()
        turns = template_turns(messages)
        if not getattr(tokenizer, "chat_template", None):
            return "\n".join(turn["content"] for turn in turns)
        extra = {"tools": openai_tools(tools)} if tools else {}  # only when asked: a plain chat renders as before
        return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True, **extra)

    def render_tokens(self, request: GenerateRequest) -> tuple[str, list[int]]:
        """The prompt as the model sees it (its tools included) and its token ids: what the runner counts."""
        prompt_text = self.render_prompt(request.messages, request.tools)
        return prompt_text, self._encode(prompt_text, False)  # the template writes any BOS itself

    def _check_length(self, n_tokens: int, what: str) -> None:
        limit = self._max_model_len()
        if limit is not None and n_tokens > limit:
            raise BackendError(f"{self.spec}: {what} has {n_tokens} tokens, more than max_model_len={limit}; "
                               "shorten it or raise max_model_len (?max_model_len=...)",
                               kind="prompt-too-long")

    # --- calls ------------------------------------------------------------------------------------

    def _generate_batch(self, jobs: list[EngineJob]) -> list[Any]:
        return self._engine().generate([{"prompt_token_ids": job.prompt_token_ids} for job in jobs],
                                       [job.sampling_params for job in jobs], use_tqdm=False)

    async def _submit(self, job: EngineJob) -> Any:
        try:
            return await self._batcher.submit(job)
        except BackendError:
            raise
        except Exception as err:  # vLLM rejected or failed the prompt: trying again will not help
            raise BackendError(f"{self.spec}: vLLM failed: {type(err).__name__}: {err}") from err

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        from vllm import SamplingParams

        if not getattr(self.tokenizer(), "chat_template", None):
            raise BackendError(f"{self.spec}: {self.model} has no chat template; use an instruct "
                               "model or a log-likelihood task")
        if request.tools and not template_takes_tools(self.tokenizer().chat_template):
            raise unsupported_tools(self.spec, self.model)
        self._engine()
        prompt_text, prompt_ids = self.render_tokens(request)
        self._check_length(len(prompt_ids), "the prompt")
        params = request.params
        limit, adaptations = None, ()
        if self.thinks():
            limit, budgeted = thinking_limit(params, self.options.thinking_budget)
            adaptations = (budgeted,)
        output = await self._submit(EngineJob(prompt_ids, SamplingParams(**sampling_kwargs(params, limit, request.backend_seed))))
        completion = output.outputs[0]
        return with_tool_calls(GenerateResponse(adaptations=adaptations,
            text=completion.text, finish_reason=completion.finish_reason or "stop",
            prompt_tokens=len(prompt_ids), completion_tokens=len(completion.token_ids),
            prompt_text=prompt_text,
            logprobs=token_logprobs(completion.token_ids, completion.logprobs, params.top_logprobs)), request.tools)

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        from vllm import SamplingParams

        self._engine()
        tokenizer = self.tokenizer()
        prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        context_ids, continuation_ids = split_continuation_tokens(
            request.context, request.continuations, self._encode, prefix)
        empty = [c for c, ids in zip(request.continuations, continuation_ids) if not ids]
        if empty:
            raise BackendError(f"{self.spec}: continuation(s) {empty!r} have no tokens to score")
        prompts = [context_ids + ids for ids in continuation_ids]
        self._check_length(max(len(p) for p in prompts), "context + longest continuation")
        # prompt_logprobs=1: each position's actual token plus the most likely one (for is_greedy);
        # detokenize=False spares decoding every prompt token.
        scoring = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1, detokenize=False)
        outputs = await asyncio.gather(*(self._submit(EngineJob(p, scoring)) for p in prompts))
        try:
            scores = [continuation_logprob(out.prompt_logprobs, prompt, len(context_ids))
                      for out, prompt in zip(outputs, prompts)]
        except ValueError as err:
            raise BackendError(f"{self.spec}: unusable prompt logprobs from vLLM: {err}",
                               kind="bad_response") from err
        evaluated = sum(len(p) - (getattr(out, "num_cached_tokens", None) or 0) for p, out in zip(prompts, outputs))
        return LoglikelihoodResponse(
            logprobs=tuple(total for total, _ in scores), is_greedy=tuple(greedy for _, greedy in scores),
            continuation_tokens=tuple(len(ids) for ids in continuation_ids),
            context_tokens=len(context_ids), tokens_evaluated=evaluated)

    async def aclose(self) -> None:
        self._llm = None  # vLLM frees the GPU when the engine is collected
