"""The llama.cpp engine process: what runs native code, apart from the run that asks it.

`LlamaCppBackend` (llamacpp.py) starts this module as a child process (``python -m
finharness.backends.llamacpp_engine FD CONFIG_JSON``) and talks to it over one socket, a message each way per
call. A segfault or illegal instruction inside llama.cpp then kills this process only: the backend
fails the calls that were in flight and the run goes on (or ends ``incomplete``), its committed calls
kept. Tokenizing and chat rendering stay in the parent (vocabulary only, no kernels run there).

Generation batches (continuous batching). The generation context holds ``slots`` sequences, each
with its own ``n_ctx`` of KV cells. Every step decodes one llama.cpp batch with the next token of
every running sequence and as many prompt tokens of newly admitted ones as fit in ``n_batch``; a
sequence that finishes frees its slot for the next request at once. A new request takes the free
slot whose cached tokens share the longest prefix with its prompt, and evaluates only the rest
(a dialogue's next turn reuses its previous turn's KV). Sampling, penalties and logprobs are
computed here from the logits row of each sequence.

Log-likelihoods use a second context that keeps every position's logits (``logits_all``) with
unrepacked weights, one request at a time; see `Scorer` for why that gives exact numbers.

Messages (pickled by multiprocessing.connection): ``("generate", id, prompt_tokens, params)``,
``("score", id, context_tokens, continuation_tokens[, per_token])`` (``"score_fresh"``: the from-scratch
reference, for tests), ``("info", id)``, ``("close",)``; replies
``(id, "ok", result)`` or ``(id, "error", message)``.

A test-only switch, ``FINHARNESS_TEST_ENGINE_CRASH=KIND:N`` (KIND generate or score), makes this
process kill itself with SIGSEGV when it receives its N-th request of that kind; the backend sets it
for its first engine process only, or for every one with ``KIND:N:every``.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import os
import signal
import sys
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Iterator, Sequence

import numpy as np

CRASH_SWITCH = "FINHARNESS_TEST_ENGINE_CRASH"


@dataclass(frozen=True)
class EngineConfig:
    """How the engine process loads the model (sent as keyword arguments on its command line)."""

    model_path: str
    """The GGUF file."""

    n_ctx: int
    """Context window of each sequence, in tokens."""

    n_batch: int
    """Tokens decoded per llama.cpp batch (prompt chunks and running sequences together)."""

    n_threads: int
    """CPU threads of both contexts."""

    n_gpu_layers: int
    """Layers offloaded to a GPU when llama.cpp was built with one."""

    slots: int
    """Sequences the generation context decodes together."""

    prompt_cache_mb: int = 0
    """RAM for saved KV states of finished sequences (0: only what the slots still hold)."""

    reuse_prefix: bool = True
    """Whether a request reuses the KV its slot holds of an earlier prompt's prefix (False: every prompt is
    evaluated from its first token, so its reply does not depend on what ran before it)."""


# --- generation --------------------------------------------------------------------------------


@dataclass
class _Sequence:
    """One generation request in a slot."""

    request_id: int
    prompt: list[int]
    params: dict[str, Any]
    pending: list[int]
    """Prompt tokens not evaluated yet."""
    rng: np.random.Generator | None
    generated: list[int] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)
    """Generated token -> occurrences (frequency and presence penalties)."""
    logprobs: list[tuple[str, float, list[tuple[str, float]]]] = field(default_factory=list)
    text: str = ""
    """The generated text so far, decoded as the bytes complete characters (a split UTF-8 character shows
    with the token that completes it), so the per-token texts of the logprobs spell the text."""
    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="ignore"))
    stop_checked: int = 0
    """Characters of `text` already searched for stop strings (each search covers only what is new)."""
    next_token: int | None = None
    """Sampled but not yet in the KV cache."""
    prompt_evaluated: int = 0
    """Prompt tokens evaluated (the rest came from KV the slot or the state cache held)."""


@dataclass
class _Slot:
    seq_id: int
    cached: list[int] = field(default_factory=list)
    """Tokens whose KV entries this sequence id holds, in order."""
    running: _Sequence | None = None


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _StateCache:
    """Saved KV states of sequences (llama_state_seq_get_data), newest last, bounded in bytes.

    When a slot is about to be reused for a prompt it does not extend, its state is saved first; a later
    prompt that extends a saved state more than any free slot restores it into its slot."""

    def __init__(self, capacity_bytes: int):
        self.capacity = capacity_bytes
        self.entries: dict[tuple[int, ...], bytes] = {}
        self.size = 0
        """Bytes held by `entries`."""

    def swap(self, generator: "Generator", slot: _Slot, prompt: list[int], reuse: int) -> int:
        """Save the slot's state if the prompt abandons part of it; restore a saved state that covers more of
        the prompt. Returns the prompt tokens the slot's KV now holds."""
        llama_cpp = generator.llama_cpp
        if len(slot.cached) > reuse:
            key = tuple(slot.cached)
            if key not in self.entries:
                size = llama_cpp.llama_state_seq_get_size(generator.ctx, slot.seq_id)
                if size <= self.capacity:
                    buffer = (ctypes.c_uint8 * size)()
                    written = llama_cpp.llama_state_seq_get_data(generator.ctx, buffer, size, slot.seq_id)
                    self.entries[key] = bytes(buffer)[:written]
                    self.size += written
                    while self.size > self.capacity:
                        self.size -= len(self.entries.pop(next(iter(self.entries))))
        best, best_length = None, reuse
        for key in self.entries:
            length = _common_prefix(key, prompt)
            if length > best_length:
                best, best_length = key, length
        if best is None:
            return reuse
        data = self.entries.pop(best)
        self.entries[best] = data  # most recently used goes last
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        llama_cpp.llama_memory_seq_rm(generator.memory, slot.seq_id, 0, -1)
        if llama_cpp.llama_state_seq_set_data(generator.ctx, buffer, len(data), slot.seq_id) == 0:
            slot.cached = []
            return 0
        slot.cached = list(best)
        return best_length


class Generator:
    """Continuous batching over `slots` sequences of one llama.cpp context."""

    def __init__(self, config: EngineConfig):
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.config = config
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = config.n_gpu_layers
        # Unrepacked weights, as the scorer's: a repacked matrix-matrix kernel rounds a sequence's row
        # differently with 1 and with 4 sequences in the batch, so batched greedy replies would part from
        # single-stream ones at near ties (measured: 3 of 8 identical at parallel=4, 8 of 8 unrepacked), and
        # on 2 cores repacking made batched decoding no faster.
        model_params.use_extra_bufts = False
        self.model = llama_cpp.llama_model_load_from_file(config.model_path.encode("utf-8"), model_params)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {config.model_path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = config.n_ctx * config.slots
        params.n_batch = params.n_ubatch = config.n_batch
        params.n_seq_max = config.slots
        params.kv_unified = False  # each sequence its own n_ctx cells
        params.n_threads = params.n_threads_batch = config.n_threads
        params.no_perf = True
        # Flash attention: batches of 6-8 sequences ran ~15 % faster with it (bench/engine_batching.py), with
        # as many replies equal to single-stream ones. YaRN values as llama_cpp.Llama sets them.
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        params.yarn_ext_factor, params.yarn_attn_factor = -1.0, 1.0
        params.yarn_beta_fast, params.yarn_beta_slow = 32.0, 1.0
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not create a context of {config.slots} x {config.n_ctx} tokens")
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(config.n_batch, 0, 1)
        self.slots = [_Slot(seq_id=i) for i in range(config.slots)]
        self.queue: deque[_Sequence] = deque()
        self.decode_steps = 0
        """Decode steps so far (one token of every running sequence each)."""
        self.peak_sequences = 0
        """Most sequences decoded together in one step."""
        self.states = _StateCache(config.prompt_cache_mb << 20) if config.prompt_cache_mb > 0 else None
        self._piece_buffer = ctypes.create_string_buffer(256)
        self._pieces: dict[int, bytes] = {}

    def close(self) -> None:
        llama_cpp = self.llama_cpp
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            llama_cpp.llama_model_free(self.model)
            self.model = None

    @property
    def busy(self) -> bool:
        return bool(self.queue) or any(slot.running for slot in self.slots)

    def submit(self, request_id: int, prompt: list[int], params: dict[str, Any]) -> None:
        if not prompt:
            raise ValueError("empty prompt")
        if len(prompt) >= self.config.n_ctx:
            raise ValueError(f"the prompt has {len(prompt)} tokens, the context window n_ctx={self.config.n_ctx}")
        seed = params.get("seed")
        rng = np.random.default_rng(seed) if params.get("temperature", 0.0) > 0 else None
        self.queue.append(_Sequence(request_id, list(prompt), params, pending=[], rng=rng))

    def piece(self, token: int) -> bytes:
        """The token's text bytes (control tokens render as nothing, as in llama-cpp-python's output)."""
        cached = self._pieces.get(token)
        if cached is None:
            buf = self._piece_buffer
            n = self.llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = self.llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
            cached = self._pieces[token] = buf.raw[:n]
        return cached

    def _admit(self) -> None:
        while self.queue:
            free = [slot for slot in self.slots if slot.running is None]
            if not free:
                return
            sequence = self.queue.popleft()
            # The free slot whose KV already holds the longest part of this prompt (none is reused when the
            # config says so); the last prompt token is always evaluated again (its logits start the generation).
            if self.config.reuse_prefix:
                reuse, slot = max(((_common_prefix(s.cached, sequence.prompt), s) for s in free), key=lambda x: x[0])
            else:
                reuse, slot = 0, free[0]
            if self.states is not None:
                reuse = self.states.swap(self, slot, sequence.prompt, reuse)
            reuse = min(reuse, len(sequence.prompt) - 1)
            self.llama_cpp.llama_memory_seq_rm(self.memory, slot.seq_id, reuse, -1)
            slot.cached = slot.cached[:reuse]
            sequence.pending = sequence.prompt[reuse:]
            sequence.prompt_evaluated = len(sequence.pending)
            slot.running = sequence

    def fail_all(self, message: str) -> list[tuple[int, str]]:
        """Fail every running and waiting request with `message` and forget what the slots cached (their KV
        state is unknown after an interrupted step)."""
        failed = [(sequence.request_id, message) for sequence in self.queue]
        self.queue.clear()
        for slot in self.slots:
            if slot.running is not None:
                failed.append((slot.running.request_id, message))
            self.llama_cpp.llama_memory_seq_rm(self.memory, slot.seq_id, 0, -1)
            slot.cached, slot.running = [], None
        return failed

    def step(self) -> list[tuple[int, dict[str, Any] | str]]:
        """Admit waiting requests, evaluate one prompt chunk, decode the next token of every running
        sequence; returns (request id, result or error) of the requests that finished.

        A prompt is evaluated in batches of its own tokens only, chunked as a lone request's would be:
        llama.cpp splits a batch of several sequences into equal per-sequence parts, and a prompt cut
        into other shapes rounds differently, so its reply could differ from the single-stream one."""
        self._admit()
        finished: list[tuple[int, dict[str, Any] | str]] = []
        prefilling = next((slot for slot in self.slots if slot.running and slot.running.pending), None)
        if prefilling is not None:
            sequence = prefilling.running
            chunk = sequence.pending[:self.config.n_batch]
            last = len(chunk) == len(sequence.pending)
            outcome = self._decode([(prefilling, chunk, last)], finished)
            if outcome is not None:
                sequence.pending = sequence.pending[len(chunk):]
                if last:
                    self._collect(outcome, finished)
        running = [(slot, [slot.running.next_token], True) for slot in self.slots
                   if slot.running is not None and slot.running.next_token is not None]
        self.decode_steps += bool(running)
        self.peak_sequences = max(self.peak_sequences, len(running))
        if running:
            outcome = self._decode(running, finished)
            if outcome is not None:
                for slot, _, _ in running:
                    slot.running.next_token = None
                self._collect(outcome, finished)
        return finished

    def _decode(self, parts: list[tuple[_Slot, list[int], bool]],
                finished: list[tuple[int, dict[str, Any] | str]]) -> list[tuple[_Slot, int]] | None:
        """One llama_decode of (slot, tokens, logits of the last token?) parts; returns (slot, logits row) to
        read, or None after a failed decode (its sequences are then failed into `finished`)."""
        llama_cpp = self.llama_cpp
        batch = self.batch
        batch.n_tokens = 0
        rows: list[tuple[_Slot, int]] = []
        for slot, tokens, logits_last in parts:
            start = len(slot.cached)
            for offset, token in enumerate(tokens):
                i = batch.n_tokens
                batch.token[i] = token
                batch.pos[i] = start + offset
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = slot.seq_id
                batch.logits[i] = logits_last and offset == len(tokens) - 1
                batch.n_tokens += 1
            if logits_last:
                rows.append((slot, batch.n_tokens - 1))
        code = llama_cpp.llama_decode(self.ctx, batch)
        if code != 0:
            # The KV state of these sequences is unknown now: fail them and forget what they cached.
            for slot, _, _ in parts:
                finished.append((slot.running.request_id, f"llama_decode returned {code}"))
                llama_cpp.llama_memory_seq_rm(self.memory, slot.seq_id, 0, -1)
                slot.cached, slot.running = [], None
            return None
        for slot, tokens, _ in parts:
            slot.cached.extend(tokens)
        return rows

    def _collect(self, rows: list[tuple[_Slot, int]], finished: list[tuple[int, dict[str, Any] | str]]) -> None:
        """Sample from each row's logits; finished sequences free their slot."""
        for slot, index in rows:
            pointer = self.llama_cpp.llama_get_logits_ith(self.ctx, index)
            logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()
            result = self._advance(slot, logits)
            if result is not None:
                finished.append((slot.running.request_id, result))
                slot.running = None

    def _advance(self, slot: _Slot, logits: np.ndarray) -> dict[str, Any] | None:
        """Sample the sequence's next token; returns its result once it has finished."""
        sequence = slot.running
        params = sequence.params
        token = self._sample(sequence, logits)
        if self.llama_cpp.llama_vocab_is_eog(self.vocab, token):
            return self._result(sequence, "stop")  # the end-of-generation token is not part of the text
        sequence.generated.append(token)
        sequence.counts[token] = sequence.counts.get(token, 0) + 1
        piece = sequence.decoder.decode(self.piece(token))
        if params.get("top_logprobs", 0) > 0:
            sequence.logprobs.append(self._logprobs(logits, token, piece, params["top_logprobs"]))
        sequence.text += piece
        cut = find_stop(sequence.text, params.get("stop"), sequence.stop_checked)
        sequence.stop_checked = len(sequence.text)
        if cut is not None:
            return self._result(sequence, "stop", text=sequence.text[:cut])
        if len(sequence.generated) >= params["max_tokens"]:
            return self._result(sequence, "length")
        if len(slot.cached) + 1 >= self.config.n_ctx:
            return self._result(sequence, "length")
        sequence.next_token = token
        return None

    def _sample(self, sequence: _Sequence, logits: np.ndarray) -> int:
        return sample_token(logits, sequence.params, sequence.counts, sequence.rng)

    def _logprobs(self, logits: np.ndarray, token: int, text: str,
                  top: int) -> tuple[str, float, list[tuple[str, float]]]:
        """(the token's text in the reply, its logprob, the `top` most likely tokens with theirs)."""
        chosen, best = top_logprobs(logits, token, top)
        return text, chosen, [(self.piece(t).decode("utf-8", errors="ignore"), lp) for t, lp in best]

    def _result(self, sequence: _Sequence, finish_reason: str, *, text: str | None = None) -> dict[str, Any]:
        return {"text": sequence.text if text is None else text,
                "finish_reason": finish_reason, "prompt_tokens": len(sequence.prompt),
                "completion_tokens": len(sequence.generated), "prompt_evaluated": sequence.prompt_evaluated,
                "logprobs": sequence.logprobs if sequence.params.get("top_logprobs", 0) > 0 else None}


def sample_token(logits: np.ndarray, params: dict[str, Any], counts: dict[int, int],
                 rng: np.random.Generator | None) -> int:
    """The next token from one logits row: frequency and presence penalties over the `counts` of the tokens
    generated so far, then greedy (temperature 0 or no `rng`) or temperature/top_p sampling as the OpenAI
    API means them (no top_k, min_p or repeat penalty). Shared by every local backend."""
    frequency, presence = params.get("frequency_penalty", 0.0), params.get("presence_penalty", 0.0)
    if (frequency or presence) and counts:
        logits = logits.copy()
        tokens = np.fromiter(counts, dtype=np.int64)
        occurrences = np.fromiter(counts.values(), dtype=np.float32)
        logits[tokens] -= occurrences * frequency + presence
    temperature = params.get("temperature", 0.0)
    if temperature <= 0 or rng is None:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / temperature
    scaled -= scaled.max()
    probs = np.exp(scaled)
    probs /= probs.sum()
    top_p = params.get("top_p", 1.0)
    if top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = order[:int(np.searchsorted(cumulative, top_p)) + 1]
        kept = probs[keep] / probs[keep].sum()
        return int(keep[rng.choice(len(keep), p=kept)])
    return int(rng.choice(len(probs), p=probs))


def top_logprobs(logits: np.ndarray, token: int, top: int) -> tuple[float, list[tuple[int, float]]]:
    """(logprob of `token`, the `top` most likely token ids with their logprobs, best first) of one logits row."""
    values = logits.astype(np.float64)
    values -= values.max()
    logprobs = values - np.log(np.exp(values).sum())
    top = min(top, len(logprobs) - 1)
    best = np.argpartition(-logprobs, top)[:top]
    best = best[np.argsort(-logprobs[best], kind="stable")]
    return float(logprobs[token]), [(int(t), float(logprobs[t])) for t in best]


def find_stop(text: str, stops: Sequence[str] | None, checked: int) -> int | None:
    """Where the earliest stop string starts in `text`, None when none does. Only what is new since `checked`
    characters is searched, looking back by the longest stop string (one may start in text searched before)."""
    stops = [stop for stop in stops or () if stop]
    if not stops:
        return None
    start = max(0, checked - max(len(stop) for stop in stops) + 1)
    found = [index for index in (text.find(stop, start) for stop in stops) if index >= 0]
    return min(found) if found else None


# --- log-likelihood ----------------------------------------------------------------------------


class Scorer:
    """Log-likelihoods of continuations, from a context that keeps every position's logits.

    Log-likelihoods never use ``echo=True`` prompt logprobs: llama-cpp-python scores the first
    prompt token against nothing, which is wrong for models without a BOS token (Qwen). Instead
    the shared context is evaluated once, each continuation is evaluated on top of it, and its
    tokens are scored from the logits rows.

    Reusing the KV cache gives the same numbers as evaluating every choice from scratch only if a
    position's logits do not depend on how the tokens were split into batches. On CPU, weights
    repacked for llama.cpp's matrix-matrix kernels break that everywhere (rows are computed in
    groups of four, the remainder by other kernels: up to 0.25 in a logit), and so do lone-token
    batches (matrix-vector kernels). This context therefore loads its weights unrepacked and
    never decodes a lone token (`_evaluate`). Measured with llama-cpp-python 0.3.36 on x86: every
    row of a batch of 8 or more tokens is then bit-identical to a from-scratch evaluation, so
    one-token continuations (option letters) score exactly; in batches of 2-7 tokens the rows
    after the first still differ slightly (up to 0.1 nats on a continuation)."""

    def __init__(self, config: EngineConfig):
        import llama_cpp

        self.llama_cpp = llama_cpp
        with _weights_unrepacked():
            self.llm = llama_cpp.Llama(
                model_path=config.model_path, n_ctx=config.n_ctx, n_batch=config.n_batch,
                n_threads=config.n_threads, n_gpu_layers=config.n_gpu_layers, logits_all=True, verbose=False)

    def close(self) -> None:
        self.llm.close()

    def score_fresh(self, context_tokens: list[int], continuation_tokens: list[list[int]]) -> dict[str, Any]:
        """The reference the tests hold `score` to: per continuation, an emptied cache and context +
        continuation evaluated in one go; also the most likely token after the context."""
        from scipy.special import log_softmax

        llm = self.llm
        n_context = len(context_tokens)
        logprobs, greedy = [], []
        llm.reset()
        llm.eval(context_tokens)
        next_token = int(llm.scores[n_context - 1].argmax())
        for tokens in continuation_tokens:
            llm.reset()
            llm.eval(context_tokens + tokens)
            rows = llm.scores[n_context - 1:n_context - 1 + len(tokens)].astype(np.float64)
            logprobs.append(float(log_softmax(rows, axis=-1)[np.arange(len(tokens)), tokens].sum()))
            greedy.append(bool((rows.argmax(axis=-1) == np.asarray(tokens)).all()))
        llm.reset()
        return {"logprobs": logprobs, "greedy": greedy, "next_token": next_token}

    def score(self, context_tokens: list[int], continuation_tokens: list[list[int]],
              per_token: bool = False) -> dict[str, Any]:
        """Sum of each continuation's token log-probabilities and whether it is greedy; `per_token` also each token's
        log-probability and the mean and standard deviation of log p over the next-token distribution at it
        (`token_moments`), from the same logits rows."""
        from scipy.special import log_softmax

        llm = self.llm
        n_context = len(context_tokens)
        try:
            # KV reuse across requests: keep the longest prefix of the context that is already
            # evaluated; its logits rows in llm.scores stay valid.
            reused = min(_common_prefix(llm.input_ids[:llm.n_tokens].tolist(), context_tokens), n_context)
            evaluated = _evaluate(llm, context_tokens, reused, n_context)
            logprobs, greedy = [], []
            detail: dict[str, list[list[float]]] = {"token_logprobs": [], "token_means": [], "token_stds": []}
            for tokens in continuation_tokens:
                # The last continuation token's own logits are never needed: only the rows
                # before each token score it. One-token continuations cost no evaluation at all.
                evaluated += _evaluate(llm, context_tokens + tokens, n_context, n_context + len(tokens) - 1)
                if per_token:
                    values, means, stds, is_greedy = token_moments(
                        llm.scores[n_context - 1:n_context - 1 + len(tokens)], tokens)
                    logprobs.append(float(sum(values)))
                    greedy.append(is_greedy)
                    for key, part in zip(detail, (values, means, stds)):
                        detail[key].append(part)
                    continue
                rows = llm.scores[n_context - 1:n_context - 1 + len(tokens)].astype(np.float64)
                token_logprobs = log_softmax(rows, axis=-1)[np.arange(len(tokens)), tokens]
                logprobs.append(float(token_logprobs.sum()))
                greedy.append(bool((rows.argmax(axis=-1) == np.asarray(tokens)).all()))
        except (ValueError, RuntimeError):
            llm.n_tokens = 0  # the KV state is unknown after a failed decode: reuse nothing
            raise
        out = {"logprobs": logprobs, "greedy": greedy, "evaluated": evaluated}
        return {**out, **detail} if per_token else out


MOMENT_ROWS = 32
"""Logits rows turned into float64 log-probabilities at a time (32 x 152k vocabulary: 39 MB), so a long text's
per-token values never hold its whole rows x vocabulary matrix."""


def token_moments(rows: np.ndarray, tokens: Sequence[int]) -> tuple[list[float], list[float], list[float], bool]:
    """(log p of each token, E[log p] and the standard deviation of log p over the next-token distribution at it,
    whether every token is the argmax) from the logits rows that predict `tokens` (row i predicts tokens[i]).
    Shared by the local engines: Min-K%++ (Zhang et al. 2024) standardises a token's log p by these two moments."""
    from scipy.special import log_softmax

    values: list[float] = []
    means: list[float] = []
    stds: list[float] = []
    greedy = True
    for start in range(0, len(tokens), MOMENT_ROWS):
        chunk = np.asarray(tokens[start:start + MOMENT_ROWS])
        logp = log_softmax(np.asarray(rows[start:start + len(chunk)], dtype=np.float64), axis=-1)
        p = np.exp(logp)
        mean = (p * logp).sum(axis=-1)
        variance = np.maximum((p * logp * logp).sum(axis=-1) - mean * mean, 0.0)
        values += logp[np.arange(len(chunk)), chunk].tolist()
        means += mean.tolist()
        stds += np.sqrt(variance).tolist()
        greedy = greedy and bool((logp.argmax(axis=-1) == chunk).all())
    return values, means, stds, greedy


@contextlib.contextmanager
def _weights_unrepacked() -> Iterator[None]:
    """Load a llama_cpp.Llama with llama.cpp's `use_extra_bufts` off (no weight repacking).

    llama-cpp-python 0.3.36 has no Llama() argument for it, so the default model parameters
    it starts from are wrapped for the duration of the load."""
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


# --- the process -------------------------------------------------------------------------------


def system_info() -> str:
    """llama.cpp's own line of the CPU features its build uses (e.g. 'AVX2 = 1 | AVX512 = 1 | ...')."""
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()


def _crash_plan() -> tuple[str, int] | None:
    kind, sep, count = os.environ.get(CRASH_SWITCH, "").partition(":")
    count = count.split(":")[0]
    return (kind, int(count)) if sep and count.isdigit() else None


def serve(conn: Connection, config: EngineConfig) -> None:
    """Answer requests until the parent says close or goes away."""
    from llama_cpp._logger import set_verbose

    set_verbose(False)  # llama.cpp's own log: errors only (its output ends up in crash messages)
    generator: Generator | None = None
    scorer: Scorer | None = None
    crash = _crash_plan()
    received = {"generate": 0, "score": 0}
    try:
        while True:
            busy = generator is not None and generator.busy
            while conn.poll(0 if busy else None):
                try:
                    message = conn.recv()
                except EOFError:
                    return
                kind = message[0]
                if kind == "close":
                    return
                request_id = message[1]
                if kind in received:
                    received[kind] += 1
                    if crash is not None and crash == (kind, received[kind]):
                        os.kill(os.getpid(), signal.SIGSEGV)
                try:
                    if kind == "generate":
                        if generator is None:
                            generator = Generator(config)
                        generator.submit(request_id, message[2], message[3])
                        busy = True
                    elif kind in ("score", "score_fresh"):
                        if scorer is None:
                            scorer = Scorer(config)
                        method = scorer.score if kind == "score" else scorer.score_fresh
                        # a fifth element (per_token) only where a request asks for it: older messages unchanged
                        conn.send((request_id, "ok", method(message[2], message[3], *message[4:])))
                    elif kind == "info":
                        stats = {"decode_steps": generator.decode_steps, "peak_sequences": generator.peak_sequences,
                                 "slots": config.slots} if generator is not None else {"slots": config.slots}
                        conn.send((request_id, "ok", {"system_info": system_info(), "pid": os.getpid(), **stats}))
                    else:
                        conn.send((request_id, "error", f"unknown engine request {kind!r}"))
                except (ValueError, RuntimeError) as err:
                    conn.send((request_id, "error", str(err)))
            if generator is not None and generator.busy:
                try:
                    finished = generator.step()
                except Exception as err:  # a Python error in a step fails its requests, not the engine
                    finished = generator.fail_all(f"{type(err).__name__}: {err}")
                for request_id, outcome in finished:
                    if isinstance(outcome, str):
                        conn.send((request_id, "error", outcome))
                    else:
                        conn.send((request_id, "ok", outcome))
    except (BrokenPipeError, ConnectionResetError):
        return
    finally:
        for part in (generator, scorer):
            if part is not None:
                part.close()


def main(argv: list[str]) -> int:
    import json

    fd = int(argv[0])
    config = EngineConfig(**json.loads(argv[1]))
    serve(Connection(fd), config)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
