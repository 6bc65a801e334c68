"""A GGUF model run in-process by llama.cpp (llama-cpp-python).

Spec: ``llamacpp:/path/model.gguf`` with optional query options, e.g.
``llamacpp:/models/qwen.gguf?n_ctx=4096&threads=2`` (see `LlamaCppOptions`).

Two llama.cpp contexts share the memory-mapped weights, each created on first use:

- the *generation* context (``logits_all=False``) renders chats with the GGUF's own
  chat template and decodes;
- the *scoring* context (``logits_all=True``: it keeps the logits of every evaluated
  position, which costs time and an n_ctx x vocabulary buffer) computes log-likelihoods,
  and serves generations that ask for top logprobs.

Log-likelihoods never use ``echo=True`` prompt logprobs: llama-cpp-python scores the
first prompt token against nothing, which is wrong for models without a BOS token
(Qwen). Instead the shared context is evaluated once, each continuation is evaluated
on top of it, and its tokens are scored from the logits rows (see `_score_sync`).

Reusing the KV cache gives the same numbers as evaluating every choice from scratch only
if a position's logits do not depend on how the tokens were split into batches. On CPU,
weights repacked for llama.cpp's matrix-matrix kernels break that everywhere (rows are
computed in groups of four, the remainder by other kernels: up to 0.25 in a logit), and so
do lone-token batches (matrix-vector kernels). The scoring context therefore loads its
weights unrepacked (they then also stay memory-mapped, shared with the generation context)
and never decodes a lone token (`_evaluate`). Measured with llama-cpp-python 0.3.36 on x86:
every row of a batch of 8 or more tokens is then bit-identical to a from-scratch
evaluation, so one-token continuations (option letters) score exactly; in batches of 2-7
tokens the rows after the first still differ slightly (up to 0.1 nats on a continuation).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from dataclasses import dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar
from urllib.parse import parse_qsl

import numpy as np

from ..core.backend import BackendError, BaseBackend, Capabilities, SpecError
from ..core.types import (
    GenerateRequest, GenerateResponse, LoglikelihoodRequest, LoglikelihoodResponse, TokenLogprob)
from ..data.io import atomic_write_text
from .model_files import cache_dir, file_sha256

_T = TypeVar("_T")

SCHEME = "llamacpp"


@dataclass(frozen=True)
class LlamaCppOptions:
    """How llama.cpp runs the model; set in the spec's query string (``?n_ctx=8192``)."""

    n_ctx: int = 4096
    """Context window in tokens (prompt + generation); bounded by the model's training context."""

    threads: int | None = None
    """CPU threads; None uses os.cpu_count()."""

    n_batch: int = 512
    """Prompt tokens decoded per llama.cpp batch."""

    n_gpu_layers: int = 0
    """Layers offloaded to a GPU when llama.cpp was built with one (-1: all)."""

    prompt_cache_mb: int = 0
    """RAM (MiB) for saved states of earlier generations (llama-cpp-python's LlamaRAMCache); 0: off.

    llama.cpp always reuses the prefix the context holds from the last call; with this cache a
    prompt that extends any saved state (a dialogue's next turn after another role or dialogue
    ran in between) also evaluates only its new tokens. A state holds its KV entries and a copy
    of the n_batch x vocabulary logits buffer (about 300 MiB for Qwen at n_batch 512), so give
    a few GiB (counted in full: see `counted_ram_cache`). Not part of the identity: like the
    built-in prefix reuse it changes which tokens are evaluated, not the request -- but, as with
    that reuse, llama.cpp's CPU kernels round
    differently for different batch shapes, so a reply can differ from the one a cold context
    gives (bench/prompt_cache.py: 10 of 12 dialogue turns identical on the 0.5B)."""

    @classmethod
    def from_query(cls, query: str, *, spec: str) -> LlamaCppOptions:
        known = {f.name for f in fields(cls)}
        values: dict[str, int] = {}
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
        except ValueError as err:
            raise SpecError(f"{spec}: malformed options {query!r} ({err})") from None
        for key, raw in pairs:
            if key not in known:
                raise SpecError(f"{spec}: unknown option {key!r}; known options: {', '.join(sorted(known))}")
            try:
                values[key] = int(raw)
            except ValueError:
                raise SpecError(f"{spec}: option {key}={raw!r} must be an integer") from None
        return cls(**values)

    @property
    def n_threads(self) -> int:
        return self.threads or os.cpu_count() or 1


def state_bytes(state: Any) -> int:
    """RAM one saved llama-cpp-python state holds: the llama.cpp state (KV entries, output logits) and the
    copies of the logits buffer and of the token ids that `Llama.save_state` keeps beside it."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


def counted_ram_cache(capacity_bytes: int) -> Any:
    """llama-cpp-python's LlamaRAMCache, evicting by what its states really hold. Its own size counts only
    the llama.cpp state, not the n_batch x vocabulary logits copy of each state (~300 MiB for Qwen), so a
    '2,000 MiB' cache of short dialogue states grew past 20 GiB and a UCFE run was killed for memory."""
    from llama_cpp import LlamaRAMCache

    class CountedRAMCache(LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(state_bytes(state) for state in self.cache_state.values())

    return CountedRAMCache(capacity_bytes=capacity_bytes)


def parse_spec(spec: str) -> tuple[Path, LlamaCppOptions]:
    """'llamacpp:PATH[?opt=value&...]' -> (path, options); the file must exist."""
    scheme, sep, rest = spec.partition(":")
    if scheme != SCHEME or not sep or not rest:
        raise SpecError(f"not a llama.cpp spec: {spec!r} (expected 'llamacpp:/path/model.gguf')")
    path_text, _, query = rest.partition("?")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise SpecError(f"{spec}: model file not found: {path}")
    return path, LlamaCppOptions.from_query(query, spec=spec)


def from_spec(spec: str) -> LlamaCppBackend:
    path, options = parse_spec(spec)
    return LlamaCppBackend(path, spec=spec, options=options)


class LlamaCppBackend(BaseBackend):
    """A GGUF model in-process; one llama.cpp call at a time per model."""

    def __init__(self, model_path: str | Path, *, spec: str | None = None,
                 options: LlamaCppOptions = LlamaCppOptions(), model_sha256: str | None = None):
        self.model_path = Path(model_path)
        self.spec = spec or f"{SCHEME}:{self.model_path}"
        self.options = options
        self._model_sha256 = model_sha256
        self.capabilities = Capabilities(
            generate=True, loglikelihood=True, next_token_logprobs=True,
            context_length=options.n_ctx, max_concurrency=1, penalties=True, seed=True)
        # Threading locks, taken inside the worker thread: a cancelled await must not release
        # the model while its llama.cpp call is still running. Tokenizing and reading metadata
        # need no call lock (llama.cpp's vocabulary is read-only), only a loaded model.
        self._call_lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._generator: Any = None  # llama_cpp.Llama, logits_all=False
        self._scorer: Any = None  # llama_cpp.Llama, logits_all=True
        self._vocab: Any = None  # llama_cpp.Llama, vocab_only=True (tokens and metadata)

    # --- loading -----------------------------------------------------------------------------

    def _load(self, *, logits_all: bool) -> Any:
        import llama_cpp  # imported late: it loads a shared library

        try:
            with _weights_unrepacked() if logits_all else contextlib.nullcontext():
                return llama_cpp.Llama(
                    model_path=str(self.model_path), n_ctx=self.options.n_ctx,
                    n_batch=self.options.n_batch, n_threads=self.options.n_threads,
                    n_gpu_layers=self.options.n_gpu_layers, logits_all=logits_all, verbose=False)
        except (ValueError, RuntimeError) as err:
            raise BackendError(f"{self.spec}: llama.cpp could not load {self.model_path}: {err}") from err

    def _generation_model(self) -> Any:
        with self._load_lock:
            if self._generator is None:
                self._generator = self._load(logits_all=False)
                if self.options.prompt_cache_mb > 0:
                    self._generator.set_cache(counted_ram_cache(self.options.prompt_cache_mb << 20))
            return self._generator

    def _scoring_model(self) -> Any:
        with self._load_lock:
            if self._scorer is None:
                self._scorer = self._load(logits_all=True)
            return self._scorer

    def _tokenizer_model(self) -> Any:
        """Any loaded context serves for tokens and metadata; else a vocabulary-only load (cheap,
        so a fully cached rerun never loads the weights)."""
        loaded = self._scorer if self._scorer is not None else self._generator
        if loaded is not None:
            return loaded
        with self._load_lock:
            if self._vocab is None:
                import llama_cpp

                self._vocab = llama_cpp.Llama(model_path=str(self.model_path), vocab_only=True, verbose=False)
            return self._vocab

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        def locked() -> _T:
            with self._call_lock:
                return fn(*args)

        return await asyncio.to_thread(locked)

    # --- identity and tokens -----------------------------------------------------------------

    def chat_template(self) -> str | None:
        """The GGUF's 'tokenizer.chat_template' metadata, None when the file has none."""
        return self._tokenizer_model().metadata.get("tokenizer.chat_template")

    def _cached_chat_template(self) -> str | None:
        """The chat template, read from the GGUF once per model file and then kept beside its hash."""
        path = cache_dir() / "hashes" / f"{self._model_sha256}.chat_template.json"
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))["chat_template"]
        template = self.chat_template()
        atomic_write_text(path, json.dumps({"chat_template": template}))
        return template

    def identity(self) -> Mapping[str, Any]:
        if self._model_sha256 is None:
            self._model_sha256 = file_sha256(self.model_path)
        return {
            "engine": f"llama.cpp (llama-cpp-python {metadata.version('llama_cpp_python')})",
            "model_sha256": self._model_sha256,
            "chat_template": self._cached_chat_template(),
            "n_ctx": self.options.n_ctx,
        }

    def _tokenize(self, text: str, *, add_bos: bool) -> list[int]:
        # special=True: control-token text such as '<|im_start|>' becomes the control token,
        # as Hugging Face tokenizers (and lm-eval on them) do.
        return self._tokenizer_model().tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def count_tokens(self, text: str) -> int | None:
        return len(self._tokenize(text, add_bos=False))

    def _model_adds_bos(self, llm: Any) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_get_add_bos(llama_cpp.llama_model_get_vocab(llm.model)))

    # --- generation --------------------------------------------------------------------------

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        return await self._run(self._generate_sync, request)

    def _render_chat(self, llm: Any, request: GenerateRequest) -> str:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise BackendError(
                f"{self.spec}: {self.model_path.name} has no chat template in its metadata "
                "('tokenizer.chat_template'); use an instruct GGUF or a log-likelihood task")

        def special_text(token_id: int) -> str:
            return "" if token_id < 0 else llm.detokenize([token_id], special=True).decode("utf-8", "replace")

        formatter = Jinja2ChatFormatter(
            template=template, eos_token=special_text(llm.token_eos()),
            bos_token=special_text(llm.token_bos()), add_generation_prompt=True)
        rendered = formatter(messages=[{"role": m.role, "content": m.content} for m in request.messages])
        return rendered.prompt

    def _generate_sync(self, request: GenerateRequest) -> GenerateResponse:
        params = request.params
        # llama-cpp-python only returns logprobs from a logits_all context.
        llm = self._scoring_model() if params.top_logprobs > 0 else self._generation_model()
        if llm is self._scorer:
            # Scoring moves n_tokens without a decode, so the context's current logits may not
            # belong to the last cached token: make create_completion evaluate from scratch.
            llm.reset()
        prompt_text = self._render_chat(llm, request)
        prompt_tokens = llm.tokenize(prompt_text.encode("utf-8"), add_bos=False, special=True)
        bos = llm.token_bos()
        if self._model_adds_bos(llm) and bos >= 0 and prompt_tokens[:1] != [bos]:
            # Templates that do not write the BOS themselves get it here, as llama.cpp server does.
            prompt_tokens = [bos, *prompt_tokens]
            prompt_text = llm.detokenize([bos], special=True).decode("utf-8", "replace") + prompt_text
        if len(prompt_tokens) >= self.options.n_ctx:
            raise BackendError(
                f"{self.spec}: the prompt has {len(prompt_tokens)} tokens, the context window "
                f"n_ctx={self.options.n_ctx}; shorten the prompt or raise n_ctx (?n_ctx=...)")
        sampled = params.temperature > 0
        try:
            # Pre-tokenized prompt: llama-cpp-python adds no BOS of its own to a token list.
            # top_k=0 and min_p=0 switch off llama.cpp's extra samplers so that temperature and
            # top_p mean what they mean in the OpenAI API.
            result = llm.create_completion(
                prompt_tokens, max_tokens=params.max_tokens, temperature=params.temperature,
                top_p=params.top_p if sampled else 1.0, top_k=0, min_p=0.0, repeat_penalty=1.0,
                stop=list(params.stop), seed=params.seed,
                frequency_penalty=params.frequency_penalty, presence_penalty=params.presence_penalty,
                logprobs=params.top_logprobs or None)
        except (ValueError, RuntimeError) as err:
            raise BackendError(f"{self.spec}: llama.cpp generation failed: {err}") from err
        choice = result["choices"][0]
        usage = result["usage"]
        return GenerateResponse(
            text=choice["text"], finish_reason=choice["finish_reason"] or "stop",
            prompt_tokens=usage["prompt_tokens"], completion_tokens=usage["completion_tokens"],
            prompt_text=prompt_text, logprobs=_token_logprobs(choice.get("logprobs")))

    # --- log-likelihood ----------------------------------------------------------------------

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        return await self._run(self._score_sync, request)

    def encode_request(self, context: str, continuations: tuple[str, ...]) -> tuple[list[int], list[list[int]]]:
        """Token ids of the shared context and of each continuation, split as lm-eval splits them.

        Trailing whitespace of the context moves onto the continuations (so ' A' tokenizes as
        it would inside running text); a continuation's tokens are those of context +
        continuation after the context's tokens, or the continuation alone where the joint
        tokenization does not start with the context's tokens. An empty context becomes the
        BOS token (EOS where the model has none), so the first token has something to follow."""
        llm = self._tokenizer_model()
        stripped = context.rstrip()
        moved = context[len(stripped):]
        adds_bos = self._model_adds_bos(llm)
        if stripped:
            context_tokens = self._tokenize(stripped, add_bos=adds_bos)
        else:
            prefix = llm.token_bos() if llm.token_bos() >= 0 else llm.token_eos()
            context_tokens = [prefix]
        continuation_tokens = []
        for continuation in continuations:
            whole = self._tokenize(stripped + moved + continuation, add_bos=adds_bos) if stripped else []
            if stripped and whole[:len(context_tokens)] == context_tokens:
                continuation_tokens.append(whole[len(context_tokens):])
            else:
                continuation_tokens.append(self._tokenize(moved + continuation, add_bos=False))
        return context_tokens, continuation_tokens

    def _score_sync(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        import llama_cpp

        llm = self._scoring_model()
        context_tokens, continuation_tokens = self.encode_request(request.context, request.continuations)
        n_context = len(context_tokens)
        if any(not tokens for tokens in continuation_tokens):
            empty = [c for c, t in zip(request.continuations, continuation_tokens) if not t]
            raise BackendError(f"{self.spec}: continuation(s) {empty!r} have no tokens to score")
        # The last continuation token is scored but never evaluated, hence the - 1.
        positions = n_context + max(len(tokens) for tokens in continuation_tokens) - 1
        if positions > self.options.n_ctx:
            raise BackendError(
                f"{self.spec}: context ({n_context} tokens) + longest continuation needs {positions} "
                f"positions, more than n_ctx={self.options.n_ctx}; shorten the context or raise n_ctx "
                "(?n_ctx=...)")
        from scipy.special import log_softmax  # here, not at import: scipy costs ~1 s of start-up

        try:
            # KV reuse across requests: keep the longest prefix of the context that is already
            # evaluated; its logits rows in llm.scores stay valid.
            reused = min(llama_cpp.Llama.longest_token_prefix(llm.input_ids[:llm.n_tokens].tolist(),
                                                              context_tokens), n_context)
            evaluated = _evaluate(llm, context_tokens, reused, n_context)
            logprobs, greedy = [], []
            for tokens in continuation_tokens:
                # The last continuation token's own logits are never needed: only the rows
                # before each token score it. One-token continuations cost no evaluation at all.
                evaluated += _evaluate(llm, context_tokens + tokens, n_context, n_context + len(tokens) - 1)
                rows = llm.scores[n_context - 1:n_context - 1 + len(tokens)].astype(np.float64)
                token_logprobs = log_softmax(rows, axis=-1)[np.arange(len(tokens)), tokens]
                logprobs.append(float(token_logprobs.sum()))
                greedy.append(bool((rows.argmax(axis=-1) == np.asarray(tokens)).all()))
        except (ValueError, RuntimeError) as err:
            llm.n_tokens = 0  # the KV state is unknown after a failed decode: reuse nothing
            raise BackendError(f"{self.spec}: llama.cpp evaluation failed: {err}") from err
        return LoglikelihoodResponse(
            logprobs=tuple(logprobs), is_greedy=tuple(greedy),
            continuation_tokens=tuple(len(t) for t in continuation_tokens),
            context_tokens=n_context, tokens_evaluated=evaluated)

    # --- lifetime ----------------------------------------------------------------------------

    def _close_sync(self) -> None:
        with self._load_lock:
            for llm in (self._generator, self._scorer):
                if llm is not None:
                    llm.close()
            self._generator = self._scorer = None

    async def aclose(self) -> None:
        await self._run(self._close_sync)


@contextlib.contextmanager
def _weights_unrepacked() -> Iterator[None]:
    """Load a llama_cpp.Llama with llama.cpp's `use_extra_bufts` off (no weight repacking).

    llama-cpp-python 0.3.36 has no Llama() argument for it, so the default model parameters
    it starts from are wrapped for the duration of the load (callers hold the load lock)."""
    import llama_cpp.llama as llama_module

    low_level = llama_module.llama_cpp
    original = low_level.llama_model_default_params

    def unrepacked_defaults() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    low_level.llama_model_default_params = unrepacked_defaults
    try:
        yield
    finally:
        low_level.llama_model_default_params = original


def _evaluate(llm: Any, sequence: list[int], start: int, end: int) -> int:
    """Evaluate sequence[start:end] on top of the KV cells of sequence[:start]; returns the
    number of tokens evaluated.

    No batch holds a lone token: llama.cpp computes one token with matrix-vector kernels
    whose rounding differs from the batched ones, so a lone token steps back to re-evaluate
    its predecessor with it, and no n_batch split leaves one token over."""
    if end <= start:
        llm.n_tokens = start
        return 0
    if end - start == 1 and start > 0:
        start -= 1
    llm.n_tokens = start  # llm.eval drops the KV cells from n_tokens on before it decodes
    position = start
    while position < end:
        size = min(llm.n_batch, end - position)
        if end - position - size == 1 and size > 2:
            size -= 1
        llm.eval(sequence[position:position + size])
        position += size
    return end - start


def _token_logprobs(raw: Mapping[str, Any] | None) -> tuple[TokenLogprob, ...] | None:
    """llama-cpp-python's OpenAI-style completion logprobs -> TokenLogprob per generated token."""
    if not raw:
        return None
    return tuple(
        TokenLogprob(token=token, logprob=float(logprob),
                     top=tuple(sorted(((t, float(lp)) for t, lp in (top or {}).items()),
                                      key=lambda item: -item[1])))
        for token, logprob, top in zip(raw["tokens"], raw["token_logprobs"], raw["top_logprobs"]))
