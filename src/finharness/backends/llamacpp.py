"""A GGUF model run by llama.cpp (llama-cpp-python) in a child process of the run.

Spec: ``llamacpp:/path/model.gguf`` with optional query options, e.g.
``llamacpp:/models/qwen.gguf?n_ctx=4096&threads=2&parallel=4`` (see `LlamaCppOptions`).

The run's process only tokenizes and renders chats (the GGUF's vocabulary and chat template; no
kernel runs there). Decoding and scoring happen in an engine process (`llamacpp_engine`), so a
segfault or illegal instruction in native code fails the calls in flight with an error that names
the engine, its build and the fix, never the run: the run ends ``incomplete`` with every committed
call kept, and the next call starts a fresh engine (at most `MAX_ENGINE_STARTS` per backend).

Generation decodes up to ``parallel`` sequences together in one llama.cpp batch (continuous
batching); log-likelihoods come from a second context that keeps every position's logits. See
`llamacpp_engine` for both, and for why the log-likelihoods are exact.

Tool calls: a request's tools go to the GGUF's chat template (`tools=`, the OpenAI shape), and the reply is read
with the strict `<tool_call>` parser of `tool_format`; a template that never names `tools` refuses the request.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, fields, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qsl

from ..core.backend import BackendError, BaseBackend, Capabilities, SpecError
from ..core.types import GenerateRequest, GenerateResponse, LoglikelihoodRequest, LoglikelihoodResponse, TokenLogprob
from ..data.io import atomic_write_text
from .engine_build import installed_stamp, rebuild_command
from .llamacpp_engine import CRASH_SWITCH, EngineConfig
from .model_files import cache_dir, file_sha256
from .spec_options import run_only
from .tool_format import openai_tools, template_takes_tools, template_turns, unsupported_tools, with_tool_calls

MAX_SEQUENCES = 256
"""llama.cpp's LLAMA_MAX_SEQ: the most sequences one context can hold."""

MAX_ENGINE_STARTS = 3
"""Engine processes one backend starts before it stops restarting a crashing engine."""

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

    prompt_cache_mb: int = run_only(0)
    """RAM (MiB) for saved KV states of finished generations; 0: off.

    The engine always reuses the prefix a free slot still holds from its last request; with this
    cache a prompt that extends any saved state (a dialogue's next turn after other dialogues took
    every slot) also evaluates only its new tokens. Not part of the identity: it changes which
    tokens are evaluated, not the request -- but llama.cpp's CPU kernels round differently for
    different batch shapes, so a reply can differ slightly from the one a cold context gives."""

    parallel: int = run_only(0)
    """Sequences the engine decodes together in one batch (continuous batching); 0: as many as the run
    keeps in flight (`--concurrency`), else 1. Not part of the identity; batched greedy replies can
    differ from single-stream ones where two tokens are nearly tied (bench/engine_batching.py)."""

    deterministic: int = run_only(0)
    """1: every reply is a function of its request alone -- one sequence at a time, each prompt evaluated
    from its first token in the same chunks, no KV reused from an earlier request -- so a rerun or a
    resumed run gets the very replies an uninterrupted one got. 0 (default): faster, but a greedy reply
    can change with what else the engine decoded beside it or before it (llama.cpp's CPU kernels round
    differently for other batch shapes): about 7 of 105 replies of `suite quick` differed between two
    schedules. Not part of the identity; excludes `parallel` above 1 and `prompt_cache_mb`."""

    @classmethod
    def from_query(cls, query: str, *, spec: str) -> LlamaCppOptions:
        """The options of a spec's query; SpecError, naming the option, for an unknown one or a value that is not
        an integer in its RANGES."""
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
            low, high = RANGES[key]
            if not low <= values[key] <= high:
                raise SpecError(f"{spec}: option {key}={raw!r} must be from {low:,} to {high:,}")
        if values.get("deterministic") and (values.get("parallel", 0) > 1 or values.get("prompt_cache_mb", 0) > 0):
            raise SpecError(f"{spec}: deterministic=1 decodes one sequence at a time from a cold cache; "
                            "it cannot take parallel above 1 or prompt_cache_mb")
        return cls(**values)

    @property
    def n_threads(self) -> int:
        return self.threads or os.cpu_count() or 1


_C_INT = 2**31 - 1
"""The engine takes these options as C ints."""

RANGES: dict[str, tuple[int, int]] = {
    "n_ctx": (1, _C_INT),
    "threads": (1, 1024),
    "n_batch": (1, _C_INT),
    "n_gpu_layers": (-1, _C_INT),  # -1: every layer
    "prompt_cache_mb": (0, 16 * 1024 * 1024),  # 0: off; at most 16 TiB
    "parallel": (0, 256),  # 0: the run's --concurrency; each sequence holds n_ctx KV cells of its own
    "deterministic": (0, 1),
}
"""The values each LlamaCppOptions field takes, inclusive."""


SpecOptions = LlamaCppOptions
"""What `finharness list --backends` shows for the scheme."""


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


def engine_build_description(features: str | None = None) -> str:
    """The installed engine and how it was built: version, CPU features, build key. `features`: llama.cpp's
    feature line as the engine process reported it (`engine_info`); default: this process's own."""
    if features is None:
        import llama_cpp

        features = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
    enabled = " ".join(part.split("=")[0].strip() for part in features.replace("CPU :", "|").split("|")
                       if part.strip().endswith("= 1"))
    stamp = installed_stamp(sys.executable)
    built = (f"finharness build {stamp.read_text(encoding='utf-8').strip()}" if stamp.is_file()
             else "not built by finharness")
    return f"llama-cpp-python {metadata.version('llama_cpp_python')}, CPU features {enabled or features}, {built}"


NATIVE_FAULTS = frozenset({signal.SIGSEGV, signal.SIGILL, signal.SIGBUS})
"""Signals that point at the engine's machine code (the build), not at Python or the machine's memory."""


def describe_exit(code: int) -> str:
    """A process's return code in words: 'signal SIGSEGV (Segmentation fault)' or 'exit code 1'."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"signal {signal.Signals(-code).name} ({signal.strsignal(-code)})"
    except ValueError:  # a signal with no name (real-time signals)
        return f"signal {-code}"


def exit_hint(code: int) -> str:
    """What to do about an engine that ended with `code`."""
    if code < 0 and -code in NATIVE_FAULTS:
        return ("A native crash like this usually means the engine was built with CPU instructions this machine "
                f"cannot run: rebuild it for this CPU without AMX: `{rebuild_command()}` (or `make engine`), then "
                "check with `finharness doctor`.")
    if code == -signal.SIGKILL:
        return ("SIGKILL is most often the kernel's out-of-memory killer: lower n_ctx or parallel "
                "(`?n_ctx=...&parallel=...`), or run fewer models at once.")
    return "The engine's own output below says why."


class EngineProcess:
    """One engine child process and the calls it is running; a reader thread resolves their futures."""

    def __init__(self, config: EngineConfig, *, label: str, first: bool = True):
        self.config = config
        self.label = label
        self._pending_lock = threading.Lock()
        """Guards `_pending`, `_ids` and `alive`; never held while sending (the reader needs it to go on)."""
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._closing = False
        self._stderr = tempfile.TemporaryFile()
        parent_end, child_end = multiprocessing.Pipe(duplex=True)
        self._conn = parent_end
        env = dict(os.environ)
        if not first and not env.get(CRASH_SWITCH, "").endswith(":every"):
            env.pop(CRASH_SWITCH, None)  # the test switch crashes the first engine only, unless told every one
        self.process = subprocess.Popen(
            [sys.executable, "-m", "finharness.backends.llamacpp_engine", str(child_end.fileno()),
             json.dumps(asdict(config))],
            pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
            env=env)
        child_end.close()
        self.alive = True
        self.failure: BackendError | None = None
        self._reader = threading.Thread(target=self._read, name=f"engine-{self.process.pid}", daemon=True)
        self._reader.start()
        atexit.register(self.close)  # the engine ends with the run, not a moment after it

    def submit(self, kind: str, *payload: Any) -> concurrent.futures.Future[Any]:
        """Send one request; may block while the engine's socket buffer is full, so callers on an event loop
        run it in a thread (`LlamaCppBackend._engine_call`)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._pending_lock:
            if not self.alive:
                raise self.failure or BackendError(f"{self.label}: the engine process is closed")
            request_id = next(self._ids)
            self._pending[request_id] = future
        try:
            with self._send_lock:
                self._conn.send((kind, request_id, *payload))
        except OSError:
            with self._pending_lock:
                self._pending.pop(request_id, None)
            if not future.done():  # the reader may already have failed it with the crash
                future.set_exception(BackendError(f"{self.label}: the engine process is gone", kind="engine_crash"))
        return future

    def _read(self) -> None:
        while True:
            try:
                request_id, status, value = self._conn.recv()
            except (EOFError, OSError):
                break
            with self._pending_lock:
                future = self._pending.pop(request_id, None)
            if future is None or future.done():
                continue
            if status == "ok":
                future.set_result(value)
            else:
                future.set_exception(BackendError(f"{self.label}: llama.cpp: {value}"))
        code = self.process.wait()
        with self._pending_lock:
            self.alive = False
            pending, self._pending = self._pending, {}
            if not self._closing:
                self.failure = self._crash_error(code, len(pending))
        for future in pending.values():
            if not future.done():
                future.set_exception(self.failure or BackendError(f"{self.label}: the engine process closed"))

    def _crash_error(self, code: int, in_flight: int) -> BackendError:
        try:
            build = engine_build_description()
        except Exception as err:  # the description is a courtesy: never hide the crash behind it
            build = f"build unknown ({err})"
        self._stderr.seek(0)
        tail = self._stderr.read()[-600:].decode("utf-8", errors="replace").strip()
        message = (f"{self.label}: the llama.cpp engine process (pid {self.process.pid}; {build}) died with "
                   f"{describe_exit(code)} with {in_flight} call(s) in flight. Those calls failed; every call already "
                   f"stored is kept and the same command resumes the run. {exit_hint(code)}")
        if tail:
            message += f" Engine output: {tail}"
        return BackendError(message, kind="engine_crash")

    def close(self, timeout: float = 10.0) -> None:
        atexit.unregister(self.close)
        with self._pending_lock:
            if self._closing and self._conn.closed:
                return
            self._closing = True
            alive = self.alive
        if alive:
            try:
                with self._send_lock:
                    self._conn.send(("close",))
            except OSError:
                pass
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=timeout)
        self._conn.close()
        self._stderr.close()


class LlamaCppBackend(BaseBackend):
    """A GGUF model served by an engine child process; tokens and chat rendering in this process."""

    def __init__(self, model_path: str | Path, *, spec: str | None = None,
                 options: LlamaCppOptions = LlamaCppOptions(), model_sha256: str | None = None):
        self.model_path = Path(model_path)
        self.spec = spec or f"{SCHEME}:{self.model_path}"
        self.options = options
        self._model_sha256 = model_sha256
        self._slots = 1 if options.deterministic else max(1, options.parallel)
        self.capabilities = Capabilities(
            generate=True, loglikelihood=True, next_token_logprobs=True,
            context_length=options.n_ctx, max_concurrency=self._slots, penalties=True, seed=True)
        self._lock = threading.Lock()
        self._engine: EngineProcess | None = None
        self._engine_starts = 0
        self._vocab: Any = None  # llama_cpp.Llama, vocab_only=True (tokens, metadata, chat template)
        self._formatter: Any = None  # Jinja2ChatFormatter of the GGUF's template
        self.prompt_tokens_evaluated = 0
        """Prompt tokens the engine evaluated for this backend's generations (the rest came from its KV reuse)."""

    # --- the engine process ------------------------------------------------------------------

    def plan_concurrency(self, calls_in_flight: int) -> None:
        """The run keeps this many calls in flight: without ?parallel=, decode that many sequences together."""
        with self._lock:
            if self.options.parallel == 0 and not self.options.deterministic and self._engine is None \
                    and calls_in_flight > self._slots:
                self._slots = calls_in_flight
                self.capabilities = replace(self.capabilities, max_concurrency=calls_in_flight)

    def engine_config(self) -> EngineConfig:
        # Each decode step puts one token of every running sequence in one batch of n_batch tokens, and llama.cpp
        # keeps at most MAX_SEQUENCES sequences: more slots than either would overrun the batch; calls beyond
        # the slots wait in the engine's queue.
        slots = min(self._slots, self.options.n_batch, MAX_SEQUENCES)
        return EngineConfig(model_path=str(self.model_path), n_ctx=self.options.n_ctx, n_batch=self.options.n_batch,
                            n_threads=self.options.n_threads, n_gpu_layers=self.options.n_gpu_layers,
                            slots=slots, prompt_cache_mb=self.options.prompt_cache_mb,
                            reuse_prefix=not self.options.deterministic)

    def _running_engine(self) -> EngineProcess:
        with self._lock:
            engine = self._engine
            if engine is not None and engine.alive:
                return engine
            if self._engine_starts >= MAX_ENGINE_STARTS:
                raise BackendError(
                    f"{self.spec}: the llama.cpp engine process died {self._engine_starts} times; not starting it "
                    f"again. Last failure: {engine.failure if engine else 'unknown'}", kind="engine_crash")
            if engine is not None:
                engine.close(timeout=1.0)
            self._engine_starts += 1
            self._engine = EngineProcess(self.engine_config(), label=self.spec, first=self._engine_starts == 1)
            return self._engine

    async def _engine_call(self, kind: str, *payload: Any) -> Any:
        # starting the engine and sending to it can block (a full socket buffer): not on the event loop
        future = await asyncio.to_thread(lambda: self._running_engine().submit(kind, *payload))
        return await asyncio.wrap_future(future)

    def engine_info(self, timeout: float = 120.0) -> dict[str, Any]:
        """The engine process's pid and llama.cpp's CPU feature line (starts the engine)."""
        return self._running_engine().submit("info").result(timeout=timeout)

    # --- identity and tokens -----------------------------------------------------------------

    def _tokenizer_model(self) -> Any:
        """A vocabulary-only load: tokens, metadata and chat template, no weights and no kernels."""
        with self._lock:
            if self._vocab is None:
                import llama_cpp  # imported late: it loads a shared library
                from llama_cpp._utils import suppress_stdout_stderr

                try:
                    # quiet: a vocabulary-only context warns that its n_ctx exceeds the (absent) training context
                    with suppress_stdout_stderr(disable=False):
                        self._vocab = llama_cpp.Llama(model_path=str(self.model_path), vocab_only=True,
                                                      verbose=False)
                except (ValueError, RuntimeError) as err:
                    raise BackendError(f"{self.spec}: llama.cpp could not read {self.model_path}: {err}") from err
            return self._vocab

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

    def _chat_formatter(self, llm: Any) -> Any:
        """The GGUF's chat template, compiled once."""
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise BackendError(
                    f"{self.spec}: {self.model_path.name} has no chat template in its metadata "
                    "('tokenizer.chat_template'); use an instruct GGUF or a log-likelihood task")

            def special_text(token_id: int) -> str:
                return "" if token_id < 0 else llm.detokenize([token_id], special=True).decode("utf-8", "replace")

            self._formatter = Jinja2ChatFormatter(
                template=template, eos_token=special_text(llm.token_eos()),
                bos_token=special_text(llm.token_bos()), add_generation_prompt=True)
        return self._formatter

    def _render_chat(self, llm: Any, request: GenerateRequest) -> str:
        formatter = self._chat_formatter(llm)
        tools = openai_tools(request.tools) if request.tools else None  # None: a plain chat renders as it always did
        return formatter(messages=template_turns(request.messages), tools=tools).prompt

    def render_tokens(self, request: GenerateRequest) -> tuple[str, list[int]]:
        """The prompt as the model sees it: text (chat template applied, the request's tools included) and token
        ids."""
        llm = self._tokenizer_model()
        prompt_text = self._render_chat(llm, request)
        prompt_tokens = llm.tokenize(prompt_text.encode("utf-8"), add_bos=False, special=True)
        bos = llm.token_bos()
        if self._model_adds_bos(llm) and bos >= 0 and prompt_tokens[:1] != [bos]:
            # Templates that do not write the BOS themselves get it here, as llama.cpp server does.
            prompt_tokens = [bos, *prompt_tokens]
            prompt_text = llm.detokenize([bos], special=True).decode("utf-8", "replace") + prompt_text
        return prompt_text, prompt_tokens

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        params = request.params
        # rendering and tokenizing are CPU work (and load the vocabulary the first time): off the event loop
        prompt_text, prompt_tokens = await asyncio.to_thread(self.render_tokens, request)
        if request.tools and not template_takes_tools(self._formatter.template):
            raise unsupported_tools(self.spec, self.model_path.name)  # the template would leave them out unseen
        if len(prompt_tokens) >= self.options.n_ctx:
            raise BackendError(
                f"{self.spec}: the prompt has {len(prompt_tokens)} tokens, the context window "
                f"n_ctx={self.options.n_ctx}; shorten the prompt or raise n_ctx (?n_ctx=...)")
        sampled = params.temperature > 0
        # temperature and top_p mean what they mean in the OpenAI API (no top_k, min_p or repeat penalty).
        engine_params = {
            "max_tokens": params.max_tokens, "temperature": params.temperature,
            "top_p": params.top_p if sampled else 1.0, "stop": list(params.stop), "seed": request.backend_seed,
            "frequency_penalty": params.frequency_penalty, "presence_penalty": params.presence_penalty,
            "top_logprobs": params.top_logprobs}
        result = await self._engine_call("generate", prompt_tokens, engine_params)
        self.prompt_tokens_evaluated += result["prompt_evaluated"]
        return with_tool_calls(GenerateResponse(
            text=result["text"], finish_reason=result["finish_reason"],
            prompt_tokens=result["prompt_tokens"], completion_tokens=result["completion_tokens"],
            prompt_text=prompt_text, logprobs=_token_logprobs(result["logprobs"])), request.tools)

    # --- log-likelihood ----------------------------------------------------------------------

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

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        context_tokens, continuation_tokens = await asyncio.to_thread(self.encode_request, request.context,
                                                                      request.continuations)
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
        # per_token goes to the engine only when asked: a plain request's message is what it always was
        extra = (True,) if request.per_token else ()
        result = await self._engine_call("score", context_tokens, continuation_tokens, *extra)
        return LoglikelihoodResponse(
            logprobs=tuple(result["logprobs"]), is_greedy=tuple(result["greedy"]),
            continuation_tokens=tuple(len(t) for t in continuation_tokens),
            context_tokens=n_context, tokens_evaluated=result["evaluated"],
            token_logprobs=result.get("token_logprobs"), token_means=result.get("token_means"),
            token_stds=result.get("token_stds"))

    # --- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            engine, self._engine = self._engine, None
            if self._vocab is not None:
                self._vocab.close()
                self._vocab = None
        if engine is not None:
            engine.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def _token_logprobs(raw: list[Any] | None) -> tuple[TokenLogprob, ...] | None:
    """The engine's (token, logprob, [(token, logprob)...]) per generated token -> TokenLogprob."""
    if not raw:
        return None
    return tuple(TokenLogprob(token=token, logprob=float(logprob), top=tuple((t, float(lp)) for t, lp in top))
                 for token, logprob, top in raw)
