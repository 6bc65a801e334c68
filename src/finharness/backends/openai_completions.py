"""`openai-completions:MODEL@BASE_URL`: an OpenAI-compatible server that also scores log-likelihoods.

Generation is the `openai:` backend's (POST /chat/completions, the same options, tool calls included). Log-likelihoods come
from POST /completions with prompt log-probabilities, which vLLM (and the legacy OpenAI completions
API) return: `logprobs=echo` (default) asks `echo: true, logprobs: 1` and reads `choices[i].logprobs`
(`token_logprobs`, `top_logprobs`); `logprobs=prompt` asks vLLM's `prompt_logprobs: 1` and reads
`choices[i].prompt_logprobs` (each token's logprob and rank).

Token boundaries are the embedded engine's (lm-eval's split, `split_continuation_tokens`): the
context and context + continuation texts are tokenized by the server (POST {root}/tokenize, vLLM's
route beside /v1), a continuation's tokens are those after the context's, and the prompts are sent
as token ids, so the server scores exactly the tokens the local engine would. One /completions call
carries every continuation of a request (a list of prompts), so the server's prefix cache can share
the context between them.

Spec: `openai-completions:MODEL@BASE_URL[?logprobs=echo|prompt&key_env=...&concurrency=N&timeout=S]`
plus the `openai:` reasoning options.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..core.backend import BackendError, Capabilities, SpecError
from ..core.types import LoglikelihoodRequest, LoglikelihoodResponse
from .http_common import bad_response, parse_remote_spec, post_json
from .openai_compat import DEFAULT_BASE_URL, OpenAICompatBackend, OpenAIOptions
from .vllm import continuation_logprob, split_continuation_tokens

SCHEME = "openai-completions"
LOGPROB_MODES = ("echo", "prompt")


@dataclass(frozen=True)
class PromptLogprob:
    """One prompt position's logprob, in the shape `continuation_logprob` reads (rank None: unknown)."""

    logprob: float
    rank: int | None = None


def echo_positions(raw: Any, prompt_ids: Sequence[int]) -> list[dict[int, PromptLogprob] | None]:
    """OpenAI-style echoed logprobs ({"token_logprobs": [...], "top_logprobs": [{text: logprob}...]}) ->
    per prompt position {token id: its logprob, plus the top alternatives under negative keys}; the
    generated token after the prompt is dropped. Greedy is then read by comparing logprobs."""
    if not isinstance(raw, dict) or not isinstance(raw.get("token_logprobs"), list):
        raise ValueError(f"no token_logprobs in {str(raw)[:120]}")
    values, tops = raw["token_logprobs"], raw.get("top_logprobs") or []
    if len(values) < len(prompt_ids):
        raise ValueError(f"{len(values)} token logprobs for a prompt of {len(prompt_ids)} tokens")
    positions: list[dict[int, PromptLogprob] | None] = []
    for i, token in enumerate(prompt_ids):
        if values[i] is None:
            positions.append(None)
            continue
        entry = {token: PromptLogprob(float(values[i]))}
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        entry.update({-(j + 1): PromptLogprob(float(v)) for j, v in enumerate(top.values())})
        positions.append(entry)
    return positions


def prompt_logprob_positions(raw: Any, prompt_ids: Sequence[int]) -> list[dict[int, PromptLogprob] | None]:
    """vLLM's `prompt_logprobs` ([null, {"id": {"logprob", "rank", "decoded_token"}}, ...]) -> the same shape."""
    if not isinstance(raw, list):
        raise ValueError(f"no prompt_logprobs list in {str(raw)[:120]}")
    return [None if entry is None else
            {int(k): PromptLogprob(float(v["logprob"]), v.get("rank")) for k, v in entry.items()}
            for entry in raw[:len(prompt_ids)]]


def api_root(base_url: str) -> str:
    """http://host:8000/v1 -> http://host:8000: vLLM serves /tokenize beside the versioned routes."""
    return base_url[:-3] if base_url.endswith("/v1") else base_url


class OpenAICompletionsBackend(OpenAICompatBackend):
    """`openai:` generation plus log-likelihoods from /completions prompt logprobs."""

    def __init__(self, spec: str, remote: Any):
        super().__init__(spec, remote)
        self.logprob_mode = remote.options.get("logprobs", "echo")
        if self.logprob_mode not in LOGPROB_MODES:
            raise SpecError(f"model spec {spec!r}: logprobs must be one of {', '.join(LOGPROB_MODES)}, "
                            f"got {self.logprob_mode!r}")
        self.capabilities = Capabilities(
            generate=True, loglikelihood=True, next_token_logprobs=True,
            max_concurrency=remote.concurrency, penalties=True, seed=True)
        self._tokenize_url = api_root(remote.base_url) + "/tokenize"

    def identity(self) -> Mapping[str, Any]:
        return {**super().identity(), "loglikelihood": f"completions/{self.logprob_mode}"}

    async def _tokenize(self, text: str, special: bool) -> list[int]:
        what = f"POST {self._tokenize_url} (model {self.remote.model})"
        try:
            reply = await post_json(self._client.get(), self._tokenize_url,
                                    {"model": self.remote.model, "prompt": text, "add_special_tokens": special}, what)
        except BackendError as err:
            if err.status == 404:
                raise BackendError(f"{what}: the server has no /tokenize route (vLLM's), which log-likelihoods "
                                   "need to split context and continuation tokens as the local engine does",
                                   kind="unsupported") from err
            raise
        tokens = reply.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise bad_response(what, f"no token list in {str(reply)[:120]}")
        return tokens

    async def encode_request(self, context: str, continuations: tuple[str, ...]) -> tuple[list[int], list[list[int]]]:
        """Context and continuation token ids, split as the local engine splits them (the server tokenizes)."""
        stripped = context.rstrip()
        moved = context[len(stripped):]
        texts = [(stripped, True)] if stripped else [("", True)]
        texts += [(stripped + moved + c, True) for c in continuations if stripped]
        texts += [(moved + c, False) for c in continuations]
        encoded = dict(zip(texts, await asyncio.gather(*(self._tokenize(t, s) for t, s in texts))))
        prefix = None  # what an empty context becomes: the BOS the server's tokenizer adds
        if not stripped:
            if not encoded[("", True)]:
                raise BackendError(f"{self.spec}: an empty context needs a BOS token to follow, and the "
                                   "server's tokenizer adds none", kind="unsupported")
            prefix = encoded[("", True)][0]
        return split_continuation_tokens(context, continuations, lambda text, bos: encoded[(text, bos)],
                                         prefix if prefix is not None else -1)

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        context_ids, continuation_ids = await self.encode_request(request.context, request.continuations)
        empty = [c for c, ids in zip(request.continuations, continuation_ids) if not ids]
        if empty:
            raise BackendError(f"{self.spec}: continuation(s) {empty!r} have no tokens to score")
        prompts = [context_ids + ids for ids in continuation_ids]
        body: dict[str, Any] = {"model": self.remote.model, "prompt": prompts, "max_tokens": 1, "temperature": 0}
        if self.logprob_mode == "echo":
            body.update(echo=True, logprobs=1)
        else:
            body["prompt_logprobs"] = 1
        what = f"POST {self.remote.base_url}/completions (model {self.remote.model}, prompt logprobs)"
        reply = await post_json(self._client.get(), "/completions", body, what)
        choices = reply.get("choices")
        if not isinstance(choices, list) or len(choices) != len(prompts):
            raise bad_response(what, f"expected {len(prompts)} choices, got {str(choices)[:120]}")
        ordered = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        try:
            scores = [continuation_logprob(self._positions(choice, prompt), prompt, len(context_ids))
                      for choice, prompt in zip(ordered, prompts)]
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise bad_response(what, f"unusable prompt logprobs ({err})") from None
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        prompt_tokens = int(usage.get("prompt_tokens") or sum(len(p) for p in prompts))
        return LoglikelihoodResponse(
            logprobs=tuple(total for total, _ in scores), is_greedy=tuple(greedy for _, greedy in scores),
            continuation_tokens=tuple(len(ids) for ids in continuation_ids), context_tokens=len(context_ids),
            tokens_evaluated=prompt_tokens - int(details.get("cached_tokens") or 0))

    def _positions(self, choice: Mapping[str, Any], prompt: list[int]) -> list[dict[int, PromptLogprob] | None]:
        if self.logprob_mode == "echo":
            return echo_positions(choice.get("logprobs"), prompt)
        return prompt_logprob_positions(choice.get("prompt_logprobs"), prompt)


@dataclass(frozen=True)
class CompletionsOptions(OpenAIOptions):
    """The query options of an `openai-completions:` spec: the `openai:` ones and how log-likelihoods are read."""

    CHOICES = {**OpenAIOptions.CHOICES, "logprobs": ("echo", "prompt")}

    logprobs: str = "echo"
    """echo: `echo` + `logprobs` (vLLM, the legacy OpenAI API); prompt: vLLM's `prompt_logprobs: 1`."""


SpecOptions = CompletionsOptions
"""What `finharness list --backends` shows for the scheme."""


def from_spec(spec: str) -> OpenAICompletionsBackend:
    """`openai-completions:MODEL@BASE_URL[?logprobs=echo|prompt&...]` (the `openai:` options too)."""
    remote = parse_remote_spec(spec, scheme=SCHEME, default_base_url=DEFAULT_BASE_URL,
                               default_key_env="OPENAI_API_KEY", declared=CompletionsOptions)
    return OpenAICompletionsBackend(spec, remote)
