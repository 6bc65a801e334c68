"""A vLLM-shaped /v1/completions server on 127.0.0.1 whose prompt logprobs come from the embedded engine.

    with completions_server(EngineModel(gguf_path)) as server:   # or ToyModel(): no weights, for fast tests
        backend = from_spec(f"openai-completions:stub@{server.base_url}")

Routes, in vLLM's shapes: POST /tokenize ({"prompt", "add_special_tokens"} -> {"tokens", "count"}),
POST /v1/completions with token-id prompts and either `echo: true, logprobs: N` (choices[i].logprobs:
tokens, token_logprobs, top_logprobs, text_offset) or `prompt_logprobs: N` (choices[i].prompt_logprobs:
per position {token id: {logprob, rank, decoded_token}}), GET /v1/models.

Prompt logprobs are computed from evaluated logits (llama.cpp eval, then log_softmax of the rows), never
from llama-cpp-python's echo (which scores a BOS-less model's first token against nothing). The logits
come from a context loaded and evaluated as the local engine's scorer does (unrepacked weights, no
lone-token batch, the longest already-evaluated prefix reused): the prompts of one request share a
context, which is evaluated once, then each prompt's own tokens on top of it. llama.cpp's CPU logits
depend on batch shapes, so this is what lets the test hold HTTP log-likelihoods to the local engine's
within 1e-4; a real server's numbers differ by its own kernels, and its protocol is what is tested.

Run alone (for the bench): `python -m tests.servers.completions_stub MODEL.gguf` prints `PORT` and serves.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from finharness.backends.llamacpp_engine import _common_prefix, _evaluate, _weights_unrepacked

from .local_http import JSONHandler, serving

Position = tuple[float, int, list[tuple[int, float]]]
"""One prompt token's score: (its logprob, its rank, the k most likely tokens with their logprobs)."""


def score_rows(rows: np.ndarray, tokens: Sequence[int], k: int, chunk: int = 64) -> list[Position]:
    """Score tokens[i] by rows[i] (logits or logprobs), as the local scorer does (log_softmax in float64), a
    chunk of rows at a time: every position of a prompt at once would take gigabytes for a 152k vocabulary."""
    from scipy.special import log_softmax

    out: list[Position] = []
    for start in range(0, len(tokens), chunk):
        table = log_softmax(np.asarray(rows[start:start + chunk], dtype=np.float64), axis=-1)
        for row, token in zip(table, tokens[start:start + chunk]):
            best = ([int(row.argmax())] if k <= 1 else
                    [int(t) for t in sorted(np.argpartition(-row, k)[:k], key=lambda t: -row[t])])
            out.append((float(row[token]), int(np.sum(row > row[token])) + 1, [(t, float(row[t])) for t in best]))
    return out


class EngineModel:
    """The embedded engine's way to score prompts: llama.cpp with the local scorer's settings."""

    def __init__(self, model_path: str | Path, *, n_ctx: int = 4096, n_batch: int = 512, threads: int | None = None):
        import llama_cpp

        with _weights_unrepacked():
            # the local engine's scorer settings (LlamaCppOptions defaults: n_ctx 4096, n_batch 512, every CPU)
            self.llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=n_ctx, n_batch=n_batch,
                                       n_threads=threads or os.cpu_count(), logits_all=True, verbose=False)
        self.adds_bos = bool(llama_cpp.llama_vocab_get_add_bos(llama_cpp.llama_model_get_vocab(self.llm.model)))
        self.n_ctx = n_ctx

    def close(self) -> None:
        self.llm.close()

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_special_tokens and self.adds_bos, special=True)

    def piece(self, token: int) -> str:
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def prompt_logprobs(self, prompts: Sequence[list[int]], k: int) -> list[list[Position]]:
        """Per prompt, each token's score after the tokens before it (tokens 1..n-1)."""
        llm = self.llm
        shared = min(_common_prefix(prompts[0], p) for p in prompts) if len(prompts) > 1 else len(prompts[0]) - 1
        shared = max(1, min(shared, min(len(p) for p in prompts) - 1))
        context = list(prompts[0][:shared])
        reused = min(_common_prefix(llm.input_ids[:llm.n_tokens].tolist(), context), shared)
        _evaluate(llm, context, reused, shared)
        context_scores = score_rows(llm.scores[:shared - 1], context[1:], k)
        out = []
        for prompt in prompts:
            _evaluate(llm, prompt, shared, len(prompt) - 1)
            out.append(context_scores + score_rows(llm.scores[shared - 1:len(prompt) - 1], prompt[shared:], k))
        return out


class ToyModel:
    """A model without weights, for fast protocol tests: a token is a run of non-spaces with at most one
    leading space (so 'Answer:A' is one token, 'Answer:' + ' A' two), BOS 1 when `adds_bos`; the
    next-token logprobs are a hash of the prefix (`row`)."""

    VOCAB = 512

    def __init__(self, adds_bos: bool = False):
        self.adds_bos = adds_bos
        self.vocab: dict[str, int] = {"<bos>": 1}
        self.n_ctx = 4096

    def close(self) -> None:
        pass

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        ids = [self.vocab.setdefault(piece, len(self.vocab) + 2) for piece in re.findall(r"\s?\S+|\s+", text)]
        return ([1] if add_special_tokens and self.adds_bos else []) + ids

    def piece(self, token: int) -> str:
        return next((p for p, t in self.vocab.items() if t == token), f"<{token}>")

    @classmethod
    def row(cls, prefix: Sequence[int]) -> np.ndarray:
        """log-softmax of the next token after `prefix`."""
        from scipy.special import log_softmax

        seed = int.from_bytes(hashlib.sha256(json.dumps(list(prefix)).encode()).digest()[:8], "big")
        return log_softmax(np.random.default_rng(seed).normal(0.0, 2.0, cls.VOCAB))

    def prompt_logprobs(self, prompts: Sequence[list[int]], k: int) -> list[list[Position]]:
        return [score_rows(np.array([self.row(p[:i]) for i in range(1, len(p))]), p[1:], k) for p in prompts]


class CompletionsStub(ThreadingHTTPServer):
    def __init__(self, model: EngineModel | ToyModel, *, port: int = 0):
        super().__init__(("127.0.0.1", port), _Handler)
        self.model = model
        self.model_lock = threading.Lock()
        self.requests: list[dict] = []
        """Every POST body to /v1/completions, in arrival order."""
        self.tokenize_calls = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def handle_error(self, request, client_address) -> None:
        pass

    def piece(self, token: int) -> str:
        return self.model.piece(token)

    def complete(self, body: dict) -> dict:
        prompts = body["prompt"]
        if not (isinstance(prompts, list) and prompts and all(isinstance(p, list) for p in prompts)):
            prompts = [prompts]  # one token-id prompt
        top = int(body.get("logprobs") or body.get("prompt_logprobs") or 0)
        with self.model_lock:
            scored = self.model.prompt_logprobs(prompts, top)
        choices = []
        for index, (prompt, positions) in enumerate(zip(prompts, scored)):
            # vLLM also generates one token (max_tokens=1): it is not part of the prompt and the client drops it
            choice: dict[str, Any] = {"index": index, "text": "", "finish_reason": "length"}
            if body.get("echo"):
                choice["logprobs"] = {
                    "tokens": [self.piece(t) for t in prompt],
                    "token_logprobs": [None] + [lp for lp, _, _ in positions],
                    "top_logprobs": [None] + [{self.piece(t): v for t, v in best} for _, _, best in positions],
                    "text_offset": self._offsets(prompt)}
            elif body.get("prompt_logprobs") is not None:
                entries: list[dict | None] = [None]
                for token, (lp, rank, best) in zip(prompt[1:], positions):
                    entry = {str(token): {"logprob": lp, "rank": rank, "decoded_token": self.piece(token)}}
                    for r, (t, v) in enumerate(best, start=1):
                        entry.setdefault(str(t), {"logprob": v, "rank": r, "decoded_token": self.piece(t)})
                    entries.append(entry)
                choice["prompt_logprobs"] = entries
            choices.append(choice)
        total = sum(len(p) for p in prompts)
        return {"id": "cmpl-stub", "object": "text_completion", "model": body.get("model"), "choices": choices,
                "usage": {"prompt_tokens": total, "completion_tokens": len(prompts),
                          "total_tokens": total + len(prompts)}}

    def _offsets(self, prompt: list[int]) -> list[int]:
        offsets, position = [], 0
        for token in prompt:
            offsets.append(position)
            position += len(self.piece(token))
        return offsets


class _Handler(JSONHandler):
    server: CompletionsStub

    def do_GET(self) -> None:
        self.model_listing({"id": "stub", "owned_by": "completions-stub", "max_model_len": self.server.model.n_ctx})

    def do_POST(self) -> None:
        body = self.read_json()
        server = self.server
        if self.path == "/tokenize":
            with server.model_lock:
                server.tokenize_calls += 1
                tokens = server.model.tokenize(body["prompt"], bool(body.get("add_special_tokens", True)))
            return self.send_json(200, {"tokens": tokens, "count": len(tokens), "max_model_len": server.model.n_ctx})
        if self.path != "/v1/completions":
            return self.no_route()
        server.requests.append(body)
        self.send_json(200, server.complete(body))


@contextlib.contextmanager
def completions_server(model: EngineModel | ToyModel) -> Iterator[CompletionsStub]:
    """Serve `model` in a daemon thread; the model is closed afterwards."""
    try:
        with serving(CompletionsStub(model)) as server:
            yield server
    finally:
        model.close()


if __name__ == "__main__":
    stub = CompletionsStub(EngineModel(sys.argv[1], threads=int(sys.argv[2]) if len(sys.argv) > 2 else None))
    print(stub.server_address[1], flush=True)
    stub.serve_forever()
