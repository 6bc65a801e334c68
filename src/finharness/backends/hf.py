"""`hf:PATH_OR_HUB_ID`: a model run in-process by Hugging Face transformers (PyTorch), on the CPU or a GPU.

Spec: ``hf:/models/Qwen2.5-7B-Instruct`` (a local folder), ``hf:Qwen/Qwen2.5-7B-Instruct?dtype=bfloat16&device=cuda``
(a Hub id) or ``hf:/models/model.gguf`` (a GGUF file, dequantized by transformers), with the options of
`HfOptions`. Install with ``pip install 'finharness[hf]'``; torch and transformers are imported only when a
backend is built, never by ``import finharness``.

- Chats are rendered with the tokenizer's own chat template (generation prompt added) and tokenized
  without special tokens; a BOS goes in front only where the tokenizer adds one itself and the template
  did not write it, as the llamacpp backend does. A request's tools go to the template (`tools=`, the OpenAI
  shape) and the reply is read with the strict `<tool_call>` parser of `tool_format`; a template that never
  names `tools` refuses such a request.
- Generation: the requests that arrive together (up to ``batch_size``) are decoded as one batch, padded on
  the left, on the model's KV cache; a finished sequence leaves the batch. Penalties, sampling, stop strings
  and top logprobs are the local engine's own (`llamacpp_engine.sample_token`, `find_stop`, `top_logprobs`)
  applied to each sequence's logits row with the request's own seed, so a sampled reply never depends on
  its batch neighbours' draws. Greedy rows take the argmax on the device.
- Log-likelihood: context and continuations are split as lm-eval splits them (`split_continuation_tokens`,
  the rules and BOS handling of the llamacpp backend: BOS only where the tokenizer adds one; an empty
  context is scored after BOS, else EOS). Each continuation is scored in one forward pass of context +
  continuation; its last token's own logits are never needed, so the one-token continuations of one context
  share one pass, and a sequence that is a prefix of another is read from the longer one. The sequences of
  the requests that arrive together are padded on the right and run in batches of ``batch_size``, with
  logits computed only at the scored positions (``logits_to_keep``). Scores are float32 log-softmaxes summed
  in float64.
- Identity (what keys the call cache): a Hub model is pinned by the commit its revision resolves to, and is
  then loaded at that commit; a local folder or GGUF file by the sha256 of its files (hashed once, then read
  from a sidecar while a file is unchanged); plus transformers' and torch's versions, the chat template, the
  dtype and the context length. Device and batch size are not in it (like the local engine's ``parallel``):
  they change rounding, not the request.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

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
from .llamacpp_engine import find_stop, sample_token, top_logprobs
from .model_files import cache_dir, file_sha256
from .spec_options import split_options
from .tool_format import openai_tools, template_takes_tools, template_turns, unsupported_tools, with_tool_calls
from .vllm import MicroBatcher, split_continuation_tokens

SCHEME = "hf"
INSTALL_HINT = "pip install 'finharness[hf]' (transformers, accelerate, gguf; and torch)"
DTYPES = ("auto", "float32", "bfloat16", "float16")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps|auto)$")

LOGITS_BUDGET = 1 << 28
"""Most logits (floats) one scoring batch keeps (1 GiB in float32): rows beyond it go to the next batch."""

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")
"""Config fields that give a model's context length, the first one present wins."""


@dataclass(frozen=True)
class HfOptions:
    """How transformers runs the model; set in the spec's query string (``?dtype=bfloat16&device=cuda``)."""

    dtype: str = "auto"
    """Weights' dtype: 'float32', 'bfloat16', 'float16', or 'auto': float32 on the CPU, the checkpoint's own
    dtype (its config's) on a GPU."""

    device: str | None = None
    """'cpu', 'cuda', 'cuda:N', 'mps', or 'auto' (accelerate spreads the layers over the GPUs:
    device_map='auto'); None: 'cuda' where torch sees a GPU, else 'cpu'."""

    batch_size: int = 8
    """Requests decoded or scored together; also the calls the run keeps in flight unless --concurrency
    says otherwise."""

    max_length: int | None = None
    """Context length in tokens (prompt + generation); None: the model config's (max_position_embeddings)."""

    revision: str | None = None
    """Hub revision (branch, tag or commit) of a Hub model; None: the default branch. The commit it resolves
    to is what the identity records."""

    trust_remote_code: bool = False
    """Run the model repository's own Python code (transformers' `trust_remote_code`); off unless asked."""

    gguf_file: str | None = None
    """A GGUF file inside the folder or Hub repository to load (dequantized) instead of its safetensors;
    `hf:/path/model.gguf` sets it."""

    threads: int | None = None
    """CPU threads torch uses (torch.set_num_threads, for the whole process); None: torch's default."""

    thinking_budget: int | None = None
    """Tokens the model may think before its answer, added to the task's max_tokens; None: the task's
    thinking budget (or the default) where the chat template thinks, nothing otherwise."""

    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"dtype": DTYPES}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("batch_size", "max_length", "threads")


def parse_spec(spec: str) -> tuple[str, HfOptions]:
    """'hf:PATH_OR_HUB_ID[?opt=value&...]' -> (model, options); SpecError says what to write instead."""
    usage = ("expected 'hf:PATH_OR_HUB_ID[?dtype=auto|float32|bfloat16|float16&device=cpu|cuda|cuda:N|mps|auto"
             "&batch_size=N&max_length=N&revision=R&trust_remote_code=1&gguf_file=NAME&threads=N"
             "&thinking_budget=N]', e.g. 'hf:Qwen/Qwen2.5-7B-Instruct?dtype=bfloat16&device=cuda'")
    base, raw = split_options(spec, {f.name for f in fields(HfOptions)})
    scheme, _, model = base.partition(":")
    if scheme != SCHEME or not model.strip():
        raise SpecError(f"model spec {spec!r}: {usage}")
    try:
        options = parse_task_options(HfOptions, raw, f"model spec {spec!r}")
    except ValueError as err:
        raise SpecError(f"{err}; {usage}") from None
    if options.device is not None and not _DEVICE.match(options.device):
        raise SpecError(f"model spec {spec!r}: device must be cpu, cuda, cuda:N, mps or auto, got {options.device!r}")
    if options.thinking_budget is not None and options.thinking_budget < 0:
        raise SpecError(f"model spec {spec!r}: thinking_budget must be >= 0, got {options.thinking_budget}")
    return model.strip(), options


SpecOptions = HfOptions
"""What `finharness list --backends` shows for the scheme."""


def from_spec(spec: str) -> HfBackend:
    model, options = parse_spec(spec)
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise SpecError(f"model spec {spec!r} needs {' and '.join(missing)}, not installed: {INSTALL_HINT}")
    path = Path(model).expanduser()
    if path.is_file():
        if path.suffix != ".gguf":
            raise SpecError(f"model spec {spec!r}: {path} is a file but not a .gguf; give the model's folder")
        if options.gguf_file is not None:
            raise SpecError(f"model spec {spec!r}: names a GGUF file twice (path and gguf_file=)")
        path, options = path.parent, replace(options, gguf_file=path.name)
    if path.is_dir():
        if options.gguf_file is not None and not (path / options.gguf_file).is_file():
            raise SpecError(f"model spec {spec!r}: GGUF file not found: {path / options.gguf_file}")
        return HfBackend(str(path.resolve()), spec=spec, options=options, local=True)
    if model.startswith(("/", ".", "~")):
        raise SpecError(f"model spec {spec!r}: model folder or file not found: {path}")
    return HfBackend(model, spec=spec, options=options, local=False)


@dataclass(frozen=True)
class GenerationJob:
    """One chat generation for a batch: the prompt's token ids and what to decode."""

    prompt_ids: list[int]
    """The rendered chat, tokenized."""

    params: GenerateParams
    """The request's decoding parameters."""

    max_tokens: int
    """Tokens to generate at most (the request's, or with a thinking budget added)."""


@dataclass(frozen=True)
class ScoringJob:
    """One log-likelihood request for a batch, tokenized."""

    context: list[int]
    """The shared context's token ids."""

    continuations: list[list[int]]
    """Each continuation's token ids (none empty)."""

    per_token: bool = False
    """Also each token's log-probability and the moments of log p at it (LoglikelihoodRequest.per_token)."""


@dataclass
class _Decoding:
    """One sequence of a generation batch while it decodes."""

    job: GenerationJob
    rng: np.random.Generator | None
    """The request's own sampler (None: greedy)."""
    generated: list[int] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)
    """Generated token -> occurrences (frequency and presence penalties)."""
    text: str = ""
    """The decoded reply so far (only kept up to date where stop strings or logprobs need it)."""
    stop_checked: int = 0
    """Characters of `text` already searched for stop strings."""
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish: str | None = None
    """'stop' or 'length' once finished."""

    @property
    def needs_row(self) -> bool:
        """Whether its next token needs the whole logits row on the CPU (sampling, penalties, logprobs)."""
        params = self.job.params
        return (self.rng is not None or params.frequency_penalty != 0 or params.presence_penalty != 0
                or params.top_logprobs > 0)

    @property
    def sampling(self) -> dict[str, Any]:
        params = self.job.params
        return {"temperature": params.temperature, "top_p": params.top_p,
                "frequency_penalty": params.frequency_penalty, "presence_penalty": params.presence_penalty}


def context_length_of(config: Any) -> int | None:
    """The model's context length from its config (the text part's, for a multimodal one); None if unknown."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for key in CONTEXT_KEYS:
        value = getattr(text_config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None




class HfBackend(BaseBackend):
    """A transformers model in this process; concurrent requests are batched into forward passes."""

    def __init__(self, model: str, *, spec: str | None = None, options: HfOptions = HfOptions(), local: bool):
        import torch  # heavy: only when the backend is built

        self._torch = torch
        self.model_name = model
        """The local folder (absolute) or the Hub id."""
        self.local = local
        self.spec = spec or f"{SCHEME}:{model}"
        self.options = options
        self.device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._loading = threading.RLock()
        self._computing = threading.Lock()
        """One forward pass at a time: generation and scoring batches share the model and the cores."""
        self._tokenizing = threading.Lock()
        """A fast tokenizer is not safe to use from several threads at once ('Already borrowed')."""
        self._commit: str | None = None
        self._config: Any = None
        self._capabilities: Capabilities | None = None
        self._tokenizer: Any = None
        self._adds_bos = False
        self._model: Any = None
        self._load_error: BackendError | None = None
        self._identity: dict[str, Any] | None = None
        self._generations: MicroBatcher[GenerationJob, dict[str, Any]] = MicroBatcher(
            self._generate_batch, max_batch=options.batch_size)
        self._scorings: MicroBatcher[ScoringJob, dict[str, Any]] = MicroBatcher(
            self._score_batch, max_batch=options.batch_size)

    # --- where the model is, its config and tokenizer: each read on first use -------------------------

    def _source(self) -> tuple[str, dict[str, Any]]:
        """What from_pretrained loads and the keyword arguments that pin it (revision, GGUF file, remote code)."""
        kwargs: dict[str, Any] = {"trust_remote_code": self.options.trust_remote_code}
        if self.options.gguf_file is not None:
            kwargs["gguf_file"] = self.options.gguf_file
        if not self.local:
            kwargs["revision"] = self.commit()
        return self.model_name, kwargs

    def commit(self) -> str | None:
        """The Hub commit the revision resolves to (one small file fetched, or read from the Hub cache when
        offline); None for a local model."""
        if self.local:
            return None
        with self._loading:
            if self._commit is None:
                from huggingface_hub import hf_hub_download  # a transformers dependency

                filename = self.options.gguf_file or "config.json"
                try:
                    path = Path(hf_hub_download(self.model_name, filename, revision=self.options.revision))
                except Exception as err:  # network, unknown repo or revision, gated model, offline without cache
                    raise BackendError(
                        f"{self.spec}: cannot resolve {self.model_name!r}"
                        f"{'' if self.options.revision is None else ' at revision ' + repr(self.options.revision)}"
                        f" on the Hugging Face Hub ({type(err).__name__}: {err}); check the id and revision, "
                        "HF_TOKEN for a gated model, or give a local folder (hf:/path/to/model)") from err
                # <cache>/models--ORG--NAME/snapshots/<commit>/<filename>
                self._commit = path.parents[len(Path(filename).parts) - 1].name
            return self._commit

    def config(self) -> Any:
        with self._loading:
            if self._config is None:
                from transformers import AutoConfig

                source, kwargs = self._source()
                self._config = self._guarded(lambda: AutoConfig.from_pretrained(source, **kwargs), "its config")
            return self._config

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        if self._capabilities is None:
            self._capabilities = Capabilities(
                generate=True, loglikelihood=True, next_token_logprobs=True,
                context_length=self.options.max_length or context_length_of(self.config()),
                max_concurrency=self.options.batch_size, penalties=True, seed=True)
        return self._capabilities

    def tokenizer(self) -> Any:
        """The model's tokenizer (loaded without the weights: a cached rerun never loads the model)."""
        with self._loading:
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                source, kwargs = self._source()
                tokenizer = self._guarded(lambda: AutoTokenizer.from_pretrained(source, **kwargs), "its tokenizer")
                bos = tokenizer.bos_token_id
                # BOS only where the tokenizer adds it itself (Llama, Gemma; not Qwen), as llama.cpp's add_bos flag
                self._adds_bos = bos is not None and tokenizer.encode("x", add_special_tokens=True)[:1] == [bos]
                self._tokenizer = tokenizer
            return self._tokenizer

    def dtype_name(self) -> str:
        """The dtype the weights are loaded in, 'auto' resolved (float32 on the CPU, the config's elsewhere)."""
        if self.options.dtype != "auto":
            return self.options.dtype
        if self.device == "cpu":
            return "float32"
        own = getattr(self.config(), "dtype", None) or getattr(self.config(), "torch_dtype", None)
        name = str(own).removeprefix("torch.") if own is not None else "float32"
        return name if name in DTYPES else "float32"

    def model(self) -> Any:
        """The model on its device, in eval mode (loaded on first use: minutes for a big one)."""
        with self._loading:
            if self._model is None:
                from transformers import AutoModelForCausalLM

                torch = self._torch
                if self.options.threads is not None:
                    torch.set_num_threads(self.options.threads)
                source, kwargs = self._source()
                kwargs["dtype"] = getattr(torch, self.dtype_name())
                if self.device == "auto":
                    kwargs["device_map"] = "auto"
                model = self._guarded(lambda: AutoModelForCausalLM.from_pretrained(source, **kwargs), "the model")
                if self.device != "auto":
                    model = self._guarded(lambda: model.to(self.device), f"the model onto {self.device}")
                self._model = model.eval()
            return self._model

    def _guarded(self, load: Any, what: str) -> Any:
        """Run a load; its failure becomes a BackendError that later calls get again without retrying it."""
        if self._load_error is not None:
            raise self._load_error
        try:
            return load()
        except BackendError:
            raise
        except Exception as err:  # missing files, unsupported architecture, out of memory, remote code refused...
            hint = (" (the repository has its own code: add ?trust_remote_code=1 if you trust it)"
                    if "trust_remote_code" in str(err) and not self.options.trust_remote_code else "")
            self._load_error = BackendError(f"{self.spec}: transformers could not load {what} of "
                                            f"{self.model_name}: {type(err).__name__}: {err}{hint}")
            raise self._load_error from err

    def _decode(self, ids: Sequence[int]) -> str:
        """Token ids to text without special tokens, less a trailing incomplete UTF-8 character (the next token
        completes it), so a reply's text only ever grows as its tokens come."""
        with self._tokenizing:
            return self.tokenizer().decode(list(ids), skip_special_tokens=True).rstrip("\ufffd")

    @property
    def _input_device(self) -> Any:
        return self.model().get_input_embeddings().weight.device

    # --- identity and tokens ------------------------------------------------------------------------

    def model_files(self) -> dict[str, str]:
        """File name -> sha256 of a local model: the GGUF file alone, else every file of the folder."""
        folder = Path(self.model_name)
        if self.options.gguf_file is not None:
            paths = [folder / self.options.gguf_file]
        else:
            paths = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
        return {path.name: file_sha256(path) for path in paths}

    def identity(self) -> Mapping[str, Any]:
        if self._identity is None:
            import transformers

            pinned = ({"files": self.model_files()} if self.local
                      else {"hub_id": self.model_name, "commit": self.commit(), "gguf_file": self.options.gguf_file})
            self._identity = {
                "engine": f"transformers {transformers.__version__} (torch {self._torch.__version__.split('+')[0]})",
                **pinned,
                "chat_template": getattr(self.tokenizer(), "chat_template", None),
                "dtype": self.dtype_name(),
                "context_length": self.capabilities.context_length,
                "trust_remote_code": self.options.trust_remote_code,
            }
            if self.options.thinking_budget is not None:
                self._identity["thinking_budget"] = self.options.thinking_budget
        return self._identity

    def _encode(self, text: str, with_bos: bool) -> list[int]:
        tokenizer = self.tokenizer()
        with self._tokenizing:
            ids = list(tokenizer.encode(text, add_special_tokens=False))
        if with_bos and self._adds_bos:
            ids.insert(0, tokenizer.bos_token_id)
        return ids

    def count_tokens(self, text: str) -> int | None:
        return len(self._encode(text, False))

    def completion_limits(self, params: Any) -> tuple[int, int | None]:
        """(the completion limit a call is sent with: max_tokens, plus a thinking budget when the model thinks; None:
        the chat template or the spec says whether it does)."""
        if not self.thinks():
            return params.max_tokens, None
        return thinking_limit(params, self.options.thinking_budget)[0], None

    def thinks(self) -> bool:
        """The model thinks before it answers: the spec gives a thinking budget, or its chat template writes
        a `<think>` block."""
        return self.options.thinking_budget is not None or THINK_OPEN in (
            getattr(self.tokenizer(), "chat_template", None) or "")

    def render_prompt(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> str:
        """The chat as the model sees it: the tokenizer's chat template with the generation prompt and the tools
        (the bare turns where the model has no template: the runner only counts their tokens, and `generate`
        refuses, as it refuses tools a template cannot show)."""
        tokenizer = self.tokenizer()
        turns = template_turns(messages)
        if not getattr(tokenizer, "chat_template", None):
            return "\n".join(turn["content"] for turn in turns)
        extra = {"tools": openai_tools(tools)} if tools else {}  # only when asked: a plain chat renders as before
        with self._tokenizing:
            return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True, **extra)

    def render_tokens(self, request: GenerateRequest) -> tuple[str, list[int]]:
        """The prompt as the model sees it: text (chat template applied, the request's tools included) and token
        ids."""
        tokenizer = self.tokenizer()
        prompt_text = self.render_prompt(request.messages, request.tools)
        prompt_ids = self._encode(prompt_text, False)
        bos = tokenizer.bos_token_id
        if self._adds_bos and prompt_ids[:1] != [bos]:
            # Templates that do not write the BOS themselves get it here, as the llamacpp backend does.
            prompt_ids.insert(0, bos)
            prompt_text = tokenizer.bos_token + prompt_text
        return prompt_text, prompt_ids

    def encode_request(self, context: str, continuations: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """Token ids of the shared context and of each continuation, split as lm-eval (and the llamacpp
        backend) split them."""
        tokenizer = self.tokenizer()
        prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        return split_continuation_tokens(context, continuations, self._encode, prefix)

    # --- calls --------------------------------------------------------------------------------------

    async def _submit(self, batcher: MicroBatcher[Any, dict[str, Any]], job: Any) -> dict[str, Any]:
        try:
            return await batcher.submit(job)
        except BackendError:
            raise
        except Exception as err:  # torch refused the batch (out of memory...): the request fails, not the run
            raise BackendError(f"{self.spec}: transformers failed: {type(err).__name__}: {err}") from err

    def _limit_error(self, n_tokens: int, what: str) -> BackendError:
        return BackendError(f"{self.spec}: {what} needs {n_tokens} positions, more than the context length "
                            f"{self.capabilities.context_length}; shorten it or raise max_length (?max_length=...)",
                            kind="prompt-too-long")

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        tokenizer = await asyncio.to_thread(self.tokenizer)
        if not getattr(tokenizer, "chat_template", None):
            raise BackendError(f"{self.spec}: {self.model_name} has no chat template; use an instruct model "
                               "or a log-likelihood task")
        if request.tools and not template_takes_tools(tokenizer.chat_template):
            raise unsupported_tools(self.spec, self.model_name)
        prompt_text, prompt_ids = await asyncio.to_thread(self.render_tokens, request)
        limit = self.capabilities.context_length
        if limit is not None and len(prompt_ids) >= limit:
            raise self._limit_error(len(prompt_ids), "the prompt")
        params = request.params
        max_tokens, adaptations = params.max_tokens, ()
        if self.thinks():
            max_tokens, budgeted = thinking_limit(params, self.options.thinking_budget)
            adaptations = (budgeted,)
        result = await self._submit(self._generations, GenerationJob(prompt_ids, params, max_tokens))
        return with_tool_calls(GenerateResponse(
            text=result["text"], finish_reason=result["finish_reason"], prompt_tokens=len(prompt_ids),
            completion_tokens=result["completion_tokens"], prompt_text=prompt_text,
            logprobs=result["logprobs"], adaptations=adaptations), request.tools)

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        context, continuations = await asyncio.to_thread(self.encode_request, request.context,
                                                         request.continuations)
        empty = [text for text, ids in zip(request.continuations, continuations) if not ids]
        if empty:
            raise BackendError(f"{self.spec}: continuation(s) {empty!r} have no tokens to score")
        # The last continuation token is scored but never evaluated, hence the - 1.
        positions = len(context) + max(len(ids) for ids in continuations) - 1
        limit = self.capabilities.context_length
        if limit is not None and positions > limit:
            raise self._limit_error(positions, "the context + the longest continuation")
        result = await self._submit(self._scorings, ScoringJob(context, continuations, request.per_token))
        return LoglikelihoodResponse(
            logprobs=tuple(result["logprobs"]), is_greedy=tuple(result["greedy"]),
            continuation_tokens=tuple(len(ids) for ids in continuations), context_tokens=len(context),
            tokens_evaluated=result["evaluated"], token_logprobs=result.get("token_logprobs"),
            token_means=result.get("token_means"), token_stds=result.get("token_stds"))

    # --- generation batches -------------------------------------------------------------------------

    def _eos_ids(self) -> set[int]:
        """Tokens that end a reply: the tokenizer's EOS and every one the generation config names."""
        ids = {self.tokenizer().eos_token_id}
        configured = getattr(getattr(self.model(), "generation_config", None), "eos_token_id", None)
        ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
        return {i for i in ids if i is not None}

    def _generate_batch(self, jobs: list[GenerationJob]) -> list[dict[str, Any]]:
        """Decode the jobs together: left-padded prompts, then one token of every running sequence per step."""
        torch = self._torch
        with self._computing, torch.inference_mode():
            model, device, tokenizer, eos = self.model(), self._input_device, self.tokenizer(), self._eos_ids()
            limit = self.capabilities.context_length
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(eos), 0)
            width = max(len(job.prompt_ids) for job in jobs)
            input_ids = torch.full((len(jobs), width), pad, dtype=torch.long)
            mask = torch.zeros((len(jobs), width), dtype=torch.long)
            for row, job in enumerate(jobs):
                input_ids[row, width - len(job.prompt_ids):] = torch.tensor(job.prompt_ids)
                mask[row, width - len(job.prompt_ids):] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            mask, positions = mask.to(device), positions.to(device)
            sequences = [_Decoding(job, np.random.default_rng(job.params.seed) if job.params.temperature > 0
                                   else None) for job in jobs]
            running = list(range(len(jobs)))  # indices into `sequences` of the rows still in the batch
            output = model(input_ids=input_ids.to(device), attention_mask=mask, position_ids=positions,
                           use_cache=True, logits_to_keep=1)
            while True:
                logits = output.logits[:, -1, :]
                tokens = self._next_tokens(logits, [sequences[i] for i in running])
                for i, token in zip(running, tokens):
                    self._advance(sequences[i], token, eos, limit)
                keep = [row for row, i in enumerate(running) if sequences[i].finish is None]
                if not keep:
                    break
                cache = getattr(output, self._cache_name(model))
                if len(keep) < len(running):  # finished sequences leave the batch
                    index = torch.tensor(keep, device=device)
                    cache.batch_select_indices(index)
                    mask, positions = mask[index], positions[index]
                    running = [running[row] for row in keep]
                step = torch.tensor([[sequences[i].generated[-1]] for i in running], device=device)
                mask = torch.cat([mask, mask.new_ones((len(running), 1))], dim=1)
                positions = positions[:, -1:] + 1
                output = model(input_ids=step, attention_mask=mask, position_ids=positions,
                               use_cache=True, **{self._cache_name(model): cache})
        return [self._result(sequence) for sequence in sequences]

    @staticmethod
    def _cache_name(model: Any) -> str:
        """The KV cache's name in the model's forward and output: `cache` from transformers 5.24 on (the old
        `past_key_values` still works there, with a warning), `past_key_values` before."""
        return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def _next_tokens(self, logits: Any, sequences: list[_Decoding]) -> list[int]:
        """Each row's next token: the argmax on the device, or the engine's sampler on the row's logits."""
        greedy = logits.argmax(dim=-1).tolist()
        wanted = [row for row, sequence in enumerate(sequences) if sequence.needs_row]
        if not wanted:
            return greedy
        rows = logits[wanted].float().cpu().numpy()
        for row, values in zip(wanted, rows):
            sequence = sequences[row]
            token = sample_token(values, sequence.sampling, sequence.counts, sequence.rng)
            top = sequence.job.params.top_logprobs
            if top > 0:
                chosen, best = top_logprobs(values, token, top)
                alternatives = tuple((self._decode([t]), lp) for t, lp in best)
                sequence.logprobs.append(TokenLogprob(token="", logprob=chosen, top=alternatives))
            greedy[row] = token
        return greedy

    def _advance(self, sequence: _Decoding, token: int, eos: set[int], limit: int | None) -> None:
        """Take the sequence's next token; mark it finished on EOS (not part of the text), a stop string, its
        token budget or the context length."""
        if token in eos:
            if sequence.logprobs:
                sequence.logprobs.pop()  # the end token is not part of the reply
            sequence.finish = "stop"
            return
        sequence.generated.append(token)
        sequence.counts[token] = sequence.counts.get(token, 0) + 1
        params = sequence.job.params
        if params.stop or params.top_logprobs > 0:
            text = self._decode(sequence.generated)
            if sequence.logprobs and params.top_logprobs > 0:  # the token's own text: what it added to the reply
                added = text[len(sequence.text):] if text.startswith(sequence.text) else text
                sequence.logprobs[-1] = replace(sequence.logprobs[-1], token=added)
            sequence.text = text
            cut = find_stop(text, params.stop, sequence.stop_checked)
            sequence.stop_checked = len(text)
            if cut is not None:
                sequence.text, sequence.finish = text[:cut], "stop"
                return
        if len(sequence.generated) >= sequence.job.max_tokens:
            sequence.finish = "length"
        elif limit is not None and len(sequence.job.prompt_ids) + len(sequence.generated) >= limit:
            sequence.finish = "length"

    def _result(self, sequence: _Decoding) -> dict[str, Any]:
        params = sequence.job.params
        text = sequence.text if (params.stop or params.top_logprobs > 0) else self._decode(sequence.generated)
        return {"text": text, "finish_reason": sequence.finish, "completion_tokens": len(sequence.generated),
                "logprobs": tuple(sequence.logprobs) if params.top_logprobs > 0 else None}

    # --- scoring batches ----------------------------------------------------------------------------

    def _score_batch(self, jobs: list[ScoringJob]) -> list[dict[str, Any]]:
        """Score every continuation of the jobs. A continuation needs the logits of context + continuation[:-1]
        at its own positions; equal sequences, and sequences that are a prefix of another, share one row."""
        needed = {tuple(job.context + ids[:-1]) for job in jobs for ids in job.continuations}
        rows: list[tuple[int, ...]] = []  # the sequences evaluated, longest first
        for sequence in sorted(needed, key=len, reverse=True):
            if not any(row[:len(sequence)] == sequence for row in rows):
                rows.append(sequence)
        served = {sequence: next(r for r, row in enumerate(rows) if row[:len(sequence)] == sequence)
                  for sequence in needed}
        # (row, position, token) of every scored token, in job and continuation order
        queries = [(served[tuple(job.context + ids[:-1])], len(job.context) - 1 + k, token)
                   for job in jobs for ids in job.continuations for k, token in enumerate(ids)]
        scores = iter(self._token_scores(rows, queries))
        results, counted = [], set()
        for job in jobs:
            totals, greedy, evaluated = [], [], 0
            detail: dict[str, list[list[float]]] = {"token_logprobs": [], "token_means": [], "token_stds": []}
            for ids in job.continuations:
                row = served[tuple(job.context + ids[:-1])]
                if row not in counted:  # a row's tokens count for the first request that uses it
                    counted.add(row)
                    evaluated += len(rows[row])
                scored = [next(scores) for _ in ids]
                totals.append(float(sum(logprob for logprob, _, _, _ in scored)))
                greedy.append(all(is_best for _, is_best, _, _ in scored))
                if job.per_token:
                    detail["token_logprobs"].append([logprob for logprob, _, _, _ in scored])
                    detail["token_means"].append([mean for _, _, mean, _ in scored])
                    detail["token_stds"].append([std for _, _, _, std in scored])
            results.append({"logprobs": totals, "greedy": greedy, "evaluated": evaluated,
                            **(detail if job.per_token else {})})
        return results

    def _token_scores(self, rows: list[tuple[int, ...]],
                      queries: list[tuple[int, int, int]]) -> list[tuple[float, bool, float, float]]:
        """(logprob, is the argmax, mean and standard deviation of log p over the next-token distribution) of each
        (row, position, token) query. Rows run in right-padded batches of at most batch_size rows and
        LOGITS_BUDGET logits, each giving logits at its queried positions only."""
        torch = self._torch
        positions_of: list[set[int]] = [set() for _ in rows]
        by_row: list[list[int]] = [[] for _ in rows]  # query indices per row
        for q, (row, position, _) in enumerate(queries):
            positions_of[row].add(position)
            by_row[row].append(q)
        wanted = [sorted(positions) for positions in positions_of]
        column = [{position: k for k, position in enumerate(positions)} for positions in wanted]
        answers: list[tuple[float, bool, float, float]] = [(0.0, False, 0.0, 0.0)] * len(queries)
        with self._computing, torch.inference_mode():
            model, device = self.model(), self._input_device
            vocabulary = model.get_output_embeddings().weight.shape[0]
            start = 0
            while start < len(rows):
                end = start + 1
                while (end < len(rows) and end - start < self.options.batch_size
                       and (end + 1 - start) * max(len(w) for w in wanted[start:end + 1]) * vocabulary
                       <= LOGITS_BUDGET):
                    end += 1
                batch = rows[start:end]
                width, keep = max(len(row) for row in batch), max(len(w) for w in wanted[start:end])
                input_ids = torch.zeros((len(batch), width), dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for r, row in enumerate(batch):
                    input_ids[r, :len(row)] = torch.tensor(row)
                    mask[r, :len(row)] = 1
                positions = torch.tensor([w + [w[-1]] * (keep - len(w)) for w in wanted[start:end]])
                logits = self._logits_at(model, input_ids.to(device), mask.to(device), positions.to(device))
                logprobs = torch.log_softmax(logits.float(), dim=-1)
                mine = [q for row in range(start, end) for q in by_row[row]]
                at = [(queries[q][0] - start, column[queries[q][0]][queries[q][1]], queries[q][2]) for q in mine]
                r_index, k_index, tokens = (torch.tensor(column, device=logprobs.device) for column in zip(*at))
                values = logprobs[r_index, k_index, tokens].tolist()
                picked = logprobs[r_index, k_index]
                best = (picked.argmax(dim=-1) == tokens).tolist()
                # the moments Min-K%++ standardises by, over the whole distribution (cheap beside the forward pass)
                mean = (picked.exp() * picked).sum(dim=-1)
                std = ((picked.exp() * picked * picked).sum(dim=-1) - mean * mean).clamp(min=0.0).sqrt()
                for q, value, is_best, m, sd in zip(mine, values, best, mean.tolist(), std.tolist()):
                    answers[q] = (value, is_best, m, sd)
                start = end
        return answers

    def _logits_at(self, model: Any, input_ids: Any, mask: Any, positions: Any) -> Any:
        """Logits [rows, positions, vocabulary] at each row's own positions: only those are projected onto the
        vocabulary (2-D `logits_to_keep`); a model that does not take it gives all, and they are picked."""
        try:
            logits = model(input_ids=input_ids, attention_mask=mask, logits_to_keep=positions).logits
            if tuple(logits.shape[:2]) == tuple(positions.shape):
                return logits
        except TypeError:
            pass
        logits = model(input_ids=input_ids, attention_mask=mask).logits
        rows = self._torch.arange(positions.shape[0], device=positions.device)[:, None]
        return logits[rows, positions]

    async def aclose(self) -> None:
        with self._loading:
            self._model = None  # torch frees the weights when the model is collected
        if self.device.startswith("cuda") and self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()


def folder_from_gguf(gguf_path: str | Path, out_dir: str | Path | None = None) -> Path:
    """A transformers folder (config, tokenizer, float32 safetensors) of a GGUF model, written once and kept.

    Loading a GGUF through transformers parses its metadata in Python and dequantizes every tensor (about a
    minute for a 0.5B model on 2 cores); the folder loads in seconds, with the same weights (the same logits,
    bit for bit). Default place: <cache>/hf-from-gguf/<sha256 prefix>-transformers-<version>/. `hf:FOLDER`
    then runs it."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    if out_dir is None:
        key = f"{file_sha256(gguf_path)[:16]}-transformers-{transformers.__version__}"
        out_dir = cache_dir() / "hf-from-gguf" / key
    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file():
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=out_dir.name + ".", suffix=".partial"))
    try:
        kwargs = {"gguf_file": gguf_path.name}
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), dtype=torch.float32, **kwargs)
        # The weights are dequantized already; transformers refuses to save a model it loaded through its GGUF
        # quantizer, which has nothing left to do.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        partial.rename(out_dir)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return out_dir
